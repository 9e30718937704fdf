package client

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// workload runs mixed operations on keys from several goroutines until stop
// is closed, and returns every error it met. done counts the operations
// ended so far (awaitOps).
func workload(ctx context.Context, col *Collection, workers, keys int, stop <-chan struct{}, done *atomic.Int64) (ops int, errs []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			n := 0
			for {
				select {
				case <-stop:
					mu.Lock()
					ops += n
					mu.Unlock()
					return
				default:
				}
				key := fmt.Sprintf("key-%d", rng.Intn(keys))
				var err error
				switch rng.Intn(6) {
				case 0, 1:
					_, err = col.Upsert(ctx, key, []byte(fmt.Sprintf("w%d-%d", w, n)), nil)
				case 2, 3:
					_, err = col.Get(ctx, key, nil)
					if err != nil && isNotFound(err) {
						err = nil
					}
				case 4:
					one := uint64(1)
					_, err = col.Increment(ctx, "ctr-"+key, &IncrementOptions{Initial: &one})
				case 5:
					_, err = col.Touch(ctx, key, time.Hour, nil)
					if err != nil && isNotFound(err) {
						err = nil
					}
				}
				n++
				done.Add(1)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}(w)
	}
	wg.Wait()
	return ops, errs
}

// awaitOps waits until done counts n more operations than from, and
// returns the count it saw: it paces a test's steps by the workload's
// progress, not by time, so that a slow machine runs as many operations
// between them as a fast one. The minute bounds a failure.
func awaitOps(t *testing.T, done *atomic.Int64, from, n int64) int64 {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if got := done.Load(); got >= from+n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workload did not run %d operations within a minute", n)
		}
	}
}

func isNotFound(err error) bool {
	var kv *KeyValueError
	return asKV(err, &kv) && kv.Err == ErrDocumentNotFound
}

// A workload of mixed operations runs while the cluster rebalances with a
// forward map: no operation fails, NOT_MY_VBUCKET never reaches the caller,
// and the forward map is used as RFC 0005 says: an operation's first attempt
// goes by the current map, after an NMV it goes by the forward map, and it
// stays there for its later attempts.
func TestRebalanceWorkloadUsesForwardMap(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 3})
	rec := &recorder{}
	// Polling slower than the test: configs must come from notifications
	// and NMV bodies.
	c := connect(t, mc, &Options{Observer: rec, ConfigPollInterval: time.Hour})
	col := c.DefaultCollection()
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		_, err := col.Upsert(ctx, fmt.Sprintf("key-%d", i), []byte("seed"), nil)
		require.NoError(t, err)
	}
	_, err := mc.AddNode()
	require.NoError(t, err)
	reb, err := mc.StartRebalance(mockcluster.RebalanceOptions{})
	require.NoError(t, err)
	revAtStart := mc.Bucket("default").Rev()
	// The workload below meets NOT_MY_VBUCKET under the forward map only
	// when a config happens to reach the client late; one NMV the test
	// makes happen checks that case whatever the machine's speed.
	probeForwardMapAfterNMV(t, mc, c, rec, reb, revAtStart)

	stop := make(chan struct{})
	type result struct {
		ops  int
		errs []error
	}
	done := make(chan result, 1)
	var progress atomic.Int64
	go func() {
		ops, errs := workload(ctx, col, 8, 200, stop, &progress)
		done <- result{ops, errs}
	}()
	// Move the vbuckets a few at a time while the workload runs; every
	// config published meanwhile carries vBucketMapForward. Each step
	// waits for 16 operations (1024 in all over the 64 steps), not for a
	// time: what the test checks of them does not depend on the
	// machine's speed.
	seen := int64(0)
	for reb.Remaining() > 0 {
		_, err := reb.Step(16)
		require.NoError(t, err)
		seen = awaitOps(t, &progress, seen, 16)
	}
	close(stop)
	res := <-done
	require.Empty(t, res.errs, "no operation fails during the rebalance")
	require.NoError(t, reb.Finish())
	assert.Greater(t, res.ops, 500)

	byOp := rec.byOp()
	nmvOps, forwardAfterNMV, beforeConfig := 0, 0, 0
	for id, atts := range byOp {
		require.False(t, atts[0].ForwardMap, "op %d: the first attempt goes by the current map", id)
		require.False(t, atts[0].Ketama)
		onForward := false
		for i, a := range atts {
			if onForward {
				assert.True(t, a.ForwardMap, "op %d attempt %d: once on the forward map it stays there", id, i)
			}
			if a.ForwardMap {
				onForward = true
			}
			if a.Status == StatusNotMyVbucket {
				require.Less(t, i+1, len(atts), "op %d: an NMV is never the last attempt", id)
				nmvOps++
				next := atts[i+1]
				// The next attempt that was sent: in between, the forward
				// node may still have been connecting (the node added for
				// the rebalance), a wait recorded as NODE_NOT_AVAILABLE.
				assert.Contains(t, []any{retryKVNotMyVbucket, RetryReasonNodeNotAvailable}, next.RetryReason,
					"op %d attempt %d", id, i+1)
				// RFC 0005: after an NMV the operation goes by the forward map
				// of the config it is routed with. An attempt routed with a
				// config from before the rebalance (the push of the new one
				// still being fetched, and NMV bodies deduplicated) has none
				// and rightly retries by the current map.
				if next.ConfigRev >= uint64(revAtStart) {
					assert.True(t, next.ForwardMap, "op %d: after an NMV the retry goes by the forward map", id)
					forwardAfterNMV++
				} else {
					beforeConfig++
				}
			}
		}
	}
	t.Logf("%d operations, %d attempts, %d NMVs: %d followed by a forward-map attempt, %d retried before the rebalance's config arrived; config rev %d -> %d",
		res.ops, len(rec.attempts()), nmvOps, forwardAfterNMV, beforeConfig, revAtStart, c.ConfigVersion().Rev)
	assert.Equal(t, nmvOps, forwardAfterNMV+beforeConfig)

	// After the rebalance the client routes by the new current map: no NMV.
	require.Eventually(t, func() bool { return c.ConfigVersion().Rev >= uint64(mc.Bucket("default").Rev()) },
		5*time.Second, 5*time.Millisecond, "the final config arrives by notification")
	before := len(rec.attempts())
	for i := 0; i < 200; i++ {
		_, err := col.Get(ctx, fmt.Sprintf("key-%d", i), nil)
		require.NoError(t, err)
	}
	for _, a := range rec.attempts()[before:] {
		assert.NotEqual(t, StatusNotMyVbucket, a.Status)
		assert.False(t, a.ForwardMap)
	}
}

