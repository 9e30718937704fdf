package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/retry"
)

// attemptLog records the attempts an Observer sees, with their errors.
type attemptLog struct {
	mu     sync.Mutex
	starts []AttemptInfo
	ends   []AttemptInfo
	errs   []error
}

func (a *attemptLog) AttemptStart(i AttemptInfo) {
	a.mu.Lock()
	a.starts = append(a.starts, i)
	a.mu.Unlock()
}

func (a *attemptLog) AttemptEnd(i AttemptInfo, err error) {
	a.mu.Lock()
	a.ends, a.errs = append(a.ends, i), append(a.errs, err)
	a.mu.Unlock()
}

// A barrier its connection refused, unwritten (conn.ErrBoundedAhead: a
// durable write was queued there between its pick and its send), was
// never sent: it is no attempt. The Observer saw an AttemptStart and an
// AttemptEnd failing with ErrBoundedAhead for it, the attempt sent once
// the write was answered came as attempt 1, and the tracer got a
// dispatch span for the request never dispatched. Now the Observer sees
// one attempt, number 0, that succeeded, and the operation's span one
// dispatch span.
func TestBarrierRefusedUnsentIsNoAttempt(t *testing.T) {
	mc := newMock(t, oneNodeNoReplicas)
	mc.SetSyncWriteDelay(time.Hour)
	t.Cleanup(mc.CommitSyncWrites) // before the cluster closes
	fc := retry.NewFakeClock(time.Now())
	log := &attemptLog{}
	tr := &treeTracer{}
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour, ConnectionsPerNode: 1,
		Observer: log, Tracer: tr})
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
				_, err := c.DefaultCollection().Upsert(context.Background(), "w", []byte(`"v"`),
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
	if err := recvWithin(t, "the durable write", done); err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	if err := recvWithin(t, "Exists", res); err != nil {
		t.Fatalf("Exists once the write was answered: %v", err)
	}

	log.mu.Lock()
	var starts, ends []AttemptInfo
	var errs []error
	for _, i := range log.starts {
		if i.Op == "Exists" {
			starts = append(starts, i)
		}
	}
	for k, i := range log.ends {
		if i.Op == "Exists" {
			ends, errs = append(ends, i), append(errs, log.errs[k])
		}
	}
	log.mu.Unlock()
	if len(starts) != 1 || len(ends) != 1 {
		t.Fatalf("the Observer saw %d AttemptStart and %d AttemptEnd of Exists (errors %v); want one of each: the refused request was never sent", len(starts), len(ends), errs)
	}
	if errs[0] != nil || starts[0].Attempt != 0 || ends[0].Attempt != 0 || starts[0].Retry {
		t.Fatalf("Exists's attempt: number %d (end %d), retry %v, error %v; want attempt 0, no retry, no error", starts[0].Attempt, ends[0].Attempt, starts[0].Retry, errs[0])
	}

	var op *treeSpan
	spans := tr.take()
	for _, s := range spans {
		if s.name == "exists" && s.parent == nil {
			op = s
		}
	}
	if op == nil {
		t.Fatal("no span of Exists")
	}
	var dispatches int
	for _, s := range children(spans, op) {
		if s.name == SpanDispatchToServer {
			dispatches++
			if s.ended != 1 {
				t.Fatalf("a dispatch span of Exists ended %d times", s.ended)
			}
		}
	}
	if dispatches != 1 {
		t.Fatalf("%d dispatch spans under Exists's; want 1: the refused request was never dispatched", dispatches)
	}
}
