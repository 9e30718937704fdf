package client

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/optrace"
	"github.com/kvwire/kvwire/memdx"
)

// opTrace is what an operation shows its observers (observers.go): its
// timings, record and Origin (internal/optrace keeps them), and its span
// and dispatch span when a tracer records. It lives in the pooled op and
// is reset with it. Every hook call happens on the operation's goroutine;
// the response handler, on a connection's reader, only copies the
// response's encoded server duration (setServer).
type opTrace struct {
	optrace.Trace
	// encStart and encEnd bound the encoding of a typed write's value,
	// done before the operation began (its start is then encStart).
	encStart, encEnd time.Time

	span     RequestSpan // nil: not traced
	dispatch RequestSpan // the attempt's dispatch span, while it is out
	parent   RequestSpan // the caller's span (options, else the context)
	event    [1]slog.Attr
}

// setServer records the server duration p carries: a copy of two bytes.
func (t *opTrace) setServer(p *memdx.Packet) { t.SetServer(p) }

// waited marks the latest clock reading stale: the operation waited.
func (t *opTrace) waited() { t.Waited() }

// begin starts observing an operation named name (the client's:
// "GetAndLock") whose opcode is opc, at start, with timeout to its
// deadline. parent is its options' ParentSpan (nil: the context's).
func (ob *observers) begin(ctx context.Context, t *opTrace, name string, opc memdx.OpCode, coll *Collection, parent RequestSpan, start time.Time, timeout time.Duration) {
	ob.Begin(&t.Trace, name, opc, start, timeout)
	if !t.encStart.IsZero() {
		defer ob.encoded(t, t.encStart, t.encEnd) // under the span, once it exists
	}
	if ob.tracer == nil {
		return
	}
	t.parent = parentSpan(ctx, parent)
	g := ob.hooks
	t.span = g.startSpan(ob.tracer, ctx, t.Origin.Operation, t.parent, start)
	g.setAttribute(t.span, AttributeSystemName, slog.StringValue(SystemCouchbase))
	g.setAttribute(t.span, AttributeService, slog.StringValue(ServiceKV))
	g.setAttribute(t.span, AttributeOperationName, slog.StringValue(t.Origin.Operation))
	if ob.bucket != "" {
		g.setAttribute(t.span, AttributeBucketName, slog.StringValue(ob.bucket))
	}
	if coll != nil {
		g.setAttribute(t.span, AttributeScopeName, slog.StringValue(coll.scope))
		g.setAttribute(t.span, AttributeCollectionName, slog.StringValue(coll.name))
	}
}

// sendAt is when an attempt is sent (optrace.Observers.SendAt: exact
// while tracing).
func (ob *observers) sendAt(t *opTrace) time.Time { return ob.SendAt(&t.Trace, t.span != nil) }

// endAt is when the operation ends (optrace.Observers.EndAt).
func (ob *observers) endAt(t *opTrace) time.Time { return ob.EndAt(&t.Trace) }

// encoded records value encoding (transcoding, compression) that ran from
// start to end: its time in the record, and a child span when tracing.
func (ob *observers) encoded(t *opTrace, start, end time.Time) {
	ob.Encoded(&t.Trace, start, end)
	if t.span == nil {
		return
	}
	g := ob.hooks
	s := g.startSpan(ob.tracer, context.Background(), SpanRequestEncoding, t.span, start)
	g.endSpan(s, end)
}

