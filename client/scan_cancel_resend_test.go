package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
)

// A RANGE_SCAN_CANCEL whose connection ends after it was written, without
// an answer, is sent again: it changes nothing but the scan it ends, so a
// second one is harmless (KEY_ENOENT at worst), and without it the scan
// stays open on the server, holding its snapshot, until its lifetime
// ends. Here the proxy swallows the first cancel it reads and resets the
// connection; the scan's Close sends the cancel again on a new connection
// and no scan is left open.
func TestScanCancelResentAfterConnectionDropsInFlight(t *testing.T) {
	mc, p, col := proxiedScan(t, 4, 20)
	var cancels atomic.Int32
	var size atomic.Uint64 // of the cancel swallowed
	swallowed := make(chan struct{})
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		if req.OpCode == memdx.OpRangeScanCancel && cancels.Add(1) == 1 {
			size.Store(uint64(memdx.HeaderSize + len(req.FramingExtras) + len(req.Extras) + len(req.Key) + len(req.Value)))
			close(swallowed)
			return faultnode.Action{Drop: true}
		}
		return faultnode.Action{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := col.Scan(ctx, RangeScan{}, &ScanOptions{BatchItemLimit: 1, Timeout: time.Minute})
	require.NoError(t, err)
	require.True(t, res.Next())
	require.Equal(t, 1, mc.OpenRangeScans(), "the scan of the vbucket being read is open")
	written := func() (n uint64) {
		for _, nd := range col.c.cl.Topology().Nodes() {
			for _, cn := range nd.Conns() {
				n += cn.Stats().BytesWritten
			}
		}
		return n
	}
	before := written()
	closed := make(chan error, 1)
	go func() { closed <- res.Close() }()
	select {
	case <-swallowed:
	case <-ctx.Done():
		t.Fatal("Close sent no RANGE_SCAN_CANCEL")
	}
	// The client's connection counts the cancel written (as it has, long
	// before any reset a real network brings), so that its end is one
	// with the request in flight, not one found before the write.
	for written() < before+size.Load() {
		select {
		case <-ctx.Done():
			t.Fatal("the cancel the proxy read was never counted written")
		case <-time.After(time.Millisecond):
		}
	}
	p.Reset() // its connection ends unanswered
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
	// The cancel sent again may be held behind the continue Close gave up
	// (a barrier is not sent behind it), and goes on its own once that is
	// answered: Close does not wait for it.
	waitUntil(t, "the cancel sent again, the scan cancelled on the server", func() bool {
		return cancels.Load() == 2 && mc.OpenRangeScans() == 0
	})
}
