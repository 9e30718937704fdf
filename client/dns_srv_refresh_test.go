package client

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// scriptedSRV answers the SRV lookups of one record: each call takes the
// next answer of script (the last one repeats); an answer with hang set
// waits for the lookup's context to end. Every call is signalled on
// called (buffered) with its number, from 0.
type scriptedSRV struct {
	record string
	mu     sync.Mutex
	script []srvAnswer
	calls  int
	called chan int
}

type srvAnswer struct {
	addrs []*net.SRV
	err   error
	hang  bool
}

func newScriptedSRV(record string, script ...srvAnswer) *scriptedSRV {
	return &scriptedSRV{record: record, script: script, called: make(chan int, 64)}
}

func (r *scriptedSRV) LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error) {
	r.mu.Lock()
	i := r.calls
	r.calls++
	a := r.script[min(i, len(r.script)-1)]
	r.mu.Unlock()
	r.called <- i
	if name != r.record || service != "" || proto != "" {
		return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	if a.hang {
		<-ctx.Done()
		return "", nil, &net.DNSError{Err: "i/o timeout: " + ctx.Err().Error(), Name: name, IsTimeout: true}
	}
	return name, a.addrs, a.err
}

func (r *scriptedSRV) numCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// awaitCall waits for lookup number i to start (real time bounded by ctx:
// only a client that never looks up again reaches it).
func (r *scriptedSRV) awaitCall(t *testing.T, ctx context.Context, i int) {
	t.Helper()
	for {
		select {
		case got := <-r.called:
			if got >= i {
				require.Equal(t, i, got, "a lookup was skipped")
				return
			}
		case <-ctx.Done():
			t.Fatalf("lookup %d of the SRV record never started (%d made)", i, r.numCalls())
		}
	}
}

// moveCluster moves mc's data from its nodes 0 and 1 to two new nodes and
// removes (stops) the old ones, as a cluster whose nodes are replaced by
// others at new addresses does; the client, to which no config is pushed
// and whose poll the test's fake clock holds, sees none of it happen.
func moveCluster(t *testing.T, mc *mockcluster.Cluster) []string {
	t.Helper()
	n2, err := mc.AddNode()
	require.NoError(t, err)
	n3, err := mc.AddNode()
	require.NoError(t, err)
	reb, err := mc.StartRebalance(mockcluster.RebalanceOptions{Nodes: []int{n2.ID(), n3.ID()}})
	require.NoError(t, err)
	require.NoError(t, reb.Finish())
	require.NoError(t, mc.RemoveNode(0))
	require.NoError(t, mc.RemoveNode(1))
	return []string{n2.Addr(), n3.Addr()}
}

// awaitUnreachable waits until no endpoint of c is connected (the stopped
// nodes' connections ended, as the client saw).
func awaitUnreachable(t *testing.T, c *Client) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, e := range c.Diagnostics(nil).Endpoints {
			if e.State == EndpointConnected {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "the stopped nodes' connections never ended")
}

// srvClient is a client connected by connStr with r as its Resolver, on
// the fake clock fc (which only the test moves), its log captured, that has
// stored "k" = "v"; ctx bounds the test's waits (real time). opCtx is for
// the operations the test leaves waiting while it moves fc: it has no
// deadline, which an operation would read on fc (Client.deadline), where
// the tests move tens of seconds, more under load, past one of real time.
type srvClient struct {
	r     *scriptedSRV
	fc    *retry.FakeClock
	logs  *logCapture
	c     *Client
	col   *Collection
	ctx   context.Context
	opCtx context.Context
}

func connectSRV(t *testing.T, connStr string, r *scriptedSRV) *srvClient {
	t.Helper()
	s := &srvClient{r: r, fc: retry.NewFakeClock(time.Now()), logs: &logCapture{}}
	o := fakeClockOptions(s.fc)
	o.Resolver = r
	o.Logger = slog.New(s.logs)
	c, err := connectString(t, connStr, o)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	opCtx, opCancel := context.WithCancel(context.Background())
	t.Cleanup(opCancel)
	s.c, s.col, s.ctx, s.opCtx = c, c.DefaultCollection(), ctx, opCtx
	_, err = s.col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	return s
}

// newerOtherCluster starts another cluster (another bucket uuid) whose
// bucket of the same name has a config newer than held.
func newerOtherCluster(t *testing.T, held ConfigVersion) *mockcluster.Cluster {
	t.Helper()
	other := newMock(t, mockcluster.Options{Nodes: 1})
	ob := other.Bucket(mockcluster.DefaultBucket)
	for i := 0; uint64(ob.Rev()) <= held.Rev; i++ {
		_, err := ob.AddScope("s" + strconv.Itoa(i))
		require.NoError(t, err)
	}
	return other
}

// A client bootstrapped from a DNS SRV record whose cluster moves to new
// addresses (its old nodes stop; the record now names the new ones) finds
// it again without a new Connect: when no node of its config can be
// reached, it looks the record up again and asks the new targets for their
// config. It used to resolve the record once, at Connect, and ask only the
// addresses it had known: every operation failed until the application
// connected again. The lookup runs on the client's (fake) clock, which the
// test never moves: the Get's wait is ended by the new config.
func TestDNSSRVLookedUpAgainWhenTheClusterMoved(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: noPushes})
	const rec = "_couchbase._tcp.cluster.test"
	s := connectSRV(t, "couchbase://cluster.test/default", newScriptedSRV(rec, srvAnswer{addrs: srvOf(t, mc.Addrs())}))
	r, logs, c, col, ctx := s.r, s.logs, s.c, s.col, s.ctx
	require.Equal(t, 1, r.numCalls(), "Connect's lookup")

	moved := moveCluster(t, mc)
	r.mu.Lock()
	r.script = []srvAnswer{{addrs: srvOf(t, moved)}}
	r.mu.Unlock()
	awaitUnreachable(t, c)

	res, err := col.Get(ctx, "k", nil)
	require.NoError(t, err, "the client never found the cluster at its new addresses")
	assert.Equal(t, []byte("v"), res.Value)
	assert.ElementsMatch(t, moved, c.Nodes())
	assert.Equal(t, 2, r.numCalls(), "one lookup again")
	st := c.cl.SeedRefreshes()
	assert.Equal(t, rec, st.Name)
	assert.Equal(t, 1, st.Lookups)
	assert.Equal(t, 0, st.Failures)
	assert.Equal(t, moved, st.Targets)
	// The lookup's own dials install the new config (Newer), or a
	// recovery round started at the same moment does: it asks the
	// targets too when the lookup remembered them before the round took
	// its candidates (a loaded machine). Either counts or logs it once its
	// round has ended (its other dials ended), which may be after the
	// config it installed woke the Get: waited for, not read at once.
	require.Eventually(t, func() bool {
		return c.cl.SeedRefreshes().Newer == 1 ||
			len(logs.find("recovery: a node outside the current config served a newer config")) > 0
	}, 10*time.Second, time.Millisecond, "neither the lookup (SeedRefreshes().Newer) nor a recovery round (its log) installed the config")
}

