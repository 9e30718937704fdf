package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
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

// scanBarrierSetup is barrierSetup for a scan: a one-node bucket of 4
// vbuckets holding the documents d:0 to d:7, written before the durable
// write on "k" that stays pending on the node's only connection.
// Each of opts, when given, amends the client's options.
func scanBarrierSetup(t *testing.T, opts ...func(*Options)) (*mockcluster.Cluster, *retry.FakeClock, *Client, *conn.Conn, <-chan error) {
	t.Helper()
	mc := newMock(t, mockcluster.Options{Nodes: 1, Buckets: []mockcluster.BucketOptions{
		{Name: mockcluster.DefaultBucket, NumVbuckets: 4, NumReplicas: mockcluster.NoReplicas}}})
	mc.SetSyncWriteDelay(time.Hour)
	t.Cleanup(mc.CommitSyncWrites) // before the cluster closes
	fc := retry.NewFakeClock(time.Now())
	o := &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour, ConnectionsPerNode: 1}
	for _, f := range opts {
		f(o)
	}
	c := connect(t, mc, o)
	col := c.DefaultCollection()
	for i := range 8 {
		if _, err := col.Upsert(context.Background(), fmt.Sprint("d:", i), []byte(`1`), &UpsertOptions{Timeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	var cn *conn.Conn
	waitUntil(t, "the node's connection", func() bool {
		es := c.cl.Endpoints()
		if len(es) == 1 && es[0].Conn != nil {
			cn = es[0].Conn
		}
		return cn != nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := col.Upsert(context.Background(), "k", []byte(`"v"`),
			&UpsertOptions{Durability: DurabilityMajority, Timeout: 2 * time.Minute, DurabilityTimeout: 65 * time.Second})
		done <- err
	}()
	waitUntil(t, "the node holding the synchronous write", func() bool { return mc.PendingSyncWrites() == 1 && cn.Pending() == 1 })
	return mc, fc, c, cn, done
}

// heldNotSent waits until a scan's request op is held by the client (a
// timer armed at at) or received by the node, and fails the test in the
// second case, when the node received more than base of them.
func heldNotSent(t *testing.T, fc *retry.FakeClock, mc *mockcluster.Cluster, op memdx.OpCode, base uint64, at time.Time) {
	t.Helper()
	sent := func() bool { return mc.RequestCount(op) > base }
	waitUntil(t, op.String()+" held or sent", func() bool { return armedAt(fc, at) || sent() })
	if sent() {
		t.Fatalf("%s was sent behind the pending synchronous write: it waits for the write and holds every later request on the connection", op)
	}
}

// RANGE_SCAN_CONTINUE is a barrier in kv_engine under UnorderedExecution
// (not is_reorder_supported). Sent on a connection holding a durable
// write waiting for replication, it waited for the write (up to its
// durability timeout), timing the scan out on a healthy node, and every
// later request on the connection (a plain Get) waited with it. It is
// held by the client, unsent, and goes once the write is answered.
func TestScanContinueHeldNotSentBehindPendingSyncWrite(t *testing.T) {
	mc, fc, c, _, done := scanBarrierSetup(t)
	col := c.DefaultCollection()
	const timeout = 30 * time.Second
	at := fc.Now().Add(timeout)
	res, err := col.Scan(context.Background(), PrefixScan{Prefix: "d:"}, &ScanOptions{Timeout: timeout, BatchItemLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	heldNotSent(t, fc, mc, memdx.OpRangeScanContinue, 0, at)
	if _, err := col.Get(context.Background(), "d:0", &GetOptions{Timeout: time.Minute}); err != nil {
		t.Fatalf("a Get on the node while the continue is held: %v", err)
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	var got []string
	for res.Next() {
		got = append(got, res.Item().ID)
	}
	if err := res.Err(); err != nil {
		t.Fatalf("the scan once the write was answered: %v", err)
	}
	slices.Sort(got)
	if want := []string{"d:0", "d:1", "d:2", "d:3", "d:4", "d:5", "d:6", "d:7"}; !slices.Equal(got, want) {
		t.Fatalf("scanned %v; want %v", got, want)
	}
}

// A continue held behind a pending durable write until the scan's
// Timeout fails the scan with an unambiguous timeout saying it was not
// sent. The scan's cancel is a barrier too: it is held as well (within its
// own Timeout, on its own: the scan's error does not wait for it), and
// sent once the write is answered, so the server-side scan is not left
// open.
func TestScanContinueHeldPastItsTimeout(t *testing.T) {
	mc, fc, c, _, done := scanBarrierSetup(t)
	const timeout = 30 * time.Second
	at := fc.Now().Add(timeout)
	res, err := c.DefaultCollection().Scan(context.Background(), PrefixScan{Prefix: "d:"}, &ScanOptions{Timeout: timeout, BatchItemLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	heldNotSent(t, fc, mc, memdx.OpRangeScanContinue, 0, at)
	fc.Advance(timeout)
	heldNotSent(t, fc, mc, memdx.OpRangeScanCancel, 0, at.Add(timeout))
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	if res.Next() {
		t.Fatal("an item from a continue held past its timeout")
	}
	err = res.Err()
	if !errors.Is(err, ErrUnambiguousTimeout) || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("the scan whose continue was held past its timeout: %v; want an unambiguous timeout saying it was not sent", err)
	}
	if n := mc.RequestCount(memdx.OpRangeScanContinue); n != 0 {
		t.Fatalf("%d continues sent; want none", n)
	}
	waitUntil(t, "the scan cancelled once the write was answered", func() bool { return mc.OpenRangeScans() == 0 })
}

// Closing a scan whose continue is held behind a pending durable write
// ends the continue and returns at once: the scan's cancel, a barrier
// too, is held (not sent behind the write) until the write is answered,
// then sent on its own, and the server-side scan is not left open. Close
// waited for that cancel, up to the scan's Timeout.
func TestScanCancelHeldNotSentBehindPendingSyncWrite(t *testing.T) {
	mc, fc, c, _, done := scanBarrierSetup(t)
	col := c.DefaultCollection()
	const timeout = 30 * time.Second
	res, err := col.Scan(context.Background(), PrefixScan{Prefix: "d:"}, &ScanOptions{Timeout: timeout, BatchItemLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	heldNotSent(t, fc, mc, memdx.OpRangeScanContinue, 0, fc.Now().Add(timeout))
	closed := make(chan error, 1)
	go func() { closed <- res.Close() }()
	cerr := recvWithin(t, "Close, the write still pending and the clock standing still", closed)
	if cerr != nil {
		t.Fatalf("Close: %v", cerr)
	}
	// The continue's worker has ended: the timer armed now is the cancel's.
	heldNotSent(t, fc, mc, memdx.OpRangeScanCancel, 0, fc.Now().Add(timeout))
	if _, err := col.Get(context.Background(), "d:0", &GetOptions{Timeout: time.Minute}); err != nil {
		t.Fatalf("a Get on the node while the cancel is held: %v", err)
	}
	if n := mc.OpenRangeScans(); n != 1 {
		t.Fatalf("%d scans open while the cancel is held; want 1", n)
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	waitUntil(t, "the scan cancelled once the write was answered", func() bool { return mc.OpenRangeScans() == 0 })
	if n := mc.RequestCount(memdx.OpRangeScanContinue); n != 0 {
		t.Fatalf("%d continues sent; want none", n)
	}
}

// scanNext runs res.Next on a goroutine and returns what it returned, or
// fails the test when it has not returned within a minute with fc's
// clock standing still.
func scanNext(t *testing.T, res *ScanResult, what string) bool {
	t.Helper()
	got := make(chan bool, 1)
	go func() { got <- res.Next() }()
	return recvWithin(t, what, got)
}

// A continue held behind a pending durable write until the scan's Timeout
// fails the scan at once: Next returns false with the timeout then. The
// scan's cancel, held as well (a barrier too), goes on its own once the
// write is answered; Next's error waited for it, up to another Timeout.
func TestScanErrorNotDelayedByItsHeldCancel(t *testing.T) {
	mc, fc, c, _, done := scanBarrierSetup(t)
	const timeout = 30 * time.Second
	at := fc.Now().Add(timeout)
	res, err := c.DefaultCollection().Scan(context.Background(), PrefixScan{Prefix: "d:"}, &ScanOptions{Timeout: timeout, BatchItemLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	heldNotSent(t, fc, mc, memdx.OpRangeScanContinue, 0, at)
	fc.Advance(timeout)
	if scanNext(t, res, "Next, the write still pending and the clock standing still") {
		t.Fatal("an item from a continue held past its timeout")
	}
	if err := res.Err(); !errors.Is(err, ErrUnambiguousTimeout) || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("the scan whose continue was held past its timeout: %v; want an unambiguous timeout saying it was not sent", err)
	}
	if err := res.Close(); !errors.Is(err, ErrUnambiguousTimeout) {
		t.Fatalf("Close: %v", err)
	}
	if n := mc.RequestCount(memdx.OpRangeScanCancel); n != 0 {
		t.Fatalf("%d cancels sent behind the pending write", n)
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	waitUntil(t, "the scan cancelled once the write was answered", func() bool { return mc.OpenRangeScans() == 0 })
}

// A scan's cancel left held behind a pending durable write once the scan
// returned ends with the client's Close, and Close waits for it: no
// goroutine of it is left once Close returns (the server drops the scan
// after its lifetime). The cancel's last act, logging its failure, is
// held in the Logger's handler until Close is seen waiting for the
// client's own goroutines: a Close that did not wait for the cancel
// returns while it is held, every time.
func TestScanHeldCancelEndsWithClientClose(t *testing.T) {
	h := &holdingHandler{msg: "kvwire: range scan cancel failed; the server drops the scan after its lifetime", reached: make(chan struct{}), release: make(chan struct{})}
	defer h.let()
	mc, fc, c, _, _ := scanBarrierSetup(t, func(o *Options) { o.Logger = slog.New(h) })
	const timeout = 30 * time.Second
	res, err := c.DefaultCollection().Scan(context.Background(), PrefixScan{Prefix: "d:"}, &ScanOptions{Timeout: timeout, BatchItemLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	heldNotSent(t, fc, mc, memdx.OpRangeScanContinue, 0, fc.Now().Add(timeout))
	if err := res.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	heldNotSent(t, fc, mc, memdx.OpRangeScanCancel, 0, fc.Now().Add(timeout))
	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	recvWithin(t, "the held cancel ending with the client's Close", h.reached)
	buf := make([]byte, 1<<20)
	for end := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		select {
		case <-closed:
			t.Fatal("the client's Close returned while a scan's cancel still ran")
		default:
		}
		if strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*bgGroup).wait") {
			break // Close waits for the cancel, which cannot end before h.let
		}
		if time.Now().After(end) {
			t.Fatal("the client's Close neither returned nor waited for the scan's cancel within a minute")
		}
	}
	h.let()
	recvWithin(t, "the client's Close once the cancel ended", closed)
	if n := mc.RequestCount(memdx.OpRangeScanCancel); n != 0 {
		t.Fatalf("%d cancels sent behind the pending write", n)
	}
}

// lateChildTracer is a treeTracer that counts the spans started under a
// parent that had ended already.
type lateChildTracer struct {
	treeTracer
	late []string
}

func (lt *lateChildTracer) RequestSpan(ctx context.Context, name string, parent RequestSpan, start time.Time) RequestSpan {
	if p, ok := parent.(*treeSpan); ok {
		lt.mu.Lock()
		if p.ended > 0 {
			lt.late = append(lt.late, name+" under "+p.name)
		}
		lt.mu.Unlock()
	}
	return lt.treeTracer.RequestSpan(ctx, name, parent, start)
}

// A scan's cancel held past the scan's end (a durable write pending on
// the node's only connection) goes on on its own once the scan returned
// (TestScanErrorNotDelayedByItsHeldCancel), and the scan's span ends
// then. The cancel sent once the write was answered made its dispatch
// span under the scan's ended span, called the tracer on that span from
// its own goroutine while the scan's ended it, and added its retries to
// a count already reported. Detached, it makes no span under the scan's.
func TestScanCancelGoneOnItsOwnMakesNoSpanUnderTheEndedScan(t *testing.T) {
	tr := &lateChildTracer{}
	mc, fc, c, _, done := scanBarrierSetup(t, func(o *Options) { o.Tracer = tr })
	const timeout = 30 * time.Second
	at := fc.Now().Add(timeout)
	res, err := c.DefaultCollection().Scan(context.Background(), PrefixScan{Prefix: "d:"}, &ScanOptions{Timeout: timeout, BatchItemLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	heldNotSent(t, fc, mc, memdx.OpRangeScanContinue, 0, at)
	fc.Advance(timeout)
	if scanNext(t, res, "Next, the write still pending and the clock standing still") {
		t.Fatal("an item from a continue held past its timeout")
	}
	if err := res.Close(); !errors.Is(err, ErrUnambiguousTimeout) {
		t.Fatalf("Close: %v", err)
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	waitUntil(t, "the scan cancelled once the write was answered", func() bool { return mc.OpenRangeScans() == 0 })
	buf := make([]byte, 1<<20)
	waitUntil(t, "the cancel's end", func() bool {
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*scanRequests).cancel")
	})
	tr.mu.Lock()
	late := slices.Clone(tr.late)
	tr.mu.Unlock()
	if len(late) != 0 {
		t.Fatalf("spans started under an ended span: %v", late)
	}
}

// holdingHandler is a slog.Handler, enabled at every level, that holds the
// goroutine logging msg (closing reached the first time) until let is
// called; it drops every record.
type holdingHandler struct {
	msg              string
	reached, release chan struct{}
	once, letOnce    sync.Once
}

func (h *holdingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *holdingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *holdingHandler) WithGroup(string) slog.Handler            { return h }

func (h *holdingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.reached) })
		<-h.release
	}
	return nil
}

// let releases the goroutines held, and any to come.
func (h *holdingHandler) let() { h.letOnce.Do(func() { close(h.release) }) }