// probeForwardMapAfterNMV checks RFC 0005's rule by construction, on the
// rebalance reb has started (its config, with a forward map, is rev
// revAtStart): once the client routes by that config, a Get of a key whose
// vbucket moves goes first to the current owner, which the test makes
// answer NOT_MY_VBUCKET; the retry goes by the forward map to the new
// owner, and stays there (the new owner answers NOT_MY_VBUCKET too until
// the test moves the vbucket, once the Get has reached it) until it
// succeeds.
func probeForwardMapAfterNMV(t *testing.T, mc *mockcluster.Cluster, c *Client, rec *recorder, reb *mockcluster.Rebalance, revAtStart int64) {
	t.Helper()
	awaitTopology(t, c, "the rebalance's config", func(top *cluster.Topology) bool {
		return top.Config() != nil && top.Config().Version().Rev >= uint64(revAtStart)
	})
	b := mc.Bucket(mockcluster.DefaultBucket)
	cur, fwd := b.VbucketMap(), b.ForwardMap()
	require.NotEmpty(t, fwd, "the rebalance's config has a forward map")
	// The lowest vbucket whose active owner changes, and how many
	// vbuckets reb.Step moves up to it (it moves them in vbucket order).
	vb, upTo := -1, 0
	for v := range cur {
		if !slices.Equal(cur[v], fwd[v]) {
			upTo++
		}
		if cur[v][0] != fwd[v][0] {
			vb = v
			break
		}
	}
	require.GreaterOrEqual(t, vb, 0, "the rebalance moves no active vbucket")
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("probe-%d", i); int(b.VbucketForKey([]byte(k))) == vb {
			key = k
		}
	}
	from, to := cur[vb][0], fwd[vb][0]
	isKey := func(r *mockcluster.Request) bool { return string(r.Key) == key }
	nmv := mc.Control(mockcluster.Match{Nodes: []int{from}, Func: isKey}, 1,
		func(*mockcluster.Request) (mockcluster.Action, bool) {
			return mockcluster.Action{Status: memdx.StatusNotMyVbucket}, true
		})
	defer nmv.Remove()
	reached := make(chan struct{})
	var once sync.Once
	atNew := mc.Control(mockcluster.Match{Nodes: []int{to}, Func: isKey}, 0,
		func(*mockcluster.Request) (mockcluster.Action, bool) {
			once.Do(func() { close(reached) })
			return mockcluster.Action{}, false
		})
	defer atNew.Remove()

	done := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Get(context.Background(), key, &GetOptions{Timeout: failAfter})
		done <- err
	}()
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("the Get of %q ended before reaching the forward owner (node %d): %v", key, to, err)
	case <-time.After(failAfter):
		t.Fatalf("the Get of %q did not reach the forward owner (node %d) in %v", key, to, failAfter)
	}
	moved, err := reb.Step(upTo)
	require.NoError(t, err)
	require.Equal(t, upTo, moved)
	err = within(t, done, "the Get on the forward owner")
	if !isNotFound(err) {
		require.NoError(t, err)
	}
	var atts []AttemptInfo
	for _, a := range rec.attempts() {
		if a.Key == key {
			atts = append(atts, a)
		}
	}
	require.GreaterOrEqual(t, len(atts), 2, "attempts of the probe: %+v", atts)
	first := atts[0]
	assert.False(t, first.ForwardMap, "the first attempt goes by the current map")
	assert.Equal(t, mc.Node(from).Addr(), first.Node)
	assert.Equal(t, StatusNotMyVbucket, first.Status)
	assert.GreaterOrEqual(t, first.ConfigRev, uint64(revAtStart))
	for i, a := range atts[1:] {
		assert.True(t, a.ForwardMap, "attempt %d after the NMV goes by the forward map: %+v", i+1, a)
		assert.Equal(t, mc.Node(to).Addr(), a.Node, "attempt %d after the NMV goes to the forward owner", i+1)
	}
	assert.NotEqual(t, StatusNotMyVbucket, atts[len(atts)-1].Status, "the last attempt is answered")
}