// A lookup made again that hangs ends after seedLookupTimeout (5 s) of the
// client's clock, one that fails is logged, and neither is made again
// before 10 s of that clock have passed since the last started (however
// often operations find no node); the next one that answers is used.
func TestDNSSRVLookupAgainBoundedAndRetried(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: noPushes})
	const rec = "_couchbase._tcp.cluster.test"
	s := connectSRV(t, "couchbase://cluster.test/default", newScriptedSRV(rec, srvAnswer{addrs: srvOf(t, mc.Addrs())}))
	r, fc, c, col, ctx := s.r, s.fc, s.c, s.col, s.ctx
	r.awaitCall(t, ctx, 0)

	moved := moveCluster(t, mc)
	r.mu.Lock()
	r.script = []srvAnswer{
		{}, // (Connect's, already made)
		{hang: true},
		{err: &net.DNSError{Err: "server misbehaving", Name: rec, IsTemporary: true}},
		{addrs: srvOf(t, moved)},
	}
	r.mu.Unlock()
	awaitUnreachable(t, c)

	g := getAsync(s.opCtx, col, "k")
	r.awaitCall(t, ctx, 1) // hangs
	stats := c.cl.SeedRefreshes
	first := stats().Last

	// Half of the timeout: the lookup still hangs.
	fc.Advance(2500 * time.Millisecond)
	assert.Equal(t, 0, stats().Failures)
	fc.Advance(2500 * time.Millisecond) // the timeout
	require.Eventually(t, func() bool { return stats().Failures == 1 }, 10*time.Second, time.Millisecond,
		"the hanging lookup did not end at its timeout")
	assert.Contains(t, stats().LastErr.Error(), "no answer within 5s")

	// The next lookup (which fails) starts no sooner than 10 s after the
	// last, however often the Get and the polls find no node meanwhile.
	advanceUntilCall(t, ctx, fc, r, 2)
	require.Eventually(t, func() bool { return stats().Failures == 2 }, 10*time.Second, time.Millisecond)
	assert.Contains(t, stats().LastErr.Error(), "server misbehaving")
	second := stats().Last
	assert.GreaterOrEqual(t, second.Sub(first), 10*time.Second)
	select {
	case err := <-g.done:
		t.Fatalf("the Get ended before the cluster was found: %v", err)
	default:
	}

	// And the one after answers.
	advanceUntilCall(t, ctx, fc, r, 3)
	assert.GreaterOrEqual(t, stats().Last.Sub(second), 10*time.Second)
	require.NoError(t, <-g.done, "the client never found the cluster at its new addresses")
	assert.ElementsMatch(t, moved, c.Nodes())
	assert.Equal(t, 3, stats().Lookups)
	assert.Equal(t, 2, stats().Failures)
	assert.Equal(t, 4, r.numCalls())
}

