package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// pollCounter counts the GET_CLUSTER_CONFIGs each node of mc ran.
type pollCounter struct {
	mu sync.Mutex
	n  map[int]int
}

func countPolls(t *testing.T, mc *mockcluster.Cluster) *pollCounter {
	pc := &pollCounter{n: map[int]int{}}
	h := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGetClusterConfig}}, 0,
		func(r *mockcluster.Request) (mockcluster.Action, bool) {
			pc.mu.Lock()
			pc.n[r.Node]++
			pc.mu.Unlock()
			return mockcluster.Action{}, false // the node answers
		})
	t.Cleanup(h.Remove)
	return pc
}

func (pc *pollCounter) of(node int) int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.n[node]
}

// barrierSetup starts a mock of nodes nodes whose synchronous writes stay
// pending (until the test commits them), a client on a fake clock polling
// every poll with KVTimeout 300 ms and one connection per node, and a
// durable Upsert of key "k" held pending on the node active for it. It
// returns that node's index and connection, and the Upsert's outcome.
func barrierSetup(t *testing.T, o mockcluster.Options, poll time.Duration, durability time.Duration) (*mockcluster.Cluster, *retry.FakeClock, *Client, int, *conn.Conn, <-chan error) {
	t.Helper()
	mc := newMock(t, o)
	mc.SetSyncWriteDelay(time.Hour)
	t.Cleanup(mc.CommitSyncWrites) // before the cluster closes
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: poll, KVTimeout: 300 * time.Millisecond,
		ConnectionsPerNode: 1})
	b := mc.Bucket(mockcluster.DefaultBucket)
	a := b.VbucketMap()[b.VbucketForKey([]byte("k"))][0]
	var cn *conn.Conn
	// Every node connected: a bootstrap's GET_CLUSTER_CONFIG is no poll.
	waitUntil(t, "a connection to every node", func() bool {
		up := 0
		for _, e := range c.cl.Endpoints() {
			if e.Conn != nil {
				up++
				if e.Node == mc.Node(a).Addr() {
					cn = e.Conn
				}
			}
		}
		return up == len(mc.Nodes()) && cn != nil
	})
	// The operation's timeout is long: its deadline on the connection
	// is read as a real time, and the durability timeout sent (90% of
	// it, or the one given) is the connection's bound for the write, on
	// real time as well. Neither may pass while the test runs.
	done := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Upsert(context.Background(), "k", []byte(`"v"`),
			&UpsertOptions{Durability: DurabilityMajority, Timeout: 2 * time.Minute, DurabilityTimeout: durability})
		done <- err
	}()
	waitUntil(t, "the node holding the synchronous write", func() bool { return mc.PendingSyncWrites() == 1 && cn.Pending() == 1 })
	return mc, fc, c, a, cn, done
}

// waitUntil waits for cond, polling; a minute bounds a broken client.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
	}
}

// recvWithin receives from ch, failing the test (named what) when nothing
// comes within a minute of real time: only a broken client waits that
// long.
func recvWithin[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("still waiting for %s after a minute", what)
		panic("unreachable")
	}
}

