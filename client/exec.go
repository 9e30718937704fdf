package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/fanout"
	"github.com/kvwire/kvwire/internal/optrace"
	"github.com/kvwire/kvwire/internal/rangescan"
	"github.com/kvwire/kvwire/internal/statuspolicy"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// opKind says how a successful response is decoded.
type opKind uint8

const (
	kindGet        opKind = iota // GET, GAT, GET_LOCKED, GET_REPLICA: flags + value
	kindMutation                 // SET/ADD/REPLACE/DELETE/APPEND/PREPEND: CAS + token
	kindCounter                  // INCREMENT/DECREMENT: value + CAS + token
	kindCas                      // TOUCH, UNLOCK: CAS only
	kindMeta                     // GET_META: deleted flag
	kindNoop                     // NOOP: nothing
	kindScanCreate               // RANGE_SCAN_CREATE: the scan id
	kindLookupIn                 // SUBDOC_MULTI_LOOKUP: per-path results (subdoc.go)
	kindMutateIn                 // SUBDOC_MULTI_MUTATION: CAS + token + values (subdoc.go)
)

// op is one operation from the caller's call to its result. It is pooled;
// handle is bound once per op object so that dispatching allocates no
// closure. The response fields are written by handle on the goroutine
// reading the connection during Do and read by the caller after Do returns.
//
// Its fields are ordered by use (issue 25): those every operation touches
// come first, the response fields the reader writes together, and the state
// only some operations use (range scans, write values, failure details,
// sub-documents) last, so that a plain Get touches as few cache lines as it
// can. reset (putOp) clears every field but the few it keeps, the cold
// ones (opCold) only when the operation may have used them;
// TestOpResetClearsEveryField fails for a field added and not reset.
type op struct {
	opHot
	opCold
}

// opHot holds the fields every operation uses.
type opHot struct {
	c    *Client
	name string
	kind opKind
	// cold: the opCold fields may hold state, because the operation is of
	// another kind than kindGet (getOp), or a Get has a finish step
	// (getThen, getProjected), or an attempt's answer was a failure
	// (recordFailure, classifyStatus). Only then does reset clear
	// them and prepare clear the last attempt's failure details: a plain
	// Get leaves their cache lines alone. The tests check that an
	// operation that did not set it left them clean (checkCold).
	cold   bool
	coll   *Collection
	key    []byte // aliases the caller's string; never written
	keyStr string
	// target is where the op goes: by key (target.Key is key), to the
	// active copy (Replica 0) or a replica; to a vbucket's active node (a
	// range scan's create: scanCfg is then the scan's configuration,
	// encoded into the value per attempt with the collection id resolved
	// for it); or to a node, whatever the topology (a node's statistics,
	// version, flush or ping; a range scan's continue and cancel, to the
	// node holding the scan, with Vbucket the scan's).
	target cluster.Target
	// handler, when set, takes every packet of the op's answer (STAT and
	// RANGE_SCAN_CONTINUE answer with several) on the connection's reader
	// and says whether its status is a result (accepted) rather than a
	// failure to judge.
	handler func(*memdx.Packet) (accepted bool, err error)
	handle  func(*memdx.Packet) error

	casGiven bool
	// barrier: the request is one kv_engine does not reorder under
	// UnorderedExecution (GET_META, NOOP, STAT, VERSION, a range scan's
	// continue and cancel): it is not sent
	// behind a request the server answers only by a bound of its own
	// (pickBarrier). A barrier is a cold op (none is kindGet): execute
	// keeps its prior attempt in a cold field.
	barrier bool
	// noVbucket: the request addresses no vbucket (a node's ping,
	// statistics, version or flush; a key of a memcached bucket): its
	// error names none (KeyValueError.noVbucket).
	noVbucket bool
	// insert: a MutateIn whose doc flags make it an insert (Add), which
	// its opcode does not say (statuspolicy.DecideMutation).
	insert bool
	// durDefault: a synchronous write whose caller gave no durability
	// timeout; each attempt sends one derived from the time left (prepare).
	durDefault bool
	timeout    time.Duration
	strategy   retry.Strategy
	// userStrategy adapts a caller's per-operation RetryStrategy
	// (internalStrategy), so that doing so allocates nothing.
	userStrategy strategyAdapter
	req          memdx.Request

	// Last attempt sent (sent: there was one; until then node and vb are
	// where the last attempt was routed): written by handle on the
	// connection's reader (with trace's server duration), read by the
	// caller after Do returns.
	sent     bool
	node     *cluster.Node
	vb       uint16
	opaque   uint32
	status   memdx.Status
	datatype memdx.Datatype
	// accepted: the last response is the operation's result although its
	// status is not SUCCESS (a sub-document status the op takes, or one its
	// handler accepted).
	accepted bool
	// Result of a success.
	value   []byte
	cas     uint64
	flags   uint32
	outcome statuspolicy.Outcome // statuspolicy.DecideRequest's, for status
	// noXerror: status came on a connection to kv_engine without XERROR,
	// which it sends some statuses remapped (statuspolicy.Request), and
	// may be a lock's; never on a plain memcached connection, nor for a
	// read of a replica copy (classifyStatus).
	noXerror bool

	st    retry.State
	route vbmap.RouteState

	// trace is what the operation shows its observers (optrace.go);
	// parentSpan its options' ParentSpan.
	trace      opTrace
	parentSpan RequestSpan
	// call is the operation of the caller's that the op is a request of
	// (a scan's: scanRequests), nil when the op is one of its own: its
	// attempts are dispatch spans of the call's span, and the meter sees
	// the call, not the op.
	call *optrace.Call
	// copyRead: the op reads one copy for a call that reads several
	// (GetAnyReplica, ...: readCopy, lookupInCopy); the meter records the
	// call's latency (wrapCall), not the op's (optrace.Trace.Part).
	copyRead bool
	// span is optrace.NameOf(spanFor, spanOpc), kept by the pool: an op
	// object serves operations of one name in a row more often than not,
	// and then finds it without a lookup (spanName).
	span    optrace.Name
	spanFor string
	spanOpc memdx.OpCode
}

