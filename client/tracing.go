package client

import (
	"context"
	"log/slog"
	"strconv"
	"time"
)

// RequestTracer receives the spans of operations (Couchbase SDK RFC 0067,
// "Request Tracing"), for a tracing system such as OpenTelemetry (the
// nested module github.com/kvwire/kvwire/kvotel adapts one). Each operation
// is a span named after it ("get", "upsert", ...) with a child span per
// request sent to a server (SpanDispatchToServer) and, where a value is
// encoded, one for that (SpanRequestEncoding); retries are events on the
// operation's span. A call that reads several copies of a document
// (GetAnyReplica, GetAllReplicas, LookupInAnyReplica, LookupInAllReplicas)
// is a span of its own ("get_any_replica", "get_all_replicas",
// "lookup_in_any_replica", "lookup_in_all_replicas", RFC 0067's wrapping
// spans) with the read of each copy under it; so is a Ping ("ping"), over
// the NOOP of each node. A Scan is one span ("scan") from Scan until its
// ScanResult's Next returns false or Close, whose requests are its
// dispatch spans. An operation refused before any request (its
// arguments, a feature its bucket lacks) is its span alone, failed; one
// called on a closed client has none.
//
// The client passes every time itself, read from Options.Clock, so that a
// span covers exactly what the client measured (and a test on a fake clock
// sees its own times). It calls a tracer on the operation's goroutine,
// never on a connection's reader or writer and never holding a lock of the
// client's: a slow tracer slows only the operations it traces. A panic in
// a tracer or a span is recovered and logged, and the operation goes on.
//
// NoopTracer is the default (Options.Tracer nil), recognised so that an
// operation makes no tracer call at all. The built-in slow-operation and
// orphan reports do not need spans: they read the operation's own
// timings.
type RequestTracer interface {
	// RequestSpan starts a span named name at start. parent is the span
	// it belongs under: the operation's span for a dispatch or encoding
	// span, or the caller's span (ContextWithParentSpan, or an
	// operation's options) for an operation's span; nil for an operation
	// whose caller gave none, in which case the tracer may find a parent
	// in ctx by its own means (the OpenTelemetry adapter takes the span
	// context.Context carries). ctx is the operation's context.
	RequestSpan(ctx context.Context, name string, parent RequestSpan, start time.Time) RequestSpan
}

// RequestSpan is a span a RequestTracer started. The client calls its
// methods from one goroutine at a time, and calls End once, last.
type RequestSpan interface {
	// SetAttribute sets an attribute (the Attribute* constants name the
	// ones the client sets). A slog.Value holds a string, number, bool
	// or duration without an allocation.
	SetAttribute(key string, value slog.Value)
	// AddEvent records an event at a time, such as a retry
	// (EventRetry, with its reason).
	AddEvent(name string, at time.Time, attrs ...slog.Attr)
	// SetStatus sets the outcome of an operation's span: SpanStatusOK,
	// or SpanStatusError for an operation that failed (not for a
	// document that was not found, nor for a replica read, of any copy or
	// all, that found none: ErrDocumentUnretrievable).
	SetStatus(status SpanStatus)
	// End ends the span at a time.
	End(at time.Time)
}

// SpanStatus is the outcome a RequestSpan reports (RFC 0067's StatusCode).
type SpanStatus uint8

// Span statuses.
const (
	SpanStatusUnset SpanStatus = iota
	SpanStatusOK
	SpanStatusError
)

func (s SpanStatus) String() string {
	switch s {
	case SpanStatusUnset:
		return "unset"
	case SpanStatusOK:
		return "ok"
	case SpanStatusError:
		return "error"
	}
	return "SpanStatus(" + strconv.Itoa(int(s)) + ")"
}

// NoopTracer is a RequestTracer that records nothing and allocates
// nothing. It is the default.
type NoopTracer struct{}

// RequestSpan returns a span that records nothing.
func (NoopTracer) RequestSpan(context.Context, string, RequestSpan, time.Time) RequestSpan {
	return noopSpan{}
}

type noopSpan struct{}

func (noopSpan) SetAttribute(string, slog.Value)          {}
func (noopSpan) AddEvent(string, time.Time, ...slog.Attr) {}
func (noopSpan) SetStatus(SpanStatus)                     {}
func (noopSpan) End(time.Time)                            {}

// tracerOn reports whether t records anything: an operation makes no span
// call at all when it does not (nil, NoopTracer), so the default costs one
// comparison per operation.
func tracerOn(t RequestTracer) bool {
	switch t.(type) {
	case nil, NoopTracer, *NoopTracer:
		return false
	}
	return true
}

