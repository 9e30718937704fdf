package client

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kvwire/kvwire/retry"
)

// The messages the reports are logged with, each with one attribute,
// "report", holding the report's JSON (a JSON handler embeds it as an
// object, a text handler prints it as one line of JSON). A program that
// wants the reports themselves (kvcli bench prints them) can pick them out
// of its Logger's records by these.
const (
	ThresholdReportMessage = "kvwire: operations over threshold"
	OrphanReportMessage    = "kvwire: orphan responses observed"
	LoggingMeterMessage    = "kvwire: operation latencies"
	// ReportAttribute is the key of the attribute holding a report.
	ReportAttribute = "report"
)

// opRecord is what the slow-operation report (threshold.go) and the
// orphan report (orphans.go) say about one operation: RFC 0067's entry
// fields. It holds no document key or value and no credential, so no
// report can show one. Its strings are the operation's constant name and
// the connection's own (id, addresses), so filling one allocates nothing.
type opRecord struct {
	service   string // ServiceKV
	operation string // the operation's span name: "get", "upsert", ...

	// total runs from the operation's start to its end; for an orphan,
	// from the last dispatch to the late answer.
	total time.Duration
	// encode is the time spent encoding the value (0: none).
	encode time.Duration
	// dispatched: the operation was sent at least once; then lastDispatch
	// and totalDispatch (the sum over every dispatch) hold, as do
	// operationID (the last request's opaque), localID and the sockets.
	dispatched                  bool
	lastDispatch, totalDispatch time.Duration
	operationID                 uint32
	localID                     string // the connection's id
	localSocket, remoteSocket   string // "host:port"
	// hasServer: a response carried the server's duration (HELLO
	// Tracing): lastServer is the last one's, totalServer their sum.
	hasServer               bool
	lastServer, totalServer time.Duration
	// timeout is the operation's timeout (0: none known).
	timeout time.Duration
}

// reportEntry is an opRecord as RFC 0067 writes it: microseconds, and
// fields that do not apply left out.
type reportEntry struct {
	TotalDurationUs         uint64  `json:"total_duration_us"`
	EncodeDurationUs        *uint64 `json:"encode_duration_us,omitempty"`
	LastDispatchDurationUs  *uint64 `json:"last_dispatch_duration_us,omitempty"`
	TotalDispatchDurationUs *uint64 `json:"total_dispatch_duration_us,omitempty"`
	LastServerDurationUs    *uint64 `json:"last_server_duration_us,omitempty"`
	TotalServerDurationUs   *uint64 `json:"total_server_duration_us,omitempty"`
	OperationName           string  `json:"operation_name"`
	LastLocalID             string  `json:"last_local_id,omitempty"`
	OperationID             string  `json:"operation_id,omitempty"`
	LastLocalSocket         string  `json:"last_local_socket,omitempty"`
	LastRemoteSocket        string  `json:"last_remote_socket,omitempty"`
	TimeoutMs               *uint64 `json:"timeout_ms,omitempty"`
}

func micros(d time.Duration) *uint64 {
	v := uint64(max(d, 0) / time.Microsecond)
	return &v
}

func (r *opRecord) entry() reportEntry {
	e := reportEntry{TotalDurationUs: *micros(r.total), OperationName: r.operation}
	if r.encode > 0 {
		e.EncodeDurationUs = micros(r.encode)
	}
	if r.dispatched {
		e.LastDispatchDurationUs = micros(r.lastDispatch)
		e.TotalDispatchDurationUs = micros(r.totalDispatch)
		e.OperationID = "0x" + strconv.FormatUint(uint64(r.operationID), 16)
		e.LastLocalID = r.localID
		e.LastLocalSocket = r.localSocket
		e.LastRemoteSocket = r.remoteSocket
	}
	if r.hasServer {
		e.LastServerDurationUs = micros(r.lastServer)
		e.TotalServerDurationUs = micros(r.totalServer)
	}
	if r.timeout > 0 {
		e.TimeoutMs = new(uint64)
		*e.TimeoutMs = uint64(r.timeout / time.Millisecond)
	}
	return e
}

// sample keeps the slowest records of an interval (by total) and counts
// every record offered. Adding allocates nothing once its slice exists.
type sample struct {
	keep  []opRecord // ascending by total; cap is the sample size
	count uint64
}

func newSample(size int) *sample { return &sample{keep: make([]opRecord, 0, size)} }

func (s *sample) add(r *opRecord) {
	s.count++
	if cap(s.keep) == 0 {
		return
	}
	if len(s.keep) == cap(s.keep) {
		if r.total <= s.keep[0].total {
			return
		}
		copy(s.keep, s.keep[1:])
		s.keep = s.keep[:len(s.keep)-1]
	}
	i := len(s.keep)
	for i > 0 && s.keep[i-1].total > r.total {
		i--
	}
	s.keep = slices.Insert(s.keep, i, *r)
}

