package optrace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/hookguard"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/meter"
	"github.com/kvwire/kvwire/internal/opreport"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// Config sets up Observers.
type Config struct {
	// Clock times the operations (the client's, as their deadlines are).
	Clock retry.Clock
	// Service is the service every span, record and metric names (the
	// client's ServiceKV); Bucket the bucket the spans name.
	Service, Bucket string
	// ErrorTypeOther is the error type of an error without an RFC 0058
	// name (the client's ErrorTypeOther).
	ErrorTypeOther string

	// Tracer starts the spans (nil: no span is made).
	Tracer Tracer
	// ClusterLabels are the cluster's name and uuid, as its config
	// publishes them ("": none), every span's (nil: none).
	ClusterLabels func() (name, uuid string)
	// Guard calls the spans and the caller's Meter's recorders.
	Guard *hookguard.Guard
	// Meter: the logging meter, called without the guard, or else
	// Recorder, which asks the caller's Meter (through Guard) for the
	// recorder of an operation's latencies with RFC 0067's attributes;
	// neither: no metric.
	LoggingMeter *meter.Logging
	Recorder     func(k MeterKey) hookguard.ValueRecorder

	Threshold *opreport.Threshold // nil: off
	// Orphans is the orphan report (nil: off): the client feeds it from
	// its connections; Close closes it with the others.
	Orphans *opreport.Orphans
}

// Observers are a client's observers of its operations: the tracer, the
// meter and the slow-operation report. Close stops the reports and the
// logging meter.
type Observers struct {
	cfg Config
	// metered: a meter records latencies; builtin: it is the logging
	// meter, whose recorders are called without the guard.
	metered, builtin bool
	meters           opMeters
}

// Init sets up ob, which is not copied afterwards; the report and the
// logging meter in cfg are started already. A zero Observers observes
// nothing.
func (ob *Observers) Init(cfg Config) {
	ob.cfg, ob.builtin = cfg, cfg.LoggingMeter != nil
	ob.metered = ob.builtin || cfg.Recorder != nil
	ob.meters.init(ob)
}

// Metered reports whether a meter records latencies; Tracing whether a
// tracer records spans.
func (ob *Observers) Metered() bool { return ob.metered }
func (ob *Observers) Tracing() bool { return ob.cfg.Tracer != nil }

// Close stops the slow-operation report, the orphan report and the
// logging meter, each logging what it holds, and waits for their
// goroutines.
func (ob *Observers) Close() {
	if ob.cfg.Threshold != nil {
		ob.cfg.Threshold.Close()
	}
	if ob.cfg.Orphans != nil {
		ob.cfg.Orphans.Close()
	}
	if ob.cfg.LoggingMeter != nil {
		ob.cfg.LoggingMeter.Close()
	}
}

// Begin starts observing an operation named name (NameOf the client's
// name, "GetAndLock", and opcode), on coll (nil: none), at start, with
// timeout to its deadline. parent is the span it belongs under, when
// tracing (nil: none given).
func (ob *Observers) Begin(ctx context.Context, t *Trace, name Name, coll *Coll, parent hookguard.Span, start time.Time, timeout time.Duration) {
	t.Origin.Operation, t.op = name.Span, name.op
	t.Origin.Timeout = timeout
	t.start, t.now, t.fresh = start, start, true
	if ob.cfg.Tracer != nil {
		ob.startOperation(ctx, t, coll, parent, start)
	}
}

// SendAt is when an attempt is sent: the latest clock reading while no
// wait came between (for a first attempt, the operation's begin, or the
// end of its value's encoding (Encoded): routing takes microseconds), a
// new one after a wait or while tracing (a span's start is then exact).
func (ob *Observers) SendAt(t *Trace) time.Time {
	if !t.fresh || t.span != nil {
		t.now, t.fresh = ob.cfg.Clock.Now(), true
	}
	return t.now
}

// EndAt is when the operation ends: the reading its last attempt's end
// made, unless it waited since.
func (ob *Observers) EndAt(t *Trace) time.Time {
	if !t.fresh {
		t.now, t.fresh = ob.cfg.Clock.Now(), true
	}
	return t.now
}

// Encoded records value encoding (transcoding, compression) that ran from
// start to end: its time in the record, and a child span when tracing.
// end is the latest clock reading: the attempt's dispatch, sent after it,
// does not count the encoding (RFC 0067: it starts once the request is
// encoded).
func (ob *Observers) Encoded(t *Trace, start, end time.Time) {
	t.Rec.Encode += end.Sub(start)
	t.now, t.fresh = end, true
	if t.span == nil {
		return
	}
	s := ob.cfg.Tracer.Start(context.Background(), SpanRequestEncoding, t.span, start)
	ob.everySpan(s)
	ob.cfg.Guard.EndSpan(s, end)
}

