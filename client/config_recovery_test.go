package client

import (
	"context"
	"encoding/json"
	"errors"
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

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A Get whose vbucket moved, against nodes that answer NOT_MY_VBUCKET
// without a body and never push configs: the client fetches the config
// from the node that answered and the Get succeeds, on a client clock that
// never moves (so no back-off and no poll ever ends: the fetch's install
// wakes the retry), with one fetch from the old owner.
func TestNMVWithoutBodyFetchesConfigFromNode(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, fakeClockOptions(fc))
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	held := c.ConfigVersion()

	nmv := emptyNMVFromNonOwners(t, mc)
	from := moveVbucket(t, mc, "k", (owner(mc, "k")+1)%3)
	fetchesBefore := mc.Node(from).RequestCount(memdx.OpGetClusterConfig)

	_, err = col.Get(ctx, "k", nil)
	require.NoError(t, err)
	assert.Positive(t, nmv.Hits(), "the Get met NOT_MY_VBUCKET without a body")
	assert.Equal(t, uint64(1), mc.Node(from).RequestCount(memdx.OpGetClusterConfig)-fetchesBefore,
		"one GET_CLUSTER_CONFIG to the node that answered NOT_MY_VBUCKET")
	assert.Equal(t, uint64(mc.Bucket(mockcluster.DefaultBucket).Rev()), c.ConfigVersion().Rev)
	assert.NotEqual(t, held, c.ConfigVersion())
}

// The acceptance figure (a Get issued right after its vbucket moved
// succeeds within 100 ms), made a check that does not depend on the
// machine's speed: the figure holds because the Get waits for no timer,
// only for the config fetch's round trip. With default options (2.5 s
// poll, default back-off and timeout) but the client's clock stopped
// while a Get runs (no poll, back-off or timeout can end), against nodes
// that answer NOT_MY_VBUCKET without a body and never push configs, each
// of 10 moves is followed by a Get that meets NOT_MY_VBUCKET and succeeds:
// a recovery that waited for a poll or any timer of the client would never
// end, and the context's deadline (real time, far above any round trip)
// reports it. Between two moves the clock moves on by ConfigFetchInterval
// (20 ms, the least spacing of two fetches from one node, which the real
// figure included): the moves cycle through the nodes, and the fourth
// Get's fetch asks the node the first asked. The real time each took is
// logged, not checked.
func TestGetAfterVbucketMoveWithoutNMVBodyWaitsForNoTimer(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, &Options{Clock: fakeClock{fc}})
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	nmv := emptyNMVFromNonOwners(t, mc)
	frozen := fc.Now()

	var took []time.Duration
	for i := range 10 {
		if i > 0 {
			fc.Advance(cluster.ConfigFetchInterval)
		}
		hits := nmv.Hits()
		moveVbucket(t, mc, "k", (owner(mc, "k")+1)%3)
		start := time.Now()
		_, err := col.Get(ctx, "k", nil)
		took = append(took, time.Since(start))
		require.NoError(t, err, "move %d: the Get waited for a timer of the client (its clock does not move while the Get runs)", i)
		require.Greater(t, nmv.Hits(), hits, "move %d: the Get met NOT_MY_VBUCKET (no poll can fetch the config first)", i)
		assert.Equal(t, uint64(mc.Bucket(mockcluster.DefaultBucket).Rev()), c.ConfigVersion().Rev, "move %d", i)
	}
	require.Equal(t, frozen.Add(9*cluster.ConfigFetchInterval), fc.Now(), "the client's clock moved only between the Gets")
	t.Logf("move to success, in move order (real time, not checked): %v", took)
	slices.Sort(took)
	t.Logf("min %v, median %v, max %v", took[0], took[len(took)/2], took[len(took)-1])
}

