package conn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// A reviewer's scenario, on the connection: a majority write pending for
// replication (the client's durability timeout, 90% of a 6 s operation
// timeout: 5.4 s), then a config poll's GET_CLUSTER_CONFIG, a barrier under
// unordered execution that the mock too runs only after the write, given
// up at its timeout (KVTimeout 300 ms). Its tombstone calls for a probe
// ProbeAfter later; sent, the NOOP would wait behind the write as well,
// and ProbeTimeout of silence closed the live connection 2.4 s in, failing
// the durable write "may have been applied". The probe is held until the
// write's durability timeout; the connection stays up past ProbeAfter and
// two ProbeTimeouts, the write succeeds once replicated, and the poll's
// late answer clears its tombstone.
func TestConfigPollBehindSyncWriteKeepsConnection(t *testing.T) {
	mc, c, fc, vb := syncWriteNode(t, "durable")
	ch := goDurable(t, testCtx(t), mc, c, vb, "durable", 5400)
	ctx, cancel := context.WithCancel(context.Background())
	poll := memdx.NewGetClusterConfig()
	pch := make(chan error, 1)
	written := c.Stats().BytesWritten
	go func() { pch <- c.Do(ctx, &poll, func(*memdx.Packet) error { return nil }) }()
	waitFor(t, "the poll written", func() bool { return c.Pending() == 2 && c.Stats().BytesWritten > written })
	cancel() // its timeout: a context deadline is a real time
	if err := recv(t, pch); !errors.Is(err, context.Canceled) {
		t.Fatalf("the poll: %v", err)
	}
	waitFor(t, "the tombstone", func() bool { return c.Stats().Abandoned == 1 })
	healthTimerMade(t, c)

	fc.Advance(DefaultProbeAfter)
	healthChecked(t, c, fc)
	for range 2 {
		fc.Advance(DefaultProbeTimeout)
	}
	if st := c.Stats(); st.Probes != 0 || c.Err() != nil {
		t.Fatalf("stats %+v, connection %v; want no probe behind the pending write, the connection up", st, c.Err())
	}
	mc.CommitSyncWrites()
	if err := recv(t, ch); err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	waitFor(t, "the poll's late answer", func() bool { return c.Pending() == 0 })
	if c.Err() != nil {
		t.Fatalf("connection: %v", c.Err())
	}
}

// BarrierFreed: while a synchronous write with a durability timeout is in
// flight, the wait is its bound and the channel open; it closes once the
// write is answered (a barrier held by a caller goes then), and again
// (a new one) when the connection ends with such a write in flight.
func TestBarrierFreedClosesWhenBoundedRequestsEnd(t *testing.T) {
	mc, c, _, vb := syncWriteNode(t, "durable")
	if w, ch := c.BarrierFreed(); w != 0 || ch != nil {
		t.Fatalf("BarrierFreed with nothing in flight: %v, %v", w, ch)
	}
	ch := goDurable(t, testCtx(t), mc, c, vb, "durable", 5400)
	waitFor(t, "the write pending", func() bool { return c.Pending() == 1 && mc.PendingSyncWrites() == 1 })
	w, freed := c.BarrierFreed()
	if w <= 0 || freed == nil {
		t.Fatalf("BarrierFreed with the write pending: %v, %v", w, freed)
	}
	select {
	case <-freed:
		t.Fatal("freed closed with the write pending")
	default:
	}
	mc.CommitSyncWrites()
	if err := recv(t, ch); err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	<-freed
	if w, ch := c.BarrierFreed(); w != 0 || ch != nil {
		t.Fatalf("BarrierFreed once the write was answered: %v, %v", w, ch)
	}

	ch = goDurable(t, testCtx(t), mc, c, vb, "durable", 5400)
	waitFor(t, "the second write pending", func() bool { return c.Pending() == 1 && mc.PendingSyncWrites() == 1 })
	_, freed = c.BarrierFreed()
	c.Close()
	<-freed
	if err := recv(t, ch); err == nil {
		t.Fatal("the durable write on a closed connection succeeded")
	}
	mc.CommitSyncWrites()
}

// A synchronous write whose tombstone was forgotten past MaxAbandoned may
// still be held by the node until its durability timeout (evictedBound):
// a barrier sent now would wait behind it, and BarrierWait says so, as its
// doc and the health probe's hold (latestBound) do. It said 0 once no
// request with a bound was left in the table.
func TestBarrierWaitCountsForgottenSyncWrite(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{clock: fc, ProbeAfter: -1, MaxAbandoned: 1}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req := memdx.NewStore(memdx.OpSet, []byte("d"), []byte("v"), 0, 0)
	req.Durability, req.DurabilityTimeout = memdx.DurabilityMajority, 5000
	ch := make(chan error, 1)
	go func() { ch <- c.Do(ctx, &req, nil) }()
	p.read()
	waitFor(t, "the write's bound", func() bool { return c.BarrierWait() > 0 })
	cancel()
	if err := recv(t, ch); !errors.Is(err, context.Canceled) {
		t.Fatalf("the durable write: %v", err)
	}
	gctx, gcancel := context.WithCancel(context.Background())
	gch := goGet(gctx, c, "g")
	p.read()
	gcancel()
	if r := recv(t, gch); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the GET: %v", r.err)
	}
	if st := c.Stats(); st.Forgotten != 1 {
		t.Fatalf("stats %+v; want the write's tombstone forgotten", st)
	}
	if w := c.BarrierWait(); w <= 0 {
		t.Fatalf("BarrierWait %v with the forgotten write's durability timeout still to come", w)
	}
	fc.Advance(5 * time.Second)
	if w := c.BarrierWait(); w != 0 {
		t.Fatalf("BarrierWait %v past the forgotten write's bound", w)
	}
}
