package optrace

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/hookguard"
	"github.com/kvwire/kvwire/internal/opreport"
)

// Call is an operation of the caller's that the client runs as requests
// of its own, on goroutines of its own, for as long as the caller reads
// its results (a scan: its creates, continues and cancels, until its
// iterator ends or is closed). It is one operation to the observers: its
// span (when tracing), under which each attempt of each of its requests is
// a dispatch span (BeginPart), and its latency and outcome on the meter,
// from BeginCall to EndCall, and one entry of the slow-operation report
// when it took longer than the threshold (its requests' dispatch and
// server times summed, the last one's opaque and connection). Its requests
// are no operations of their own: they make no span of their own, and
// neither the meter nor the slow-operation report sees them one by one
// (the orphan report, which is about answers, still sees each late
// answer, but for that of a request given up when the call stopped as its
// caller asked: conn.ErrNotNeeded).
type Call struct {
	span    hookguard.Span // nil: not traced
	coll    *Coll
	name    string
	start   time.Time
	timeout time.Duration // to the deadline of BeginCall's context (0: none)
	retries atomic.Int64  // its requests' retries, summed
	ended   atomic.Bool

	// rec sums its requests' records for the slow-operation report (when
	// it is on: reported); lastAt is when the request whose dispatch is
	// rec's last ended, cn its connection. Its requests end on goroutines
	// of their own: mu guards them.
	reported bool
	mu       sync.Mutex
	rec      opreport.Record
	lastAt   time.Time
	cn       *conn.Conn
	// retried are its requests' retries, for its span's retry events
	// (while traced; at most maxCallEvents, guarded by mu): kept, not
	// added at once, since its requests run on goroutines of their own
	// and the span is called from one goroutine at a time (EndCall's).
	retried []callRetry
}

// callRetry is a retry of a Call's request: when it was decided, and its
// reason.
type callRetry struct {
	at     time.Time
	reason string
}

// maxCallEvents bounds the retry events a Call's span gets (its
// couchbase.retries counts them all).
const maxCallEvents = 64

// BeginCall starts observing a Call named name (RFC 0067's style:
// "scan") on coll (nil: none) under parent (nil: none given) at start.
// It returns nil when neither a tracer, a meter nor the slow-operation
// report records.
func (ob *Observers) BeginCall(ctx context.Context, name string, coll *Coll, parent hookguard.Span, start time.Time) *Call {
	if ob.cfg.Tracer == nil && !ob.metered && ob.cfg.Threshold == nil {
		return nil
	}
	c := &Call{coll: coll, name: name, start: start, reported: ob.cfg.Threshold != nil}
	if d, ok := ctx.Deadline(); ok {
		c.timeout = d.Sub(start)
	}
	if ob.cfg.Tracer != nil {
		c.span = ob.startSpan(ctx, name, coll, parent, start)
	}
	return c
}

// Observed reports whether a Call would be observed (BeginCall returns
// one).
func (ob *Observers) Observed() bool {
	return ob.cfg.Tracer != nil || ob.metered || ob.cfg.Threshold != nil
}

// Span is c's span: nil when not traced (or c is nil).
func (c *Call) Span() hookguard.Span {
	if c == nil {
		return nil
	}
	return c.span
}

// Ended reports whether c has ended (EndCall).
func (c *Call) Ended() bool { return c.ended.Load() }

// EndCall ends c (nil: nothing) at at with err (nil: success): its span
// gets the retries of its requests, err's error type and status, and
// ends; the meter records its latency with that error type. Only the
// first call does anything: a Call may end from more than one place
// (its results exhausted, closed, a panic unwinding).
func (ob *Observers) EndCall(c *Call, err error, at time.Time) {
	if c == nil || !c.ended.CompareAndSwap(false, true) {
		return
	}
	var errType string
	if err != nil {
		errType = ErrorType(err, ob.cfg.ErrorTypeOther)
	}
	total := at.Sub(c.start)
	if ob.metered {
		ob.meters.record(c.coll, c.name, opUnlisted, errType, total)
	}
	if th := ob.cfg.Threshold; th != nil && total > th.KV {
		c.mu.Lock()
		r := c.rec
		cn := c.cn
		c.mu.Unlock()
		r.Service, r.Operation, r.Total, r.Timeout = ob.cfg.Service, c.name, total, c.timeout
		if cn != nil {
			r.LocalID, r.LocalSocket, r.RemoteSocket = cn.ID(), cn.LocalAddr(), cn.RemoteAddr()
		}
		th.Add(&r)
	}
	if s := c.span; s != nil {
		g := ob.cfg.Guard
		c.mu.Lock()
		retried := c.retried
		c.retried = nil
		c.mu.Unlock()
		// In time order: its requests ran at once.
		slices.SortStableFunc(retried, func(a, b callRetry) int { return a.at.Compare(b.at) })
		for _, r := range retried {
			g.AddEvent(s, EventRetry, r.at, slog.String(AttrRetryReason, r.reason))
		}
		g.SetAttribute(s, AttrRetries, slog.Int64Value(c.retries.Load()))
		if err != nil {
			g.SetAttribute(s, AttrErrorType, slog.StringValue(errType))
		}
		ob.cfg.Tracer.SetStatus(s, failed(err))
		g.EndSpan(s, at)
	}
}

