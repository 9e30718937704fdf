package client

import (
	"log/slog"
	"time"

	"github.com/kvwire/kvwire/retry"
)

// The slow-operation report (RFC 0067's threshold logging): every
// interval, the operations of each service that took longer than the
// service's threshold, counted, and the slowest of them (the sample size)
// with their timings: total, encode, last and total dispatch, last and
// total server duration, last local id, operation id, last local and
// remote socket. It is logged at warn as
//
//	kvwire: operations over threshold report={"kv":{"total_count":3,"top_requests":[{...},...]}}
//
// and skipped for an interval with none. It reads each operation's own
// record, not spans, so it works with any RequestTracer, the default
// NoopTracer included, and costs an operation under the threshold one
// comparison.

// thresholdConfig configures a thresholdLogger; zero fields take the
// defaults.
type thresholdConfig struct {
	interval   time.Duration
	kv         time.Duration // the KV service's threshold
	sampleSize int
}

// thresholdLogger collects the operations over their service's threshold
// and logs the report every interval. record may be called from any
// goroutine; it takes a lock only for an operation over the threshold.
type thresholdLogger struct {
	kv time.Duration
	*sampledReport
}

// newThresholdLogger starts a slow-operation report on clock; close stops
// it.
func newThresholdLogger(cfg thresholdConfig, clock retry.Clock, logger *slog.Logger) *thresholdLogger {
	kv := cfg.kv
	if kv <= 0 {
		kv = DefaultKVThreshold
	}
	return &thresholdLogger{kv: kv, sampledReport: newSampledReport(ThresholdReportMessage,
		cfg.interval, DefaultThresholdInterval, cfg.sampleSize, DefaultThresholdSampleSize, clock, logger)}
}

// threshold is the threshold of service (a non-KV service has none yet:
// kvwire has no other).
func (t *thresholdLogger) threshold(service string) (time.Duration, bool) {
	if service == ServiceKV {
		return t.kv, true
	}
	return 0, false
}

// record offers a finished operation: kept when it took longer than its
// service's threshold.
func (t *thresholdLogger) record(r *opRecord) {
	if th, ok := t.threshold(r.service); ok && r.total > th {
		t.add(r)
	}
}