// opCold holds the fields only some operations use.
type opCold struct {
	// Results of some kinds only.
	token    memdx.MutationToken
	hasToken bool
	counter  uint64
	deleted  bool

	// queued: the attempt of a barrier handed to its connection, which
	// is reported to the observers only once the connection has queued
	// it (Queued): refused unwritten (conn.ErrBoundedAhead), it is no
	// attempt.
	queued queuedAttempt
	// prior: a barrier's last attempt sent, as it was before the
	// placement began another (op.attempt), put back when its connection
	// refuses the new one unwritten (execute). Here, not on execute's
	// stack, so that a Get (not cold, never a barrier) does not clear it
	// at each call.
	prior attemptRecord

	// A barrier's holds (pickBarrier) before this attempt's: how many,
	// and how long in all, for the error of one held to its deadline.
	holds   int
	heldFor time.Duration
	// onHold, when set, is called each time the barrier is held
	// (pickBarrier) with the hold's wait: a scan's cancel held long goes
	// on on its own (scanRequests.Cancel).
	onHold func(wait time.Duration)

	// Range scans.
	scanCfg *memdx.RangeScanCreate
	scanID  memdx.RangeScanID

	// value handling for writes: raw is the caller's value; z its snappy
	// form when worth sending (computed at most once).
	raw      []byte
	z        []byte
	zTried   bool
	zWorth   bool
	baseType memdx.Datatype

	// Failure details of the last attempt.
	errCtx memdx.ErrorContext
	// manifestUID is the manifest uid an UNKNOWN_COLLECTION answer named
	// (hasManifestUID: it named one), for the collection cache.
	manifestUID    uint64
	hasManifestUID bool
	// nmvOffer: what became of the config in a NOT_MY_VBUCKET body. The
	// reader recognises a body it can without scanning it
	// (cluster.Recognise); any other body is copied to nmvBody and offered
	// when the operation judges the answer (cluster.NotMyVbucket), so that
	// no scan holds up the connection's reader.
	nmvOffer cluster.Offer
	nmvBody  []byte
	errName  string
	errDesc  string

	// sd: a LookupIn's or MutateIn's specs and results.
	sd subdocState

	// finish, when set, is the call's last step after a success (GetJSON's
	// decoding, a projected Get's shaping), run by execute before the
	// operation ends: its error is the operation's, which its observers
	// see (a span, a point), as the caller does. Who sets it sets cold:
	// execute reads it only then.
	finish func(o *op) error
}

var opPool = sync.Pool{New: func() any {
	o := &op{}
	o.handle = o.onResponse
	return o
}}

func (c *Client) getOp(name string, kind opKind, coll *Collection, key string) *op {
	o := opPool.Get().(*op)
	o.c, o.name, o.kind, o.coll = c, name, kind, coll
	o.cold = kind != kindGet
	o.keyStr = key
	o.key = unsafe.Slice(unsafe.StringData(key), len(key))
	o.target.Key = o.key
	return o
}

// maxPooledBuf bounds the scratch buffers (snappy output, NMV config
// body) a pooled op keeps: a larger one, grown by a large value, is dropped
// rather than held by the pool for good.
const maxPooledBuf = 256 << 10

func putOp(o *op) {
	o.reset()
	opPool.Put(o)
}

// reset clears every field of the op for its next operation but those the
// pool keeps: the bound handle, the scratch buffers (emptied), the
// sub-document state's storage (subdocState.Keep) and the span name found
// last (spanName). The cold fields are cleared only when the operation may
// have used them (cold).
func (o *op) reset() {
	h := o.handle
	span, spanFor, spanOpc := o.span, o.spanFor, o.spanOpc
	if o.cold {
		o.resetCold()
	} else if checkCold != nil && !checkCold(&o.opCold) {
		panic("client: op " + o.name + " wrote its cold fields without setting cold")
	}
	o.opHot = opHot{}
	o.handle = h
	o.span, o.spanFor, o.spanOpc = span, spanFor, spanOpc
}

func (o *op) resetCold() {
	nmv := o.nmvBody[:0]
	z := o.z[:0]
	if cap(nmv) > maxPooledBuf {
		nmv = nil
	}
	if cap(z) > maxPooledBuf {
		z = nil
	}
	sd := o.sd.Keep()
	o.opCold = opCold{}
	o.nmvBody, o.z, o.sd = nmv, z, sd
}

// checkCold, set by the package's tests (op_reset_test.go: coldClean),
// makes reset check that an operation that did not set cold left its cold
// fields clean, and panic if not: the whole test suite then guards against
// a cold field written without cold, which reset would hand to the next
// operation. Nil outside tests.
var checkCold func(*opCold) bool

// spanName is the operation's optrace.Name, found again only when the
// pooled op last served an operation of another name or opcode. The names
// are the client's constants: the same name is the same bytes, compared
// by address (a name equal in other bytes is only looked up again).
func (o *op) spanName() optrace.Name {
	if unsafe.StringData(o.spanFor) != unsafe.StringData(o.name) || len(o.spanFor) != len(o.name) || o.spanOpc != o.req.OpCode {
		o.span, o.spanFor, o.spanOpc = optrace.NameOf(o.name, o.req.OpCode), o.name, o.req.OpCode
	}
	return o.span
}

// onResponse records the response of an attempt. It runs on the goroutine
// reading the connection; the packet is valid only during the call, so
// everything kept is copied, and the value is copied exactly once, into the
// caller's result.
func (o *op) onResponse(p *memdx.Packet) error {
	if (p.OpCode == memdx.OpGetK || p.OpCode == memdx.OpGetKQ) && (len(p.Key) > 0 || p.Status == memdx.StatusSuccess) &&
		!o.req.SendsKey(p.Key) {
		// Another request's answer: conn closes the connection.
		return memdx.ForeignKey(p, o.keyStr)
	}
	o.status = p.Status
	o.opaque = p.Opaque
	o.trace.SetServer(p)
	if o.handler != nil {
		accepted, err := o.handler(p)
		if o.accepted = accepted; accepted || err != nil {
			return err
		}
	}
	if (o.kind == kindLookupIn || o.kind == kindMutateIn) && subdocDocAccessed(p.Status) {
		return o.onSubdocResponse(p)
	}
	if p.Status != memdx.StatusSuccess {
		o.onFailure(p)
		return nil
	}
	o.cas = p.Cas
	switch o.kind {
	case kindGet:
		v, flags, dt, err := memdx.CopyGetValue(p, nil)
		if err != nil {
			return err
		}
		o.value, o.flags, o.datatype = v, flags, dt
	case kindMutation, kindCounter:
		tok, ok, err := memdx.DecodeMutationToken(p)
		if err != nil {
			return err
		}
		o.token, o.hasToken = tok, ok
		if o.kind == kindCounter {
			v, err := memdx.DecodeCounterValue(p)
			if err != nil {
				return err
			}
			o.counter = v
		}
	case kindMeta:
		m, err := memdx.DecodeGetMeta(p)
		if err != nil {
			return err
		}
		o.deleted = m.Deleted
	case kindScanCreate:
		id, err := memdx.DecodeRangeScanCreateResponse(p)
		if err != nil {
			return err
		}
		o.scanID = id
	}
	return nil
}

// onFailure records what a response whose status is a failure says beside
// its status.
func (o *op) onFailure(p *memdx.Packet) { o.recordFailure(p.Status, p.Datatype, p.Value) }

