package optrace

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/hookguard"
	"github.com/kvwire/kvwire/memdx"
)

// Tracer starts the spans of operations: the client's RequestTracer,
// called through the client's guard. Its spans are the client's
// RequestSpans, whose status it sets too (the status is the client's
// type).
type Tracer interface {
	// Start starts a span named name at start under parent (nil: none
	// given; the tracer may find one in ctx).
	Start(ctx context.Context, name string, parent hookguard.Span, start time.Time) hookguard.Span
	// SetStatus sets the status of an operation's span: failed or not.
	SetStatus(s hookguard.Span, failed bool)
}

// RFC 0067's names the spans carry: span and event names, attribute keys
// and values. The client publishes each under its own name
// (SpanDispatchToServer, EventRetry, AttributeSystemName, ...), the same
// text; a test of the client's checks that they agree.
const (
	SpanDispatchToServer = "dispatch_to_server"
	SpanRequestEncoding  = "request_encoding"
	EventRetry           = "retry"
	EventCancelled       = "cancelled"

	AttrSystemName       = "db.system.name"
	AttrClusterName      = "couchbase.cluster.name"
	AttrClusterUUID      = "couchbase.cluster.uuid"
	AttrService          = "couchbase.service"
	AttrOperationName    = "db.operation.name"
	AttrBucketName       = "db.namespace"
	AttrScopeName        = "couchbase.scope.name"
	AttrCollectionName   = "couchbase.collection.name"
	AttrRetries          = "couchbase.retries"
	AttrDurability       = "couchbase.durability"
	AttrErrorType        = "error.type"
	AttrNetworkTransport = "network.transport"
	AttrServerDuration   = "couchbase.server_duration"
	AttrLocalID          = "couchbase.local_id"
	AttrOperationID      = "couchbase.operation_id"
	AttrServerAddress    = "server.address"
	AttrServerPort       = "server.port"
	AttrPeerAddress      = "network.peer.address"
	AttrPeerPort         = "network.peer.port"
	AttrRetryReason      = "couchbase.retry.reason"

	SystemCouchbase = "couchbase"
	TransportTCP    = "tcp"
)

// everySpan sets the attributes every span has: the system's name, and
// the cluster's labels when its config publishes them.
func (ob *Observers) everySpan(s hookguard.Span) {
	g := ob.cfg.Guard
	g.SetAttribute(s, AttrSystemName, slog.StringValue(SystemCouchbase))
	if ob.cfg.ClusterLabels == nil {
		return
	}
	name, uuid := ob.cfg.ClusterLabels()
	if name != "" {
		g.SetAttribute(s, AttrClusterName, slog.StringValue(name))
	}
	if uuid != "" {
		g.SetAttribute(s, AttrClusterUUID, slog.StringValue(uuid))
	}
}

// startOperation starts t's span under parent, with the operation's
// attributes; coll is its collection (nil: none).
func (ob *Observers) startOperation(ctx context.Context, t *Trace, coll *Coll, parent hookguard.Span, start time.Time) {
	t.span = ob.startSpan(ctx, t.Origin.Operation, coll, parent, start)
}

// startSpan starts the span of an operation named name (RFC 0067's) on
// coll (nil: none) under parent at start, with an operation's attributes.
func (ob *Observers) startSpan(ctx context.Context, name string, coll *Coll, parent hookguard.Span, start time.Time) hookguard.Span {
	g := ob.cfg.Guard
	s := ob.cfg.Tracer.Start(ctx, name, parent, start)
	ob.everySpan(s)
	g.SetAttribute(s, AttrService, slog.StringValue(ob.cfg.Service))
	g.SetAttribute(s, AttrOperationName, slog.StringValue(name))
	if ob.cfg.Bucket != "" {
		g.SetAttribute(s, AttrBucketName, slog.StringValue(ob.cfg.Bucket))
	}
	if coll != nil {
		g.SetAttribute(s, AttrScopeName, slog.StringValue(coll.scope))
		g.SetAttribute(s, AttrCollectionName, slog.StringValue(coll.name))
	}
	return s
}

// BeginWrap starts, when tracing, the span of an operation the client
// runs as several (GetAnyReplica: a read per copy), named name (RFC
// 0067's wrapping span: "get_any_replica"), on coll (nil: none), under
// parent (nil: none given), at start: the operations it runs take it as
// their parent. It returns nil when not tracing.
func (ob *Observers) BeginWrap(ctx context.Context, name string, coll *Coll, parent hookguard.Span, start time.Time) hookguard.Span {
	if ob.cfg.Tracer == nil {
		return nil
	}
	return ob.startSpan(ctx, name, coll, parent, start)
}

