package client

import (
	"context"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A ScanResult its caller drops unclosed (Close must be called unless
// Next returned false) held, for as long as the client lived, its
// goroutines (waiting to queue a batch nobody would take), its
// server-side scans and the client's watch of it: a long-lived client
// whose code forgets Close on some path gained a goroutine per scan (a
// soak: 50 scans dropped, 50 goroutines more, none ending). Once
// unreachable, it is stopped as Close would: its goroutines end and its
// server-side scans are cancelled.
func TestDroppedScanStops(t *testing.T) {
	// Four vbuckets of about 50 documents each, a document a continue:
	// the vbucket scanned has more than the three batches read ahead.
	mc, c := scanMock(t, mockcluster.Options{}, 4)
	col := c.DefaultCollection()
	scanDocs(t, col, 200)
	res, err := col.Scan(context.Background(), RangeScan{}, &ScanOptions{BatchItemLimit: 1, Concurrency: 1})
	require.NoError(t, err)
	require.True(t, res.Next())
	run := res.cur.Run()
	require.Eventually(t, func() bool { return run.Queued() == 1 }, 10*time.Second, time.Millisecond,
		"the worker waits to queue a batch")
	cancels := func() (n uint64) {
		for _, nd := range mc.Nodes() {
			n += nd.RequestCount(memdx.OpRangeScanCancel)
		}
		return n
	}
	require.Zero(t, cancels())
	// Reachable until here: past its last use the compiler may take res
	// for dead, and a collection during the waits above stopped the scan
	// before the test dropped it (a clean-clone run failed so: the worker
	// never queued its batch).
	runtime.KeepAlive(res)
	res = nil // dropped unclosed
	require.Eventually(t, func() bool {
		runtime.GC()
		return run.Workers() == 0
	}, 30*time.Second, 10*time.Millisecond, "the dropped scan's goroutines ended")
	require.Equal(t, uint64(1), cancels(), "its server-side scan was cancelled")
}

// A ScanResult dropped unclosed is still an operation its observers see
// end: when its cleanup stops it, its span ends, failed (status Error,
// error.type _OTHER), once, not left open for the life of the process
// (a tracer exporting spans as they end never saw it, nor its latency).
func TestDroppedScanEndsItsSpan(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Buckets: []mockcluster.BucketOptions{
		{Name: mockcluster.DefaultBucket, NumVbuckets: 4}}})
	tr := &treeTracer{}
	c := connect(t, mc, &Options{Tracer: tr})
	col := c.DefaultCollection()
	scanDocs(t, col, 200)
	tr.take() // the writes' spans
	res, err := col.Scan(context.Background(), RangeScan{}, &ScanOptions{BatchItemLimit: 1, Concurrency: 1})
	require.NoError(t, err)
	require.True(t, res.Next())
	run := res.cur.Run()
	runtime.KeepAlive(res)
	res = nil // dropped unclosed
	require.Eventually(t, func() bool {
		runtime.GC()
		return run.Workers() == 0
	}, 30*time.Second, 10*time.Millisecond, "the dropped scan's goroutines ended")
	scanSpan := func() *treeSpan {
		for _, s := range tr.spansNow() {
			if s.name == spanScan {
				return s
			}
		}
		return nil
	}
	s := scanSpan()
	require.NotNil(t, s, "the scan's span")
	ended := func() int {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return s.ended
	}
	// The cleanup ends it after the goroutines, on its own goroutine.
	require.Eventually(t, func() bool { return ended() > 0 }, 30*time.Second, time.Millisecond,
		"the dropped scan's span ended")
	tr.mu.Lock()
	defer tr.mu.Unlock()
	require.Equal(t, 1, s.ended)
	require.Equal(t, SpanStatusError, s.status)
	require.Equal(t, ErrorTypeOther, s.attrs[AttributeErrorType].String())
}

// A panic of the caller's code in a dropped scan's requests (here its
// Observer, in the RANGE_SCAN_CANCEL its cleanup sends) has no caller's
// goroutine to be raised on: it is logged at error, not lost without a
// word.
func TestDroppedScanLogsItsPanic(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Buckets: []mockcluster.BucketOptions{
		{Name: mockcluster.DefaultBucket, NumVbuckets: 4}}})
	var mu sync.Mutex
	var errs []string
	logger := slog.New(logcapture.Func(func(l logcapture.Logged) {
		if l.Level >= slog.LevelError {
			mu.Lock()
			errs = append(errs, l.Msg)
			mu.Unlock()
		}
	}))
	c := connect(t, mc, &Options{Logger: logger,
		Observer: cancelPanics{}})
	col := c.DefaultCollection()
	scanDocs(t, col, 200)
	res, err := col.Scan(context.Background(), RangeScan{}, &ScanOptions{BatchItemLimit: 1, Concurrency: 1})
	require.NoError(t, err)
	require.True(t, res.Next())
	run := res.cur.Run()
	require.Eventually(t, func() bool { return run.Queued() == 1 }, 10*time.Second, time.Millisecond,
		"the worker waits to queue a batch")
	runtime.KeepAlive(res)
	res = nil // dropped unclosed
	require.Eventually(t, func() bool {
		runtime.GC()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range errs {
			if strings.Contains(m, "dropped unclosed") && strings.Contains(m, "panicked") {
				return true
			}
		}
		return false
	}, 30*time.Second, 10*time.Millisecond, "the panic of the dropped scan's cancel is logged")
	require.Zero(t, run.Workers())
}

