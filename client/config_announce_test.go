package client

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// requireTimerAt waits until fc has a timer armed to fire at, and fails
// the test if a value arrives on fetches first: what the fetcher decided
// (to wait for its spacing) rather than how long anything took.
func requireTimerAt(t *testing.T, ctx context.Context, fc *retry.FakeClock, at time.Time, fetches <-chan struct{}, why string) {
	t.Helper()
	for {
		for _, w := range fc.Timers() {
			if w.Equal(at) {
				return
			}
		}
		select {
		case <-fetches:
			t.Fatalf("a config fetch %s", why)
		case <-ctx.Done():
			t.Fatalf("no timer for %v: %s", at, why)
		case <-time.After(time.Millisecond):
		}
	}
}

// A node that announces a newer config (a brief cluster-map notification)
// right after the client fetched from it is asked for it once the spacing
// between fetches from a node has passed, as for NOT_MY_VBUCKET: on a
// client clock that moves only by that spacing, the announced config is
// installed.
func TestAnnouncedConfigFetchedAfterFetchSpacing(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, &Options{Clock: fakeClock{fc}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held := c.ConfigVersion()

	// An NMV without a body makes the client fetch from the node, which
	// starts that node's fetch spacing on the frozen clock.
	nmv := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"},
		Action: mockcluster.Action{Status: memdx.StatusNotMyVbucket, Value: []byte{}}, Times: 1})
	defer nmv.Remove()
	fetch := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGetClusterConfig}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail}, Times: 1})
	defer fetch.Remove()
	gctx, gcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Get(gctx, "k", nil)
		done <- err
	}()
	select {
	case <-fetch.Done():
	case <-ctx.Done():
		t.Fatal("the NMV without a body asked for no config fetch")
	}
	fetched := fc.Now()
	gcancel() // the Get sleeps in its back-off on the frozen clock
	<-done
	require.Equal(t, held, c.ConfigVersion())

	// The node announces a newer config (a node joins the cluster).
	_, err := mc.AddNode()
	require.NoError(t, err)
	want := uint64(mc.Bucket(mockcluster.DefaultBucket).Rev())
	require.Greater(t, want, held.Rev)
	requireTimerAt(t, ctx, fc, fetched.Add(cluster.ConfigFetchInterval), nil, "")
	fc.Advance(cluster.ConfigFetchInterval)
	for c.ConfigVersion().Rev < want {
		select {
		case <-ctx.Done():
			t.Fatalf("the announced config (rev %d) was never fetched: the client holds %v", want, c.ConfigVersion())
		case <-time.After(time.Millisecond):
		}
	}
}

// briefNotification is a cluster-map change notification without a
// config, announcing (epoch, rev).
func briefNotification(t *testing.T, epoch, rev int64) []byte {
	t.Helper()
	ext := make([]byte, 16)
	binary.BigEndian.PutUint64(ext[0:8], uint64(epoch))
	binary.BigEndian.PutUint64(ext[8:16], uint64(rev))
	b, err := faultnode.Encode(memdx.Packet{Magic: memdx.MagicServerReq,
		ServerOpCode: memdx.ServerOpClustermapChangeNotification, Extras: ext, Key: []byte(mockcluster.DefaultBucket)})
	require.NoError(t, err)
	return b
}

// A node that keeps announcing config revisions it never serves costs the
// spacing of NOT_MY_VBUCKET's fetches, not a fetch per announcement: one
// fetch in flight, the next no sooner than cluster.ConfigFetchInterval after the
// last began (on the client's fake clock, which moves only when the test
// says), at most cluster.MaxAnnouncedFetches for one version, and none for a
// version announced again after it was given up on.
func TestAnnouncementsOfAConfigNeverServedAreSpaced(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	ps, _ := proxyEach(t, mc)
	p := ps[0]
	fc := retry.NewFakeClock(time.Now())
	c := connectVia(t, p.Addr(), &Options{Clock: fakeClock{fc}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held := c.ConfigVersion()
	fetches := make(chan struct{}, 64)
	hold, release := make(chan struct{}), make(chan struct{})
	p.OnResponse(func(req, _ *memdx.Packet) faultnode.Action {
		if req.OpCode == memdx.OpGetClusterConfig {
			fetches <- struct{}{}
			select {
			case <-hold: // the first answer waits for release
			case <-release:
			}
		}
		return faultnode.Action{}
	})
	fs := c.cl.Announced
	announce := func(rev uint64) {
		t.Helper()
		require.Equal(t, 1, p.Inject(briefNotification(t, int64(held.Epoch), int64(rev))))
	}

	announce(held.Rev + 1)
	recv := func(why string) {
		t.Helper()
		select {
		case <-fetches:
		case <-ctx.Done():
			t.Fatalf("no config fetch: %s", why)
		}
	}
	recv("after the first announcement")
	start := fc.Now()
	// More announcements while that fetch is in flight, then its answer
	// (the config the client holds).
	announce(held.Rev + 2)
	announce(held.Rev + 3)
	waitFor(t, "the announcements noted", func() bool { _, v := fs(); return v == held.Rev+3 })
	close(hold)
	requireTimerAt(t, ctx, fc, start.Add(cluster.ConfigFetchInterval), fetches, "began at once after the last, not spaced")
	// The fetch in flight began before rev+3 was announced: the version
	// gets cluster.MaxAnnouncedFetches of its own.
	for i := 1; i <= cluster.MaxAnnouncedFetches; i++ {
		fc.Advance(cluster.ConfigFetchInterval)
		recv("once the spacing passed")
		if i < cluster.MaxAnnouncedFetches {
			requireTimerAt(t, ctx, fc, fc.Now().Add(cluster.ConfigFetchInterval), fetches, "began at once after the last, not spaced")
		}
	}
	waitFor(t, "the announcement given up", func() bool { a, _ := fs(); return !a })
	// The same version again: not fetched. A newer one: fetched.
	announce(held.Rev + 3)
	announce(held.Rev + 4)
	waitFor(t, "the newer announcement noted", func() bool { a, v := fs(); return a && v == held.Rev+4 })
	// Its fetcher reads the clock, then arms its timer: advanced between
	// the two, the clock would leave the timer a full spacing ahead.
	requireTimerAt(t, ctx, fc, fc.Now().Add(cluster.ConfigFetchInterval), fetches, "for the newer version began at once after the last, not spaced")
	fc.Advance(cluster.ConfigFetchInterval)
	recv("for a newer version")
	select {
	case <-fetches:
		t.Fatal("more than one fetch for the newer announcement before the spacing passed")
	default:
	}
	close(release)
	assert.Equal(t, held, c.ConfigVersion())
}
