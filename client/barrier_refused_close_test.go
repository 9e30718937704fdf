package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A barrier refused by its connection (conn.ErrBoundedAhead: a durable
// write was queued there after its pick) is placed again with no retry
// counted. When the client's Close lands between that refusal and the
// placement, the operation ends with ErrClosed; the retry it made before
// (sent, answered TMPFAIL) still counts: RetryAttempts is 1, not 0, and
// its reason is still named. The refusal was no retry decided, so there
// is none for the placement to take off.
func TestBarrierRefusedThenClosedKeepsItsRetries(t *testing.T) {
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
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k", OpCodes: []memdx.OpCode{memdx.OpGetMeta}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail, Value: []byte{}}, Times: 1})

	done := make(chan error, 1)
	var sends atomic.Int32
	var once sync.Once
	hook := func(from *conn.Origin) {
		if from.Operation != "exists" || sends.Add(1) != 2 {
			return
		}
		once.Do(func() {
			// The retry's pick found the connection free; a durable
			// write is queued there before its send, and the client's
			// Close begins (its context ends before its connections
			// close).
			go func() {
				_, err := c.DefaultCollection().Upsert(context.Background(), "w", []byte(`"v"`),
					&UpsertOptions{Durability: DurabilityMajority, Timeout: 2 * time.Minute, DurabilityTimeout: 65 * time.Second})
				done <- err
			}()
			waitUntil(t, "the synchronous write queued after the pick", func() bool { return mc.PendingSyncWrites() == 1 && cn.Pending() == 1 })
			c.cl.Cancel()
		})
	}
	testHookSend.Store(&hook)
	t.Cleanup(func() { testHookSend.Store(nil) }) // after the client's Close
	strategy := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return RetryAfter(0) })
	_, err := c.DefaultCollection().Exists(context.Background(), "k", &ExistsOptions{Timeout: 30 * time.Second, RetryStrategy: strategy})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Exists refused, then closed: %v, want ErrClosed", err)
	}
	var kv *KeyValueError
	if !errors.As(err, &kv) {
		t.Fatalf("Exists: %T %v, want a *KeyValueError", err, err)
	}
	if kv.RetryAttempts != 1 || !kv.RetryReasons.Has(RetryReasonKVTemporaryFailure) {
		t.Fatalf("Exists retried once for TMPFAIL (sent), then refused unsent: RetryAttempts %d, reasons %v; want 1, TMPFAIL: %v",
			kv.RetryAttempts, kv.RetryReasons, err)
	}
	mc.CommitSyncWrites()
	<-done
}

// A barrier refused by its connection (conn.ErrBoundedAhead) after a
// retry, then held until its deadline, times out naming the attempt that
// was sent: its placement had begun an attempt (op.attempt), which cleared
// the earlier one's status and opaque, and the refusal left them cleared.
// An Exists answered TMPFAIL, retried, refused and held timed out with
// Status 0 and Opaque 0, as if no answer had come; it now says TMPFAIL,
// as an Exists held at its retry's pick (never refused) does.
func TestBarrierRefusedThenHeldKeepsLastStatus(t *testing.T) {
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
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k", OpCodes: []memdx.OpCode{memdx.OpGetMeta}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail, Value: []byte{}}, Times: 1})

	done := make(chan error, 1)
	var sends atomic.Int32
	hook := func(from *conn.Origin) {
		if from.Operation != "exists" || sends.Add(1) != 2 {
			return
		}
		// The retry's pick found the connection free; a durable write
		// is queued there before its send.
		go func() {
			_, err := c.DefaultCollection().Upsert(context.Background(), "w", []byte(`"v"`),
				&UpsertOptions{Durability: DurabilityMajority, Timeout: 2 * time.Minute, DurabilityTimeout: 65 * time.Second})
			done <- err
		}()
		waitUntil(t, "the synchronous write queued after the pick", func() bool { return mc.PendingSyncWrites() == 1 && cn.Pending() == 1 })
	}
	testHookSend.Store(&hook)
	t.Cleanup(func() { testHookSend.Store(nil) }) // after the client's Close
	strategy := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return RetryAfter(0) })
	const timeout = 30 * time.Second
	deadline := fc.Now().Add(timeout)
	res := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Exists(context.Background(), "k", &ExistsOptions{Timeout: timeout, RetryStrategy: strategy})
		res <- err
	}()
	heldOrSent(t, fc, cn, deadline, "Exists")
	fc.Advance(timeout)
	err := recvWithin(t, "Exists", res)
	if !errors.Is(err, ErrUnambiguousTimeout) {
		t.Fatalf("Exists held past its deadline: %v; want an unambiguous timeout", err)
	}
	var kv *KeyValueError
	if !errors.As(err, &kv) {
		t.Fatalf("Exists: %T %v, want a *KeyValueError", err, err)
	}
	if kv.Status != statusOf(memdx.StatusTmpFail) || kv.Opaque == 0 || kv.RetryAttempts != 1 {
		t.Fatalf("Exists answered TMPFAIL, retried, refused unsent and held: Status %v, Opaque %d, RetryAttempts %d; want TMPFAIL, the sent attempt's opaque, 1: %v",
			kv.Status, kv.Opaque, kv.RetryAttempts, err)
	}
	mc.CommitSyncWrites()
	if err := recvWithin(t, "the durable write", done); err != nil {
		t.Fatalf("the durable write: %v", err)
	}
}