// cancelPanics is an Observer panicking at a RANGE_SCAN_CANCEL's attempt.
type cancelPanics struct{}

func (cancelPanics) AttemptStart(a AttemptInfo) {
	if a.OpCode.wire() == memdx.OpRangeScanCancel {
		panic("observer bug")
	}
}
func (cancelPanics) AttemptEnd(AttemptInfo, error) {}

// spansNow returns the spans recorded so far, keeping them.
func (tr *treeTracer) spansNow() []*treeSpan {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.spans)
}

// The client calls no code of its caller's once Close has returned (its
// doc: no goroutine of the client's is left). A ScanResult dropped
// unclosed that the garbage collector finds only after the client's
// Close is stopped all the same, but its cleanup no longer ends its span
// then: it ended it in the caller's tracer (whose exporter the caller
// may have shut down after Close) from a goroutine Close neither waited
// for nor knew of.
func TestDroppedScanCallsNoCallerCodeAfterClose(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Buckets: []mockcluster.BucketOptions{
		{Name: mockcluster.DefaultBucket, NumVbuckets: 4}}})
	tr := &treeTracer{}
	c := connect(t, mc, &Options{Tracer: tr})
	col := c.DefaultCollection()
	scanDocs(t, col, 200)
	tr.take() // the writes' spans
	stopped := make(chan struct{})
	hook := func(of *Client) {
		if of == c {
			close(stopped)
		}
	}
	testHookDroppedScan.Store(&hook)
	t.Cleanup(func() { testHookDroppedScan.Store(nil) })
	res, err := col.Scan(context.Background(), RangeScan{}, &ScanOptions{BatchItemLimit: 1, Concurrency: 1})
	require.NoError(t, err)
	require.True(t, res.Next())
	runtime.KeepAlive(res)
	res = nil // dropped unclosed
	require.NoError(t, c.Close())
	closed := time.Now() // a collection before Close may have ended the span then
	require.Eventually(t, func() bool {
		runtime.GC()
		select {
		case <-stopped:
			return true
		default:
			return false
		}
	}, 30*time.Second, 10*time.Millisecond, "the dropped scan's cleanup ran")
	for _, s := range tr.spansNow() {
		if s.name == spanScan {
			tr.mu.Lock()
			ended, end := s.ended, s.end
			tr.mu.Unlock()
			require.True(t, ended == 0 || end.Before(closed), "the scan's span ended after the client's Close returned")
		}
	}
}

// Close called from the caller's code that a dropped scan's request runs
// on the scan's own goroutine (here an Observer, at a continue's attempt)
// does not wait for that goroutine (Close's doc: it waits for the
// goroutines of the client's own, not for those an operation waits for),
// even while the scan's cleanup is stopping it: the shutdown may wait for
// the cleanup's observers (stopDropped), not for the scan's goroutines,
// one of which is the one calling Close.
func TestDroppedScanCloseFromItsRequest(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Buckets: []mockcluster.BucketOptions{
		{Name: mockcluster.DefaultBucket, NumVbuckets: 4}}})
	obs := &closingObserver{in: make(chan struct{}), release: make(chan struct{}), closed: make(chan struct{})}
	c := connect(t, mc, &Options{Observer: obs, Tracer: &treeTracer{}})
	obs.c = c
	col := c.DefaultCollection()
	scanDocs(t, col, 200)
	res, err := col.Scan(context.Background(), RangeScan{}, &ScanOptions{BatchItemLimit: 1, Concurrency: 1})
	require.NoError(t, err)
	require.True(t, res.Next())
	run := res.cur.Run()
	require.Eventually(t, func() bool { return run.Queued() == 1 }, 10*time.Second, time.Millisecond,
		"the worker waits to queue a batch")
	obs.armed.Store(true)
	require.True(t, res.Next()) // room for the worker's batch: it sends its next continue
	<-obs.in                    // whose attempt's Observer holds the worker
	runtime.KeepAlive(res)
	res = nil // dropped unclosed
	require.Eventually(t, func() bool {
		runtime.GC()
		return run.Stopped()
	}, 30*time.Second, 10*time.Millisecond, "the dropped scan's cleanup stops it")
	close(obs.release) // the Observer calls Close on the scan's goroutine
	select {
	case <-obs.closed:
	case <-time.After(30 * time.Second): // a deadlock, not a slow machine
		t.Fatal("Close called on the dropped scan's goroutine waits for that goroutine")
	}
	require.Eventually(t, func() bool { return run.Workers() == 0 }, 30*time.Second, time.Millisecond)
}

// closingObserver holds the first RANGE_SCAN_CONTINUE attempt it sees once
// armed until released, then closes the client c on its goroutine.
type closingObserver struct {
	c                   *Client
	armed               atomic.Bool
	once                sync.Once
	in, release, closed chan struct{}
}

func (o *closingObserver) AttemptStart(a AttemptInfo) {
	if a.OpCode.wire() != memdx.OpRangeScanContinue || !o.armed.Load() {
		return
	}
	o.once.Do(func() {
		close(o.in)
		<-o.release
		_ = o.c.Close()
		close(o.closed)
	})
}
func (*closingObserver) AttemptEnd(AttemptInfo, error) {}
