package client

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
)

// opTrace is what an operation shows its observers (observers.go): its
// span and dispatch span when a tracer records, the timings of its record
// for the reports (opRecord), the Origin its requests carry for the orphan
// report, and the server duration its last response carried. It lives in
// the pooled op and is reset with it.
//
// Every hook call happens on the operation's goroutine, in the steps
// below; the response handler, on a connection's reader, only copies the
// response's encoded server duration (setServer). Clock readings: the
// operation's begin (which its deadline needs anyway), one when each
// attempt's request ends, and, only while tracing or when an attempt
// follows a wait, one when an attempt is sent.
type opTrace struct {
	// origin is what the attempt in flight tells its connection: RFC
	// 0067's name of the operation ("get"), when the attempt was sent,
	// the timeout from start to the operation's deadline.
	origin conn.Origin
	op     int // origin.Operation's index in opNames (opUnlisted: none)
	start  time.Time
	now    time.Time // the latest clock reading; stale after a wait
	fresh  bool      // now is still the time (no wait since it was read)
	// encStart and encEnd bound the encoding of a typed write's value,
	// done before the operation began (its start is then encStart).
	encStart, encEnd time.Time

	span     RequestSpan // nil: not traced
	dispatch RequestSpan // the attempt's dispatch span, while it is out
	parent   RequestSpan // the caller's span (options, else the context)
	event    [1]slog.Attr

	rec opRecord
	// The server duration of the last response (HELLO Tracing), encoded:
	// decoding costs a power, done only when someone reads it.
	serverEnc   uint16
	hasServer   bool
	pendingLast bool // serverEnc is the last attempt's, not yet in rec
}

// setServer records the server duration p carries. It runs on the
// connection's reader during the response handler: a copy of two bytes.
func (t *opTrace) setServer(p *memdx.Packet) {
	t.serverEnc, t.hasServer = p.ServerDurationEncoded()
}

// begin starts observing an operation named name (the client's:
// "GetAndLock") whose opcode is opc, at start, with timeout to its
// deadline. parent is its options' ParentSpan (nil: the context's).
func (ob *observers) begin(ctx context.Context, t *opTrace, name string, opc memdx.OpCode, coll *Collection, parent RequestSpan, start time.Time, timeout time.Duration) {
	t.origin.Operation, t.op = spanName(name, opc)
	t.origin.Timeout = timeout
	t.start, t.now, t.fresh = start, start, true
	t.rec.service, t.rec.operation = ServiceKV, t.origin.Operation
	if !t.encStart.IsZero() {
		defer ob.encoded(t, t.encStart, t.encEnd) // under the span, once it exists
	}
	if ob.tracer == nil {
		return
	}
	t.parent = parentSpan(ctx, parent)
	g := ob.hooks
	t.span = g.startSpan(ob.tracer, ctx, t.origin.Operation, t.parent, start)
	g.setAttribute(t.span, AttributeSystemName, slog.StringValue(SystemCouchbase))
	g.setAttribute(t.span, AttributeService, slog.StringValue(ServiceKV))
	g.setAttribute(t.span, AttributeOperationName, slog.StringValue(t.origin.Operation))
	if ob.bucket != "" {
		g.setAttribute(t.span, AttributeBucketName, slog.StringValue(ob.bucket))
	}
	if coll != nil {
		g.setAttribute(t.span, AttributeScopeName, slog.StringValue(coll.scope))
		g.setAttribute(t.span, AttributeCollectionName, slog.StringValue(coll.name))
	}
}

// sendAt is when an attempt is sent: the latest clock reading while no
// wait came between (for a first attempt, the operation's begin: routing
// takes microseconds), a new one after a wait or while tracing (a span's
// start is then exact).
func (ob *observers) sendAt(t *opTrace) time.Time {
	if !t.fresh || t.span != nil {
		t.now, t.fresh = ob.clock.Now(), true
	}
	return t.now
}

// endAt is when the operation ends: the reading its last attempt's end
// made, unless it waited since.
func (ob *observers) endAt(t *opTrace) time.Time {
	if !t.fresh {
		t.now, t.fresh = ob.clock.Now(), true
	}
	return t.now
}