// advanceUntilCall moves fc on by 2.5 s (the poll interval) whenever no
// lookup started for a while, until lookup i starts. How long it waits
// between two steps only paces the test: what it checks is the client's
// clock when each lookup started (SeedRefreshStats.Last).
func advanceUntilCall(t *testing.T, ctx context.Context, fc *retry.FakeClock, r *scriptedSRV, i int) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case got := <-r.called:
			require.Equal(t, i, got, "a lookup was skipped")
			return
		case <-tick.C:
			// A lookup that started while the tick came is not
			// followed by another move of the clock (select picks
			// either at random): it would set off a recovery round,
			// or end the lookup's dials (their bootstrap's watch).
			select {
			case got := <-r.called:
				require.Equal(t, i, got, "a lookup was skipped")
				return
			default:
			}
			fc.Advance(2500 * time.Millisecond)
		case <-ctx.Done():
			t.Fatalf("lookup %d of the SRV record never started (%d made)", i, r.numCalls())
		}
	}
}

// awaitRefused waits until a target of the record looked up again that
// serves another cluster's bucket has been refused (SeedRefreshes.Foreign),
// or its config installed (held no longer is the version: the caller's
// assertion fails). Refused by the lookup's own dials, and by a recovery
// round that asks it too when the clock moved on after the lookup started:
// the count may go from 0 to 2 at once, so it is not waited for to be
// exactly 1. The clock moves on meanwhile (600 ms, past the recovery
// interval, every 5 ms): a dial of the lookup ended by a move (its
// bootstrap's watch, on the client's clock) is made again by the next
// recovery round.
func awaitRefused(t *testing.T, ctx context.Context, fc *retry.FakeClock, c *Client, held ConfigVersion) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for c.cl.SeedRefreshes().Foreign == 0 && c.ConfigVersion() == held {
		select {
		case <-tick.C:
			fc.Advance(600 * time.Millisecond)
		case <-ctx.Done():
			t.Fatal("the other cluster's config was never refused")
		}
	}
}

// Seeds that came from no SRV record (the connection string gave ports, or
// the name had no record) are never looked up again, however long no node
// can be reached.
func TestDNSSRVNoLookupAgainWithoutRecord(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: noPushes})
	s := connectSRV(t, mc.ConnString()+"/default", newScriptedSRV("_couchbase._tcp.cluster.test", srvAnswer{addrs: srvOf(t, mc.Addrs())}))
	r, fc, c, col := s.r, s.fc, s.c, s.col

	moveCluster(t, mc)
	awaitUnreachable(t, c)
	g := getAsync(s.opCtx, col, "k")
	for range 4 {
		fc.Advance(10 * time.Second)
	}
	select {
	case err := <-g.done:
		t.Fatalf("the Get ended: %v", err)
	default:
	}
	assert.Zero(t, r.numCalls(), "looked up")
	st := c.cl.SeedRefreshes()
	assert.Empty(t, st.Name)
	assert.Zero(t, st.Lookups)
	require.NoError(t, c.Close())
	require.Error(t, <-g.done)
}

// A target of the record looked up again that serves a config of another
// bucket of the same name (another cluster: another bucket uuid), newer
// than the one held, is not taken for the bucket the client was using: its
// config is not installed, and the client keeps its nodes.
func TestDNSSRVLookupAgainIgnoresAnotherCluster(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: noPushes})
	const rec = "_couchbase._tcp.cluster.test"
	s := connectSRV(t, "couchbase://cluster.test/default", newScriptedSRV(rec, srvAnswer{addrs: srvOf(t, mc.Addrs())}))
	r, fc, c, col, ctx := s.r, s.fc, s.c, s.col, s.ctx
	held, nodes := c.ConfigVersion(), c.Nodes()
	r.awaitCall(t, ctx, 0) // Connect's

	other := newerOtherCluster(t, held)
	r.mu.Lock()
	r.script = []srvAnswer{{addrs: srvOf(t, other.Addrs())}}
	r.mu.Unlock()
	mc.Node(0).Stop()
	mc.Node(1).Stop()
	awaitUnreachable(t, c)

	g := getAsync(s.opCtx, col, "k")
	advanceUntilCall(t, ctx, fc, r, 1)
	awaitRefused(t, ctx, fc, c, held)
	assert.Equal(t, held, c.ConfigVersion(), "the other cluster's config was installed")
	assert.Equal(t, nodes, c.Nodes())
	assert.Zero(t, c.cl.SeedRefreshes().Newer)
	require.NoError(t, c.Close())
	require.Error(t, <-g.done)
}

