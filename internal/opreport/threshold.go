package opreport

import (
	"time"

	"github.com/kvwire/kvwire/internal/logreport"
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

// Threshold collects the operations over their service's threshold and
// logs the report every interval. Record may be called from any
// goroutine; it takes a lock only for an operation over the threshold.
type Threshold struct {
	// Service is the one service with a threshold (the client's
	// ServiceKV: kvwire has no other), KV its threshold.
	Service string
	KV      time.Duration
	*Report
}

// NewThreshold starts a slow-operation report of service's operations
// over kv; Close stops it.
func NewThreshold(service string, kv time.Duration, cfg logreport.Config, sampleSize int) *Threshold {
	return &Threshold{Service: service, KV: kv, Report: NewReport(cfg, sampleSize)}
}

// Threshold is the threshold of service (a non-KV service has none yet:
// kvwire has no other).
func (t *Threshold) Threshold(service string) (time.Duration, bool) {
	if service == t.Service {
		return t.KV, true
	}
	return 0, false
}

// Record offers a finished operation: kept when it took longer than its
// service's threshold.
func (t *Threshold) Record(r *Record) {
	if th, ok := t.Threshold(r.Service); ok && r.Total > th {
		t.Add(r)
	}
}