// parentSpanKey is the context key of ContextWithParentSpan.
type parentSpanKey struct{}

// ContextWithParentSpan returns a context under which operations start
// their spans as children of span: the way to hand a parent to every
// operation made with a context, where an operation's options name none.
func ContextWithParentSpan(ctx context.Context, span RequestSpan) context.Context {
	return context.WithValue(ctx, parentSpanKey{}, span)
}

// ParentSpanFromContext returns the span ContextWithParentSpan put in ctx,
// or nil.
func ParentSpanFromContext(ctx context.Context) RequestSpan {
	if ctx == nil {
		return nil
	}
	s, _ := ctx.Value(parentSpanKey{}).(RequestSpan)
	return s
}

// parentSpan is the parent of an operation's span: the one its options
// name, else the one its context carries, else nil.
func parentSpan(ctx context.Context, fromOptions RequestSpan) RequestSpan {
	if fromOptions != nil {
		return fromOptions
	}
	return ParentSpanFromContext(ctx)
}

// Span names (RFC 0067, "Span Names"). An operation's span is named after
// the operation in snake case ("get", "get_and_lock", "lookup_in", ...).
const (
	SpanDispatchToServer = "dispatch_to_server"
	SpanRequestEncoding  = "request_encoding"
)

// EventRetry is the event an operation's span gets for each retry, with
// AttributeRetryReason.
const EventRetry = "retry"

// EventCancelled is the event that ends the read of one copy of a
// GetAnyReplica (or LookupInAnyReplica) that another copy's read beat:
// canceled once the other answered, it is no operation of the caller's.
// Its span and, when its request was out, its dispatch span get the event;
// neither gets a status or AttributeErrorType, and the meter records
// nothing of it.
const EventCancelled = "cancelled"

// Attribute keys, RFC 0067's stable names (OpenTelemetry semantic
// conventions v1.37 and Couchbase's own), and the values the client gives
// some of them. Spans and metrics carry these; a span's attributes never
// include a document's key or value.
const (
	// Every span: AttributeSystemName = SystemCouchbase, and the cluster
	// labels when the cluster publishes them (7.6.4 and later); the
	// operation metric has them too.
	AttributeSystemName  = "db.system.name"
	AttributeClusterName = "couchbase.cluster.name"
	AttributeClusterUUID = "couchbase.cluster.uuid"

	// An operation's span (and the operation metric's attributes).
	AttributeService        = "couchbase.service"         // ServiceKV
	AttributeOperationName  = "db.operation.name"         // the span's name
	AttributeBucketName     = "db.namespace"              // the bucket
	AttributeScopeName      = "couchbase.scope.name"      // "_default" unless named
	AttributeCollectionName = "couchbase.collection.name" // "_default" unless named
	AttributeRetries        = "couchbase.retries"         // int, 0 when none
	AttributeDurability     = "couchbase.durability"      // a durable write only: "majority", "majority_and_persist_active", "persist_majority"
	AttributeErrorType      = "error.type"                // RFC 0058 name of the error; absent on success

	// A dispatch span.
	AttributeNetworkTransport = "network.transport"         // TransportTCP
	AttributeServerDuration   = "couchbase.server_duration" // int, microseconds, from the response
	AttributeLocalID          = "couchbase.local_id"        // the connection's id
	AttributeOperationID      = "couchbase.operation_id"    // int, the request's opaque
	AttributeServerAddress    = "server.address"            // the node's canonical host
	AttributeServerPort       = "server.port"               // int
	AttributePeerAddress      = "network.peer.address"      // the socket's remote IP
	AttributePeerPort         = "network.peer.port"         // int

	// Deprecated: no span carries the socket's local address and port:
	// RFC 0067 removed them with its move to OpenTelemetry's stable
	// semantic conventions (net.host.name and net.host.port have no
	// successor). The connection's local id (AttributeLocalID) names it;
	// the slow-operation and orphan reports still give its local socket.
	AttributeLocalAddress = "network.local.address"
	// Deprecated: see AttributeLocalAddress.
	AttributeLocalPort = "network.local.port"

	// A retry event.
	AttributeRetryReason = "couchbase.retry.reason" // RetryReason.String()
)

// Attribute values.
const (
	SystemCouchbase = "couchbase"
	ServiceKV       = "kv"
	TransportTCP    = "tcp"
)