// encoded records value encoding (transcoding, compression) that ran from
// start to end: its time in the record, and a child span when tracing.
func (ob *observers) encoded(t *opTrace, start, end time.Time) {
	t.rec.encode += end.Sub(start)
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
	t.origin.Sent = at
	if t.span == nil {
		return &t.origin
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
	return &t.origin
}

// ended is the attempt sent on cn with opaque ending at at (answered or
// not): its dispatch time, connection and server duration go into the
// record, and its dispatch span ends.
func (ob *observers) ended(t *opTrace, cn *conn.Conn, opaque uint32, at time.Time) {
	t.now, t.fresh = at, true
	d := at.Sub(t.origin.Sent)
	r := &t.rec
	r.dispatched = true
	r.lastDispatch = d
	r.totalDispatch += d
	r.operationID = opaque
	r.localID, r.localSocket, r.remoteSocket = cn.ID(), cn.LocalAddr(), cn.RemoteAddr()
	t.foldServer()
	if t.hasServer {
		t.pendingLast = true
		r.hasServer = true
	}
	if t.dispatch == nil {
		return
	}
	g := ob.hooks
	if t.hasServer {
		g.setAttribute(t.dispatch, AttributeServerDuration, slog.Int64Value(memdx.DecodeServerDuration(t.serverEnc).Microseconds()))
	}
	if opaque != 0 {
		g.setAttribute(t.dispatch, AttributeOperationID, slog.Int64Value(int64(opaque)))
	}
	g.endSpan(t.dispatch, at)
	t.dispatch = nil
}

// foldServer adds the server duration of an earlier attempt to the
// record's total, decoding it (an attempt after another: a retry).
func (t *opTrace) foldServer() {
	if !t.pendingLast {
		return
	}
	d := memdx.DecodeServerDuration(t.serverEnc)
	t.rec.lastServer = d
	t.rec.totalServer += d
	t.pendingLast = false
	t.hasServer = false
}

// retryDecided notes when a retry is decided: the end of the attempt it
// follows (the latest reading, while fresh); after a wait, a new reading
// only while tracing (the event needs it; nothing else does).
func (ob *observers) retryDecided(t *opTrace) {
	if !t.fresh && t.span != nil {
		t.now, t.fresh = ob.clock.Now(), true
	}
}

// retried is a retry for reason, decided when retryDecided noted: an
// event on the span.
func (ob *observers) retried(t *opTrace, reason RetryReason) {
	t.foldServer()
	if t.span == nil {
		return
	}
	t.event[0] = slog.String(AttributeRetryReason, reason.String())
	ob.hooks.addEvent(t.span, EventRetry, t.now, t.event[:]...)
}

// waited marks the latest clock reading stale: the operation waited.
func (t *opTrace) waited() { t.fresh = false }

// end ends the operation at at with err (nil: success), after retries
// retries: the span gets its last attributes and ends, the latency goes
// to the meter, and the record to the slow-operation report.
func (ob *observers) end(t *opTrace, coll *Collection, err error, retries int, at time.Time) {
	if t.origin.Operation == "" {
		return // never begun: refused before its first step (the client was closed)
	}
	total := at.Sub(t.start)
	var errType string
	if err != nil {
		errType = errorType(err)
	}
	if ob.threshold != nil && total > ob.threshold.kv {
		t.foldServer()
		t.rec.total, t.rec.timeout = total, t.origin.Timeout
		ob.threshold.add(&t.rec)
	}
	if ob.meter != nil {
		ob.meters.record(coll, t.origin.Operation, t.op, errType, total)
	}
	if t.span == nil {
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
	if ob.tracer == nil && ob.meter == nil && (ob.threshold == nil || end.Sub(start) <= ob.threshold.kv) {
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

// opNames are RFC 0067's names of the client's operations; an opTrace
// holds its operation's index here (opUnlisted for a name not listed), by
// which the operation's metric recorder is found without hashing.
var opNames = [...]string{
	"get", "get_and_touch", "get_and_lock", "get_replica", "unlock", "touch", "exists",
	"upsert", "insert", "replace", "remove", "append", "prepend", "increment", "decrement",
	"lookup_in", "lookup_in_replica", "mutate_in", "ping", "stats", "version", "flush",
	"range_scan_create", "range_scan_continue", "range_scan_cancel", "scan",
}

const opUnlisted = -1

// opIndex is the index in opNames of the client's operation name (with
// its opcode where one name covers several requests), opUnlisted for one
// not listed.
func opIndex(name string, opc memdx.OpCode) int {
	switch name {
	case "Get", "GetReplica(active)":
		return 0
	case "GetAndTouch":
		return 1
	case "GetAndLock":
		return 2
	case "GetReplica":
		return 3
	case "Unlock":
		return 4
	case "Touch":
		return 5
	case "Exists":
		return 6
	case "Upsert":
		return 7
	case "Insert":
		return 8
	case "Replace":
		return 9
	case "Remove":
		return 10
	case "Append":
		return 11
	case "Prepend":
		return 12
	case "Increment":
		return 13
	case "Decrement":
		return 14
	case "LookupIn", "LookupInReplica(active)":
		return 15
	case "LookupInReplica":
		return 16
	case "MutateIn":
		return 17
	case "Ping":
		return 18
	case "Stats":
		return 19
	case "Version":
		return 20
	case "Flush":
		return 21
	case "Scan":
		switch opc {
		case memdx.OpRangeScanCreate:
			return 22
		case memdx.OpRangeScanContinue:
			return 23
		case memdx.OpRangeScanCancel:
			return 24
		}
		return 25
	}
	return opUnlisted
}

// spanName is RFC 0067's name of the client's operation name, and its
// index in opNames.
func spanName(name string, opc memdx.OpCode) (string, int) {
	if i := opIndex(name, opc); i != opUnlisted {
		return opNames[i], i
	}
	return snakeCase(name), opUnlisted
}

// snakeCase turns "GetAndLock" into "get_and_lock", for names spanName
// does not list.
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// errorTypes name the sentinels RFC 0058 names (SDK 3 error handling), in
// the order they are tried: the timeouts first (a timeout's cause may
// match another).
var errorTypes = []struct {
	err  error
	name string
}{
	{ErrAmbiguousTimeout, "AmbiguousTimeout"},
	{ErrUnambiguousTimeout, "UnambiguousTimeout"},
	{ErrRequestCanceled, "RequestCanceled"},
	{ErrDocumentNotFound, "DocumentNotFound"},
	{ErrDocumentExists, "DocumentExists"},
	{ErrCasMismatch, "CasMismatch"},
	{ErrDocumentLocked, "DocumentLocked"},
	{ErrDocumentNotLocked, "DocumentNotLocked"},
	{ErrValueTooLarge, "ValueTooLarge"},
	{ErrDurabilityAmbiguous, "DurabilityAmbiguous"},
	{ErrDurabilityImpossible, "DurabilityImpossible"},
	{ErrDurabilityLevelNotAvailable, "DurabilityLevelNotAvailable"},
	{ErrDurableWriteInProgress, "DurableWriteInProgress"},
	{ErrDurableWriteReCommitInProgress, "DurableWriteReCommitInProgress"},
	{ErrPathNotFound, "PathNotFound"},
	{ErrPathMismatch, "PathMismatch"},
	{ErrPathInvalid, "PathInvalid"},
	{ErrPathTooBig, "PathTooBig"},
	{ErrPathTooDeep, "PathTooDeep"},
	{ErrPathExists, "PathExists"},
	{ErrValueTooDeep, "ValueTooDeep"},
	{ErrValueInvalid, "ValueInvalid"},
	{ErrDocumentNotJSON, "DocumentNotJson"},
	{ErrNumberTooBig, "NumberTooBig"},
	{ErrDeltaInvalid, "DeltaInvalid"},
	{ErrXattrUnknownMacro, "XattrUnknownMacro"},
	{ErrXattrInvalidKeyCombo, "XattrInvalidKeyCombo"},
	{ErrXattrUnknownVirtualAttribute, "XattrUnknownVirtualAttribute"},
	{ErrXattrCannotModifyVirtualAttribute, "XattrCannotModifyVirtualAttribute"},
	{ErrXattrInvalidOrder, "XattrInvalidOrder"},
	{ErrXattrInvalidFlagCombo, "XattrInvalidFlagCombo"},
	{ErrDocumentAlreadyAlive, "DocumentAlreadyAlive"},
	{ErrScopeNotFound, "ScopeNotFound"},
	{ErrCollectionNotFound, "CollectionNotFound"},
	{ErrBucketNotFound, "BucketNotFound"},
	{ErrAuthenticationFailure, "AuthenticationFailure"},
	{ErrTemporaryFailure, "TemporaryFailure"},
	{ErrEncodingFailure, "EncodingFailure"},
	{ErrDecodingFailure, "DecodingFailure"},
	{ErrFeatureNotAvailable, "FeatureNotAvailable"},
	{ErrInvalidArgument, "InvalidArgument"},
	{ErrServerFailure, "InternalServerFailure"},
	{ErrNoNodeAvailable, "ServiceNotAvailable"},
}

// errorType is AttributeErrorType's value for err: RFC 0058's name of
// its sentinel, ErrorTypeOther for one without.
func errorType(err error) string {
	for _, e := range errorTypes {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	return ErrorTypeOther
}
