package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// barrierOp is an operation whose request kv_engine does not reorder
// under UnorderedExecution (not is_reorder_supported), run with timeout.
type barrierOp struct {
	name string
	run  func(c *Client, timeout time.Duration) error
	// kvTimeout: the operation takes no timeout, its bound is the
	// client's KVTimeout (barrierSetup's: 300 ms).
	kvTimeout bool
}

// timeout is the bound of o run with timeout.
func (o barrierOp) timeout(timeout time.Duration) time.Duration {
	if o.kvTimeout {
		return 300 * time.Millisecond
	}
	return timeout
}

var barrierOps = []barrierOp{
	{name: "Exists", run: func(c *Client, timeout time.Duration) error {
		_, err := c.DefaultCollection().Exists(context.Background(), "k", &ExistsOptions{Timeout: timeout})
		return err
	}},
	{name: "Stats", run: func(c *Client, timeout time.Duration) error {
		_, err := c.Stats(context.Background(), "", &StatsOptions{Timeout: timeout})
		return err
	}},
	{name: "Version", run: func(c *Client, timeout time.Duration) error {
		_, err := c.Version(context.Background(), &VersionOptions{Timeout: timeout})
		return err
	}},
	{name: "Ping", run: func(c *Client, _ time.Duration) error {
		return c.Ping(context.Background())[0].Err
	}, kvTimeout: true},
}

// heldOrSent waits until a barrier operation begun on a one-node client
// is either held (fc has a timer armed at at) or sent behind the pending
// synchronous write on cn, and fails the test in the second case.
func heldOrSent(t *testing.T, fc *retry.FakeClock, cn *conn.Conn, at time.Time, what string) {
	t.Helper()
	waitUntil(t, what+" held or sent", func() bool { return armedAt(fc, at) || cn.Pending() > 1 })
	if n := cn.Pending(); n > 1 {
		t.Fatalf("%s was sent behind the pending synchronous write (%d requests in flight on the connection): it waits for the write and holds every later request", what, n)
	}
}

// GET_META (Exists), STAT, VERSION and NOOP (Ping) are barriers in
// kv_engine under UnorderedExecution. On a node whose only connection holds
// a durable write waiting for replication they went behind it: they timed
// out on a healthy node, and every request sent after them on the
// connection (a plain Get) was held as long. Now they are held by the
// client, unsent: a later Get is answered at once, and the operation, if
// the write is still pending at its deadline, times out saying why.
func TestBarrierOpsHeldNotSentBehindPendingSyncWrite(t *testing.T) {
	for _, bo := range barrierOps {
		t.Run(bo.name, func(t *testing.T) {
			mc, fc, c, _, cn, done := barrierSetup(t, oneNodeNoReplicas, time.Hour, 65*time.Second)
			timeout := bo.timeout(30 * time.Second)
			at := fc.Now().Add(timeout)
			res := make(chan error, 1)
			go func() { res <- bo.run(c, timeout) }()
			heldOrSent(t, fc, cn, at, bo.name)
			if _, err := c.DefaultCollection().Get(context.Background(), "k", &GetOptions{Timeout: time.Minute}); !errors.Is(err, ErrDocumentNotFound) {
				t.Fatalf("a Get on the node while %s is held: %v; want ErrDocumentNotFound", bo.name, err)
			}
			fc.Advance(timeout)
			err := <-res
			if !errors.Is(err, ErrUnambiguousTimeout) {
				t.Fatalf("%s held past its timeout: %v; want an unambiguous timeout", bo.name, err)
			}
			if !strings.Contains(err.Error(), "not sent") || !strings.Contains(err.Error(), "synchronous write") {
				t.Fatalf("%s's timeout does not say it was held behind the synchronous write: %v", bo.name, err)
			}
			t.Logf("%s: %v", bo.name, err)
			if n := cn.Pending(); n != 1 {
				t.Fatalf("%d requests in flight on the connection; want the write alone", n)
			}
			mc.CommitSyncWrites()
			if err := <-done; err != nil {
				t.Fatalf("the durable write: %v", err)
			}
		})
	}
}