// A target of the record looked up again that serves another cluster's
// bucket of the same name is not used by the recovery rounds either: it
// used to join the addresses recovery asks, whose next round (500 ms later)
// installed that config, newer than the one held, without the uuid check
// the lookup's own dials make.
func TestDNSSRVLookupAgainForeignTargetNotUsedByRecovery(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: noPushes})
	const rec = "_couchbase._tcp.cluster.test"
	s := connectSRV(t, "couchbase://cluster.test/default", newScriptedSRV(rec, srvAnswer{addrs: srvOf(t, mc.Addrs())}))
	r, fc, logs, c, col, ctx := s.r, s.fc, s.logs, s.c, s.col, s.ctx
	held, nodes := c.ConfigVersion(), c.Nodes()
	r.awaitCall(t, ctx, 0) // Connect's

	other := newerOtherCluster(t, held)
	r.mu.Lock()
	r.script = []srvAnswer{{addrs: srvOf(t, other.Addrs())}}
	r.mu.Unlock()
	mc.Node(0).Stop()
	mc.Node(1).Stop()
	awaitUnreachable(t, c)

	g := getAsync(s.opCtx, col, "k")
	advanceUntilCall(t, ctx, fc, r, 1)
	awaitRefused(t, ctx, fc, c, held)

	// Recovery rounds go on while the cluster stays unreachable: wait for
	// one that asked the other cluster's node (or installed its config).
	asked := func() bool {
		return slices.ContainsFunc(logs.find("no seed or known node serves a config newer"), func(r string) bool { return strings.HasSuffix(r, " tried=1") }) ||
			c.ConfigVersion() != held
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !asked() {
		select {
		case <-tick.C:
			fc.Advance(600 * time.Millisecond)
		case <-ctx.Done():
			t.Fatal("no recovery round asked the other cluster's node")
		}
	}
	assert.Equal(t, held, c.ConfigVersion(), "the other cluster's config was installed by a recovery round")
	assert.Equal(t, nodes, c.Nodes())
	require.NoError(t, c.Close())
	require.Error(t, <-g.done)
}

// When the record names the nodes otherwise than the config does (host
// names there, IP addresses here), its targets looked up again while no
// node can be reached are the seeds recovery already asks every round: the
// lookup does not dial them again (nor log a warning for each, every 10 s,
// when they serve the config held); it logs them at info level as already
// asked, and still counts them in SeedRefreshes. It used to compare them
// with the config's nodes only, and asked them again as new addresses.
func TestDNSSRVLookupAgainSkipsSeedsRecoveryAsks(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: noPushes, ConfigHost: mockcluster.DefaultHost})
	const rec = "_couchbase._tcp.cluster.test"
	var named []*net.SRV
	var seeds []string
	for _, a := range mc.Addrs() {
		_, p, err := net.SplitHostPort(a)
		require.NoError(t, err)
		port, err := strconv.Atoi(p)
		require.NoError(t, err)
		named = append(named, &net.SRV{Target: "localhost.", Port: uint16(port)})
		seeds = append(seeds, net.JoinHostPort("localhost", p))
	}
	s := connectSRV(t, "couchbase://cluster.test/default", newScriptedSRV(rec, srvAnswer{addrs: named}))
	r, logs, c, col, ctx := s.r, s.logs, s.c, s.col, s.ctx
	require.ElementsMatch(t, mc.Addrs(), c.Nodes(), "the config names the nodes by IP address")
	r.awaitCall(t, ctx, 0) // Connect's

	mc.Node(0).Stop()
	mc.Node(1).Stop()
	awaitUnreachable(t, c)
	g := getAsync(s.opCtx, col, "k")
	r.awaitCall(t, ctx, 1)
	done := func() bool {
		return len(logs.find("the seeds looked up again")) > 0
	}
	require.Eventually(t, done, 10*time.Second, time.Millisecond, "the lookup never ended")
	assert.Empty(t, logs.find("name addresses the config does not"), "the lookup asked again the seeds recovery asks")
	assert.Empty(t, logs.find("a seed looked up again serves no config newer"))
	known := logs.find("the seeds looked up again are already asked")
	if assert.Len(t, known, 1) {
		assert.True(t, strings.HasPrefix(known[0], "INFO "), known[0])
	}
	st := c.cl.SeedRefreshes()
	assert.Equal(t, 1, st.Lookups)
	assert.Zero(t, st.Failures)
	assert.Equal(t, seeds, st.Targets)
	require.NoError(t, c.Close())
	require.Error(t, <-g.done)
}
