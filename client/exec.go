package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/kvwire/kvwire/conn"
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
// closure. The response fields are written by handle on the connection's
// reader goroutine during Do and read by the caller after Do returns.
type op struct {
	c      *Client
	name   string
	kind   opKind
	coll   *Collection
	key    []byte // aliases the caller's string; never written
	keyStr string
	// Where the op goes: by key, to the active copy (replica 0) or replica
	// n, unless byVbucket or onNode is set. byVbucket: to fixedVb's active
	// node (a range scan's create); scanCfg is then the scan's
	// configuration, encoded into the value per attempt with the
	// collection id resolved for it. onNode: to that node, whatever the
	// topology (a node's statistics, version, flush or ping; a range
	// scan's continue and cancel, to the node holding the scan, with
	// fixedVb the scan's vbucket).
	replica   int
	byVbucket bool
	onNode    *node
	fixedVb   uint16
	scanCfg   *memdx.RangeScanCreate
	scanID    memdx.RangeScanID
	// handler, when set, takes every packet of the op's answer (STAT and
	// RANGE_SCAN_CONTINUE answer with several) on the connection's reader
	// and says whether its status is a result (accepted) rather than a
	// failure to judge.
	handler func(*memdx.Packet) (accepted bool, err error)

	casGiven bool
	// durDefault: a synchronous write whose caller gave no durability
	// timeout; each attempt sends one derived from the time left (prepare).
	durDefault bool
	req        memdx.Request
	timeout    time.Duration
	strategy   retry.Strategy
	// userStrategy adapts a caller's per-operation RetryStrategy
	// (internalStrategy), so that doing so allocates nothing.
	userStrategy strategyAdapter

	// value handling for writes: raw is the caller's value; z its snappy
	// form when worth sending (computed at most once).
	raw      []byte
	z        []byte
	zTried   bool
	zWorth   bool
	baseType memdx.Datatype

	st    retry.State
	route vbmap.RouteState

	handle func(*memdx.Packet) error

	// Last attempt.
	node    *node
	vb      uint16
	opaque  uint32
	status  memdx.Status
	outcome statusOutcome // decideStatus's, for status
	errCtx  memdx.ErrorContext
	// nmvOffer: what became of the config in a NOT_MY_VBUCKET body. The
	// reader recognises a body it can without scanning it (recognise);
	// any other body is copied to nmvBody and offered by the operation
	// (onNotMyVbucket), so that no scan holds up the connection's reader.
	nmvOffer offerResult
	nmvBody  []byte
	errName  string
	errDesc  string
	// accepted: the last response is the operation's result although its
	// status is not SUCCESS (a sub-document status the op takes, or one its
	// handler accepted).
	accepted bool

	// Result of a success.
	value    []byte
	cas      uint64
	flags    uint32
	datatype memdx.Datatype
	token    memdx.MutationToken
	hasToken bool
	counter  uint64
	deleted  bool
	// sd: a LookupIn's or MutateIn's specs and results.
	sd subdocState
}

var opPool = sync.Pool{New: func() any {
	o := &op{}
	o.handle = o.onResponse
	return o
}}

func (c *Client) getOp(name string, kind opKind, coll *Collection, key string) *op {
	o := opPool.Get().(*op)
	o.c, o.name, o.kind, o.coll = c, name, kind, coll
	o.keyStr = key
	o.key = unsafe.Slice(unsafe.StringData(key), len(key))
	return o
}

// maxPooledBuf bounds the scratch buffers (snappy output, NMV config
// body) a pooled op keeps: a larger one, grown by a large value, is dropped
// rather than held by the pool for good.
const maxPooledBuf = 256 << 10

func putOp(o *op) {
	nmv := o.nmvBody[:0]
	z := o.z[:0]
	if cap(nmv) > maxPooledBuf {
		nmv = nil
	}
	if cap(z) > maxPooledBuf {
		z = nil
	}
	h := o.handle
	sd := o.sd.keep()
	*o = op{}
	o.handle, o.nmvBody, o.z, o.sd = h, nmv, z, sd
	opPool.Put(o)
}