// A barrier held for a pending synchronous write goes once the write is
// answered, without waiting for the write's bound or its own deadline.
func TestBarrierOpsSentOnceSyncWriteAnswered(t *testing.T) {
	for _, bo := range barrierOps {
		t.Run(bo.name, func(t *testing.T) {
			mc, fc, c, _, cn, done := barrierSetup(t, oneNodeNoReplicas, time.Hour, 65*time.Second)
			const timeout = 30 * time.Second
			res := make(chan error, 1)
			go func() { res <- bo.run(c, timeout) }()
			heldOrSent(t, fc, cn, fc.Now().Add(bo.timeout(timeout)), bo.name)
			mc.CommitSyncWrites()
			if err := <-done; err != nil {
				t.Fatalf("the durable write: %v", err)
			}
			if err := <-res; err != nil {
				t.Fatalf("%s once the write was answered: %v", bo.name, err)
			}
		})
	}
}

// With two connections to the node, one holding a durable write, a
// barrier goes on the other at once.
func TestBarrierOpsTakeFreeConnection(t *testing.T) {
	mc := newMock(t, oneNodeNoReplicas)
	mc.SetSyncWriteDelay(time.Hour)
	t.Cleanup(mc.CommitSyncWrites)
	c := connect(t, mc, &Options{ConfigPollInterval: time.Hour, ConnectionsPerNode: 2})
	waitUntil(t, "two connections", func() bool { return len(c.cl.Endpoints()) == 2 && c.cl.Endpoints()[1].Conn != nil })
	done := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Upsert(context.Background(), "k", []byte(`"v"`),
			&UpsertOptions{Durability: DurabilityMajority, Timeout: 2 * time.Minute, DurabilityTimeout: 65 * time.Second})
		done <- err
	}()
	waitUntil(t, "the node holding the synchronous write", func() bool { return mc.PendingSyncWrites() == 1 })
	for range 4 { // both connections in turn
		for _, bo := range barrierOps {
			if err := bo.run(c, time.Minute); err != nil {
				t.Fatalf("%s with a connection free of the write: %v", bo.name, err)
			}
		}
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
}

// heldFetch waits until the fetcher of the only node holds its fetch
// (fc has a timer armed within the write's bound, between 60 and 66 s from
// now: the poll's is an hour away) or sent it behind the pending
// synchronous write (the node received more than base GET_CLUSTER_CONFIGs),
// and fails the test in the second case.
func heldFetch(t *testing.T, fc *retry.FakeClock, mc *mockcluster.Cluster, base uint64) {
	t.Helper()
	held := func() bool {
		for _, at := range fc.Timers() {
			if d := at.Sub(fc.Now()); d > 60*time.Second && d <= 66*time.Second {
				return true
			}
		}
		return false
	}
	sent := func() bool { return mc.RequestCount(memdx.OpGetClusterConfig) > base }
	waitUntil(t, "the config fetch held or sent", func() bool { return held() || sent() })
	if sent() {
		t.Fatal("the config fetch was sent behind the pending synchronous write: it waits for the write and holds every later request on the connection")
	}
}

// The config fetch a NOT_MY_VBUCKET without a config asks of its node
// (which alone can say what it holds) is not sent behind a durable write
// pending on the node's only connection: GET_CLUSTER_CONFIG is a barrier
// in kv_engine under UnorderedExecution, and sent there it waited for the
// write and held every later request on the connection (a Get timed out).
// It is held until the write is answered, then sent.
func TestConfigFetchAfterNMVHeldBehindPendingSyncWrite(t *testing.T) {
	mc, fc, c, _, _, done := barrierSetup(t, oneNodeNoReplicas, time.Hour, 65*time.Second)
	base := mc.RequestCount(memdx.OpGetClusterConfig)
	nmv := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k2"},
		Action: mockcluster.Action{Status: memdx.StatusNotMyVbucket, Value: []byte{}}, Times: 1})
	defer nmv.Remove()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Get(ctx, "k2", &GetOptions{Timeout: time.Minute})
		got <- err
	}()
	<-nmv.Done()
	heldFetch(t, fc, mc, base)
	if _, err := c.DefaultCollection().Get(context.Background(), "k", &GetOptions{Timeout: time.Minute}); !errors.Is(err, ErrDocumentNotFound) {
		t.Fatalf("a Get on the node while the fetch is held: %v; want ErrDocumentNotFound", err)
	}
	if sent := mc.RequestCount(memdx.OpGetClusterConfig) - base; sent != 0 {
		t.Fatalf("%d config fetches sent while the write was pending", sent)
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	waitUntil(t, "the fetch sent once the write was answered", func() bool { return mc.RequestCount(memdx.OpGetClusterConfig) > base })
	cancel() // the Get waits in its back-off on the frozen clock
	<-got
}