// send is an attempt handed to connection cn (to node, the node's
// address) at at: it fills the Origin its request carries and, when
// tracing, starts its dispatch span.
func (ob *observers) send(t *opTrace, cn *conn.Conn, node string, at time.Time) *conn.Origin {
	origin := ob.Send(&t.Trace, at)
	if t.span == nil {
		return origin
	}
	g := ob.hooks
	s := g.startSpan(ob.tracer, context.Background(), SpanDispatchToServer, t.span, at)
	t.dispatch = s
	g.setAttribute(s, AttributeSystemName, slog.StringValue(SystemCouchbase))
	g.setAttribute(s, AttributeNetworkTransport, slog.StringValue(TransportTCP))
	g.setAttribute(s, AttributeLocalID, slog.StringValue(cn.ID()))
	if host, port, ok := splitHostPort(node); ok {
		g.setAttribute(s, AttributeServerAddress, slog.StringValue(host))
		g.setAttribute(s, AttributeServerPort, slog.IntValue(port))
	}
	if host, port, ok := splitHostPort(cn.RemoteAddr()); ok {
		g.setAttribute(s, AttributePeerAddress, slog.StringValue(host))
		g.setAttribute(s, AttributePeerPort, slog.IntValue(port))
	}
	if host, port, ok := splitHostPort(cn.LocalAddr()); ok {
		g.setAttribute(s, AttributeLocalAddress, slog.StringValue(host))
		g.setAttribute(s, AttributeLocalPort, slog.IntValue(port))
	}
	return origin
}

// ended is the attempt sent on cn with opaque ending at at (answered or
// not): its dispatch time, connection and server duration go into the
// record, and its dispatch span ends.
func (ob *observers) ended(t *opTrace, cn *conn.Conn, opaque uint32, at time.Time) {
	ob.Ended(&t.Trace, cn, opaque, at)
	if t.dispatch == nil {
		return
	}
	g := ob.hooks
	if d, ok := t.ServerDuration(); ok {
		g.setAttribute(t.dispatch, AttributeServerDuration, slog.Int64Value(d.Microseconds()))
	}
	if opaque != 0 {
		g.setAttribute(t.dispatch, AttributeOperationID, slog.Int64Value(int64(opaque)))
	}
	g.endSpan(t.dispatch, at)
	t.dispatch = nil
}

// retryDecided notes when a retry is decided (optrace's RetryDecided: a
// new clock reading after a wait only while tracing).
func (ob *observers) retryDecided(t *opTrace) { ob.RetryDecided(&t.Trace, t.span != nil) }

// retried is a retry for reason, decided when retryDecided noted: an
// event on the span.
func (ob *observers) retried(t *opTrace, reason RetryReason) {
	ob.Retried(&t.Trace)
	if t.span == nil {
		return
	}
	t.event[0] = slog.String(AttributeRetryReason, reason.String())
	ob.hooks.addEvent(t.span, EventRetry, t.Now(), t.event[:]...)
}

// end ends the operation at at with err (nil: success), after retries
// retries: the span gets its last attributes and ends, the latency goes
// to the meter, and the record to the slow-operation report.
func (ob *observers) end(t *opTrace, coll *Collection, err error, retries int, at time.Time) {
	errType, begun := ob.End(&t.Trace, ob.collMeters(coll), err, at)
	if !begun || t.span == nil {
		return
	}
	g := ob.hooks
	if t.dispatch != nil { // an attempt that ended without ended(): abandoned
		g.endSpan(t.dispatch, at)
		t.dispatch = nil
	}
	g.setAttribute(t.span, AttributeRetries, slog.IntValue(retries))
	status := SpanStatusOK
	if err != nil {
		g.setAttribute(t.span, AttributeErrorType, slog.StringValue(errType))
		if !errors.Is(err, ErrDocumentNotFound) {
			status = SpanStatusError
		}
	}
	g.setStatus(t.span, status)
	g.endSpan(t.span, at)
	t.span = nil
}

// done shows its observers an operation that had no operation of its own
// (a get a memcached GetMany's group read hit): begun at start, ended at
// end, in one attempt.
func (ob *observers) done(ctx context.Context, name string, opc memdx.OpCode, coll *Collection, parent RequestSpan, start, end time.Time) {
	if ob.tracer == nil && !ob.Wants(end.Sub(start)) {
		return
	}
	var t opTrace
	ob.begin(ctx, &t, name, opc, coll, parent, start, 0)
	ob.end(&t, coll, nil, 0, end)
}

// splitHostPort splits "host:port" without allocating.
func splitHostPort(addr string) (string, int, bool) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, false
	}
	port, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		return "", 0, false
	}
	host := addr[:i]
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	return host, port, true
}