// onResponse records the response of an attempt. It runs on the reader
// goroutine; the packet is valid only during the call, so everything kept is
// copied, and the value is copied exactly once, into the caller's result.
func (o *op) onResponse(p *memdx.Packet) error {
	if (p.OpCode == memdx.OpGetK || p.OpCode == memdx.OpGetKQ) && (len(p.Key) > 0 || p.Status == memdx.StatusSuccess) &&
		!o.req.SendsKey(p.Key) {
		// Another request's answer: conn closes the connection.
		return foreignKey(p, o.keyStr)
	}
	o.status = p.Status
	o.opaque = p.Opaque
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
		v, flags, dt, err := decodeGetValue(p, nil)
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
// its status: a NOT_MY_VBUCKET's config (handed to the config loop; the
// operation never parses it), or the error context of any other.
func (o *op) onFailure(p *memdx.Packet) {
	switch p.Status {
	case memdx.StatusNotMyVbucket:
		if res, ok := o.c.recognise(p.Value, o.node.host, "not-my-vbucket"); ok {
			o.nmvOffer = res
		} else {
			o.nmvBody = append(o.nmvBody[:0], p.Value...)
		}
	case memdx.StatusSubdocSuccessDeleted:
	default:
		if ec, ok := memdx.DecodeErrorContext(p.Datatype, p.Value); ok {
			o.errCtx = ec
		}
	}
}

// decodeGetValue decodes a get's success: a copy of its value (inflated
// when compressed), its flags and its datatype (without Snappy). The copy
// goes into into when it has room (the caller's block), else into a slice
// of its own.
// foreignKey is the error of a GETK or GETKQ answer that names another
// key than want, its request's: the server mixed up its answers. It
// matches ErrProtocol, on which conn closes the connection (the request
// then ends with the connection's error, and a read is retried).
func foreignKey(p *memdx.Packet, want string) error {
	return fmt.Errorf("a %s answer names key %q, not its request's %q: %w", p.OpCode, p.Key, want, ErrProtocol)
}

func decodeGetValue(p *memdx.Packet, into []byte) (value []byte, flags uint32, dt memdx.Datatype, err error) {
	flags, err = memdx.DecodeGetFlags(p)
	if err != nil {
		return nil, 0, 0, err
	}
	dt = p.Datatype &^ memdx.DatatypeSnappy
	if p.Datatype.Has(memdx.DatatypeSnappy) {
		value, err = memdx.DecompressSnappy(nil, p.Value, 0)
		if err != nil {
			return nil, 0, 0, err
		}
		return value, flags, dt, nil
	}
	if into == nil || cap(into) < len(p.Value) {
		// Never nil: an empty value is a value (make allocates
		// nothing for 0 bytes).
		into = make([]byte, 0, len(p.Value))
	}
	return append(into[:0], p.Value...), flags, dt, nil
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
	t          *topology
}

// placed is where an attempt goes.
type placed struct {
	t   *topology
	n   *node
	cn  *conn.Conn
	vb  uint16
	cid uint32
}

// execute runs o to completion: route, dispatch, classify, and retry as the
// orchestrator says. It returns nil on success (results are in o) or the
// operation's final error.
func (c *Client) execute(ctx context.Context, o *op) error {
	if err := c.begin(ctx, o, c.clock.Now()); err != nil {
		return err
	}
	var opID uint64
	obs := c.opts.Observer
	if obs != nil {
		opID = c.opIDs.Add(1)
	}
	var lastReason retry.Reason
	retried := false
	for attempt := 0; ; attempt++ {
		pl, nx := c.place(ctx, o, attempt)
		if nx.err != nil {
			return nx.err
		}
		if !nx.done {
			if err := c.waitNext(o, nx); err != nil {
				return err
			}
			lastReason, retried = nx.reason, true
			continue
		}
		var start time.Time
		if obs != nil {
			start = time.Now()
			info := o.attemptInfo(opID, attempt, start, pl.t, lastReason, retried)
			obs.AttemptStart(info)
		}
		opaque, err := pl.cn.DoDeadline(ctx, o.st.Deadline(), &o.req, o.handle)
		if obs != nil {
			info := o.attemptInfo(opID, attempt, start, pl.t, lastReason, retried)
			info.Duration = time.Since(start)
			info.Status = statusOf(o.status)
			info.Opaque = opaque
			obs.AttemptEnd(info, err)
		}
		if o.opaque == 0 {
			o.opaque = opaque
		}
		nx = c.judge(ctx, o, pl, err)
		if nx.done {
			return nil
		}
		if nx.err != nil {
			return nx.err
		}
		if err := c.waitNext(o, nx); err != nil {
			return err
		}
		lastReason, retried = nx.reason, true
	}
}

// begin prepares o's first attempt at now: its deadline (the earlier of
// its timeout and ctx's deadline), its strategy and its retry state. It
// fails when the client is closed.
func (c *Client) begin(ctx context.Context, o *op, now time.Time) error {
	if c.ctx.Err() != nil {
		return newKVError(o, ErrClosed, nil)
	}
	strategy := o.strategy
	if strategy == nil {
		strategy = c.strategy
	}
	o.st.Init(ctx, o.req.OpCode, strategy, c.deadline(ctx, o.timeout, now))
	o.st.SetOperation(o.name)
	if o.onNode != nil && repeatable(o.req.OpCode) {
		o.st.SetIdempotent(true)
	}
	return nil
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
// Options.KVTimeout): the earlier of now + timeout and ctx's deadline.
func (c *Client) deadline(ctx context.Context, timeout time.Duration, now time.Time) time.Time {
	if timeout <= 0 {
		timeout = c.opts.KVTimeout
	}
	if int64(timeout) > c.longestTimeout.Load() {
		c.noteTimeout(timeout)
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
// error.
func (c *Client) place(ctx context.Context, o *op, attempt int) (placed, next) {
	if attempt > 0 && c.ctx.Err() != nil {
		// Closed while this operation was retrying: its connections
		// are gone and will not come back.
		return placed{}, next{err: newKVError(o, ErrClosed, nil)}
	}
	t := c.topo.Load()
	n, vb, reason, err := c.routeOp(t, o)
	var cn *conn.Conn
	if err == nil {
		cn, reason, err = n.pick()
	}
	var cid uint32
	if err == nil && o.onNode == nil && o.coll != nil && !o.coll.isDefault {
		cid, reason, err = c.colls.resolve(ctx, o.st.Deadline(), cn, o.coll)
	}
	if err != nil {
		if reason == retry.ReasonUnknown {
			return placed{}, next{err: newKVError(o, cmp.Or(sentinelOf(err), ErrServerFailure), err)}
		}
		var le *lookupError
		if reason == retry.ReasonKVErrorMapRetryIndicated && errors.As(err, &le) {
			o.st.SetErrorMapEntry(le.outcome.entry)
		}
		return placed{}, next{reason: reason, cause: err, t: t}
	}
	o.node, o.vb = n, vb
	if ferr := o.checkFeatures(cn); ferr != nil {
		return placed{}, next{err: newKVError(o, ErrFeatureNotAvailable, ferr)}
	}
	o.prepare(cn, vb, cid)
	return placed{t: t, n: n, cn: cn, vb: vb, cid: cid}, next{done: true}
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
		return next{reason: reason, cause: err, t: pl.t}
	}
	if o.succeeded() {
		return next{done: true}
	}
	reason, ok := c.classifyStatus(o, pl.t, pl.n, pl.cn)
	if !ok {
		return next{err: c.statusError(o, nil)}
	}
	return next{reason: reason, fromStatus: true, t: pl.t}
}

// waitNext waits as the orchestrator decides for the retry nx and returns
// nil to place the operation again, or its final error: a refusal after a
// status is that status's error, whatever the reason's. A wait after an
// unavailable node or NOT_MY_VBUCKET ends when the topology is replaced (a
// newer config, a node with a connection again: wakeFor); every wait ends
// when the client closes.
func (c *Client) waitNext(o *op, nx next) error {
	wake := wakeFor(nx.t, nx.reason)
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
// (noteUnreachable).
func (c *Client) retryCause(o *op, nx next) error {
	if nx.fromStatus {
		return o.statusErr()
	}
	if nx.reason == retry.ReasonNodeNotAvailable {
		c.noteUnreachable()
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
// error (LOCKED, say, when the strategy gives up); a timeout or a
// cancellation is that.
func (c *Client) waitError(o *op, fromStatus bool, err error) error {
	if fromStatus && errors.Is(err, ErrNotRetried) {
		return c.statusError(o, err)
	}
	return newKVError(o, nil, err)
}

// succeeded reports whether the last attempt's response is the operation's
// result: SUCCESS, or a sub-document status the operation takes as its
// result (onSubdocResponse).
func (o *op) succeeded() bool { return o.status == memdx.StatusSuccess || o.accepted }

// noteTimeout raises longestTimeout to d.
func (c *Client) noteTimeout(d time.Duration) {
	for {
		cur := c.longestTimeout.Load()
		if int64(d) <= cur || c.longestTimeout.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// prepare sets the per-attempt fields of the request.
func (o *op) prepare(cn *conn.Conn, vb uint16, cid uint32) {
	f := cn.Features()
	o.req.Vbucket = vb
	o.req.Collections = f.Has(memdx.FeatureCollections) && o.req.OpCode.HasCollectionKey()
	o.req.CollectionID = cid
	o.status = 0
	o.outcome = statusOutcome{}
	o.opaque = 0
	o.nmvOffer = offerStale
	o.nmvBody = o.nmvBody[:0]
	o.errCtx = memdx.ErrorContext{}
	o.errName, o.errDesc = "", ""
	o.accepted = false
	if o.durDefault {
		o.req.DurabilityTimeout = defaultDurabilityTimeout(o.st.Deadline().Sub(o.c.clock.Now()))
	}
	if o.scanCfg != nil {
		o.scanCfg.CollectionID = cid
		// Checked by Scan before the first attempt: it encodes.
		o.req.Value, _ = memdx.AppendRangeScanCreateValue(o.req.Value[:0], o.scanCfg)
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
// pending for its own, longer default. A write still pending past the
// deadline would hold back the connection's health probe (NOOP is not
// reordered past it under unordered execution) and could get a live
// connection closed.
func defaultDurabilityTimeout(left time.Duration) uint16 {
	ms := (left * 9 / 10).Milliseconds()
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
		o.z = memdx.CompressSnappy(o.z[:0], o.raw)
		o.zWorth = float64(len(o.z)) <= co.MinRatio*float64(len(o.raw))
	}
	return o.zWorth
}

// routeOp finds the node and vbucket of o's next attempt.
func (c *Client) routeOp(t *topology, o *op) (*node, uint16, retry.Reason, error) {
	if t == nil {
		return nil, 0, retry.ReasonNodeNotAvailable, ErrNoNodeAvailable
	}
	switch {
	case o.onNode != nil:
		return o.onNode, o.fixedVb, 0, nil
	case o.byVbucket:
		return c.routeVbucket(t, o)
	}
	if t.ketama != nil {
		// One server takes every key: skip the ring's MD5 (measured 9% of
		// the client's CPU per Get on one memcached).
		i := 0
		if len(t.servers) > 1 {
			i = t.ketama.Server(o.key)
		}
		if i < 0 || i >= len(t.servers) || t.servers[i] == nil {
			return nil, 0, retry.ReasonNodeNotAvailable, ErrNoNodeAvailable
		}
		n := t.servers[i]
		if c.memcached {
			// A memcached server that refuses connections fails its
			// keys at once, as other memcached clients do, rather than
			// retrying until the timeout; its node redials meanwhile.
			if err := n.downErr(); err != nil {
				o.node = n
				return n, 0, retry.ReasonUnknown, err
			}
		}
		return n, 0, 0, nil
	}
	server, vb, err := o.route.Route(t.cfg, o.key, o.replica)
	if err != nil {
		if errors.Is(err, vbmap.ErrReplicaOutOfRange) {
			return nil, 0, retry.ReasonUnknown, err
		}
		return nil, vb, retry.ReasonNodeNotAvailable, err
	}
	n := t.servers[server]
	if n == nil {
		return nil, vb, retry.ReasonNodeNotAvailable, &NodeError{Addr: "server index " + itoa(server), Err: errors.New("no address on network " + c.network)}
	}
	return n, vb, 0, nil
}

// routeVbucket routes an operation addressed to a vbucket (o.fixedVb).
func (c *Client) routeVbucket(t *topology, o *op) (*node, uint16, retry.Reason, error) {
	vb := o.fixedVb
	if t.cfg == nil || t.ketama != nil {
		return nil, vb, retry.ReasonUnknown, fmt.Errorf("%w: %s needs a bucket with vbuckets", ErrFeatureNotAvailable, o.req.OpCode)
	}
	server, err := o.route.RouteVbucket(t.cfg, vb, 0)
	if err != nil {
		return nil, vb, retry.ReasonNodeNotAvailable, err
	}
	n := t.servers[server]
	if n == nil {
		return nil, vb, retry.ReasonNodeNotAvailable, &NodeError{Addr: "server index " + itoa(server), Err: errors.New("no address on network " + c.network)}
	}
	return n, vb, 0, nil
}

// classifyStatus gives the retry reason for a non-success status, as the
// status policy decides (decideStatus), updating the config from a
// NOT_MY_VBUCKET body and the collection cache from UNKNOWN_COLLECTION on
// the way. ok is false when the status is final.
func (c *Client) classifyStatus(o *op, t *topology, n *node, cn *conn.Conn) (retry.Reason, bool) {
	st := o.status
	o.outcome = decideStatus(o.req.OpCode, o.casGiven, st, cn.ErrorMap())
	if st == memdx.StatusNotMyVbucket && t.cfg != nil {
		if o.onNode == nil {
			return c.onNotMyVbucket(o, t, n), true
		}
		// A request addressed to a node cannot go elsewhere: it ends
		// (a scan then creates its vbucket's scan again where the
		// vbucket went). The node's config is news all the same.
		if len(o.nmvBody) > 0 {
			c.offerConfig(o.nmvBody, n.host, "not-my-vbucket")
		}
		return 0, false
	}
	out := o.outcome
	if out.found {
		o.errName, o.errDesc = out.entry.Name, out.entry.Desc
	}
	switch out.reason {
	case retry.ReasonUnknown:
		return 0, false
	case retry.ReasonKVCollectionOutdated:
		if o.coll != nil {
			c.colls.invalidate(o.coll)
		}
	case retry.ReasonKVErrorMapRetryIndicated:
		o.st.SetErrorMapEntry(out.entry)
	}
	return out.reason, true
}

// routeOpPeek routes without changing o's route state.
func (c *Client) routeOpPeek(t *topology, o *op) (*node, uint16, retry.Reason, error) {
	saved := o.route
	defer func() { o.route = saved }()
	return c.routeOp(t, o)
}

func (o *op) statusErr() error {
	return &memdx.StatusError{Status: o.status, OpCode: o.req.OpCode, Opaque: o.opaque,
		Context: o.errCtx.Context, Ref: o.errCtx.Ref}
}

// statusError builds the error of an operation that ended on a status.
func (c *Client) statusError(o *op, cause error) error {
	if cause == nil {
		cause = o.statusErr()
	}
	e := newKVError(o, o.outcome.sentinel, cause)
	if o.outcome.ambiguous {
		e.Ambiguous = true
	}
	return e
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	neg := i < 0
	if neg {
		i = -i
	}
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}
