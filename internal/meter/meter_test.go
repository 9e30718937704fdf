package meter

import (
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/leakcheck"
	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/internal/logreport"
	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// testConfig is a logging meter's logging on clock and logger.
func testConfig(clock retry.Clock, logger *slog.Logger, interval time.Duration) logreport.Config {
	return logreport.Config{Message: "kvwire: operation latencies", Key: "report", Interval: interval, Clock: clock, Logger: logger}
}

// Every bucket holds the values from its bottom to its top, the next
// starts right after, and no bucket is wider than a sixteenth of its
// bottom: a percentile read off a bucket's top is at most 6.25% high.
func TestHistogramBuckets(t *testing.T) {
	require.Zero(t, histLower(0))
	for i := range histBuckets {
		lo, hi := histLower(i), histUpper(i)
		require.Equal(t, i, histBucket(lo), "bottom of bucket %d", i)
		require.Equal(t, i, histBucket(hi), "top of bucket %d", i)
		if i+1 < histBuckets {
			require.Equal(t, hi+1, histLower(i+1), "bucket %d ends where %d starts", i, i+1)
		}
		if lo >= histSub {
			require.LessOrEqual(t, float64(hi-lo+1), float64(lo)/16, "width of bucket %d", i)
		}
	}
	require.Equal(t, histBuckets-1, histBucket(1<<62), "longer values count in the last bucket")
}

// Percentiles of 1..1000 microseconds are within 6.25% above the truth,
// and the maximum is exact.
func TestHistogramPercentiles(t *testing.T) {
	var h Histogram
	for v := uint64(1000); v >= 1; v-- {
		h.RecordValue(v)
	}
	s := h.drain()
	require.EqualValues(t, 1000, s.count)
	for _, tc := range []struct {
		p    float64
		want uint64
	}{{50, 500}, {90, 900}, {99, 990}, {99.9, 999}, {100, 1000}} {
		got := s.percentile(tc.p)
		require.GreaterOrEqual(t, got, tc.want, "p%v", tc.p)
		require.LessOrEqual(t, float64(got), float64(tc.want)*1.0625, "p%v", tc.p)
	}
	require.EqualValues(t, 1000, s.max)
	require.Zero(t, h.drain().count, "a drain empties the histogram")

	h.RecordValue(7)
	s = h.drain()
	require.EqualValues(t, 7, s.percentile(50))
	require.EqualValues(t, 7, s.percentile(100))
	require.Zero(t, (&histSnapshot{}).percentile(50))
}

// RecordValues(v, n) leaves the histogram as n calls of RecordValue(v)
// do; n = 0 records nothing, not even a maximum.
func TestHistogramRecordValues(t *testing.T) {
	var one, bulk Histogram
	for _, v := range []uint64{3, 700, 12345} {
		for range 37 {
			one.RecordValue(v)
		}
		bulk.RecordValues(v, 37)
	}
	bulk.RecordValues(1<<30, 0)
	a, b := one.drain(), bulk.drain()
	require.EqualValues(t, 3*37, b.count)
	require.Equal(t, a, b)
}

// The meter keeps a histogram per service and operation, and logs RFC 0067's report at info every
// interval, operations without values left out; an interval without any
// still logs (the RFC's meter always reports).
func TestLoggingMeterReport(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	logger, logs := logcapture.New()
	m := NewLogging(testConfig(clock, logger, 600*time.Second))
	defer m.Close()
	logcapture.Tick(t, clock, 0)
	require.Equal(t, []time.Time{logcapture.Epoch.Add(600 * time.Second)}, clock.Timers(), "RFC 0067's 10 minutes")

	// The client asks for the histogram of get once per outcome (a
	// success, a DocumentNotFound): both are the one histogram of get.
	get, getFailed := m.Histogram("kv", "get"), m.Histogram("kv", "get")
	require.Same(t, get, getFailed)
	for _, r := range []*Histogram{get, getFailed} {
		for v := uint64(1); v <= 100; v++ {
			r.RecordValue(v)
		}
	}
	m.Histogram("kv", "upsert") // never records

	logcapture.Tick(t, clock, 600*time.Second)
	l := logcapture.Next(t, logs)
	require.Equal(t, slog.LevelInfo, l.Level)
	require.Equal(t, "kvwire: operation latencies", l.Msg)
	var rep struct {
		Meta struct {
			EmitIntervalS int `json:"emit_interval_s"`
		} `json:"meta"`
		Operations map[string]map[string]struct {
			TotalCount    int            `json:"total_count"`
			PercentilesUs map[string]int `json:"percentiles_us"`
		} `json:"operations"`
	}
	require.NoError(t, json.Unmarshal(l.Report, &rep), "%s", l.Report)
	require.Equal(t, 600, rep.Meta.EmitIntervalS)
	require.Len(t, rep.Operations, 1)
	require.Len(t, rep.Operations["kv"], 1, "upsert recorded nothing: left out")
	g := rep.Operations["kv"]["get"]
	require.Equal(t, 200, g.TotalCount, "both outcomes of get in one histogram")
	require.Equal(t, 100, g.PercentilesUs["100.0"])
	require.Len(t, g.PercentilesUs, 5)
	for _, p := range []string{"50.0", "90.0", "99.0", "99.9", "100.0"} {
		require.Contains(t, g.PercentilesUs, p)
	}

	logcapture.Tick(t, clock, 600*time.Second)
	l = logcapture.Next(t, logs)
	require.JSONEq(t, `{"meta":{"emit_interval_s":600},"operations":{}}`, string(l.Report))
}

func TestLoggingMeterRecordAllocatesNothing(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	m := NewLogging(testConfig(clock, slog.New(slog.DiscardHandler), 600*time.Second))
	defer m.Close()
	r := m.Histogram("kv", "get")
	v := uint64(0)
	require.Zero(t, testing.AllocsPerRun(1000, func() { v += 37; r.RecordValue(v) }))
}

// Recorders are used from many goroutines while the meter reports: no
// value is lost or counted twice.
func TestLoggingMeterConcurrent(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	logger, logs := logcapture.New()
	m := NewLogging(testConfig(clock, logger, time.Second))
	r := m.Histogram("kv", "get")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				r.RecordValue(uint64(g*1000 + i))
			}
		})
	}
	total := 0
	for range 3 {
		logcapture.Tick(t, clock, time.Second)
		total += countGets(t, logcapture.Next(t, logs))
	}
	wg.Wait()
	m.Close()
	total += countGets(t, logcapture.Next(t, logs))
	require.Equal(t, 8000, total)
}

func countGets(t *testing.T, l logcapture.Logged) int {
	t.Helper()
	var rep struct {
		Operations map[string]map[string]struct {
			TotalCount int `json:"total_count"`
		} `json:"operations"`
	}
	require.NoError(t, json.Unmarshal(l.Report, &rep))
	return rep.Operations["kv"]["get"].TotalCount
}

// The default meter's cost per operation: one histogram record.
func BenchmarkLoggingMeterRecord(b *testing.B) {
	m := NewLogging(testConfig(retry.NewFakeClock(logcapture.Epoch), slog.New(slog.DiscardHandler), 600*time.Second))
	defer m.Close()
	r := m.Histogram("kv", "get")
	b.ReportAllocs()
	v := uint64(0)
	for b.Loop() {
		v++
		r.RecordValue(v & 0xffff)
	}
}