// A config poll is not sent behind a synchronous write waiting for
// replication. GET_CLUSTER_CONFIG is a barrier in kv_engine on a
// connection with UnorderedExecution (not is_reorder_supported): it runs
// only once every earlier command has finished, and no later command
// starts before it. Sent behind the pending write, it held every later
// request on the connection (a Get timed out; with a KVTimeout of 300 ms
// the poll timed out too, and before 3e1e180 its tombstone's health probe,
// a barrier as well, got the live connection closed as unresponsive and
// the durable write failed "may have been applied"). The poll goes to the
// other node instead, and a Get of a key on the write's node is answered
// at once.
func TestConfigPollNotSentBehindPendingSyncWrite(t *testing.T) {
	mc, fc, c, a, cn, done := barrierSetup(t, mockcluster.Options{Nodes: 2}, 50*time.Millisecond, 0)
	polls := countPolls(t, mc)
	other := 1 - a
	for round := range 4 {
		// A poll asked for while a fetch of the node runs is merged
		// into it: each round's poll comes once the last is done.
		waitUntil(t, "no fetch running", func() bool { return c.cl.Fetching() == 0 })
		before := polls.of(other)
		// The config loop reads the clock, then arms its poll timer:
		// advanced between the two, the clock would leave the timer a
		// whole interval ahead, and the poll would never come.
		waitUntil(t, "the poll armed", func() bool { return armedAt(fc, fc.Now().Add(50*time.Millisecond)) })
		fc.Advance(50 * time.Millisecond)
		waitUntil(t, "the poll", func() bool { return polls.of(other) > before || cn.Pending() > 1 })
		if n := cn.Pending(); n > 1 {
			t.Fatalf("round %d: a config poll was sent to node %d behind its pending synchronous write (%d requests in flight)", round, a, n)
		}
	}
	// The write is pending: the node answers the Get with what it
	// holds, nothing.
	if _, err := c.DefaultCollection().Get(context.Background(), "k", &GetOptions{Timeout: time.Minute}); !errors.Is(err, ErrDocumentNotFound) {
		t.Fatalf("a Get on the node holding the write: %v; want ErrDocumentNotFound", err)
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
}

// armedAt reports whether a timer of fc is due at t.
func armedAt(fc *retry.FakeClock, t time.Time) bool {
	for _, at := range fc.Timers() {
		if at.Equal(t) {
			return true
		}
	}
	return false
}

// heldPoll advances fc to the next poll (every second here) with the only
// node's connection holding a synchronous write, and checks that the poll
// was held: not sent, looked at again pollRecheckInterval later.
func heldPoll(t *testing.T, fc *retry.FakeClock, cn *conn.Conn, d time.Duration) {
	t.Helper()
	waitUntil(t, "the poll armed", func() bool { return armedAt(fc, fc.Now().Add(d)) })
	fc.Advance(d)
	waitUntil(t, "the poll held or sent", func() bool {
		return armedAt(fc, fc.Now().Add(50*time.Millisecond)) || cn.Pending() > 1
	})
	if n := cn.Pending(); n > 1 {
		t.Fatalf("a config poll was sent behind the pending synchronous write (%d requests in flight)", n)
	}
}

// With every node's connection holding a synchronous write, the poll due
// is held, not sent behind it, and goes out once the write is answered.
func TestConfigPollHeldUntilSyncWriteAnswered(t *testing.T) {
	mc, fc, _, _, cn, done := barrierSetup(t, oneNodeNoReplicas, time.Second, time.Minute)
	polls := countPolls(t, mc)
	heldPoll(t, fc, cn, time.Second)
	heldPoll(t, fc, cn, 50*time.Millisecond)
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	fc.Advance(50 * time.Millisecond)
	waitUntil(t, "the poll", func() bool { return polls.of(0) == 1 })
}

// A poll held for a synchronous write is held no longer than the write's
// durability timeout as it stood when the poll became due: then it is
// sent anyway (a workload of durable writes delays the polls, never stops
// them).
func TestConfigPollHeldAtMostUntilDurabilityTimeout(t *testing.T) {
	mc, fc, _, _, cn, done := barrierSetup(t, oneNodeNoReplicas, time.Second, time.Minute)
	polls := countPolls(t, mc)
	heldPoll(t, fc, cn, time.Second)
	fc.Advance(time.Minute)
	waitUntil(t, "the poll sent behind the write", func() bool { return cn.Pending() == 2 })
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	waitUntil(t, "the poll answered", func() bool { return polls.of(0) == 1 })
}

// oneNodeNoReplicas: a one-node mock whose bucket has no replica, where a
// majority write needs the node alone.
var oneNodeNoReplicas = mockcluster.Options{Nodes: 1,
	Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumReplicas: mockcluster.NoReplicas}}}
