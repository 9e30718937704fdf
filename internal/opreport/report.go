package opreport

import (
	"log/slog"

	"github.com/kvwire/kvwire/internal/logreport"
)

// Report is a report of sampled operation records (the slow-operation and
// the orphan report): every interval it logs, at warn, the count and
// slowest records of each service since the last one, and nothing for an
// interval without any.
type Report struct {
	samples  *sampler
	reporter *logreport.Reporter
}

// NewReport starts a report of the sampleSize slowest records of each
// service, logged as cfg says (the client's ThresholdReportMessage or
// OrphanReportMessage); Close stops it.
func NewReport(cfg logreport.Config, sampleSize int) *Report {
	r := &Report{samples: newSampler(sampleSize)}
	r.reporter = logreport.Start(cfg, slog.LevelWarn, r.Drain)
	return r
}

// Add records one operation.
func (r *Report) Add(rec *Record) { r.samples.add(rec) }

// SampleSize is how many records of a service each report shows at most.
func (r *Report) SampleSize() int { return r.samples.size }

// Drain returns the report of the records since the last one, and starts
// the next; nil when there were none.
func (r *Report) Drain() []byte { return r.samples.drain() }

// Close stops the report, logging what was recorded since the last one.
func (r *Report) Close() { r.reporter.Close() }
