package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A node that left the cluster drains its connections for at most the
// longest operation timeout plus a second counted on the client's Clock,
// as the operations' own timeouts are: with a fake clock, a request in
// flight on it (its answer held a minute by the node) keeps the connection
// open, however much real time passes, until the clock has moved past that
// bound, and then the connection closes. A drain bounded by real time
// closed it after 1.01 s of real time with the clock stopped, failing a
// request whose timeout (on the client's clock) had not passed.
func TestLeavingNodeDrainIsBoundedOnTheClock(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	fc := retry.NewFakeClock(time.Now())
	cfg := testConfig(mc)
	cfg.Clock = fc
	cfg.KVTimeout = time.Minute // a config fetch's bound, in real time: never reached under load
	bound := cfg.KVTimeout + time.Second
	c := connectCluster(t, cfg)
	leaving := c.Node(mc.Node(0).Addr())
	require.NotNil(t, leaving)
	cn, _, err := leaving.Pick()
	require.NoError(t, err)

	held := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Nodes: []int{0}, OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "drain"},
		Action: mockcluster.Action{Delay: time.Minute}})
	defer held.Remove()
	done := make(chan error, 1)
	go func() {
		done <- cn.Do(context.Background(), &memdx.Request{OpCode: memdx.OpGet, Key: []byte("drain")},
			func(*memdx.Packet) error { return nil })
	}()
	wait := time.NewTimer(time.Minute) // a bound only a broken run reaches
	defer wait.Stop()
	for held.Hits() == 0 {
		select {
		case <-wait.C:
			t.Fatal("the request never reached the node")
		case <-time.After(time.Millisecond):
		}
	}
	require.Equal(t, 1, cn.Pending())

	left := fc.Now() // the drain begins no earlier
	r, err := mc.StartRebalance(mockcluster.RebalanceOptions{Nodes: []int{1, 2}})
	require.NoError(t, err)
	require.NoError(t, r.Finish())
	// The rebalance publishes its configs one after another; fetches of
	// them are spaced by ConfigFetchInterval on the clock, moved on by
	// that step whenever a timer is due within it, far from the bound.
	for steps := 0; c.Node(mc.Node(0).Addr()) != nil; {
		select {
		case <-wait.C:
			t.Fatal("the node never left the topology")
		case <-time.After(time.Millisecond):
			now := fc.Now()
			if slices.ContainsFunc(fc.Timers(), func(due time.Time) bool { return !due.After(now.Add(ConfigFetchInterval)) }) {
				require.Less(t, steps, 10, "fetches keep waiting for their spacing")
				steps++
				fc.Advance(ConfigFetchInterval)
			}
		}
	}

	// The drain's bound is a timer on the clock, due bound from when the
	// drain began: after the rebalance began, and no later than now (the
	// node may leave, and its drain begin, a step of the loop above before
	// the topology without it is seen).
	var drainAt time.Time
	for drainAt.IsZero() {
		select {
		case <-cn.Done():
			t.Fatalf("the leaving node's connection closed with a request in flight, the client's clock not moved (%v)", cn.Err())
		case err := <-done:
			t.Fatalf("the request ended while the node held its answer: %v", err)
		case <-wait.C:
			t.Fatal("the drain started no timer on the clock")
		case <-time.After(time.Millisecond):
			from, to := left.Add(bound), fc.Now().Add(bound)
			for _, due := range fc.Timers() {
				if !due.Before(from) && !due.After(to) {
					drainAt = due
				}
			}
		}
	}
	// The held GET is still in flight (a config fetch sent to the node
	// meanwhile may wait behind it: GET_CLUSTER_CONFIG is not reorderable,
	// kv_engine runs it after every earlier command).
	assert.GreaterOrEqual(t, cn.Pending(), 1, "the request is still in flight")
	fc.Advance(drainAt.Sub(fc.Now()) - time.Nanosecond)
	// Nothing can be waited for to show that the drain did not end early;
	// the request is still pending on an open connection as far as the
	// test can see at once.
	select {
	case <-cn.Done():
		t.Fatal("the drain ended before its bound on the clock")
	default:
	}
	fc.Advance(time.Nanosecond)
	select {
	case <-leaving.Stopped():
	case <-wait.C:
		t.Fatal("the drain did not end once the clock passed its bound")
	}
	select {
	case <-cn.Done():
	default:
		t.Fatal("the node stopped with its connection open")
	}
	require.Error(t, <-done, "the request ends with the connection the drain closed")
}

// A leaving node's drain waits for the requests whose callers still wait,
// not for tombstones (requests their callers gave up on, whose late answer
// only an orphan report would read): with nothing but a tombstone on its
// connection (its answer held a minute by the node), the connection closes
// as soon as the node has left, the clock not moved. The drain waited its
// whole bound, the longest timeout and a second, for an answer no caller
// waits for.
func TestLeavingNodeDrainDoesNotWaitForAbandonedRequests(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	fc := retry.NewFakeClock(time.Now())
	cfg := testConfig(mc)
	cfg.Clock = fc
	cfg.KVTimeout = time.Minute // a config fetch's bound, in real time: never reached under load
	c := connectCluster(t, cfg)
	leaving := c.Node(mc.Node(0).Addr())
	require.NotNil(t, leaving)
	cn, _, err := leaving.Pick()
	require.NoError(t, err)

	held := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Nodes: []int{0}, OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "drain"},
		Action: mockcluster.Action{Delay: time.Minute}})
	defer held.Remove()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cn.Do(ctx, &memdx.Request{OpCode: memdx.OpGet, Key: []byte("drain")},
			func(*memdx.Packet) error { return nil })
	}()
	wait := time.NewTimer(time.Minute) // a bound only a broken run reaches
	defer wait.Stop()
	for held.Hits() == 0 {
		select {
		case <-wait.C:
			t.Fatal("the request never reached the node")
		case <-time.After(time.Millisecond):
		}
	}
	cancel() // written: the caller leaves a tombstone
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, 1, cn.Stats().Abandoned)
	require.Equal(t, 1, cn.Pending())

	r, err := mc.StartRebalance(mockcluster.RebalanceOptions{Nodes: []int{1, 2}})
	require.NoError(t, err)
	require.NoError(t, r.Finish())
	// As in TestLeavingNodeDrainIsBoundedOnTheClock: the fetches' spacing
	// is stepped through, far from the drain's bound.
	for steps := 0; c.Node(mc.Node(0).Addr()) != nil; {
		select {
		case <-wait.C:
			t.Fatal("the node never left the topology")
		case <-time.After(time.Millisecond):
			now := fc.Now()
			if slices.ContainsFunc(fc.Timers(), func(due time.Time) bool { return !due.After(now.Add(ConfigFetchInterval)) }) {
				require.Less(t, steps, 10, "fetches keep waiting for their spacing")
				steps++
				fc.Advance(ConfigFetchInterval)
			}
		}
	}
	select {
	case <-leaving.Stopped():
	case <-wait.C:
		t.Fatalf("the leaving node's drain still waits, its connection holding only a tombstone (pending %d, abandoned %d)",
			cn.Pending(), cn.Stats().Abandoned)
	}
	select {
	case <-cn.Done():
	default:
		t.Fatal("the node stopped with its connection open")
	}
}
