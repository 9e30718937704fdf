// Package meter is the client's logging meter (RFC 0067's LoggingMeter):
// a latency histogram per service and operation, and at info every
// interval each one's count and percentiles (50, 90, 99, 99.9 and 100) in
// microseconds:
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
// counters, it does not keep: the client records only operation
// latencies on it.
//
// Percentiles are read off buckets of a sixteenth of a power of two, so
// each is at most 1/16 (6.25%) above the true value and never above the
// maximum, which is exact.
package meter

import (
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/kvwire/kvwire/internal/logreport"
)

// Logging is the logging meter. Its histograms may be used from any
// goroutine.
type Logging struct {
	interval time.Duration
	reporter *logreport.Reporter

	mu  sync.Mutex
	ops map[key]*Histogram
}

type key struct{ service, operation string }

// NewLogging starts a logging meter, logging as cfg says (the client's
// LoggingMeterMessage); Close stops it.
func NewLogging(cfg logreport.Config) *Logging {
	m := &Logging{interval: cfg.Interval, ops: make(map[key]*Histogram)}
	m.reporter = logreport.Start(cfg, slog.LevelInfo, m.Report)
	return m
}

// Histogram returns the latency histogram of service's operation, made
// the first time.
func (m *Logging) Histogram(service, operation string) *Histogram {
	k := key{service, operation}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.ops[k]
	if h == nil {
		h = &Histogram{}
		m.ops[k] = h
	}
	return h
}

// report is RFC 0067's JSON of the logging meter.
type report struct {
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

// Report returns the report of the values recorded since the last one,
// and starts the next. Operations without values in the interval are left
// out; the report is made even when none has any.
func (m *Logging) Report() []byte {
	var rep report
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

// Close stops the meter, logging what was recorded since the last report.
func (m *Logging) Close() { m.reporter.Close() }
