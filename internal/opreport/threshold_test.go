package opreport

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/leakcheck"
	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/internal/logreport"
	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

const (
	thresholdMessage = "kvwire: operations over threshold"
	orphanMessage    = "kvwire: orphan responses observed"
)

// testConfig is a report's logging on clock and logger.
func testConfig(clock retry.Clock, logger *slog.Logger, msg string, interval time.Duration) logreport.Config {
	return logreport.Config{Message: msg, Key: "report", Interval: interval, Clock: clock, Logger: logger}
}

// Every interval the operations over the threshold are counted and the
// slowest logged at warn, slowest first, with RFC 0067's fields; an
// operation at or under the threshold is not; an interval with none logs
// nothing.
func TestThresholdReportsSlowestOverThreshold(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	logger, logs := logcapture.New()
	th := NewThreshold("kv", 500*time.Millisecond, testConfig(clock, logger, thresholdMessage, 10*time.Second), 3)
	defer th.Close()
	for _, d := range []time.Duration{600, 100, 1000, 500, 700, 900, 800} {
		r := fullRecord(d * time.Millisecond)
		th.Record(&r)
	}
	logcapture.Tick(t, clock, 10*time.Second)
	l := logcapture.Next(t, logs)
	require.Equal(t, slog.LevelWarn, l.Level)
	require.Equal(t, "kvwire: operations over threshold", l.Msg)
	rep := logcapture.ParseKV(t, l)
	require.EqualValues(t, 5, rep.KV.TotalCount, "600, 700, 800, 900 and 1000 ms are over 500 ms")
	var totals []float64
	for _, e := range rep.KV.TopRequests {
		totals = append(totals, e["total_duration_us"].(float64))
		require.Equal(t, 700000.0, e["last_server_duration_us"])
		require.Equal(t, "0x2a", e["operation_id"])
		require.Equal(t, "10.0.0.1:11210", e["last_remote_socket"])
	}
	require.Equal(t, []float64{1e6, 900000, 800000}, totals)

	logcapture.Tick(t, clock, 10*time.Second)
	logcapture.RequireNone(t, logs)

	// A non-KV service has no threshold in kvwire: nothing is kept.
	other := fullRecord(time.Hour)
	other.Service = "query"
	th.Record(&other)
	logcapture.Tick(t, clock, 10*time.Second)
	logcapture.RequireNone(t, logs)
}

// close logs what was recorded since the last report, and stops the
// reporter's goroutine (TestMain fails on a leaked one).
func TestThresholdCloseFlushes(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	logger, logs := logcapture.New()
	th := NewThreshold("kv", time.Millisecond, testConfig(clock, logger, thresholdMessage, 10*time.Second), 10)
	r := fullRecord(2 * time.Millisecond)
	th.Record(&r)
	th.Close()
	require.EqualValues(t, 1, logcapture.ParseKV(t, logcapture.Next(t, logs)).KV.TotalCount)
	th.Close() // a second close does nothing
	logcapture.RequireNone(t, logs)
}

// A handler that panics loses its report, not the reporter; one that
// blocks holds only the reporter's goroutine: operations still record.
func TestThresholdSurvivesBadHandler(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	logger := slog.New(logcapture.Func(func(l logcapture.Logged) {
		switch calls.Add(1) {
		case 1:
			panic("handler bug")
		case 2:
			close(entered)
			<-release
		}
	}))
	th := NewThreshold("kv", time.Millisecond, testConfig(clock, logger, thresholdMessage, 10*time.Second), 10)
	defer th.Close()
	r := fullRecord(time.Second)
	th.Record(&r)
	logcapture.Tick(t, clock, 10*time.Second) // the handler panics: the report is dropped

	th.Record(&r)
	require.NoError(t, clock.BlockUntilTimers(t.Context(), 1))
	clock.Advance(10 * time.Second)
	<-entered // the handler blocks in the reporter's goroutine
	for range 100 {
		th.Record(&r) // still recorded at once
	}
	close(release)
	logcapture.Tick(t, clock, 10*time.Second)
	require.EqualValues(t, 3, calls.Load(), "the third report, with the 100 records made while the handler blocked, was logged")
}

func TestThresholdRecordAllocatesNothing(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	th := NewThreshold("kv", 500*time.Millisecond, testConfig(clock, slog.New(slog.DiscardHandler), thresholdMessage, 10*time.Second), 10)
	defer th.Close()
	under, over := fullRecord(time.Millisecond), fullRecord(time.Second)
	th.Record(&over)
	require.Zero(t, testing.AllocsPerRun(1000, func() { th.Record(&under); th.Record(&over) }))
}
