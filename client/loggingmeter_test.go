package client

import (
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/require"
)

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
	var h histogram
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

// The meter keeps a histogram per service and operation for the
// operation duration only, and logs RFC 0067's report at info every
// interval, operations without values left out; an interval without any
// still logs (the RFC's meter always reports).
func TestLoggingMeterReport(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	logger, logs := newCapture()
	m := newLoggingMeter(0, clock, logger)
	defer m.close()
	tick(t, clock, 0)
	require.Equal(t, []time.Time{reportEpoch.Add(600 * time.Second)}, clock.Timers(), "RFC 0067's 10 minutes")

	get := map[string]string{AttributeService: ServiceKV, AttributeOperationName: "get", AttributeBucketName: "default"}
	getFailed := map[string]string{AttributeService: ServiceKV, AttributeOperationName: "get", AttributeErrorType: "DocumentNotFound"}
	upsert := map[string]string{AttributeService: ServiceKV, AttributeOperationName: "upsert"}
	for _, attrs := range []map[string]string{get, getFailed} {
		r, err := m.ValueRecorder(MetricOperationDuration, attrs)
		require.NoError(t, err)
		for v := uint64(1); v <= 100; v++ {
			r.RecordValue(v)
		}
	}
	_, err := m.ValueRecorder(MetricOperationDuration, upsert) // never records
	require.NoError(t, err)
	other, err := m.ValueRecorder("some.other.metric", get)
	require.NoError(t, err)
	other.RecordValue(1 << 30)
	c, err := m.Counter("some.counter", get)
	require.NoError(t, err)
	c.IncrementBy(5)

	tick(t, clock, 600*time.Second)
	l := nextLog(t, logs)
	require.Equal(t, slog.LevelInfo, l.level)
	require.Equal(t, "kvwire: operation latencies", l.msg)
	var rep struct {
		Meta struct {
			EmitIntervalS int `json:"emit_interval_s"`
		} `json:"meta"`
		Operations map[string]map[string]struct {
			TotalCount    int            `json:"total_count"`
			PercentilesUs map[string]int `json:"percentiles_us"`
		} `json:"operations"`
	}
	require.NoError(t, json.Unmarshal(l.report, &rep), "%s", l.report)
	require.Equal(t, 600, rep.Meta.EmitIntervalS)
	require.Len(t, rep.Operations, 1)
	require.Len(t, rep.Operations[ServiceKV], 1, "upsert recorded nothing: left out")
	g := rep.Operations[ServiceKV]["get"]
	require.Equal(t, 200, g.TotalCount, "both outcomes of get in one histogram")
	require.Equal(t, 100, g.PercentilesUs["100.0"])
	require.Len(t, g.PercentilesUs, 5)
	for _, p := range []string{"50.0", "90.0", "99.0", "99.9", "100.0"} {
		require.Contains(t, g.PercentilesUs, p)
	}

	tick(t, clock, 600*time.Second)
	l = nextLog(t, logs)
	require.JSONEq(t, `{"meta":{"emit_interval_s":600},"operations":{}}`, string(l.report))
}

func TestLoggingMeterRecordAllocatesNothing(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	m := newLoggingMeter(0, clock, slog.New(slog.DiscardHandler))
	defer m.close()
	r, err := m.ValueRecorder(MetricOperationDuration, map[string]string{AttributeService: ServiceKV, AttributeOperationName: "get"})
	require.NoError(t, err)
	v := uint64(0)
	require.Zero(t, testing.AllocsPerRun(1000, func() { v += 37; r.RecordValue(v) }))
}

// Recorders are used from many goroutines while the meter reports: no
// value is lost or counted twice.
func TestLoggingMeterConcurrent(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	logger, logs := newCapture()
	m := newLoggingMeter(time.Second, clock, logger)
	r, err := m.ValueRecorder(MetricOperationDuration, map[string]string{AttributeService: ServiceKV, AttributeOperationName: "get"})
	require.NoError(t, err)
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
		tick(t, clock, time.Second)
		total += countGets(t, nextLog(t, logs))
	}
	wg.Wait()
	m.close()
	total += countGets(t, nextLog(t, logs))
	require.Equal(t, 8000, total)
}

func countGets(t *testing.T, l logged) int {
	t.Helper()
	var rep struct {
		Operations map[string]map[string]struct {
			TotalCount int `json:"total_count"`
		} `json:"operations"`
	}
	require.NoError(t, json.Unmarshal(l.report, &rep))
	return rep.Operations[ServiceKV]["get"].TotalCount
}
