// Package optrace is what one operation shows the client's observers: its
// span and dispatch spans when a tracer records (RFC 0067's names and
// attributes), its timings and record for the slow-operation report, its
// latency for the meter, the Origin its requests carry for the orphan
// report, each read off the clock as few times as the operation allows;
// with RFC 0067's names of the operations and RFC 0058's of the errors.
//
// Every call happens on the operation's goroutine; the response handler,
// on a connection's reader, only copies the response's encoded server
// duration (SetServer). Clock readings: the operation's begin (which its
// deadline needs anyway), one when each attempt's request ends, and, only
// while tracing or when an attempt follows a wait, one when an attempt is
// sent.
package optrace

import (
	"log/slog"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/hookguard"
	"github.com/kvwire/kvwire/internal/opreport"
	"github.com/kvwire/kvwire/memdx"
)

// Trace is one operation's observed state. It lives in the pooled
// operation and is reset with it.
type Trace struct {
	// Origin is what the attempt in flight tells its connection: RFC
	// 0067's name of the operation ("get"), when the attempt was sent,
	// the timeout from start to the operation's deadline.
	Origin conn.Origin
	op     int // Origin.Operation's index in opNames (opUnlisted: none)
	start  time.Time
	now    time.Time // the latest clock reading; stale after a wait
	fresh  bool      // now is still the time (no wait since it was read)

	// Part: the operation is one of several that a call of the caller's
	// runs at once (the read of one copy by GetAnyReplica), whose latency
	// the meter records as the call's (RecordCall): End records none of
	// it, nor does the slow-operation report (Copies). The client sets it
	// before Begin.
	Part bool
	// Copies, for a Part, is where the slow-operation report's entry of
	// its call is kept (nil: the report is off); End adds the Part's
	// record to it. The client sets it before Begin.
	Copies *Copies

	span     hookguard.Span // nil: not traced (a Call's request: the Call's span)
	dispatch hookguard.Span // the attempt's dispatch span, while it is out
	call     *Call          // the Call the request is part of (BeginPart), nil: an operation of its own
	event    [1]slog.Attr

	// Rec is the operation's record for the reports. Its names and its
	// connection's identity are filled in only when a report takes it
	// (record): most operations are never reported.
	Rec  opreport.Record
	cn   *conn.Conn // the last dispatched attempt's connection, the record's (nil: none)
	last *conn.Conn // the last attempt's connection, dispatched or not (nil: none)
	// The server duration of the last response (HELLO Tracing), encoded:
	// decoding costs a power, done only when someone reads it.
	serverEnc   uint16
	hasServer   bool
	pendingLast bool // serverEnc is the last attempt's, not yet in Rec
}

// SetServer records the server duration p carries. It runs on the
// connection's reader during the response handler: a copy of two bytes.
func (t *Trace) SetServer(p *memdx.Packet) {
	t.serverEnc, t.hasServer = p.ServerDurationEncoded()
}

// ServerDuration is the server duration of the last attempt's response,
// when it carried one.
func (t *Trace) ServerDuration() (time.Duration, bool) {
	if !t.hasServer {
		return 0, false
	}
	return memdx.DecodeServerDuration(t.serverEnc), true
}

// Conn is the connection the operation's last attempt was handed to, nil
// when none was.
func (t *Trace) Conn() *conn.Conn { return t.last }

// record fills in the parts of Rec kept elsewhere until a report takes it:
// the service, the operation's name, and its last connection's identity.
func (t *Trace) record(service string) *opreport.Record {
	r := &t.Rec
	r.Service, r.Operation = service, t.Origin.Operation
	if cn := t.cn; cn != nil {
		r.LocalID, r.LocalSocket, r.RemoteSocket = cn.ID(), cn.LocalAddr(), cn.RemoteAddr()
	}
	return r
}

// Traced reports whether the operation has a span.
func (t *Trace) Traced() bool { return t.span != nil }

// Detach makes t, a request of a Call (BeginPart) that the Call no longer
// waits for (a scan's cancel held past the scan's return), trace nothing
// more under the Call's span, which may end from now on: its later
// attempts make no dispatch span, and its retries no event. It is called
// between attempts, on the request's goroutine, before the Call learns
// that it no longer waits.
func (t *Trace) Detach() { t.span = nil }

// Waited marks the latest clock reading stale: the operation waited.
func (t *Trace) Waited() { t.fresh = false }

// foldServer adds the server duration of an earlier attempt to the
// record's total, decoding it (an attempt after another: a retry).
func (t *Trace) foldServer() {
	if !t.pendingLast {
		return
	}
	d := memdx.DecodeServerDuration(t.serverEnc)
	t.Rec.LastServer = d
	t.Rec.TotalServer += d
	t.pendingLast = false
	t.hasServer = false
}
