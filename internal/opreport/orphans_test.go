package opreport

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/require"
)

// Every orphan is counted, the slowest are sampled, and the report is
// logged at warn each interval that had any, with the fields of the
// slow-operation report.
func TestOrphanReportCountsAndSamples(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	logger, logs := logcapture.New()
	o := NewOrphans(testConfig(clock, logger, orphanMessage, time.Second), 2)
	defer o.Close()
	logcapture.Tick(t, clock, time.Second)
	logcapture.RequireNone(t, logs) // nothing yet

	// Orphans come from every connection's reader at once.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			r := fullRecord(time.Duration(i+1) * time.Millisecond)
			o.Orphan(&r)
		})
	}
	wg.Wait()
	logcapture.Tick(t, clock, time.Second)
	l := logcapture.Next(t, logs)
	require.Equal(t, slog.LevelWarn, l.Level)
	require.Equal(t, "kvwire: orphan responses observed", l.Msg)
	rep := logcapture.ParseKV(t, l)
	require.EqualValues(t, 20, rep.KV.TotalCount)
	require.Len(t, rep.KV.TopRequests, 2)
	require.Equal(t, 20000.0, rep.KV.TopRequests[0]["total_duration_us"])
	require.Equal(t, 19000.0, rep.KV.TopRequests[1]["total_duration_us"])
	require.Equal(t, 700000.0, rep.KV.TopRequests[0]["last_server_duration_us"])
	require.Equal(t, 2500.0, rep.KV.TopRequests[0]["timeout_ms"])

	logcapture.Tick(t, clock, time.Second)
	logcapture.RequireNone(t, logs)

	late := fullRecord(time.Second)
	o.Orphan(&late)
	o.Close()
	require.EqualValues(t, 1, logcapture.ParseKV(t, logcapture.Next(t, logs)).KV.TotalCount, "close logs the rest")
}

// A connection's reader calls orphan: it allocates nothing.
func TestOrphanAllocatesNothing(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	o := NewOrphans(testConfig(clock, slog.New(slog.DiscardHandler), orphanMessage, 10*time.Second), 10)
	defer o.Close()
	r := fullRecord(time.Second)
	o.Orphan(&r)
	require.Zero(t, testing.AllocsPerRun(1000, func() { o.Orphan(&r) }))
}
