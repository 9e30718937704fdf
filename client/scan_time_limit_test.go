package client

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// continueLimits records the time limit of every RANGE_SCAN_CONTINUE the
// mock receives.
type continueLimits struct {
	mu     sync.Mutex
	limits []uint32
}

func (l *continueLimits) watch(mc *mockcluster.Cluster) {
	mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanContinue}}, 0,
		func(r *mockcluster.Request) (mockcluster.Action, bool) {
			if req, err := memdx.DecodeRangeScanContinueRequest(r.Packet); err == nil {
				l.mu.Lock()
				l.limits = append(l.limits, req.TimeLimitMs)
				l.mu.Unlock()
			}
			return mockcluster.Action{}, false // the node handles it
		})
}

func (l *continueLimits) get() []uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint32(nil), l.limits...)
}

// A continue over a vbucket the server reads slowly (a sparse range, a
// large vbucket read from disk) ends at its time limit with the items so
// far and RANGE_SCAN_MORE (kv_engine checks its limits after each item,
// RangeScan::areLimitsExceeded), well before the request's timeout; the
// scan goes on with the next continue. Without a time limit (0: none,
// kv_engine's docs/range_scans/range_scan_continue.md) the continue ran
// until its item or byte limit or the end of the vbucket, holding every
// other request of the node's connection behind it (RANGE_SCAN_CONTINUE is
// not reorderable) and its health probe too. Here every reading of the
// cluster's clock during the scan moves it 100 ms: 20 documents take some
// 2 s of the server's time to read, twice the scan's 1 s Timeout.
func TestScanContinueEndsAtItsTimeLimit(t *testing.T) {
	var tick atomic.Int64
	var offset atomic.Int64
	base := time.Now()
	clock := func() time.Time {
		return base.Add(time.Duration(offset.Add(tick.Load())))
	}
	mc, c := scanMock(t, mockcluster.Options{Clock: clock}, 1)
	col := c.DefaultCollection()
	keys := scanDocs(t, col, 20)
	var l continueLimits
	l.watch(mc)
	const timeout = time.Second
	tick.Store(int64(100 * time.Millisecond))
	items := collect(t, col, PrefixScan{Prefix: "doc-"}, &ScanOptions{Timeout: timeout, BatchItemLimit: 50, BatchByteLimit: 1 << 20})
	tick.Store(0)
	assert.Equal(t, keys, ids(t, items))
	limits := l.get()
	require.Greater(t, len(limits), 1, "continues sent: one continue read the whole vbucket, time limits %v", limits)
	for i, ms := range limits {
		assert.True(t, ms > 0 && time.Duration(ms)*time.Millisecond <= timeout/2,
			"continue %d: time limit %d ms; want 1 ms to half the %v timeout", i, ms, timeout)
	}
}

// A scan's continue the caller gave up on (the scan's context cancelled)
// while the server still runs it leaves a tombstone on the node's
// connection. The server ends the continue by its time limit, so the
// connection counts the tombstone as waiting only from then (conn's
// answerBy): its health probe goes out ProbeAfter after that bound, not
// ProbeAfter after the cancel. A NOOP sent before would wait behind the
// continue (under UnorderedExecution neither runs past the other in
// kv_engine, nor in the mock), and its silence would close the live
// connection as unresponsive. Without a time limit the continue had no
// bound: the probe went out ProbeAfter after the cancel. The node here
// never ends the continue by itself (its answer is held): the probe does
// go out, once the bound has passed, and is answered once the continue
// is. Every time here is the client's fake Clock's, which the connection's
// health check runs on: the probe is due exactly at the bound plus
// ProbeAfter, and goes out when the Clock gets there.
func TestScanContinueBoundsItsConnectionsProbe(t *testing.T) {
	const probeAfter = time.Second
	mc, _ := scanMock(t, mockcluster.Options{}, 1)
	fc := retry.NewFakeClock(reportEpoch) // years ahead: no deadline passes on the system clock
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, KVTimeout: time.Hour, ConfigPollInterval: 100 * time.Hour,
		HealthCheck: HealthCheckOptions{ProbeAfter: probeAfter}})
	col := c.DefaultCollection()
	scanDocs(t, col, 5)
	release := make(chan struct{})
	hit := make(chan uint32, 1)
	mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanContinue}}, 1,
		func(r *mockcluster.Request) (mockcluster.Action, bool) {
			req, err := memdx.DecodeRangeScanContinueRequest(r.Packet)
			if err != nil {
				return mockcluster.Action{}, false
			}
			hit <- req.TimeLimitMs
			return mockcluster.Action{Hold: release}, true // the server is still reading
		})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	res, err := col.Scan(ctx, RangeScan{}, &ScanOptions{Timeout: 4 * time.Second})
	require.NoError(t, err)
	defer res.Close()
	next := make(chan bool, 1)
	go func() { next <- res.Next() }()
	var limitMs uint32
	select {
	case limitMs = <-hit:
	case <-time.After(time.Minute):
		t.Fatal("no continue reached the node within a minute")
	}
	require.NotZero(t, limitMs, "the continue's time limit")
	cn, _, err := c.cl.Topology().Nodes()[0].Pick()
	require.NoError(t, err)
	waitFor(t, "the continue taken by the socket", func() bool { return cn.Awaited() == 1 && cn.BarrierWait() > 0 })
	cancel()
	bound := time.Duration(limitMs) * time.Millisecond
	due := fc.Now().Add(bound + probeAfter)
	waitFor(t, "the tombstone's probe due on the client's clock", func() bool { return slices.ContainsFunc(fc.Timers(), due.Equal) })
	fc.Advance(bound + probeAfter - time.Millisecond)
	require.Zero(t, cn.Stats().Probes, "a probe before the continue's time limit (%v) and ProbeAfter had passed", bound)
	fc.Advance(time.Millisecond)
	waitFor(t, "the health probe", func() bool { return cn.Stats().Probes == 1 })

	close(release)
	released = true
	<-next
	assert.Nil(t, cn.Err(), "the connection was closed")
}

// A scan given a long Timeout (75 s) still asks each continue for a time limit of at most
// rangescan.MaxContinueTimeLimit: half of the 75 s let one continue over a
// sparse vbucket hold its connection (RANGE_SCAN_CONTINUE is not
// reorderable: every later request on it, the health check's NOOP
// included, waits behind it) for some 37 s.
func TestScanContinueTimeLimitCapped(t *testing.T) {
	mc, c := scanMock(t, mockcluster.Options{}, 1)
	col := c.DefaultCollection()
	keys := scanDocs(t, col, 3)
	var l continueLimits
	l.watch(mc)
	items := collect(t, col, PrefixScan{Prefix: "doc-"}, &ScanOptions{Timeout: 75 * time.Second, BatchItemLimit: 1})
	assert.Equal(t, keys, ids(t, items))
	limits := l.get()
	require.NotEmpty(t, limits, "continues sent")
	for i, ms := range limits {
		assert.True(t, ms > 0 && time.Duration(ms)*time.Millisecond <= time.Second,
			"continue %d: time limit %d ms; want 1 ms to 1 s", i, ms)
	}
}