// serviceReport is one service's part of a report (RFC 0067's JSON).
type serviceReport struct {
	TotalCount  uint64        `json:"total_count"`
	TopRequests []reportEntry `json:"top_requests"`
}

// drain returns the service's report, slowest first, and empties s.
func (s *sample) drain() serviceReport {
	r := serviceReport{TotalCount: s.count, TopRequests: make([]reportEntry, len(s.keep))}
	for i := range s.keep {
		r.TopRequests[len(s.keep)-1-i] = s.keep[i].entry()
	}
	s.keep, s.count = s.keep[:0], 0
	return r
}

// sampler is a report's state: a sample per service, under a lock that no
// caller holds for more than an insertion into a slice of sample size.
type sampler struct {
	size int

	mu       sync.Mutex
	services map[string]*sample
}

func newSampler(size int) *sampler {
	return &sampler{size: size, services: make(map[string]*sample)}
}

func (sm *sampler) add(r *opRecord) {
	sm.mu.Lock()
	s := sm.services[r.service]
	if s == nil {
		s = newSample(sm.size)
		sm.services[r.service] = s
	}
	s.add(r)
	sm.mu.Unlock()
}

// drain returns the report of what was added since the last drain (RFC
// 0067's {"<service>":{"total_count":n,"top_requests":[...]}}), or nil when
// nothing was.
func (sm *sampler) drain() []byte {
	sm.mu.Lock()
	out := make(map[string]serviceReport)
	for name, s := range sm.services {
		if s.count > 0 {
			out[name] = s.drain()
		}
	}
	sm.mu.Unlock()
	if len(out) == 0 {
		return nil
	}
	b, err := json.Marshal(out) // maps marshal in key order: a stable report
	if err != nil {
		return nil // unreachable: plain strings and numbers
	}
	return b
}

// rawJSON is a report as a log attribute: a JSON handler embeds it as an
// object, a text handler prints it as one line of JSON.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }
func (r rawJSON) MarshalText() ([]byte, error) { return r, nil }

// reporter emits a report through a logger every interval of a clock,
// from a goroutine of its own, and once more when it stops. A report
// whose logger's handler panics is dropped (the handler is the caller's
// code); the next one is tried as usual.
type reporter struct {
	clock    retry.Clock
	interval time.Duration
	emit     func()

	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// startReporter starts calling emit every interval (a non-positive
// interval starts nothing: emit runs only at stop).
func startReporter(clock retry.Clock, interval time.Duration, emit func()) *reporter {
	r := &reporter{clock: clock, interval: interval, emit: emit, stop: make(chan struct{}), done: make(chan struct{})}
	if interval <= 0 {
		close(r.done)
		return r
	}
	go r.run()
	return r
}

func (r *reporter) run() {
	defer close(r.done)
	t := r.clock.NewTimer(r.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			r.safeEmit()
			t.Reset(r.interval)
		case <-r.stop:
			return
		}
	}
}

func (r *reporter) safeEmit() {
	defer func() { _ = recover() }()
	r.emit()
}

// close stops the reporter, waits for its goroutine, and emits what was
// recorded since the last report.
func (r *reporter) close() {
	r.stopped.Do(func() {
		close(r.stop)
		<-r.done
		r.safeEmit()
	})
}

// sampledReport is a report of sampled operation records (the
// slow-operation and the orphan report): every interval it logs, at warn
// with msg, the count and slowest records of each service since the last
// one, and nothing for an interval without any.
type sampledReport struct {
	msg      string
	logger   *slog.Logger
	samples  *sampler
	reporter *reporter
}

// newSampledReport starts a report on clock (a non-positive interval or
// size takes the default given); close stops it.
func newSampledReport(msg string, interval, defInterval time.Duration, size, defSize int,
	clock retry.Clock, logger *slog.Logger) *sampledReport {
	if interval <= 0 {
		interval = defInterval
	}
	if size <= 0 {
		size = defSize
	}
	r := &sampledReport{msg: msg, logger: logger, samples: newSampler(size)}
	r.reporter = startReporter(clock, interval, r.emit)
	return r
}

// add records one operation.
func (r *sampledReport) add(rec *opRecord) { r.samples.add(rec) }

// report returns the report of the records since the last one, and starts
// the next; nil when there were none.
func (r *sampledReport) report() []byte { return r.samples.drain() }

func (r *sampledReport) emit() { logReport(r.logger, slog.LevelWarn, r.msg, r.report()) }

// close stops the report, logging what was recorded since the last one.
func (r *sampledReport) close() { r.reporter.close() }

// logReport logs a report at level with msg, when there is one.
func logReport(logger *slog.Logger, level slog.Level, msg string, report []byte) {
	if report == nil || !logger.Enabled(context.Background(), level) {
		return
	}
	logger.LogAttrs(context.Background(), level, msg, slog.Any(ReportAttribute, rawJSON(report)))
}
