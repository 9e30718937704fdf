package client

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