// EndWrap ends s, a span BeginWrap started (nil: none), at at with the
// operation's error (nil: success) after retries retries (its operations',
// summed): its couchbase.retries, error type and status, as an
// operation's span has them.
func (ob *Observers) EndWrap(s hookguard.Span, err error, retries int64, at time.Time) {
	if s == nil {
		return
	}
	ob.cfg.Guard.SetAttribute(s, AttrRetries, slog.Int64Value(retries))
	if err != nil {
		ob.cfg.Guard.SetAttribute(s, AttrErrorType, slog.StringValue(ErrorType(err, ob.cfg.ErrorTypeOther)))
	}
	ob.cfg.Tracer.SetStatus(s, failed(err))
	ob.cfg.Guard.EndSpan(s, at)
}

// Durability sets the durability level of t's operation, a synchronous
// write, on its span (RFC 0067's couchbase.durability, as the other SDKs
// name the levels); nothing when it is not traced or has no durability.
// It is inlined on every operation's path; durability sets the attribute.
func (ob *Observers) Durability(t *Trace, level memdx.DurabilityLevel) {
	if t.span != nil && level != memdx.DurabilityNone {
		ob.durability(t, level)
	}
}

func (ob *Observers) durability(t *Trace, level memdx.DurabilityLevel) {
	var name string
	switch level {
	case memdx.DurabilityMajority:
		name = "majority"
	case memdx.DurabilityMajorityAndPersistOnMaster:
		name = "majority_and_persist_active"
	case memdx.DurabilityPersistToMajority:
		name = "persist_majority"
	default:
		name = level.String()
	}
	ob.cfg.Guard.SetAttribute(t.span, AttrDurability, slog.StringValue(name))
}

// startDispatch starts the dispatch span of t's attempt handed to cn (to
// node, the node's address) at at.
func (ob *Observers) startDispatch(t *Trace, cn *conn.Conn, node string, at time.Time) {
	g := ob.cfg.Guard
	s := ob.cfg.Tracer.Start(context.Background(), SpanDispatchToServer, t.span, at)
	t.dispatch = s
	ob.everySpan(s)
	g.SetAttribute(s, AttrNetworkTransport, slog.StringValue(TransportTCP))
	g.SetAttribute(s, AttrLocalID, slog.StringValue(cn.ID()))
	if host, port, ok := splitHostPort(node); ok {
		g.SetAttribute(s, AttrServerAddress, slog.StringValue(host))
		g.SetAttribute(s, AttrServerPort, slog.IntValue(port))
	}
	if host, port, ok := splitHostPort(cn.RemoteAddr()); ok {
		g.SetAttribute(s, AttrPeerAddress, slog.StringValue(host))
		g.SetAttribute(s, AttrPeerPort, slog.IntValue(port))
	}
}

// endDispatch ends the dispatch span of t's attempt sent with opaque, at
// at.
func (ob *Observers) endDispatch(t *Trace, opaque uint32, at time.Time) {
	g := ob.cfg.Guard
	if d, ok := t.ServerDuration(); ok {
		g.SetAttribute(t.dispatch, AttrServerDuration, slog.Int64Value(d.Microseconds()))
	}
	if opaque != 0 {
		g.SetAttribute(t.dispatch, AttrOperationID, slog.Int64Value(int64(opaque)))
	}
	g.EndSpan(t.dispatch, at)
	t.dispatch = nil
}

// errUnwound is the error an operation's span ends with when a panic
// unwound the operation (Unwound).
var errUnwound = errors.New("the operation was unwound by a panic")

// Unwound ends t's spans when a panic (or runtime.Goexit) in the caller's
// code that its operation runs (an Observer, a RetryStrategy, a Logger)
// unwound the operation before End: the dispatch span of the attempt out,
// then the operation's span, failed (error type ErrorTypeOther) after
// retries retries, at at. An OpenTelemetry span that is never ended is
// never exported: the trace would hold the operation's dispatch spans,
// ended before the panic, under a parent it never receives. The meter and
// the reports see nothing of the operation. After End it does nothing.
func (ob *Observers) Unwound(t *Trace, retries int, at time.Time) {
	if t.call != nil {
		ob.endPart(t, retries, at) // the Call's span ends with the Call
		return
	}
	if t.span != nil {
		ob.endOperation(t, errUnwound, ob.cfg.ErrorTypeOther, true, retries, at)
	}
}

// endOperation ends t's span at at, after retries retries, with err's
// error type (err nil: success); failed is its status.
func (ob *Observers) endOperation(t *Trace, err error, errType string, failed bool, retries int, at time.Time) {
	g := ob.cfg.Guard
	if t.dispatch != nil { // an attempt that ended without Ended: abandoned
		g.EndSpan(t.dispatch, at)
		t.dispatch = nil
	}
	g.SetAttribute(t.span, AttrRetries, slog.IntValue(retries))
	if err != nil {
		g.SetAttribute(t.span, AttrErrorType, slog.StringValue(errType))
	}
	ob.cfg.Tracer.SetStatus(t.span, failed)
	g.EndSpan(t.span, at)
	t.span = nil
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