// The fetch of a config its node announced (a cluster-map notification
// without a config) is held, as an NOT_MY_VBUCKET's is, while a durable
// write is pending on the node's only connection, and sent once the write
// is answered: the announced config is installed.
func TestAnnouncedConfigFetchHeldBehindPendingSyncWrite(t *testing.T) {
	mc, fc, c, _, _, done := barrierSetup(t, oneNodeNoReplicas, time.Hour, 65*time.Second)
	held := c.ConfigVersion()
	base := mc.RequestCount(memdx.OpGetClusterConfig)
	if _, err := mc.AddNode(); err != nil {
		t.Fatal(err)
	}
	heldFetch(t, fc, mc, base)
	if _, err := c.DefaultCollection().Get(context.Background(), "k", &GetOptions{Timeout: time.Minute}); !errors.Is(err, ErrDocumentNotFound) {
		t.Fatalf("a Get on the node while the fetch is held: %v; want ErrDocumentNotFound", err)
	}
	if sent := mc.RequestCount(memdx.OpGetClusterConfig) - base; sent != 0 || c.ConfigVersion() != held {
		t.Fatalf("%d config fetches sent while the write was pending (config %v)", sent, c.ConfigVersion())
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	waitUntil(t, "the announced config installed", func() bool { return c.ConfigVersion().Rev > held.Rev })
}

// A barrier held on a node for its pending durable write is not held
// there once the node leaves the config (failed over): the key's vbucket
// is another node's now, free of the write, and the operation goes there.
// It stayed held until the write's bound or its own deadline, and then
// timed out saying it was held, on a healthy cluster.
func TestBarrierHeldOnNodeThatLeavesIsRoutedAgain(t *testing.T) {
	twoNodes := mockcluster.Options{Nodes: 2,
		Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumReplicas: 1}}}
	mc, fc, c, a, cn, _ := barrierSetup(t, twoNodes, time.Hour, 65*time.Second)
	const timeout = 30 * time.Second
	res := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Exists(context.Background(), "k", &ExistsOptions{Timeout: timeout})
		res <- err
	}()
	heldOrSent(t, fc, cn, fc.Now().Add(timeout), "Exists")
	if err := mc.Failover(a); err != nil {
		t.Fatal(err)
	}
	addr := mc.Node(a).Addr()
	waitUntil(t, "the config without the node", func() bool { return !slices.Contains(c.Nodes(), addr) })
	err := recvWithin(t, "Exists, on the clock that does not move", res)
	if err != nil {
		t.Fatalf("Exists once its node left the config: %v", err)
	}
}

// A barrier held because both connections of its node hold a durable
// write goes on the connection the node dials anew once the other one
// ended: it waited for the write on the one it watched, its bound or its
// own deadline, and then timed out saying every connection was held, with
// a free one there all along.
func TestBarrierHeldTakesConnectionDialedMeanwhile(t *testing.T) {
	mc := newMock(t, oneNodeNoReplicas)
	mc.SetSyncWriteDelay(time.Hour)
	t.Cleanup(mc.CommitSyncWrites)
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour, ConnectionsPerNode: 2})
	conns := func() []*conn.Conn {
		var cs []*conn.Conn
		for _, e := range c.cl.Endpoints() {
			if e.Conn != nil {
				select {
				case <-e.Conn.Done():
				default:
					cs = append(cs, e.Conn)
				}
			}
		}
		return cs
	}
	waitUntil(t, "two connections", func() bool { return len(conns()) == 2 })
	first := conns()
	for i, d := range []time.Duration{65 * time.Second, 64 * time.Second} {
		go func() {
			_, _ = c.DefaultCollection().Upsert(context.Background(), fmt.Sprint("w", i), []byte(`"v"`),
				&UpsertOptions{Durability: DurabilityMajority, Timeout: 3 * time.Minute, DurabilityTimeout: d})
		}()
		waitUntil(t, "the node holding the synchronous write", func() bool { return mc.PendingSyncWrites() == i+1 })
	}
	waitUntil(t, "a write on each connection", func() bool { return first[0].BarrierWait() > 0 && first[1].BarrierWait() > 0 })
	longer, shorter := first[0], first[1]
	if shorter.BarrierWait() > longer.BarrierWait() {
		longer, shorter = shorter, longer
	}
	const timeout = 2 * time.Minute
	res := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Exists(context.Background(), "k", &ExistsOptions{Timeout: timeout})
		res <- err
	}()
	waitUntil(t, "Exists held", func() bool { return armedAt(fc, fc.Now().Add(64*time.Second)) })
	if n := first[0].Pending() + first[1].Pending(); n != 2 {
		t.Fatalf("%d requests in flight; want the two writes alone", n)
	}
	longer.Close() // its write ends; the node dials a connection anew
	waitUntil(t, "a new connection", func() bool {
		cs := conns()
		return len(cs) == 2 && !slices.Contains(first, cs[0]) || len(cs) == 2 && !slices.Contains(first, cs[1])
	})
	err := recvWithin(t, "Exists, on the clock that does not move", res)
	if err != nil {
		t.Fatalf("Exists with a connection free of writes: %v", err)
	}
	if shorter.BarrierWait() <= 0 {
		t.Fatal("Exists went only once the write it watched was answered, not on the connection dialed meanwhile")
	}
}