// recordFailure records what an answer with failure status st says beside
// it, in its body (value, of datatype dt): a NOT_MY_VBUCKET's config
// (handed to the config loop; the operation never parses it), or the
// error context of any other.
func (o *op) recordFailure(st memdx.Status, dt memdx.Datatype, value []byte) {
	o.cold = true
	switch st {
	case memdx.StatusNotMyVbucket:
		if res, ok := o.c.cl.Recognise(value, o.node.Host(), "not-my-vbucket"); ok {
			o.nmvOffer = res
		} else {
			o.nmvBody = append(o.nmvBody[:0], value...)
		}
	case memdx.StatusSubdocSuccessDeleted:
	default:
		if b, ok := memdx.DecodeErrorBody(dt, value); ok {
			if b.HasContext {
				o.errCtx = b.ErrorContext
			}
			if st == memdx.StatusUnknownCollection {
				o.manifestUID, o.hasManifestUID = b.ManifestUID, b.HasManifest
			}
		}
	}
}

// An operation runs in steps, shared by execute (one operation, blocking)
// and by batches (many operations driven from one goroutine, batch.go):
//
//   - begin: the deadline, the strategy and the retry state;
//   - place: route the next attempt and pick its connection (or say why
//     there is none), then prepare the request for it;
//   - send the request (conn.DoDeadline, or conn.Start in a batch);
//   - judge its outcome: the operation's result, its final error, or a
//     retry for a reason;
//   - wait as the orchestrator says (WaitOrWake, or Plan and Resume in a
//     batch), then place again.
//
// Every rule (which statuses retry, what is ambiguous, how deadlines and
// cancellations end an operation) lives in these steps, once.

// next is what follows a step of an operation: done (its last response is
// its result), err (its final error), or a retry for reason after a wait
// (cause: the attempt's error; fromStatus: the reason came from o.status;
// t: the topology the attempt was routed with, whose change ends a wait
// for the reasons a new config resolves).
type next struct {
	done       bool
	err        error
	reason     retry.Reason
	cause      error
	fromStatus bool
	t          *cluster.Topology
}

// placed is where an attempt goes: its route, connection and collection
// id, with the collection-id cache's generation the id belongs to (for
// CollectionIDs.Outdated: an answer about an id cached before the bucket
// was made again says nothing of the new one).
type placed struct {
	cluster.Route
	cn     *conn.Conn
	cid    uint32
	cidGen uint64
}

// execute runs o to completion: route, dispatch, classify, and retry as the
// orchestrator says. It returns nil on success (results are in o) or the
// operation's final error. Its observers (Options.Tracer, Meter, the
// reports) see it begin, each attempt sent and ended, each retry, and its
// end, on this goroutine. The attempts' loop is written here rather than in
// a function of its own: each call between the caller and DoDeadline
// costs a return after the system calls there, which the processor's
// return predictions do not survive (run).
func (c *Client) execute(ctx context.Context, o *op) error {
	now := o.trace.encStart
	if now.IsZero() {
		now = c.clock.Now()
	}
	if err := c.begin(ctx, o, now); err != nil {
		c.observeRefused(ctx, o, err)
		return err
	}
	ob, t := c.obs, &o.trace
	t.Part = o.copyRead
	if o.copyRead && ob.Reported() {
		t.Copies = wrapCopies(ctx) // its call's slow-operation entry (wrapCall)
	}
	if o.call == nil {
		ob.begin(ctx, t, o.spanName(), o.coll, o.parentSpan, now, o.st.Deadline().Sub(now))
	} else {
		ob.BeginPart(&t.Trace, o.call, o.spanName(), now, o.st.Deadline().Sub(now))
	}
	defer ob.unwound(o) // a panic of the caller's code (an Observer, ...) still ends the spans
	ob.Durability(&t.Trace, o.req.Durability)
	var opID uint64
	obs := c.observer
	if obs != nil {
		opID = c.opIDs.Add(1)
	}
	var lastReason retry.Reason
	retried := false
	var err error
	// Each way out of the loop sets err (nil: o's result is in o).
	// refused: the barriers their connection refused unwritten
	// (conn.ErrBoundedAhead), placed again: no attempts, they take no
	// attempt number.
	refused := 0
	for attempt := 0; ; attempt++ {
		if o.barrier {
			o.prior = o.lastAttempt()
		}
		pl, nx := c.place(ctx, o, attempt, nil)
		if nx.err != nil {
			err = nx.err
			break
		}
		if !nx.done {
			if err = c.retry(o, nx); err != nil {
				break
			}
			lastReason, retried = nx.reason, true
			continue
		}
		var start time.Time
		number := attempt - refused
		if obs != nil {
			start = time.Now()
			if !o.barrier {
				info := o.attemptInfo(opID, number, start, pl.Topo, lastReason, retried)
				obs.AttemptStart(info)
			}
		}
		var from *conn.Origin
		if !o.barrier {
			from = ob.Send(&t.Trace, pl.cn, pl.Node.Addr(), ob.SendAt(&t.Trace)) // both inlined
		} else {
			// Reported once its connection has queued it (Queued):
			// one refused unwritten (conn.ErrBoundedAhead) was never
			// sent, and is no attempt.
			// Without an Observer or a tracer there is nothing to
			// report: no hook, and the request may borrow its
			// connection's read role.
			var hook conn.QueuedHook
			if obs != nil || t.Traced() {
				hook = o
				o.queued = queuedAttempt{cn: pl.cn, node: pl.Node.Addr()}
				if obs != nil {
					// Read now: once queued, its answer may be
					// written into o at any time.
					o.queued.info = o.attemptInfo(opID, number, start, pl.Topo, lastReason, retried)
				}
			}
			from = ob.SendBarrier(&t.Trace, ob.SendAt(&t.Trace), hook)
		}
		// A first attempt's send time is the operation's begin, read just
		// now, or the end of its value's compression (unless a typed
		// write's encoding, earlier, began it: its end is older than the
		// routing); a later one's is a reading SendAt made after the wait.
		// Read from the real clock, it is the time the connection's
		// deadline check needs: it reads none of its own.
		from.SentIsNow = c.realClock && (attempt > 0 || o.trace.encStart.IsZero())
		from.Resendable = o.resendable()
		from.Barrier = o.barrier
		if hook := testHookSend.Load(); hook != nil {
			(*hook)(from)
		}
		opaque, derr := pl.cn.DoDeadline(ctx, o.st.Deadline(), &o.req, o.handle, from)
		if o.barrier && derr != nil && errors.Is(derr, conn.ErrBoundedAhead) {
			// A barrier the connection refused, unwritten: a request
			// the server answers only by a bound of its own was queued
			// there since the pick. It was never sent: no attempt, and
			// nothing reported (Queued did not run). Placed again, it
			// is held (pickBarrier), with no retry; the last attempt
			// sent (its status, opaque, node) is still the one its
			// error names, should it end so.
			refused++
			o.restoreAttempt(&o.prior)
			continue
		}
		ended := c.after(from.Sent)
		if derr != nil && t.Traced() && fanout.Lost(ctx) {
			ob.Cancelled(&t.Trace, ended) // another copy's read answered first
		}
		ob.Ended(&t.Trace, pl.cn, opaque, ended)
		if obs != nil && (!o.barrier || o.queued.reported) {
			info := o.attemptInfo(opID, number, start, pl.Topo, lastReason, retried)
			info.Duration = time.Since(start)
			info.Status = statusOf(o.status)
			info.Opaque = opaque
			obs.AttemptEnd(info, derr)
		}
		if o.opaque == 0 {
			o.opaque = opaque
		}
		nx = c.judge(ctx, o, pl, derr)
		if nx.done {
			break // err is nil
		}
		if nx.err != nil {
			err = nx.err
			break
		}
		if err = c.retry(o, nx); err != nil {
			break
		}
		lastReason, retried = nx.reason, true
	}
	if t.Traced() {
		addWrapRetries(ctx, o.st.Attempts()) // a call's operation (wrapCall): its retries are the call's too
	}
	if err != nil && fanout.Lost(ctx) {
		// A read of one copy that another copy's read beat (GetAnyReplica):
		// not the caller's operation, and no failure.
		ob.EndLost(&t.Trace, o.st.Attempts(), ob.EndAt(&t.Trace))
		return err
	}
	if err == nil && o.cold && o.finish != nil { // cold first: a plain Get reads no cold field
		err = o.finish(o)
		t.Waited() // the operation ends after it
	}
	ob.end(t, o.coll, err, o.st.Attempts(), ob.EndAt(&t.Trace))
	return err
}

