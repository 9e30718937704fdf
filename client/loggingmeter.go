package client

import (
	"encoding/json"
	"log/slog"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/retry"
)

// The logging meter (RFC 0067's LoggingMeter): a Meter that keeps a
// latency histogram per service and operation from
// MetricOperationDuration and logs, at info every interval, each one's
// count and percentiles (50, 90, 99, 99.9 and 100) in microseconds:
//
//	kvwire: operation latencies report={"meta":{"emit_interval_s":600},"operations":{"kv":{"get":{"total_count":1234,"percentiles_us":{"50.0":5,...}}}}}
//
// It is meant to be the client's default Meter, on, at RFC 0067's interval
// of 10 minutes: an operator who configured nothing gets the latency of
// every operation in the logs six times an hour, which is what the RFC
// asks of the default and what the official SDKs (gocb, the C++ core)
// ship; recording costs an operation two atomic adds on a histogram the
// client looked up once (BenchmarkLoggingMeterRecord: no allocation), and
// the log line is one per interval whatever the load. Other metrics, and
// counters, it ignores.
//
// Percentiles are read off buckets of a sixteenth of a power of two, so
// each is at most 1/16 (6.25%) above the true value and never above the
// maximum, which is exact.

// loggingMeter is the logging meter. Its recorders may be used from any
// goroutine.
type loggingMeter struct {
	interval time.Duration
	logger   *slog.Logger
	reporter *reporter

	mu  sync.Mutex
	ops map[meterKey]*histogram
}

type meterKey struct{ service, operation string }

// newLoggingMeter starts a logging meter on clock (interval 0: the
// default); close stops it.
func newLoggingMeter(interval time.Duration, clock retry.Clock, logger *slog.Logger) *loggingMeter {
	if interval <= 0 {
		interval = DefaultLoggingMeterInterval
	}
	m := &loggingMeter{interval: interval, logger: logger, ops: make(map[meterKey]*histogram)}
	m.reporter = startReporter(clock, interval, m.emit)
	return m
}

// ValueRecorder returns the histogram of the attributes' service and
// operation for MetricOperationDuration, and a recorder that records
// nothing for any other metric.
func (m *loggingMeter) ValueRecorder(name string, attrs map[string]string) (ValueRecorder, error) {
	if name != MetricOperationDuration {
		return noopInstrument{}, nil
	}
	k := meterKey{attrs[AttributeService], attrs[AttributeOperationName]}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.ops[k]
	if h == nil {
		h = &histogram{}
		m.ops[k] = h
	}
	return h, nil
}

// Counter returns a counter that counts nothing: the report has none.
func (m *loggingMeter) Counter(string, map[string]string) (Counter, error) {
	return noopInstrument{}, nil
}

// meterReport is RFC 0067's JSON of the logging meter.
type meterReport struct {
	Meta struct {
		EmitIntervalS uint64 `json:"emit_interval_s"`
	} `json:"meta"`
	Operations map[string]map[string]operationLatency `json:"operations"`
}

type operationLatency struct {
	TotalCount    uint64      `json:"total_count"`
	PercentilesUs percentiles `json:"percentiles_us"`
}

type percentiles struct {
	P50  uint64 `json:"50.0"`
	P90  uint64 `json:"90.0"`
	P99  uint64 `json:"99.0"`
	P999 uint64 `json:"99.9"`
	P100 uint64 `json:"100.0"`
}

// report returns the report of the values recorded since the last one,
// and starts the next. Operations without values in the interval are left
// out; the report is made even when none has any.
func (m *loggingMeter) report() []byte {
	var rep meterReport
	rep.Meta.EmitIntervalS = uint64(m.interval / time.Second)
	rep.Operations = make(map[string]map[string]operationLatency)
	m.mu.Lock()
	for k, h := range m.ops {
		s := h.drain()
		if s.count == 0 {
			continue
		}
		svc := rep.Operations[k.service]
		if svc == nil {
			svc = make(map[string]operationLatency)
			rep.Operations[k.service] = svc
		}
		svc[k.operation] = operationLatency{TotalCount: s.count, PercentilesUs: percentiles{
			P50: s.percentile(50), P90: s.percentile(90), P99: s.percentile(99), P999: s.percentile(99.9), P100: s.max,
		}}
	}
	m.mu.Unlock()
	b, err := json.Marshal(rep)
	if err != nil {
		return nil // unreachable: plain strings and numbers
	}
	return b
}

func (m *loggingMeter) emit() {
	logReport(m.logger, slog.LevelInfo, LoggingMeterMessage, m.report())
}

// close stops the meter, logging what was recorded since the last report.
func (m *loggingMeter) close() { m.reporter.close() }

// histogram is a lock-free latency histogram: buckets of a sixteenth of
// a power of two up to 2^40 microseconds (12 days; longer values count in
// the last bucket), and the exact maximum.
type histogram struct {
	buckets [histBuckets]atomic.Uint64
	max     atomic.Uint64
}

const (
	histSubBits = 4 // 16 buckets per power of two
	histSub     = 1 << histSubBits
	histMaxBit  = 39 // the highest power of two with buckets of its own
	histBuckets = (histMaxBit-histSubBits+1)*histSub + histSub
)

// histBucket is the bucket of v: v itself below 2^5, then 16 buckets for
// each power of two.
func histBucket(v uint64) int {
	if v < histSub {
		return int(v)
	}
	msb := bits.Len64(v) - 1
	if msb > histMaxBit {
		return histBuckets - 1
	}
	shift := msb - histSubBits
	return (shift+1)*histSub + int((v>>shift)&(histSub-1))
}

// histLower is the smallest value of bucket i.
func histLower(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	return uint64(histSub+i%histSub) << (i/histSub - 1)
}

// histUpper is the largest value of bucket i.
func histUpper(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	return histLower(i) + 1<<(i/histSub-1) - 1
}

// RecordValue records one value, in microseconds.
func (h *histogram) RecordValue(v uint64) {
	h.buckets[histBucket(v)].Add(1)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// histSnapshot is what a histogram held at a drain.
type histSnapshot struct {
	counts [histBuckets]uint64
	count  uint64
	max    uint64
}

// drain takes the histogram's values and empties it. A value recorded
// during the drain is counted in this snapshot or the next, never both;
// its maximum may land in the other one, so a snapshot's maximum is at
// least the bottom of its highest bucket.
func (h *histogram) drain() *histSnapshot {
	s := &histSnapshot{}
	top := -1
	for i := range h.buckets {
		n := h.buckets[i].Swap(0)
		s.counts[i] = n
		s.count += n
		if n > 0 {
			top = i
		}
	}
	s.max = h.max.Swap(0)
	if top >= 0 {
		s.max = max(s.max, histLower(top))
	}
	return s
}

// percentile is the p-th percentile: the top of the bucket that holds the
// value of rank ceil(p% of the count), capped at the maximum.
func (s *histSnapshot) percentile(p float64) uint64 {
	if s.count == 0 {
		return 0
	}
	rank := uint64(p / 100 * float64(s.count))
	if float64(rank) < p/100*float64(s.count) {
		rank++
	}
	rank = max(rank, 1)
	var seen uint64
	for i, n := range s.counts {
		seen += n
		if seen >= rank {
			return min(histUpper(i), s.max)
		}
	}
	return s.max
}
