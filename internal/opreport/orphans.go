package opreport

import "github.com/kvwire/kvwire/internal/logreport"

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

// Orphans counts and samples orphaned responses and logs the report every
// interval. Orphan is called by a connection's reader for each late
// answer: it takes a lock for an insertion into a slice of sample size,
// allocates nothing, calls no code of the caller's, and never blocks on
// the report's logging, which happens on the reporter's own goroutine.
type Orphans struct{ *Report }

// NewOrphans starts an orphan report; Close stops it.
func NewOrphans(cfg logreport.Config, sampleSize int) *Orphans {
	return &Orphans{NewReport(cfg, sampleSize)}
}

// Orphan records one orphaned response.
func (o *Orphans) Orphan(r *Record) { o.Add(r) }
