package client

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/require"
)

var reportEpoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// kvReport is the "kv" part of a threshold or orphan report.
type kvReport struct {
	KV struct {
		TotalCount  uint64           `json:"total_count"`
		TopRequests []map[string]any `json:"top_requests"`
	} `json:"kv"`
	raw string // the report's JSON
}

func parseKVReport(t *testing.T, l logged) kvReport {
	t.Helper()
	require.NotNil(t, l.report, "%q has no report", l.msg)
	var r kvReport
	require.NoError(t, json.Unmarshal(l.report, &r), "%s", l.report)
	r.raw = string(l.report)
	return r
}

// RFC 0067's defaults: every 10 s, over 500 ms for KV, the 10 slowest.
func TestThresholdDefaults(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	logger, _ := newCapture()
	th := newThresholdLogger(thresholdConfig{}, clock, logger)
	defer th.close()
	require.Equal(t, 500*time.Millisecond, th.kv)
	require.Equal(t, 10, th.samples.size)
	tick(t, clock, 0)
	require.Equal(t, []time.Time{reportEpoch.Add(10 * time.Second)}, clock.Timers(), "the first report is due one interval on")
}

// Every interval the operations over the threshold are counted and the
// slowest logged at warn, slowest first, with RFC 0067's fields; an
// operation at or under the threshold is not; an interval with none logs
// nothing.
func TestThresholdReportsSlowestOverThreshold(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	logger, logs := newCapture()
	th := newThresholdLogger(thresholdConfig{sampleSize: 3}, clock, logger)
	defer th.close()
	for _, d := range []time.Duration{600, 100, 1000, 500, 700, 900, 800} {
		r := fullRecord(d * time.Millisecond)
		th.record(&r)
	}
	tick(t, clock, 10*time.Second)
	l := nextLog(t, logs)
	require.Equal(t, slog.LevelWarn, l.level)
	require.Equal(t, "kvwire: operations over threshold", l.msg)
	rep := parseKVReport(t, l)
	require.EqualValues(t, 5, rep.KV.TotalCount, "600, 700, 800, 900 and 1000 ms are over 500 ms")
	var totals []float64
	for _, e := range rep.KV.TopRequests {
		totals = append(totals, e["total_duration_us"].(float64))
		require.Equal(t, 700000.0, e["last_server_duration_us"])
		require.Equal(t, "0x2a", e["operation_id"])
		require.Equal(t, "10.0.0.1:11210", e["last_remote_socket"])
	}
	require.Equal(t, []float64{1e6, 900000, 800000}, totals)

	tick(t, clock, 10*time.Second)
	requireNoLog(t, logs)

	// A non-KV service has no threshold in kvwire: nothing is kept.
	other := fullRecord(time.Hour)
	other.service = "query"
	th.record(&other)
	tick(t, clock, 10*time.Second)
	requireNoLog(t, logs)
}

// close logs what was recorded since the last report, and stops the
// reporter's goroutine (TestMain fails on a leaked one).
func TestThresholdCloseFlushes(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	logger, logs := newCapture()
	th := newThresholdLogger(thresholdConfig{kv: time.Millisecond}, clock, logger)
	r := fullRecord(2 * time.Millisecond)
	th.record(&r)
	th.close()
	require.EqualValues(t, 1, parseKVReport(t, nextLog(t, logs)).KV.TotalCount)
	th.close() // a second close does nothing
	requireNoLog(t, logs)
}

// A handler that panics loses its report, not the reporter; one that
// blocks holds only the reporter's goroutine: operations still record.
func TestThresholdSurvivesBadHandler(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	logger := slog.New(funcHandler(func(l logged) {
		switch calls.Add(1) {
		case 1:
			panic("handler bug")
		case 2:
			close(entered)
			<-release
		}
	}))
	th := newThresholdLogger(thresholdConfig{kv: time.Millisecond}, clock, logger)
	defer th.close()
	r := fullRecord(time.Second)
	th.record(&r)
	tick(t, clock, 10*time.Second) // the handler panics: the report is dropped

	th.record(&r)
	require.NoError(t, clock.BlockUntilTimers(t.Context(), 1))
	clock.Advance(10 * time.Second)
	<-entered // the handler blocks in the reporter's goroutine
	for range 100 {
		th.record(&r) // still recorded at once
	}
	close(release)
	tick(t, clock, 10*time.Second)
	require.EqualValues(t, 3, calls.Load(), "the third report, with the 100 records made while the handler blocked, was logged")
}

// funcHandler is a slog.Handler calling f for each record, on the
// logging goroutine.
type funcHandler func(logged)

func (f funcHandler) Enabled(context.Context, slog.Level) bool { return true }
func (f funcHandler) WithAttrs([]slog.Attr) slog.Handler       { return f }
func (f funcHandler) WithGroup(string) slog.Handler            { return f }
func (f funcHandler) Handle(_ context.Context, r slog.Record) error {
	f(logged{level: r.Level, msg: r.Message})
	return nil
}

func TestThresholdRecordAllocatesNothing(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	th := newThresholdLogger(thresholdConfig{}, clock, slog.New(slog.DiscardHandler))
	defer th.close()
	under, over := fullRecord(time.Millisecond), fullRecord(time.Second)
	th.record(&over)
	require.Zero(t, testing.AllocsPerRun(1000, func() { th.record(&under); th.record(&over) }))
}