// Send is an attempt handed to connection cn (to node, the node's
// address) at at: it fills the Origin its request carries and, when
// tracing, starts its dispatch span.
func (ob *Observers) Send(t *Trace, cn *conn.Conn, node string, at time.Time) *conn.Origin {
	t.Origin.Sent, t.Origin.Queued = at, nil
	if t.span != nil {
		ob.startDispatch(t, cn, node, at)
	}
	return &t.Origin
}

// SendBarrier is Send for a barrier's attempt (conn.Origin.Barrier), which
// its connection may refuse, unwritten: it fills the Origin, and its
// dispatch span starts (Queued) only once the connection has queued the
// request, when it calls queued (conn.Origin.Queued).
func (ob *Observers) SendBarrier(t *Trace, at time.Time, queued conn.QueuedHook) *conn.Origin {
	t.Origin.Sent, t.Origin.Queued = at, queued
	return &t.Origin
}

// Queued is a barrier's attempt (SendBarrier) queued by connection cn (to
// node): when tracing, its dispatch span starts, at its send time.
func (ob *Observers) Queued(t *Trace, cn *conn.Conn, node string) {
	if t.span != nil {
		ob.startDispatch(t, cn, node, t.Origin.Sent)
	}
}

// Ended is the attempt sent on cn with opaque ending at at (answered or
// not): its dispatch time, connection and server duration go into the
// record, and its dispatch span ends. An opaque of 0 is an attempt its
// connection refused before giving it one (closed, or its context
// ended): it was never dispatched, and the record keeps the last attempt
// that was.
func (ob *Observers) Ended(t *Trace, cn *conn.Conn, opaque uint32, at time.Time) {
	t.now, t.fresh = at, true
	t.last = cn
	if opaque != 0 {
		d := at.Sub(t.Origin.Sent)
		r := &t.Rec
		r.Dispatched = true
		r.LastDispatch = d
		r.TotalDispatch += d
		r.OperationID = opaque
		t.cn = cn // its identity goes into the record when a report takes it
	}
	t.foldServer()
	if t.hasServer {
		t.pendingLast = true
		t.Rec.HasServer = true
	}
	if t.dispatch != nil {
		ob.endDispatch(t, opaque, at)
	}
}

// RetryDecided notes when a retry is decided: the end of the attempt it
// follows (the latest reading, while fresh); after a wait, a new reading
// only while tracing (the span's event needs it; nothing else does).
func (ob *Observers) RetryDecided(t *Trace) {
	if !t.fresh && t.span != nil {
		t.now, t.fresh = ob.cfg.Clock.Now(), true
	}
}

// Retried is a retry for reason (RetryReason.String(), read only when
// tracing), decided when RetryDecided noted: an event on the span.
func (ob *Observers) Retried(t *Trace, reason fmt.Stringer) {
	t.foldServer()
	if t.span == nil {
		return
	}
	if t.call != nil { // a Call's span: its requests run at once, on goroutines of their own
		t.call.retry(t.now, reason.String())
		return
	}
	t.event[0] = slog.String(AttrRetryReason, reason.String())
	ob.cfg.Guard.AddEvent(t.span, EventRetry, t.now, t.event[:]...)
}

// End ends the operation at at with err (nil: success) on coll (nil:
// none), after retries retries: the span gets its last attributes and
// ends, the latency goes to the meter, and the record to the
// slow-operation report.
func (ob *Observers) End(t *Trace, coll *Coll, err error, retries int, at time.Time) {
	if t.Origin.Operation == "" {
		return // never begun: refused before its first step (the client was closed)
	}
	total := at.Sub(t.start)
	var errType string
	if err != nil {
		errType = ErrorType(err, ob.cfg.ErrorTypeOther)
	}
	if t.call != nil {
		ob.endPart(t, retries, at) // the Call's request: no operation of its own
		return
	}
	if t.Part { // the call reports it (Copies): no entry of its own
		if c := t.Copies; c != nil {
			c.add(t, err == nil, at)
		}
	} else if th := ob.cfg.Threshold; th != nil && total > th.KV {
		t.foldServer()
		r := t.record(ob.cfg.Service)
		r.Total, r.Timeout = total, t.Origin.Timeout
		th.Add(r)
	}
	if ob.metered && !t.Part {
		ob.meters.record(coll, t.Origin.Operation, t.op, errType, total)
	}
	if t.span != nil {
		ob.endOperation(t, err, errType, failed(err), retries, at)
	}
}

