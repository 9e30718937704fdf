package opreport

import (
	"log/slog"
	"time"

	"github.com/kvwire/kvwire/internal/logreport"
	"github.com/kvwire/kvwire/retry"
)

// Config configures a report. Every field is needed: the client fills in
// its defaults.
type Config struct {
	// Message and Key are the log message and the attribute holding the
	// report's JSON (the client's ThresholdReportMessage or
	// OrphanReportMessage, and ReportAttribute).
	Message, Key string
	Interval     time.Duration
	SampleSize   int
	Clock        retry.Clock
	Logger       *slog.Logger
}

// Report is a report of sampled operation records (the slow-operation and
// the orphan report): every interval it logs, at warn, the count and
// slowest records of each service since the last one, and nothing for an
// interval without any.
type Report struct {
	msg, key string
	logger   *slog.Logger
	samples  *sampler
	reporter *logreport.Reporter
}

// NewReport starts a report on cfg.Clock; Close stops it.
func NewReport(cfg Config) *Report {
	r := &Report{msg: cfg.Message, key: cfg.Key, logger: cfg.Logger, samples: newSampler(cfg.SampleSize)}
	r.reporter = logreport.Start(cfg.Clock, cfg.Interval, r.emit)
	return r
}

// Add records one operation.
func (r *Report) Add(rec *Record) { r.samples.add(rec) }

// SampleSize is how many records of a service each report shows at most.
func (r *Report) SampleSize() int { return r.samples.size }

// Drain returns the report of the records since the last one, and starts
// the next; nil when there were none.
func (r *Report) Drain() []byte { return r.samples.drain() }

func (r *Report) emit() { logreport.Log(r.logger, slog.LevelWarn, r.msg, r.key, r.Drain()) }

// Close stops the report, logging what was recorded since the last one.
func (r *Report) Close() { r.reporter.Close() }