// Nodes join and leave without failing requests in flight. A node joins
// as in a real rebalance: the config that starts it names the node, and
// its vbuckets move only after the client has connected to it, whatever
// that takes (the new node's bootstrap is held past the operations'
// default timeout here, so that the test shows it does not depend on how
// fast a machine dials and authenticates); how operations wait for a node
// that has no connection yet is TestNodeBackEndsRetryWaitsAtOnce's.
func TestNodesAddedAndRemoved(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 3})
	c := connect(t, mc, &Options{ConfigPollInterval: 50 * time.Millisecond})
	col := c.DefaultCollection()
	ctx := context.Background()
	stop := make(chan struct{})
	type result struct {
		ops  int
		errs []error
	}
	done := make(chan result, 1)
	var progress atomic.Int64
	go func() {
		ops, errs := workload(ctx, col, 4, 100, stop, &progress)
		done <- result{ops, errs}
	}()
	// Rebalances move vbuckets in chunks, a config per chunk, as a real
	// rebalance publishes configs at a pace of seconds, not microseconds.
	// ready, when set, runs after the rebalance has started (its config
	// published) and before the first vbucket moves.
	rebalance := func(o mockcluster.RebalanceOptions, ready func()) {
		reb, err := mc.StartRebalance(o)
		require.NoError(t, err)
		if ready != nil {
			ready()
		}
		// Paced by the workload's progress (8 operations a step), not
		// by time: as many operations meet each config on any machine.
		seen := progress.Load()
		for reb.Remaining() > 0 {
			_, err := reb.Step(64)
			require.NoError(t, err)
			seen = awaitOps(t, &progress, seen, 8)
		}
		require.NoError(t, reb.Finish())
	}
	n4, err := mc.AddNode()
	require.NoError(t, err)
	slowBootstrap := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Nodes: []int{n4.ID()}, OpCodes: []memdx.OpCode{memdx.OpHello}},
		Action: mockcluster.Action{Delay: DefaultKVTimeout + 500*time.Millisecond}})
	defer slowBootstrap.Remove()
	rebalance(mockcluster.RebalanceOptions{}, func() {
		awaitDiagnostics(t, c, n4.Addr(), EndpointConnected, nil)
	})
	awaitTopology(t, c, "the added node holds vbuckets", func(top *cluster.Topology) bool {
		return len(top.Nodes()) == 4 && topologyHas(top, n4.Addr())
	})

	// Take node 0 out gracefully: rebalance it out, wait for the client to
	// route without it and to drain and close its connections to it (its
	// maintainer has then exited), then remove it. Nothing of the workload
	// is in flight on node 0 when it stops.
	gone := mc.Node(0).Addr()
	n0 := c.cl.Node(gone)
	require.NotNil(t, n0, "the client has a pool for node 0")
	rebalance(mockcluster.RebalanceOptions{Nodes: []int{1, 2, n4.ID()}}, nil)
	awaitTopology(t, c, "node 0 is rebalanced out", func(top *cluster.Topology) bool {
		return len(top.Nodes()) == 3 && !topologyHas(top, gone)
	})
	select {
	case <-n0.Stopped():
	case <-time.After(time.Minute):
		t.Fatal("the client did not drain and close its connections to the node rebalanced out within a minute")
	}
	require.NoError(t, mc.RemoveNode(0))
	// The workload goes on over the remaining nodes; a few operations of
	// the test's own, on keys of every node, show it.
	for i := range 30 {
		_, err := col.Upsert(ctx, fmt.Sprintf("after-%d", i), []byte("v"), nil)
		require.NoError(t, err)
	}
	close(stop)
	res := <-done
	assert.Empty(t, res.errs, "no request fails while nodes join and leave")
	assert.Greater(t, res.ops, 100)
	assert.NotContains(t, c.Nodes(), gone)
}