// BeginPart starts observing a request of c's (nil: the request is an
// operation of its own: Begin's job) named name, at start, with timeout
// to its deadline: its attempts are dispatch spans under c's span, its
// retries count as c's, and End ends none but them.
func (ob *Observers) BeginPart(t *Trace, c *Call, name Name, start time.Time, timeout time.Duration) {
	t.Origin.Operation, t.op = name.Span, name.op
	t.Origin.Timeout = timeout
	t.start, t.now, t.fresh = start, start, true
	t.call = c
	if ob.cfg.Tracer != nil {
		t.span = c.Span()
	}
}

// endPart ends a request of a Call (BeginPart) at at after retries
// retries: the dispatch span of an attempt still out, and its retries
// added to the Call's. The Call's span is the Call's to end.
func (ob *Observers) endPart(t *Trace, retries int, at time.Time) {
	if t.dispatch != nil { // an attempt that ended without Ended: abandoned
		ob.cfg.Guard.EndSpan(t.dispatch, at)
		t.dispatch = nil
	}
	c := t.call
	c.retries.Add(int64(retries))
	if c.reported {
		c.add(t, at)
	}
	t.span, t.call = nil, nil
}

// retry keeps a retry of one of c's requests, decided at at for reason,
// for its span's events (EndCall adds them).
func (c *Call) retry(at time.Time, reason string) {
	c.mu.Lock()
	if len(c.retried) < maxCallEvents {
		c.retried = append(c.retried, callRetry{at: at, reason: reason})
	}
	c.mu.Unlock()
}

// add adds the record of t, a request of c's that ended at at, to c's:
// its dispatch and server times to the sums, and, when it ended after
// every other request dispatched so far, its last dispatch, server time,
// opaque and connection as the Call's last.
func (c *Call) add(t *Trace, at time.Time) {
	t.foldServer()
	p := &t.Rec
	if !p.Dispatched {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &c.rec
	r.Dispatched = true
	r.TotalDispatch += p.TotalDispatch
	if p.HasServer {
		r.HasServer = true
		r.TotalServer += p.TotalServer
	}
	if !at.Before(c.lastAt) {
		c.lastAt = at
		r.LastDispatch, r.OperationID, c.cn = p.LastDispatch, p.OperationID, t.cn
		r.LastServer = p.LastServer // 0 when its answer carried none
	}
}

// Copies is what the slow-operation report sees of a call of the caller's
// that reads several copies of a document at once (GetAnyReplica,
// GetAllReplicas, their LookupIn forms): one entry, named as the call's
// outer span, with the call's total and the record of one read (the copy
// that answered: for an "any" call the first to answer, else the last;
// when none did, the last to end), its dispatch and server times, opaque
// and connection. The reads are parts (Trace.Part, Trace.Copies) with no
// entry of their own. Its reads end on goroutines of their own: mu guards
// the rest.
type Copies struct {
	// First: the call returns the first answer (get_any_replica): that
	// read is the one reported, not a later one.
	First bool

	mu      sync.Mutex
	rec     opreport.Record
	cn      *conn.Conn
	any, ok bool // a read was kept; it answered
	at      time.Time
}

// add keeps t's record, a read of c's that ended at at (ok: it answered),
// when it is the one to report so far.
func (c *Copies) add(t *Trace, ok bool, at time.Time) {
	t.foldServer()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.any, ok && !c.ok:
	case ok != c.ok: // a failure after an answer
		return
	case ok && c.First: // the first answer is the call's
		return
	case at.Before(c.at):
		return
	}
	c.any, c.ok, c.at = true, ok, at
	c.rec, c.cn = t.Rec, t.cn
	c.rec.Timeout = t.Origin.Timeout
}

// Reported reports whether the slow-operation report is on.
func (ob *Observers) Reported() bool { return ob.cfg.Threshold != nil }

// EndCopies gives the slow-operation report the entry of a call named
// name (its outer span's: "get_any_replica") whose reads were c's, which
// took total, when total is over the threshold.
func (ob *Observers) EndCopies(c *Copies, name string, total time.Duration) {
	th := ob.cfg.Threshold
	if th == nil || total <= th.KV {
		return
	}
	c.mu.Lock()
	r, cn := c.rec, c.cn
	c.mu.Unlock()
	r.Service, r.Operation, r.Total = ob.cfg.Service, name, total
	if cn != nil {
		r.LocalID, r.LocalSocket, r.RemoteSocket = cn.ID(), cn.LocalAddr(), cn.RemoteAddr()
	}
	th.Add(&r)
}