// queuedAttempt is the attempt of a barrier handed to its connection, as
// its observers are told of it once the connection queued it (Queued):
// what the Observer's AttemptStart gets, its connection and node;
// reported: they were told.
type queuedAttempt struct {
	info     AttemptInfo
	cn       *conn.Conn
	node     string
	reported bool
}

// Queued is a barrier's attempt queued by its connection
// (conn.QueuedHook, on the operation's goroutine): the Observer sees its
// start, and its dispatch span starts. Until then it could still be
// refused unwritten, and be no attempt.
func (o *op) Queued() {
	q := &o.queued
	q.reported = true
	if obs := o.c.observer; obs != nil {
		obs.AttemptStart(q.info)
	}
	o.c.obs.Queued(&o.trace.Trace, q.cn, q.node)
}

// retry waits for the retry nx (waitNext), telling the operation's
// observers of it: an event on its span when the orchestrator retries.
func (c *Client) retry(o *op, nx next) error {
	c.obs.RetryDecided(&o.trace.Trace)
	err := c.waitNext(o, nx)
	if err == nil {
		o.trace.retryPending, o.trace.retryReason = true, nx.reason // its event: place
	}
	o.trace.Waited()
	return err
}

// begin prepares o's first attempt at now: its deadline (the earlier of
// its timeout and ctx's deadline), its strategy and its retry state. It
// fails when ctx is nil (errNilContext) or the client is closed.
func (c *Client) begin(ctx context.Context, o *op, now time.Time) error {
	if ctx == nil {
		return newKVError(o, ErrInvalidArgument, errNilContext)
	}
	if c.ctx.Err() != nil {
		return newKVError(o, ErrClosed, nil)
	}
	strategy := o.strategy
	if strategy == nil {
		strategy = c.strategy
	}
	o.st.Init(ctx, o.req.OpCode, strategy, c.deadline(ctx, o.timeout, now))
	o.st.SetOperation(o.name)
	if o.target.Node != nil && repeatable(o.req.OpCode) {
		o.st.SetIdempotent(true)
	}
	return nil
}

// errNilContext is the cause of the refusal of a call given a nil
// context: an argument like any other, refused (ErrInvalidArgument)
// rather than dereferenced.
var errNilContext = errors.New("nil context: pass context.Background() or a context of yours")

// testHookSend, when set by this package's tests, sees each attempt's
// Origin as it is handed to its connection (conn.Conn.DoDeadline). It is
// atomic: an operation of an earlier test still retrying may read it while
// a test sets it.
var testHookSend atomic.Pointer[func(*conn.Origin)]

// resendable reports whether o's request is sent again, should its
// connection end after it is written, just as it would be were the
// connection found ended before (conn.Origin.Resendable: the connection
// then need not check first that it is still open): an idempotent request
// to whichever node holds its key, under a strategy of the package's that
// retries such a request for either reason (retry.ResendsIdempotent). A
// request to a chosen node (Ping, Stats: sent once) or under a caller's
// strategy, which may tell the two apart, keeps the check.
func (o *op) resendable() bool {
	if !o.st.Idempotent() || o.target.Node != nil {
		return false
	}
	if o.strategy == nil { // the client's, asked once (Client.resends)
		return o.c.resends
	}
	return retry.ResendsIdempotent(o.strategy)
}

// resendsIdempotent is retry.ResendsIdempotent of the strategy an
// operation given s runs under (a State given none runs the default).
func resendsIdempotent(s retry.Strategy) bool {
	if s == nil {
		s = retry.DefaultStrategy()
	}
	return retry.ResendsIdempotent(s)
}

// repeatable reports whether a request RFC 0049's idempotent list leaves
// out may be sent again after it was written without an answer: STAT and
// VERSION read and change nothing, and a second RANGE_SCAN_CANCEL of a
// scan answers KEY_ENOENT, which the scan takes as cancelled. FLUSH and a
// scan's continue (which moves the scan on) may not.
func repeatable(op memdx.OpCode) bool {
	return op == memdx.OpStat || op == memdx.OpVersion || op == memdx.OpRangeScanCancel
}

// sendOnce is the strategy of the requests a caller asks of each node
// (Stats, Version, Flush, Ping): they are sent once and never retried, so
// that each node's outcome, failure included, is what it answered.
var sendOnce retry.Strategy = onceStrategy{}

type onceStrategy struct{}

func (onceStrategy) RetryAfter(retry.Request, retry.Reason) retry.Action { return retry.NoRetry() }

