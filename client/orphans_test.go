package client

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/require"
)

// RFC 0067's defaults: every 10 s, the 10 slowest.
func TestOrphanDefaults(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	logger, _ := newCapture()
	o := newOrphanReporter(orphanConfig{}, clock, logger)
	defer o.close()
	require.Equal(t, 10, o.samples.size)
	tick(t, clock, 0)
	require.Equal(t, []time.Time{reportEpoch.Add(10 * time.Second)}, clock.Timers(), "the first report is due one interval on")
}

// Every orphan is counted, the slowest are sampled, and the report is
// logged at warn each interval that had any, with the fields of the
// slow-operation report.
func TestOrphanReportCountsAndSamples(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	logger, logs := newCapture()
	o := newOrphanReporter(orphanConfig{interval: time.Second, sampleSize: 2}, clock, logger)
	defer o.close()
	tick(t, clock, time.Second)
	requireNoLog(t, logs) // nothing yet

	// Orphans come from every connection's reader at once.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			r := fullRecord(time.Duration(i+1) * time.Millisecond)
			o.orphan(&r)
		})
	}
	wg.Wait()
	tick(t, clock, time.Second)
	l := nextLog(t, logs)
	require.Equal(t, slog.LevelWarn, l.level)
	require.Equal(t, "kvwire: orphan responses observed", l.msg)
	rep := parseKVReport(t, l)
	require.EqualValues(t, 20, rep.KV.TotalCount)
	require.Len(t, rep.KV.TopRequests, 2)
	require.Equal(t, 20000.0, rep.KV.TopRequests[0]["total_duration_us"])
	require.Equal(t, 19000.0, rep.KV.TopRequests[1]["total_duration_us"])
	require.Equal(t, 700000.0, rep.KV.TopRequests[0]["last_server_duration_us"])
	require.Equal(t, 2500.0, rep.KV.TopRequests[0]["timeout_ms"])

	tick(t, clock, time.Second)
	requireNoLog(t, logs)

	late := fullRecord(time.Second)
	o.orphan(&late)
	o.close()
	require.EqualValues(t, 1, parseKVReport(t, nextLog(t, logs)).KV.TotalCount, "close logs the rest")
}

// A connection's reader calls orphan: it allocates nothing.
func TestOrphanAllocatesNothing(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	o := newOrphanReporter(orphanConfig{}, clock, slog.New(slog.DiscardHandler))
	defer o.close()
	r := fullRecord(time.Second)
	o.orphan(&r)
	require.Zero(t, testing.AllocsPerRun(1000, func() { o.orphan(&r) }))
}