// awaitTopology waits until the client's routing snapshot satisfies ok,
// woken by each install of a new one (no polling); it fails the test after
// a minute, a bound no healthy run comes near.
func awaitTopology(t *testing.T, c *Client, what string, ok func(*cluster.Topology) bool) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		top := c.cl.Topology()
		if ok(top) {
			return
		}
		select {
		case <-top.Changed():
		case <-deadline.C:
			t.Fatalf("the client's topology (nodes %v) did not reach %q within a minute", c.Nodes(), what)
		}
	}
}

// topologyHas reports whether top routes to addr.
func topologyHas(top *cluster.Topology, addr string) bool {
	for _, n := range top.Nodes() {
		if n.Addr() == addr {
			return true
		}
	}
	return false
}

// A node that stops and restarts: reads are retried on the new connection.
// The node comes back once a Get of one of its keys waits for it (its
// strategy is asked about a retry because the node has no connection), not
// after a sleep a loaded machine may outlast before any Get reached it; the
// attempts then show that Get answered by the restarted node.
func TestNodeRestart(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	rec := &recorder{}
	c := connect(t, mc, &Options{Observer: rec})
	col := c.DefaultCollection()
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		_, err := col.Upsert(ctx, fmt.Sprintf("k%d", i), []byte("v"), nil)
		require.NoError(t, err)
	}
	onStopped := 0
	for i := 0; i < 50; i++ {
		if owner(mc, fmt.Sprintf("k%d", i)) == 1 {
			onStopped++
		}
	}
	require.Positive(t, onStopped, "no key is on the node the test stops")
	nd := mc.Node(1)
	addr := nd.Addr()
	nd.Stop()
	// Only the Gets of the stopped node's keys carry the strategy, so the
	// first reason it is asked about is one of theirs.
	waiting := make(chan RetryReason, 1)
	strategy := RetryStrategyFunc(func(req RetryRequest, reason RetryReason) RetryAction {
		select {
		case waiting <- reason:
		default:
		}
		return DefaultRetryStrategy().RetryAfter(req, reason)
	})
	restarted := make(chan error, 1)
	go func() {
		select {
		case r := <-waiting:
			switch r {
			case RetryReasonSocketNotAvailable, RetryReasonNodeNotAvailable, RetryReasonSocketClosedWhileInFlight:
				restarted <- nd.Restart()
			default:
				restarted <- fmt.Errorf("a Get of the stopped node's keys retried for %v, not for the node's absence", r)
			}
		case <-time.After(failAfter):
			restarted <- fmt.Errorf("no Get waited for the stopped node in %v", failAfter)
		}
	}()
	waited := ""
	for i := 0; i < 50; i++ {
		key := fmt.Sprintf("k%d", i)
		o := &GetOptions{Timeout: failAfter}
		if owner(mc, key) == 1 {
			o.RetryStrategy = strategy
		}
		_, err := col.Get(ctx, key, o)
		require.NoError(t, err, "reads wait for the node to come back")
		if owner(mc, key) == 1 && waited == "" {
			waited = key
		}
	}
	require.NoError(t, within(t, restarted, "the node's restart"))
	// The first Get of the stopped node's keys is the one that waited: its
	// last attempt went to the restarted node, after at least one retry.
	var last *AttemptInfo
	for _, a := range rec.attempts() {
		if a.Key == waited && a.Op == "Get" {
			last = &a
		}
	}
	require.NotNil(t, last, "no attempt of the Get of %s was recorded", waited)
	assert.Equal(t, addr, last.Node, "the Get of %s was answered by the restarted node", waited)
	assert.True(t, last.Retry, "the Get of %s was answered at its first attempt: it never waited for the node", waited)
	assert.Equal(t, StatusSuccess, last.Status)
}