// RecordCall records on the meter the latency d of a call named name (RFC
// 0067's name of its outer span: "get_any_replica") on coll (nil: none)
// that ran its operations as parts (Trace.Part), with its error err (nil:
// success).
func (ob *Observers) RecordCall(coll *Coll, name string, err error, d time.Duration) {
	if !ob.metered {
		return
	}
	var errType string
	if err != nil {
		errType = ErrorType(err, ob.cfg.ErrorTypeOther)
	}
	ob.meters.record(coll, name, opUnlisted, errType, d)
}

// Cancelled is t's attempt out canceled at at because another read of the
// same call answered first (fanout.Lost): an EventCancelled event on its
// dispatch span, which Ended then ends.
func (ob *Observers) Cancelled(t *Trace, at time.Time) {
	if t.dispatch != nil {
		ob.cfg.Guard.AddEvent(t.dispatch, EventCancelled, at)
	}
}

// EndLost ends, at at after retries retries, an operation that lost the
// race of a call reading several copies at once (GetAnyReplica): it was
// canceled because another read answered first, and what it returned is
// not the caller's outcome. Its span ends with an EventCancelled event
// and neither error.type nor a status; the meter and the slow-operation
// report see nothing of it: it is no operation of the caller's, failed or
// not, and counting it failed (RequestCanceled) would inflate the error
// rate of every such call.
func (ob *Observers) EndLost(t *Trace, retries int, at time.Time) {
	if t.span == nil {
		return
	}
	g := ob.cfg.Guard
	if t.dispatch != nil { // abandoned without Ended
		g.AddEvent(t.dispatch, EventCancelled, at)
		g.EndSpan(t.dispatch, at)
		t.dispatch = nil
	}
	g.SetAttribute(t.span, AttrRetries, slog.IntValue(retries))
	g.AddEvent(t.span, EventCancelled, at)
	g.EndSpan(t.span, at)
	t.span = nil
}

// failed is an operation's span status for its error err: failed, but for
// a success or a document not found (RFC 0067: a failure, "not an error
// code like document not found").
func failed(err error) bool {
	return err != nil && !errors.Is(err, kverr.ErrDocumentNotFound)
}

// Wants reports whether an operation of duration d that ran without an
// operation of its own (a get a memcached GetMany's group read hit) is
// shown to the observers: when a tracer or a meter records, or the
// slow-operation report would keep it.
func (ob *Observers) Wants(d time.Duration) bool {
	return ob.cfg.Tracer != nil || ob.metered || (ob.cfg.Threshold != nil && d > ob.cfg.Threshold.KV)
}

// MeterOnly reports whether operations of duration d that ran without an
// operation of their own are seen by the meter alone (Wants, less the
// tracer and the slow-operation report): RecordN then shows them all.
func (ob *Observers) MeterOnly(d time.Duration) bool {
	return ob.cfg.Tracer == nil && (ob.cfg.Threshold == nil || d <= ob.cfg.Threshold.KV)
}

// RecordN shows the meter n successful operations named name (opcode opc)
// on coll (nil: none), each of latency d, as n Begin/End pairs would when
// MeterOnly(d) holds.
func (ob *Observers) RecordN(coll *Coll, name string, opc memdx.OpCode, d time.Duration, n int) {
	if !ob.metered || n <= 0 {
		return
	}
	operation, op := SpanName(name, opc)
	ob.meters.recordN(coll, operation, op, d, n)
}

// OrphanRecord is the orphan report's record of x, a response of service
// that came after its caller left: its total from the request's dispatch
// (x.Sent, on the caller's clock) to arrived, when the answer came read
// on that same clock; from when it was abandoned to when it arrived, both
// on the connection's clock (x.Abandoned, x.Arrived: conn.Options.Clock),
// when the request carried no Sent. Each duration is so the difference of
// two readings of one clock. It runs on a connection's reader and
// allocates nothing.
func OrphanRecord(service string, x conn.Orphan, arrived time.Time) opreport.Record {
	r := opreport.Record{Service: service, Operation: x.Operation, Timeout: x.Timeout,
		Dispatched: true, OperationID: x.Opaque, LocalID: x.ConnID, LocalSocket: x.LocalAddr, RemoteSocket: x.RemoteAddr}
	if r.Operation == "" {
		r.Operation = OpcodeSpanName(x.OpCode)
	}
	if x.Sent.IsZero() {
		r.Total = x.Arrived.Sub(x.Abandoned) // its caller said nothing: from when it left
	} else {
		r.Total = arrived.Sub(x.Sent)
	}
	r.LastDispatch, r.TotalDispatch = r.Total, r.Total
	if x.HasServerDuration {
		r.HasServer = true
		r.LastServer, r.TotalServer = x.ServerDuration, x.ServerDuration
	}
	return r
}