// A barrier held because both connections of its node hold a durable
// write goes on the first connection whose write is answered. It watched
// only the connection whose write's bound ends first: the other one's
// write answered sooner left it held, with a free connection there, until
// the write it watched was answered or its bound passed (here 64 s), or
// until its own deadline.
func TestBarrierHeldGoesOnTheConnectionFreedFirst(t *testing.T) {
	mc := newMock(t, oneNodeNoReplicas)
	release := map[string]chan struct{}{"w0": make(chan struct{}), "w1": make(chan struct{})}
	for key, ch := range release {
		f := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: key, OpCodes: []memdx.OpCode{memdx.OpSet}},
			Action: mockcluster.Action{Hold: ch}, Times: 1})
		t.Cleanup(f.Remove)
	}
	released := map[string]bool{}
	free := func(key string) {
		if !released[key] {
			released[key] = true
			close(release[key])
		}
	}
	t.Cleanup(func() { free("w0"); free("w1") }) // before the cluster closes
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour, ConnectionsPerNode: 2})
	var conns []*conn.Conn
	waitUntil(t, "two connections", func() bool {
		conns = conns[:0]
		for _, e := range c.cl.Endpoints() {
			if e.Conn != nil {
				conns = append(conns, e.Conn)
			}
		}
		return len(conns) == 2
	})
	writes := make(chan error, 2)
	for i, d := range []time.Duration{65 * time.Second, 64 * time.Second} {
		go func() {
			_, err := c.DefaultCollection().Upsert(context.Background(), fmt.Sprint("w", i), []byte(`"v"`),
				&UpsertOptions{Durability: DurabilityMajority, Timeout: 3 * time.Minute, DurabilityTimeout: d})
			writes <- err
		}()
		waitUntil(t, "the write on a connection", func() bool { return conns[0].Pending()+conns[1].Pending() == i+1 })
	}
	if conns[0].BarrierWait() <= 0 || conns[1].BarrierWait() <= 0 {
		t.Fatalf("the writes are not one on each connection (waits %v, %v)", conns[0].BarrierWait(), conns[1].BarrierWait())
	}
	longer, shorter := conns[0], conns[1]
	if shorter.BarrierWait() > longer.BarrierWait() {
		longer, shorter = shorter, longer
	}
	res := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Exists(context.Background(), "k", &ExistsOptions{Timeout: 2 * time.Minute})
		res <- err
	}()
	waitUntil(t, "Exists held", func() bool { return armedAt(fc, fc.Now().Add(64*time.Second)) })
	if n := longer.Pending() + shorter.Pending(); n != 2 {
		t.Fatalf("%d requests in flight; want the two writes alone", n)
	}
	free("w0") // the write whose bound ends last (65 s) is answered first
	if err := <-writes; err != nil {
		t.Fatalf("the write answered: %v", err)
	}
	err := recvWithin(t, "Exists, on the clock that does not move", res)
	if err != nil {
		t.Fatalf("Exists with a connection freed of its write: %v", err)
	}
	if shorter.Pending() != 1 {
		t.Fatalf("%d requests in flight on the connection still holding a write; want the write alone", shorter.Pending())
	}
	free("w1")
	if err := <-writes; err != nil {
		t.Fatalf("the other write: %v", err)
	}
}

