package client

import (
	"log/slog"
	"time"

	"github.com/kvwire/kvwire/retry"
)

// The orphan report (RFC 0067's orphaned response reporting): a response
// that arrives after its caller left (the operation timed out or was
// cancelled after its request was written; the connection kept a
// tombstone for it) is an orphan. Every interval the orphans of each
// service are counted and the slowest of them (the sample size) logged at
// warn with the same fields as the slow-operation report, their total
// being the time from the request's dispatch to its late answer:
//
//	kvwire: orphan responses observed report={"kv":{"total_count":1,"top_requests":[{...}]}}
//
// An interval without orphans logs nothing.

// orphanConfig configures an orphanReporter; zero fields take the
// defaults.
type orphanConfig struct {
	interval   time.Duration
	sampleSize int
}

// orphanReporter counts and samples orphaned responses and logs the report
// every interval. orphan is called by a connection's reader for each late
// answer: it takes a lock for an insertion into a slice of sample size,
// allocates nothing, calls no code of the caller's, and never blocks on
// the report's logging, which happens on the reporter's own goroutine.
type orphanReporter struct{ *sampledReport }

// newOrphanReporter starts an orphan report on clock; close stops it.
func newOrphanReporter(cfg orphanConfig, clock retry.Clock, logger *slog.Logger) *orphanReporter {
	return &orphanReporter{newSampledReport(OrphanReportMessage,
		cfg.interval, DefaultOrphanInterval, cfg.sampleSize, DefaultOrphanSampleSize, clock, logger)}
}

// orphan records one orphaned response.
func (o *orphanReporter) orphan(r *opRecord) { o.add(r) }