// deadline is the deadline of an operation begun at now with timeout (0:
// Options.KVTimeout; a negative one is refused before, checkTimeout): the
// earlier of now + timeout and ctx's deadline.
func (c *Client) deadline(ctx context.Context, timeout time.Duration, now time.Time) time.Time {
	if timeout <= 0 {
		timeout = c.kvTimeout
	} else if timeout > c.kvTimeout && timeout > c.cl.LongestTimeout() {
		// The cluster knows KVTimeout (its Config's); only a longer
		// timeout is news, and the common case reads none of the
		// cluster's memory for it.
		c.cl.NoteTimeout(timeout)
	}
	d := now.Add(timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	return d
}

// place finds where o's attempt number attempt goes and prepares the
// request for it. next.done says it is placed; otherwise next is a retry
// (no route, no connection, a collection id not known yet) or the final
// error. shared, when not nil, holds the collection-id lookup failures of
// the operations placed with it (a batch's round, all of o's collection):
// the first lookup that fails on a connection is recorded there, and the
// others that would look up on that connection take its outcome instead
// of sending a lookup each (those routed to another node look up there: a
// node's failure is not another's), until a lookup succeeds: the id is
// cached then, for every connection.
func (c *Client) place(ctx context.Context, o *op, attempt int, shared *lookupFailures) (placed, next) {
	if attempt > 0 && c.ctx.Err() != nil {
		// Closed while this operation was retrying: its connections
		// are gone and will not come back. The retry decided is not
		// made: the error does not count it. A barrier its connection
		// refused unsent (conn.ErrBoundedAhead) is placed again with
		// no retry decided: there is none to take off, and the retries
		// made before it still count.
		if o.trace.retryPending {
			o.st.RetryNotSent()
		}
		return placed{}, next{err: newKVError(o, ErrClosed, nil)}
	}
	if o.trace.retryPending {
		// The retry goes ahead (it counts in o.st.Attempts()): its
		// event, as decided (RetryDecided's time).
		o.trace.retryPending = false
		c.obs.Retried(&o.trace.Trace, retryReasonOf(o.trace.retryReason))
	}
	r, reason, err := c.cl.Route(&o.route, &o.target)
	if !o.sent {
		// Named by the error should this attempt not be sent either (its
		// node has no connection, say); once one was sent, the error
		// describes that one (attempt).
		o.node, o.vb = r.Node, r.Vbucket
	}
	if o.target.Node == nil && r.Topo != nil && r.Topo.Ketama() {
		o.noVbucket = true // a memcached bucket's key: no vbucket
	}
	if merr := c.memcachedBucketRefusal(o, r.Topo); merr != nil {
		return placed{}, next{err: newKVError(o, ErrFeatureNotAvailable, merr)}
	}
	var cn *conn.Conn
	if err == nil {
		if !o.barrier {
			cn, reason, err = r.Node.Pick()
		} else {
			var final error // held until the deadline, or ctx ended
			if cn, reason, err, final = c.pickBarrier(ctx, o, r.Node); final != nil {
				return placed{}, next{err: final}
			}
		}
	}
	var cid uint32
	var cidGen uint64
	if err == nil && o.target.Node == nil && o.coll != nil && !o.coll.isDefault {
		if f := shared.on(cn); f != nil {
			reason, err = f.reason, f.err
		} else {
			var waited bool
			cid, cidGen, waited, reason, err = c.cl.Collections().ID(ctx, o.st.Deadline(), cn, o.coll.scope, o.coll.name, o.coll.path)
			if le := (*cluster.LookupError)(nil); errors.As(err, &le) && le.Outcome.ConnInvalid {
				// The lookup's connection: a caller that waited for
				// another's lookup has its own on another.
				c.dropInvalidated(le.Conn(), le.Outcome.Entry.Status)
			}
			if waited {
				// A lookup, perhaps another operation's that this
				// one waited for: the send time is read anew
				// (SendAt), for the connection's deadline check
				// too (conn.Origin.SentIsNow).
				o.trace.Waited()
			}
			switch {
			case shared == nil:
			case err != nil:
				*shared = append(*shared, lookupFailure{cn: cn, reason: reason, err: err})
			case waited && len(*shared) > 0:
				// The id is cached now, for every connection:
				// the round's failures no longer hold its keys.
				*shared = (*shared)[:0]
			}
		}
	}
	if err != nil {
		if re := (*conn.RequestError)(nil); errors.As(err, &re) &&
			(errors.Is(re.Err, context.DeadlineExceeded) || errors.Is(re.Err, context.Canceled)) &&
			(reason == retry.ReasonUnknown || ctx.Err() != nil || !c.clock.Now().Before(o.st.Deadline())) {
			// A collection-id lookup (sent, held or another's waited
			// for) that this operation's own deadline or ctx ended: its
			// end, as judge says for an attempt, not a retry for a
			// socket that was fine. The operation was not sent.
			if ctx.Err() == context.Canceled {
				return placed{}, next{err: newKVError(o, ErrRequestCanceled, err)}
			}
			return placed{}, next{err: newKVError(o, nil, o.st.TimeoutError(err))}
		}
		if reason == retry.ReasonUnknown {
			return placed{}, next{err: newKVError(o, cmp.Or(sentinelOf(err), ErrServerFailure), err)}
		}
		var le *cluster.LookupError
		if reason == retry.ReasonKVErrorMapRetryIndicated && errors.As(err, &le) {
			o.st.SetErrorMapEntry(le.Outcome.Entry)
		}
		return placed{}, next{reason: reason, cause: err, t: r.Topo}
	}
	if ferr := o.checkFeatures(cn); ferr != nil {
		return placed{}, next{err: newKVError(o, ErrFeatureNotAvailable, ferr)}
	}
	o.attempt(r.Node, r.Vbucket)
	o.prepare(cn, r.Vbucket, cid)
	return placed{Route: r, cn: cn, cid: cid, cidGen: cidGen}, next{done: true}
}

// pickBarrier is Pick for an operation whose request is a barrier in
// kv_engine under UnorderedExecution (o.barrier: not is_reorder_supported)
// to node n: it runs only once every earlier request on its connection
// has finished, and no later one starts before it is done. Sent behind a
// request the server answers only by a bound of its own (a synchronous
// write waiting for replication, by its durability timeout; a range
// scan's continue), it would wait for that request, and every later
// request on the connection (plain Gets) would wait with it: the write's
// latency would stall the node's traffic, and the operation time out on
// a healthy node. It goes instead on a connection of n free of them
// (cluster.Node.PickBarrier); when every connection has one, it is held
// here, unsent, until one is free (its requests answered), or the
// shortest of their bounds has passed, or n dials a connection anew, and
// goes then (or is held again); or until n leaves
// the config (Pick then says so: the operation is routed again); or until its own
// deadline, when it fails with a timeout saying it was held (final), or
// until ctx ends. cn, reason and err are otherwise Pick's. Only barriers
// come here.
func (c *Client) pickBarrier(ctx context.Context, o *op, n *cluster.Node) (cn *conn.Conn, reason retry.Reason, err, final error) {
	var heldAt time.Time
	for held := false; ; held = true {
		cn, hold, reason, err := n.PickBarrier()
		if cn != nil || err != nil {
			if held {
				// The send time is read anew (SendAt), for the
				// connection's deadline check too.
				o.trace.Waited()
				o.holds++
				o.heldFor += c.clock.Now().Sub(heldAt)
			}
			return cn, reason, err, nil
		}
		now := c.clock.Now()
		if !held {
			heldAt = now
		}
		if o.onHold != nil {
			o.onHold(hold.Wait)
		}
		left := o.st.Deadline().Sub(now)
		if left > 0 {
			switch hold.Sleep(c.clock, min(hold.Wait, left), ctx.Done(), c.ctx.Done()) {
			case cluster.HoldChanged:
				// Free, a connection dialed anew, or the node left the
				// config (Pick then says so, and the operation is
				// routed again).
				continue
			case cluster.HoldElapsed:
				if hold.Wait < left {
					continue // the bound has passed: the request is answered, or due
				}
			case cluster.HoldStopped:
				if c.ctx.Err() != nil {
					return nil, 0, nil, newKVError(o, ErrClosed, nil)
				}
				if ctx.Err() == context.Canceled {
					return nil, 0, nil, newKVError(o, ErrRequestCanceled, c.heldError(o, n, hold, now, heldAt, ctx.Err()))
				}
			}
		}
		return nil, 0, nil, newKVError(o, nil, o.st.TimeoutError(c.heldError(o, n, hold, now, heldAt, context.DeadlineExceeded)))
	}
}

// heldError is the error of a barrier held (pickBarrier) since heldAt, not
// sent, until cause (its deadline, its context) ended it; h is the last
// hold, seen at seen. The time held counts the operation's earlier holds
// too (before earlier attempts, or before it was routed again).
func (c *Client) heldError(o *op, n *cluster.Node, h cluster.BarrierHold, seen, heldAt time.Time, cause error) error {
	now := c.clock.Now()
	due := max(h.Wait-now.Sub(seen), 0)
	last := now.Sub(heldAt)
	held := fmt.Sprintf("held %v, not sent", last.Round(time.Millisecond))
	if o.holds > 0 {
		held = fmt.Sprintf("held %v in all, %d times (the last %v), this attempt not sent",
			(o.heldFor + last).Round(time.Millisecond), o.holds+1, last.Round(time.Millisecond))
	}
	return &conn.RequestError{Op: o.req.OpCode, Addr: n.Addr(), Err: fmt.Errorf(
		"%w: %s: every connection to the node has a request in flight that the server answers only by a bound of its own (a synchronous write waiting for replication, or a range scan's continue), the earliest due in %v; %s is not reordered past those (a barrier under unordered execution): sent, it would have waited for them and held every later request on the connection",
		cause, held, due.Round(time.Millisecond), o.req.OpCode)}
}

// lookupFailure is a collection-id lookup's failure on cn (reason, err:
// ID's) that the operations placed after it on cn share (place).
type lookupFailure struct {
	cn     *conn.Conn
	reason retry.Reason
	err    error
}

// lookupFailures are a batch round's lookup failures, one per connection
// at most (a round's keys go to a few nodes).
type lookupFailures []lookupFailure

// on returns the failure recorded for cn, nil when none is (or fs is nil).
func (fs *lookupFailures) on(cn *conn.Conn) *lookupFailure {
	if fs == nil {
		return nil
	}
	for i := range *fs {
		if (*fs)[i].cn == cn {
			return &(*fs)[i]
		}
	}
	return nil
}

// judge decides what follows an attempt placed at pl that ended with err
// (DoDeadline's, or a started request's Result): the result, the final
// error, or a retry.
func (c *Client) judge(ctx context.Context, o *op, pl placed, err error) next {
	if err != nil {
		var re *conn.RequestError
		if !errors.As(err, &re) {
			// The response arrived but did not decode: a server bug
			// or a corrupt stream. Not retried. A success status means
			// the server applied the request: for a mutation the
			// error must say so (ambiguous), never "not applied".
			if o.succeeded() {
				o.st.MarkInDoubt()
			}
			return next{err: newKVError(o, ErrServerFailure, err)}
		}
		if !re.Written && errors.Is(re.Err, memdx.ErrInvalidRequest) {
			// The request cannot be encoded (a durability level
			// out of range, a key too long): no retry can help.
			return next{err: newKVError(o, ErrInvalidArgument, err)}
		}
		if re.Written {
			o.st.MarkInDoubt()
		}
		if pe := (*conn.ProtocolError)(nil); re.Written && errors.As(re.Err, &pe) && pe.AnswerTooLarge(re.Opaque) {
			// The answer is longer than the client reads (memcached
			// -I over 20 MiB): a resend would get it again.
			return next{err: newKVError(o, ErrValueTooLarge, err)}
		}
		if errors.Is(re.Err, context.DeadlineExceeded) || errors.Is(re.Err, context.Canceled) {
			if ctx.Err() == context.Canceled {
				return next{err: newKVError(o, ErrRequestCanceled, err)}
			}
			return next{err: newKVError(o, nil, o.st.TimeoutError(err))}
		}
		reason := retry.ReasonSocketNotAvailable
		if re.Written {
			reason = retry.ReasonSocketClosedWhileInFlight
		}
		return next{reason: reason, cause: err, t: pl.Topo}
	}
	if o.succeeded() {
		return next{done: true}
	}
	reason, ok := c.classifyStatus(o, pl)
	if !ok {
		return next{err: c.statusError(o, nil)}
	}
	return next{reason: reason, fromStatus: true, t: pl.Topo}
}

// waitNext waits as the orchestrator decides for the retry nx and returns
// nil to place the operation again, or its final error: a refusal after a
// status is that status's error, whatever the reason's. A wait after an
// unavailable node or NOT_MY_VBUCKET ends when the topology is replaced (a
// newer config, a node with a connection again: Topology.Wake); every wait ends
// when the client closes.
func (c *Client) waitNext(o *op, nx next) error {
	wake := nx.t.Wake(nx.reason)
	if wake == nil {
		// Any other wait ends when the client closes (the topology's
		// channel is closed then too).
		wake = c.ctx.Done()
	}
	err := c.orch.WaitOrWake(&o.st, nx.reason, c.retryCause(o, nx), wake)
	if err == nil {
		return nil
	}
	return c.waitError(o, nx.fromStatus, err)
}

// planNext is waitNext's decision without the wait, for a caller that
// waits itself (a batch); resumeNext ends that wait (woken: by the
// topology's replacement or the client closing; ctxErr: by the operation's
// context) with what waitNext would have returned.
func (c *Client) planNext(o *op, nx next) retry.Plan {
	return c.orch.Plan(&o.st, nx.reason, c.retryCause(o, nx))
}

// retryCause is the error the retry nx is decided on: the status's after a
// status, else the attempt's. A retry for an unavailable node is noted
// (cluster.NodeUnavailable).
func (c *Client) retryCause(o *op, nx next) error {
	if nx.fromStatus {
		return o.statusErr()
	}
	if nx.reason == retry.ReasonNodeNotAvailable {
		c.cl.NodeUnavailable()
	}
	return nx.cause
}

func (c *Client) resumeNext(o *op, nx next, p retry.Plan, woken bool, ctxErr error) error {
	err := c.orch.Resume(&o.st, p, woken, ctxErr)
	if err == nil {
		return nil
	}
	return c.waitError(o, nx.fromStatus, err)
}

// waitError is the final error of an operation whose retry the
// orchestrator ended with err: a refusal after a status is that status's
// error (LOCKED, say, when the strategy gives up); a refusal after the
// client closed is ErrClosed; a timeout or a cancellation is that.
func (c *Client) waitError(o *op, fromStatus bool, err error) error {
	if fromStatus && errors.Is(err, ErrNotRetried) {
		return c.statusError(o, err)
	}
	if !fromStatus && errors.Is(err, ErrNotRetried) && c.ctx.Err() != nil {
		// An attempt that Close ended (its connection closed under
		// it) and that is not retried (sent once: Ping, Stats): the
		// client closed, as for an operation whose retry finds it
		// closed. Ambiguity is kept (o.st).
		return newKVError(o, ErrClosed, err)
	}
	return newKVError(o, nil, err)
}

// succeeded reports whether the last attempt's response is the operation's
// result: SUCCESS, or a sub-document status the operation takes as its
// result (onSubdocResponse).
func (o *op) succeeded() bool { return o.status == memdx.StatusSuccess || o.accepted }

// attempt begins an attempt of o that is placed, on a connection to node
// for vbucket vb, and sent next: whatever the last attempt sent said
// (status, opaque, error context, error-map entry, NOT_MY_VBUCKET body)
// is forgotten, so that the fields of o an error reports (newKVError) are
// those of one attempt, the last one sent. An attempt that is not sent
// (place fails) leaves them as they are.
func (o *op) attempt(node *cluster.Node, vb uint16) {
	o.node, o.vb, o.sent = node, vb, true
	o.status = 0
	o.outcome = statuspolicy.Outcome{}
	o.opaque = 0
	if o.cold {
		o.nmvOffer = cluster.OfferStale
		o.nmvBody = o.nmvBody[:0]
		o.errCtx = memdx.ErrorContext{}
		o.manifestUID, o.hasManifestUID = 0, false
		o.errName, o.errDesc = "", ""
	}
	o.accepted = false
}

// attemptRecord is what attempt clears or sets of the last attempt sent:
// a barrier its connection refused unwritten puts it back (execute), since
// the attempt begun for it was never sent.
type attemptRecord struct {
	sent           bool
	node           *cluster.Node
	vb             uint16
	opaque         uint32
	status         memdx.Status
	accepted       bool
	outcome        statuspolicy.Outcome
	nmvOffer       cluster.Offer
	nmvBody        []byte
	errCtx         memdx.ErrorContext
	manifestUID    uint64
	hasManifestUID bool
	errName        string
	errDesc        string
}

// lastAttempt returns o's record of its last attempt, for restoreAttempt.
func (o *op) lastAttempt() attemptRecord {
	return attemptRecord{sent: o.sent, node: o.node, vb: o.vb, opaque: o.opaque, status: o.status,
		accepted: o.accepted, outcome: o.outcome, nmvOffer: o.nmvOffer, nmvBody: o.nmvBody,
		errCtx: o.errCtx, manifestUID: o.manifestUID, hasManifestUID: o.hasManifestUID,
		errName: o.errName, errDesc: o.errDesc}
}

// restoreAttempt undoes attempt: o's last attempt is r's again (nmvBody's
// bytes are still there: attempt only shortened it, and no answer came).
func (o *op) restoreAttempt(r *attemptRecord) {
	o.sent, o.node, o.vb, o.opaque, o.status = r.sent, r.node, r.vb, r.opaque, r.status
	o.accepted, o.outcome, o.nmvOffer, o.nmvBody = r.accepted, r.outcome, r.nmvOffer, r.nmvBody
	o.errCtx, o.manifestUID, o.hasManifestUID = r.errCtx, r.manifestUID, r.hasManifestUID
	o.errName, o.errDesc = r.errName, r.errDesc
}

// prepare sets the per-attempt fields of the request of an attempt begun
// (attempt) and placed on cn.
func (o *op) prepare(cn *conn.Conn, vb uint16, cid uint32) {
	f := cn.Features()
	o.req.Vbucket = vb
	o.req.Collections = f.Has(memdx.FeatureCollections) && o.req.OpCode.HasCollectionKey()
	o.req.CollectionID = cid
	if o.durDefault {
		o.req.DurabilityTimeout = defaultDurabilityTimeout(o.st.Deadline().Sub(o.c.clock.Now()))
	}
	if o.scanCfg != nil {
		o.scanCfg.CollectionID = cid
		if s := o.scanCfg.Snapshot; s != nil { // a copy of the scan's, this create's own
			s.TimeoutMs = rangescan.SnapshotWait(o.st.Deadline().Sub(o.c.clock.Now()))
		}
		// Checked by Scan before the first attempt: it encodes.
		o.req.Value, _ = memdx.AppendRangeScanCreateValue(o.req.Value[:0], o.scanCfg)
	}
	if o.req.OpCode == memdx.OpRangeScanContinue {
		// The server ends the continue well before this attempt's deadline
		// (rangescan.ContinueTimeLimit), and the connection knows when
		// (conn's answerBy: its health probe does not wait behind it).
		rangescan.SetContinueTimeLimit(&o.req, o.st.Deadline().Sub(o.c.clock.Now()))
	}
	if o.raw != nil {
		o.req.Value = o.raw
		o.req.Datatype = o.baseType
		if f.Has(memdx.FeatureSnappy) && o.compress() {
			o.req.Value = o.z
			o.req.Datatype |= memdx.DatatypeSnappy
		}
		if !f.Has(memdx.FeatureJSON) {
			o.req.Datatype &^= memdx.DatatypeJSON
		}
	}
}

// defaultDurabilityTimeout is the durability timeout sent with a
// synchronous write whose caller set none: 90% of the time the operation has
// left (in ms, 1 to 65534), so that the server ends the write with
// SYNC_WRITE_AMBIGUOUS before the client's deadline rather than keeping it
// pending for its own, longer default. A pending write holds back the
// connection's health probe (NOOP is not reordered past it under unordered
// execution): conn waits for the durability timeout sent before it probes
// behind the write (conn's package doc, Health), so the shorter, the
// sooner a node that stopped answering is found.
//
// 90% is left - left/10, not left*9/10, whose product overflows for a
// timeout over some 32 years (a caller's "no timeout") and would ask for
// 1 ms.
func defaultDurabilityTimeout(left time.Duration) uint16 {
	ms := (left - left/10).Milliseconds()
	return uint16(min(max(ms, 1), math.MaxUint16-1))
}

// checkFeatures refuses a request that needs what the node did not grant:
// frame infos need AltRequests, durability SyncReplication, preserving the
// expiry PreserveTTL.
func (o *op) checkFeatures(cn *conn.Conn) error {
	f := cn.Features()
	if o.req.Durability != memdx.DurabilityNone &&
		!(f.Has(memdx.FeatureSyncReplication) && f.Has(memdx.FeatureAltRequests)) {
		return errors.New("synchronous durability needs a server with SyncReplication")
	}
	if o.req.PreserveTTL && !(f.Has(memdx.FeaturePreserveTTL) && f.Has(memdx.FeatureAltRequests)) {
		return errors.New("PreserveExpiry needs a server with PreserveTtl")
	}
	if o.req.OpCode == memdx.OpRangeScanCreate && !f.Has(memdx.FeatureJSON) {
		return errors.New("range scans need a server that negotiated JSON")
	}
	return nil
}

// compress decides once whether the value is worth sending compressed.
func (o *op) compress() bool {
	co := &o.c.opts.Compression
	if co.Disabled || len(o.raw) < co.MinSize {
		return false
	}
	if !o.zTried {
		o.zTried = true
		start := o.c.clock.Now()
		o.z = memdx.CompressSnappy(o.z[:0], o.raw)
		o.zWorth = float64(len(o.z)) <= co.MinRatio*float64(len(o.raw))
		o.c.obs.Encoded(&o.trace.Trace, start, o.c.clock.Now())
	}
	return o.zWorth
}

// classifyStatus gives the retry reason for a non-success status of an
// attempt placed at pl, as the status policy decides (statuspolicy.DecideRequest),
// handing a NOT_MY_VBUCKET to the cluster and updating the collection
// cache from UNKNOWN_COLLECTION on the way. ok is false when the status is
// final.
func (c *Client) classifyStatus(o *op, pl placed) (retry.Reason, bool) {
	st := o.status
	// A plain memcached connection negotiates nothing, but no kv_engine
	// remaps its statuses: it is not one "without XERROR". Nor is a read
	// of a replica copy, for what noXerror decides: no lock reaches a
	// replica (locks are not replicated), so its TMPFAIL is no
	// locked_tmpfail.
	o.noXerror = !pl.cn.Memcached() && !pl.cn.Features().Has(memdx.FeatureXerror) && o.target.Replica == 0
	o.outcome = statuspolicy.DecideRequest(statuspolicy.Request{Op: o.req.OpCode, CasGiven: o.casGiven,
		NotInsert: o.kind == kindMutateIn && !o.insert, NoXerror: o.noXerror}, st, pl.cn.ErrorMap())
	if st == memdx.StatusNotMyVbucket && pl.Topo.Config() != nil {
		nmv := cluster.NMV{Offer: o.nmvOffer, Body: o.nmvBody}
		o.nmvBody = o.nmvBody[:0]
		if o.target.Node != nil {
			// A request addressed to a node cannot go elsewhere: it
			// ends (a scan then creates its vbucket's scan again where
			// the vbucket went). The node's config is news all the same.
			if len(nmv.Body) > 0 {
				c.cl.Offer(nmv.Body, pl.Node.Host(), "not-my-vbucket")
			}
			return 0, false
		}
		switch c.cl.NotMyVbucket(pl.Route, nmv, &o.route, &o.target) {
		case cluster.NMVMoved:
			o.st.MarkRouteChanged()
		case cluster.NMVAwaitConfig:
			o.st.MarkAwaitWake()
		}
		return retry.ReasonKVNotMyVbucket, true
	}
	out := o.outcome
	if out.Found {
		o.cold = true
		o.errName, o.errDesc = out.Entry.Name, out.Entry.Desc
	}
	if out.ConnInvalid {
		c.dropInvalidated(pl.cn, st)
	}
	switch out.Reason {
	case retry.ReasonUnknown:
		return 0, false
	case retry.ReasonKVCollectionOutdated:
		if o.coll != nil && !o.coll.isDefault {
			// Not when the id cached is newer than the one sent, or
			// than the node's manifest, or the one sent was cached
			// before the bucket was made again (Outdated).
			c.cl.Collections().Outdated(o.coll.path, pl.cid, pl.cidGen, o.manifestUID, o.hasManifestUID)
		}
	case retry.ReasonKVErrorMapRetryIndicated:
		o.st.SetErrorMapEntry(out.Entry)
	}
	return out.Reason, true
}

// dropInvalidated ends cn, whose node answered st, a status its error
// map marks "conn-state-invalidated" or "special-handling"
// (statuspolicy.Outcome.ConnInvalid): RFC 0013 says the connection is no
// longer valid and must be dropped. Its requests in flight end as on any
// lost connection (a mutation's error is then ambiguous), and the node's
// pool dials a new one. Abort, not Close: Close waits for the
// connection's goroutines, which may be waiting for this caller, and
// Abort starts none.
func (c *Client) dropInvalidated(cn *conn.Conn, st memdx.Status) {
	select {
	case <-cn.Done():
		return
	default:
	}
	c.opts.Logger.Warn("kvwire: dropping a connection: the node's error map says its state is no longer valid",
		"node", cn.Addr(), "conn", cn.ID(), "status", st)
	cn.Abort(&cluster.ConnInvalidatedError{Err: fmt.Errorf("the node answered %s, which its error map says leaves the connection invalid", st)})
}

func (o *op) statusErr() error {
	return &memdx.StatusError{Status: o.status, OpCode: o.req.OpCode, Opaque: o.opaque,
		Context: o.errCtx.Context, Ref: o.errCtx.Ref}
}

// statusNote is what status, answered to opc (on a connection without
// XERROR: noXerror; lockTmpFail: the status policy read this TMPFAIL as a
// lock), likely stands for when that is not what the status's name says,
// for the error's message; "" when it says it. kv_engine answers TMPFAIL
// for a lock: Connection::remapErrorCode gives a connection without XERROR
// locked_tmpfail (GET_LOCKED of a locked document, a sub-document command
// on one given no CAS, DELETE of one and UNLOCK_KEY given another CAS) and
// not_locked as TMPFAIL (one with XERROR gets LOCKED and NOT_LOCKED), and
// KVBucket::unlockKey before 7.6, which had no NOT_LOCKED, answers TMPFAIL
// for a document that is not locked.
func statusNote(opc memdx.OpCode, status memdx.Status, noXerror, lockTmpFail bool) string {
	if status != memdx.StatusTmpFail {
		return ""
	}
	if opc == memdx.OpUnlockKey {
		if noXerror {
			return "Couchbase Server before 7.6 answers UNLOCK_KEY so for a document that is not locked;" +
				" to a connection without XERROR it also answers so for a lock held with another CAS"
		}
		return "Couchbase Server before 7.6 answers UNLOCK_KEY so for a document that is not locked"
	}
	if !lockTmpFail {
		return ""
	}
	const lockNote = " so to a connection without XERROR, though it may also be a temporary failure"
	switch opc {
	case memdx.OpGetLocked:
		return "Couchbase Server answers GET_LOCKED of a locked document" + lockNote
	case memdx.OpSubdocMultiLookup, memdx.OpSubdocMultiMutation:
		return "Couchbase Server answers a sub-document command given no CAS on a locked document" + lockNote
	case memdx.OpDelete:
		return "Couchbase Server answers DELETE of a locked document given another CAS" + lockNote
	}
	return "Couchbase Server answers a command on a locked document" + lockNote
}

// statusError builds the error of an operation that ended on a status.
func (c *Client) statusError(o *op, cause error) error {
	if cause == nil {
		cause = o.statusErr()
	}
	e := newKVError(o, o.outcome.Sentinel, cause)
	if o.outcome.Ambiguous {
		e.Ambiguous = true
	}
	return e
}