// A barrier held more than once (held behind a durable write, sent once
// the write was answered, refused with a temporary failure, then held
// behind the next durable write until its deadline) says how long it was
// held in all: its error said "held 15s", the last hold alone, for an
// operation held 25 s of its 30.
func TestBarrierHeldTwiceSaysHowLongInAll(t *testing.T) {
	mc, fc, c, _, cn, done := barrierSetup(t, oneNodeNoReplicas, time.Hour, 65*time.Second)
	tmpfail := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGetMeta}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail}, Times: 1})
	defer tmpfail.Remove()
	const timeout = 30 * time.Second
	deadline := fc.Now().Add(timeout)
	res := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Exists(context.Background(), "k", &ExistsOptions{Timeout: timeout})
		res <- err
	}()
	heldOrSent(t, fc, cn, deadline, "Exists")
	fc.Advance(10 * time.Second) // held 10 s
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	<-tmpfail.Done() // sent, refused: its retry waits on the clock that does not move
	second := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Upsert(context.Background(), "k", []byte(`"v"`),
			&UpsertOptions{Durability: DurabilityMajority, Timeout: 2 * time.Minute, DurabilityTimeout: 65 * time.Second})
		second <- err
	}()
	waitUntil(t, "the second synchronous write", func() bool { return mc.PendingSyncWrites() == 1 && cn.Pending() == 1 })
	waitUntil(t, "the retry's back-off", func() bool {
		for _, at := range fc.Timers() {
			if d := at.Sub(fc.Now()); d > 0 && d <= 5*time.Second {
				return true
			}
		}
		return false
	})
	fc.Advance(5 * time.Second) // the retry's back-off has passed: held again
	heldOrSent(t, fc, cn, deadline, "Exists's retry")
	fc.Advance(15 * time.Second) // held 15 s more, to its deadline
	err := <-res
	if !errors.Is(err, ErrUnambiguousTimeout) {
		t.Fatalf("Exists held past its timeout: %v; want an unambiguous timeout", err)
	}
	if !strings.Contains(err.Error(), "held 25s") {
		t.Fatalf("Exists, held 10 s then 15 s, does not say it was held 25 s: %v", err)
	}
	t.Log(err)
	if n := mc.RequestCount(memdx.OpGetMeta); n != 1 {
		t.Fatalf("%d GET_META received; want 1", n)
	}
	mc.CommitSyncWrites()
	if err := <-second; err != nil {
		t.Fatalf("the second durable write: %v", err)
	}
}

// A durable write queued on the connection a barrier was given, between
// the pick (PickBarrier found it free) and the barrier's send, does not
// get the barrier sent behind it: the connection refuses the barrier,
// unwritten, at queueing (conn.Origin.Barrier), and the barrier is placed
// again, held until the write is answered. It went behind the write,
// waiting for it and holding every later request on the connection. The
// test queues the write in that window (testHookSend).
func TestBarrierNotSentBehindAWriteQueuedAfterItsPick(t *testing.T) {
	mc := newMock(t, oneNodeNoReplicas)
	mc.SetSyncWriteDelay(time.Hour)
	t.Cleanup(mc.CommitSyncWrites) // before the cluster closes
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour, ConnectionsPerNode: 1})
	var cn *conn.Conn
	waitUntil(t, "the node's connection", func() bool {
		if es := c.cl.Endpoints(); len(es) == 1 {
			cn = es[0].Conn
		}
		return cn != nil
	})
	done := make(chan error, 1)
	var once sync.Once
	hook := func(from *conn.Origin) {
		if from.Operation != "exists" {
			return
		}
		once.Do(func() {
			go func() {
				_, err := c.DefaultCollection().Upsert(context.Background(), "k", []byte(`"v"`),
					&UpsertOptions{Durability: DurabilityMajority, Timeout: 2 * time.Minute, DurabilityTimeout: 65 * time.Second})
				done <- err
			}()
			waitUntil(t, "the synchronous write queued after the pick", func() bool { return mc.PendingSyncWrites() == 1 && cn.Pending() == 1 })
		})
	}
	testHookSend.Store(&hook)
	t.Cleanup(func() { testHookSend.Store(nil) }) // after the client's Close
	const timeout = 30 * time.Second
	at := fc.Now().Add(timeout)
	res := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Exists(context.Background(), "k", &ExistsOptions{Timeout: timeout})
		res <- err
	}()
	heldOrSent(t, fc, cn, at, "Exists")
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	if err := <-res; err != nil {
		t.Fatalf("Exists once the write was answered: %v", err)
	}
}