// A config that arrives while an operation sleeps in its NOT_MY_VBUCKET
// back-off ends the sleep: with a back-off of an hour on the client's fake
// clock, the Get succeeds once the vbucket's move is announced (the fetch
// its NMV asked for fails, so the config arrives only through the nodes'
// change notifications). The rebalance publishes its configs one after
// another, so a notification's fetch may bring one before the last, and
// the fetches that follow are spaced by ConfigFetchInterval on the same
// clock: the test moves it on by that step whenever a timer is due within
// it (a fetch waiting for its spacing), at most 10 times, never near the
// hour (nor the poll interval, nor retry.MaxAwaitWake). It moves the clock
// for what the client waits for, not by the real time the config takes to
// come, which a loaded machine stretches.
func TestConfigArrivingDuringBackoffWakesOperation(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	fc := retry.NewFakeClock(time.Now())
	o := fakeClockOptions(fc)
	o.NMVRetryInterval = time.Hour
	c := connect(t, mc, o)
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	a := owner(mc, "k")
	held := c.ConfigVersion()

	// The owner answers NOT_MY_VBUCKET without a body (the vbucket is
	// about to move), and the fetch that asks for gets no config.
	nmv := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Nodes: []int{a}, Key: "k"},
		Action: mockcluster.Action{Status: memdx.StatusNotMyVbucket, Value: []byte{}}})
	defer nmv.Remove()
	fetch := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGetClusterConfig}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail}, Times: 1})
	defer fetch.Remove()

	g := getAsync(ctx, col, "k")
	// The hour of NMVRetryInterval reaches past the Get's deadline: it
	// sleeps until the deadline, which a config arriving ends.
	dl, _ := ctx.Deadline()
	requireInBackoff(t, ctx, fc, g, dl.Equal, "before the config arrived")
	select {
	case <-fetch.Done(): // the NMV asked for a fetch, which failed
	case <-ctx.Done():
		t.Fatal("the NMV without a body asked for no config fetch")
	}
	moveVbucket(t, mc, "k", (a+1)%3)
	for steps := 0; ; {
		select {
		case err := <-g.done:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatalf("the Get still sleeps in its back-off after the new config was announced (config rev %d, the cluster's %d; the clock moved %d fetch spacings)",
				c.ConfigVersion().Rev, mc.Bucket(mockcluster.DefaultBucket).Rev(), steps)
		case <-time.After(time.Millisecond): // looking for a fetch waiting for its spacing
			now := fc.Now()
			if slices.ContainsFunc(fc.Timers(), func(due time.Time) bool { return !due.After(now.Add(cluster.ConfigFetchInterval)) }) {
				require.Less(t, steps, 10, "fetches keep waiting for their spacing")
				steps++
				fc.Advance(cluster.ConfigFetchInterval)
			}
			continue
		}
		break
	}
	assert.Positive(t, nmv.Hits())
	assert.Greater(t, c.ConfigVersion().Rev, held.Rev, "a newer config was installed")
}

// unreachableConfig returns the bucket's config with a higher rev and every
// node at host (which nothing listens on).
func unreachableConfig(t *testing.T, mc *mockcluster.Cluster, rev int64, host string) []byte {
	t.Helper()
	b := mc.Bucket(mockcluster.DefaultBucket)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b.ConfigJSON(0), &m))
	m["rev"] = rev
	vsm := m["vBucketServerMap"].(map[string]any)
	for i, s := range vsm["serverList"].([]any) {
		_, port, err := net.SplitHostPort(s.(string))
		require.NoError(t, err)
		vsm["serverList"].([]any)[i] = net.JoinHostPort(host, port)
	}
	for _, n := range m["nodes"].([]any) {
		nm := n.(map[string]any)
		nm["hostname"] = strings.Replace(nm["hostname"].(string), "$HOST", host, 1)
	}
	for _, n := range m["nodesExt"].([]any) {
		n.(map[string]any)["hostname"] = host
	}
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "$HOST")
	return raw
}

