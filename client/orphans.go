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

// Defaults of the orphan report (RFC 0067).
const (
	defaultOrphanInterval   = 10 * time.Second
	defaultOrphanSampleSize = 10
)

// orphanConfig configures an orphanReporter; zero fields take the
// defaults.
type orphanConfig struct {
	interval   time.Duration
	sampleSize int
}

func (c orphanConfig) withDefaults() orphanConfig {
	if c.interval <= 0 {
		c.interval = defaultOrphanInterval
	}
	if c.sampleSize <= 0 {
		c.sampleSize = defaultOrphanSampleSize
	}
	return c
}

// orphanReporter counts and samples orphaned responses and logs the report
// every interval. orphan is called by a connection's reader for each late
// answer: it takes a lock for an insertion into a slice of sample size,
// allocates nothing, calls no code of the caller's, and never blocks on
// the report's logging, which happens on the reporter's own goroutine.
type orphanReporter struct {
	cfg      orphanConfig
	logger   *slog.Logger
	samples  *sampler
	reporter *reporter
}

// newOrphanReporter starts an orphan report on clock; close stops it.
func newOrphanReporter(cfg orphanConfig, clock retry.Clock, logger *slog.Logger) *orphanReporter {
	o := &orphanReporter{cfg: cfg.withDefaults(), logger: logger}
	o.samples = newSampler(o.cfg.sampleSize)
	o.reporter = startReporter(clock, o.cfg.interval, o.emit)
	return o
}

// orphan records one orphaned response.
func (o *orphanReporter) orphan(r *opRecord) { o.samples.add(r) }

// report returns the report of the orphans since the last one, and starts
// the next; nil when there were none.
func (o *orphanReporter) report() []byte { return o.samples.drain() }

func (o *orphanReporter) emit() {
	logReport(o.logger, slog.LevelWarn, "kvwire: orphan responses observed", o.report())
}

// close stops the report, logging the orphans since the last one.
func (o *orphanReporter) close() { o.reporter.close() }