// A config naming only unreachable nodes (here in a NOT_MY_VBUCKET body)
// retires every node the client could reach. Once the cluster publishes a
// newer config, the client gets it from a seed (the seeds and the nodes it
// knew are asked when no node of its config can be reached) and serves
// operations again.
func TestConfigNamingUnreachableNodesRecoversFromSeeds(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	b := mc.Bucket(mockcluster.DefaultBucket)

	bad := unreachableConfig(t, mc, b.Rev()+1, "127.0.0.2")
	h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"},
		Action: mockcluster.Action{Status: memdx.StatusNotMyVbucket, Value: bad}, Times: 1})
	defer h.Remove()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, _ = col.Get(short, "k", nil)
	cancel()
	require.Eventually(t, func() bool { return c.ConfigVersion().Rev == uint64(b.Rev()+1) },
		10*time.Second, 5*time.Millisecond, "the unreachable config was not installed")
	for _, addr := range c.Nodes() {
		require.True(t, strings.HasPrefix(addr, "127.0.0.2:"), addr)
	}

	// The cluster moves past the bad config's rev.
	for b.Rev() <= int64(c.ConfigVersion().Rev) {
		_, err := b.AddScope("s" + strconv.FormatInt(b.Rev(), 10))
		require.NoError(t, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err = col.Get(short, "k", nil)
		cancel()
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the client never recovered: %v (config rev %s, nodes %v)",
			err, c.ConfigVersion(), c.Nodes())
	}
	assert.Equal(t, uint64(b.Rev()), c.ConfigVersion().Rev)
	for _, addr := range c.Nodes() {
		assert.True(t, strings.HasPrefix(addr, "127.0.0.1:"), addr)
	}
}

// Connect against a cluster whose config names its nodes by an address the
// client cannot connect to fails, with ErrNoNodeAvailable and an error that
// names the nodes it tried, instead of returning a client that can reach no
// node.
func TestConnectFailsWhenNoBootstrapNodeIsUsable(t *testing.T) {
	mc := newMock(t, mockcluster.Options{ConfigHost: "127.0.0.2"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, mc.ConnString(), testOptions(&Options{Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword, Bucket: mockcluster.DefaultBucket, ConnectTimeout: 5 * time.Second}))
	if err == nil {
		_ = c.Close()
		t.Fatal("Connect returned a client that can reach no node")
	}
	t.Log(err)
	assert.ErrorIs(t, err, ErrNoNodeAvailable)
	var ce *ConnectError
	require.True(t, errors.As(err, &ce))
	for _, n := range mc.Nodes() {
		_, port, _ := net.SplitHostPort(n.Addr())
		assert.Contains(t, err.Error(), "127.0.0.2:"+port, "the error names each node tried")
	}
	assert.Len(t, ce.All, len(mc.Nodes()))
	assert.NoError(t, ctx.Err(), "Connect used the whole context")
}

// logCapture is a slog handler that keeps every record.
type logCapture struct {
	mu   sync.Mutex
	recs []string
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	h.mu.Lock()
	h.recs = append(h.recs, b.String())
	h.mu.Unlock()
	return nil
}
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCapture) WithGroup(string) slog.Handler      { return h }

func (h *logCapture) find(s string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if strings.Contains(r, s) {
			out = append(out, r)
		}
	}
	return out
}

// An operation waiting in its back-off because its node is unavailable (the
// node crashed) is woken by the config that fails the node over: on a
// client clock that never moves, the Get goes to the promoted replica as
// soon as that config is installed.
func TestFailoverConfigWakesOperationWaitingForNode(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, fakeClockOptions(fc))
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	a := owner(mc, "k")
	n := c.cl.Node(mc.Node(a).Addr())
	require.NotNil(t, n)

	mc.Node(a).Stop()
	require.Eventually(t, func() bool { _, _, err := n.Pick(); return err != nil },
		10*time.Second, time.Millisecond, "the client never saw the node's connection close")
	g := getAsync(ctx, col, "k")
	requireAsked(t, ctx, g, RetryReasonNodeNotAvailable, "while its node was down")
	require.NoError(t, mc.Failover(a))
	select {
	case err := <-g.done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the Get still waits for the failed node after the failover config was installed")
	}
}
