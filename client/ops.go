package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// MaxKeyLength is the longest document key Couchbase Server and memcached
// accept (in bytes, without the collection prefix) in the default
// collection; MaxCollectionKeyLength is the longest in any other.
const MaxKeyLength = 250

// MaxCollectionKeyLength is the longest document key Couchbase Server
// accepts in a collection other than the default one (in bytes, without
// the collection prefix): kv_engine leaves room for the longest prefix
// (MaxCollectionsLogicalKeyLen), so that 246 bytes fit whatever the
// collection's id.
const MaxCollectionKeyLength = 246

// Options of the operations: one type per operation, holding only what that
// operation uses. A nil pointer means every default. Timeout overrides the
// client's KVTimeout (the context's deadline still wins when earlier); 0
// means KVTimeout, and a negative Timeout (or DurabilityTimeout) is
// refused before anything is sent, with ErrInvalidArgument naming it;
// RetryStrategy overrides the client's strategy for this operation;
// ParentSpan is the span the operation's span goes under when
// Options.Tracer records (else the context's, ContextWithParentSpan).

// GetOptions are the options of Get.
type GetOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
	// Project, for Get only, reads just these sub-document paths ("name",
	// "address.city", "tags[0]") and returns them as one JSON object
	// shaped like the document: {"address":{"city":"Paris"}} for
	// "address.city" (Flags say JSON). It is built on LookupIn, as gocb's
	// is: up to MaxSubdocSpecs paths are read as one GetSpec each, more
	// by reading the whole body and picking the paths out. A path the
	// document does not have is left out; any other path error fails the
	// Get. An array index keeps the element, not its position:
	// "tags[2]" gives {"tags":[<element 2>]}. The object is JSON built by
	// kvwire from the server's JSON values (a Transcoder cannot address
	// paths); GetResult.ContentAs decodes it with the client's Transcoder,
	// as for any Get.
	Project []string
}

// GetAndTouchOptions are the options of GetAndTouch.
type GetAndTouchOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
}

// GetAndLockOptions are the options of GetAndLock.
type GetAndLockOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
}

// UnlockOptions are the options of Unlock.
type UnlockOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
}

// TouchOptions are the options of Touch.
type TouchOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
}

// ExistsOptions are the options of Exists.
type ExistsOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
}

// GetReplicaOptions are the options of GetAnyReplica and GetAllReplicas;
// they apply to the read of each copy.
type GetReplicaOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
}

// UpsertOptions are the options of Upsert (and of UpsertJSON, UpsertString
// and UpsertValue, which set Flags and JSON from the value's format).
type UpsertOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
	// Cas, when not 0, makes the write conditional on the document's
	// current CAS; a mismatch fails with ErrCasMismatch.
	Cas uint64
	// Expiry is the document's time to live (0: none; a negative one is
	// refused, ErrInvalidArgument). Durations over 30 days are sent as an
	// absolute time, as the server requires.
	Expiry time.Duration
	// PreserveExpiry keeps the expiry of a document that already exists
	// (the server needs PreserveTtl; Expiry then applies only to a
	// document the write creates).
	PreserveExpiry bool
	// Flags are the document's flags, stored with it and returned by Get.
	// 0 means the Couchbase common flags of the value's format (see
	// CommonFlagsBinary) on couchbase:// and couchbases://, and 0 on
	// memcached://; any other value is written as given.
	Flags uint32
	// JSON says the value is JSON: the JSON datatype bit (when the server
	// negotiated JSON) and, when Flags is 0 on a Couchbase bucket,
	// CommonFlagsJSON.
	JSON bool
	// Durability makes the write synchronous; DurabilityTimeout bounds it
	// on the server (0: 90% of the time the operation has left, sent with
	// each attempt, so that the server answers before the client's
	// deadline; without Durability it is not sent).
	Durability        DurabilityLevel
	DurabilityTimeout time.Duration
}

// InsertOptions are the options of Insert (and of InsertJSON and
// InsertValue). The fields mean what UpsertOptions' do.
type InsertOptions struct {
	Timeout           time.Duration
	RetryStrategy     RetryStrategy
	ParentSpan        RequestSpan
	Expiry            time.Duration
	Flags             uint32
	JSON              bool
	Durability        DurabilityLevel
	DurabilityTimeout time.Duration
}

// ReplaceOptions are the options of Replace (and of ReplaceJSON and
// ReplaceValue). The fields mean what UpsertOptions' do.
type ReplaceOptions struct {
	Timeout           time.Duration
	RetryStrategy     RetryStrategy
	ParentSpan        RequestSpan
	Cas               uint64
	Expiry            time.Duration
	PreserveExpiry    bool
	Flags             uint32
	JSON              bool
	Durability        DurabilityLevel
	DurabilityTimeout time.Duration
}

// RemoveOptions are the options of Remove. The fields mean what
// UpsertOptions' do.
type RemoveOptions struct {
	Timeout           time.Duration
	RetryStrategy     RetryStrategy
	ParentSpan        RequestSpan
	Cas               uint64
	Durability        DurabilityLevel
	DurabilityTimeout time.Duration
}

// AppendOptions are the options of Append. The fields mean what
// UpsertOptions' do; the document keeps its flags and expiry.
type AppendOptions struct {
	Timeout           time.Duration
	RetryStrategy     RetryStrategy
	ParentSpan        RequestSpan
	Cas               uint64
	Durability        DurabilityLevel
	DurabilityTimeout time.Duration
}

// PrependOptions are the options of Prepend. The fields mean what
// UpsertOptions' do; the document keeps its flags and expiry.
type PrependOptions struct {
	Timeout           time.Duration
	RetryStrategy     RetryStrategy
	ParentSpan        RequestSpan
	Cas               uint64
	Durability        DurabilityLevel
	DurabilityTimeout time.Duration
}

// IncrementOptions are the options of Increment.
type IncrementOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
	// Delta is added to the counter. 0 adds nothing: the call reads the
	// counter (or creates it, with Initial).
	Delta uint64
	// Initial, when not nil, is the value a missing document is created
	// with (the delta is not applied to it). nil: a missing document fails
	// with ErrDocumentNotFound.
	Initial *uint64
	// Expiry is the time to live of a document Initial creates; setting it
	// without Initial is ErrInvalidArgument (the server would ignore it).
	Expiry            time.Duration
	Durability        DurabilityLevel
	DurabilityTimeout time.Duration
}

// DecrementOptions are the options of Decrement. The fields mean what
// IncrementOptions' do; Delta is subtracted (the counter stops at 0).
type DecrementOptions struct {
	Timeout           time.Duration
	RetryStrategy     RetryStrategy
	ParentSpan        RequestSpan
	Delta             uint64
	Initial           *uint64
	Expiry            time.Duration
	Durability        DurabilityLevel
	DurabilityTimeout time.Duration
}

// opParams are what every operation's options give it.
type opParams struct {
	timeout  time.Duration
	strategy RetryStrategy
	parent   RequestSpan
	// invalid says why the operation refuses one of its arguments before
	// sending anything; newOp makes it the operation's ErrInvalidArgument.
	invalid error
	// copyRead: the operation reads one copy for a call that reads
	// several (op.copyRead); refused, it is no operation of its own to
	// the observers: the call's failure is.
	copyRead bool
	// encoded: the operation is a typed write whose value was encoded
	// before it existed; refused, storeOp shows it to the observers,
	// with its encoding (unsent), not newOp.
	encoded bool
}

// mutParams are what a mutation's options give it.
type mutParams struct {
	opParams
	cas               uint64
	durability        DurabilityLevel
	durabilityTimeout time.Duration
}

// storeParams are what a whole-document write's options give it.
type storeParams struct {
	mutParams
	expiry   time.Duration
	preserve bool
	flags    uint32
	json     bool
	// typed: flags are final (a Transcoder's, or the caller's), written
	// as they are on memcached:// too.
	typed bool
	// encStart and encEnd bound a typed write's encoding of its value
	// (zero: none), the operation's first step.
	encStart, encEnd time.Time
}

// counterParams are what a counter's options give it.
type counterParams struct {
	mutParams
	delta   uint64
	initial *uint64
	expiry  time.Duration
}

// GetResult is a document read. Value is the caller's own copy; ContentAs
// decodes it by its Flags (FormatOf).
type GetResult struct {
	Value []byte
	// Cas is 0xffffffffffffffff in a Get of a locked document: the server
	// hides the lock's CAS, which only GetAndLock's result has.
	Cas uint64
	// Flags are the flags stored with the document: Couchbase common
	// flags when an SDK (or kvwire on a Couchbase bucket) wrote it.
	Flags uint32
	// Datatype is what the server knows of the value (DatatypeJSON when it
	// is JSON and the server negotiated JSON).
	Datatype Datatype
	// RetryAttempts is the number of retries; RetryReasons why they were made.
	RetryAttempts int
	RetryReasons  RetryReasons

	transcoder Transcoder // the client's, for ContentAs
}

// MutationToken identifies a mutation (when sequence numbers were
// negotiated): its vbucket, the vbucket's UUID and the sequence number.
type MutationToken struct {
	Bucket  string
	Vbucket uint16
	VbUUID  uint64
	Seqno   uint64
}

// MutationResult is the outcome of a write.
type MutationResult struct {
	Cas uint64
	// Token is the zero value when the server sent none.
	Token         MutationToken
	RetryAttempts int
	RetryReasons  RetryReasons
}

// CounterResult is the outcome of Increment or Decrement.
type CounterResult struct {
	MutationResult
	Value uint64
}

// ExistsResult says whether a document exists.
type ExistsResult struct {
	Exists bool
	// Cas is 0xffffffffffffffff while the document is locked, as
	// GetResult.Cas.
	Cas           uint64
	RetryAttempts int
	RetryReasons  RetryReasons
}

func (o *op) getResult() GetResult {
	return GetResult{Value: o.value, Cas: o.cas, Flags: o.flags, Datatype: Datatype(o.datatype),
		RetryAttempts: o.st.Attempts(), RetryReasons: retryReasonsOf(o.st.Reasons()), transcoder: o.c.transcoder}
}

func (o *op) mutationResult() MutationResult {
	r := MutationResult{Cas: o.cas, RetryAttempts: o.st.Attempts(), RetryReasons: retryReasonsOf(o.st.Reasons())}
	if o.hasToken {
		r.Token = MutationToken{Bucket: o.c.opts.Bucket, Vbucket: o.vb, VbUUID: o.token.VbUUID, Seqno: o.token.Seqno}
	}
	return r
}

// newOp builds an operation on key, or its error: a key or an argument it
// refuses (p.invalid), or an operation memcached cannot do.
func (col *Collection) newOp(ctx context.Context, name string, kind opKind, key string, req memdx.Request, p opParams) (*op, error) {
	o := col.c.getOp(name, kind, col, key)
	o.req, o.timeout, o.parentSpan = req, p.timeout, p.parent
	o.strategy = internalStrategy(p.strategy, &o.userStrategy)
	o.req.Key = o.key
	if invalid := firstErr(col.checkKey(key), checkTimeout(p.timeout), p.invalid); invalid != nil {
		o.copyRead = p.copyRead || p.encoded // shown by its call, or by storeOp: not here
		e := col.argumentRefused(ctx, o, invalid)
		putOp(o)
		return nil, e
	}
	if col.c.memcached {
		var why string
		switch {
		case !col.isDefault:
			why = "memcached has no collections"
		case !memcachedSupports(req.OpCode):
			why = "memcached has no " + req.OpCode.String()
		}
		if why != "" {
			e := newKVError(o, ErrFeatureNotAvailable, errors.New(why))
			o.copyRead = p.copyRead || p.encoded // as above
			o.c.observeRefused(ctx, o, e)
			putOp(o)
			return nil, e
		}
	}
	return o, nil
}

// argumentRefused is the error of operation o, which refused one of its
// arguments (err says which and why) before sending anything, called
// with ctx; its observers see it end so (observeRefused).
func (col *Collection) argumentRefused(ctx context.Context, o *op, err error) error {
	e := newKVError(o, ErrInvalidArgument, err)
	col.c.observeRefused(ctx, o, e)
	return e
}

// memcachedSupports reports whether plain memcached implements op. Others
// must never be sent: memcached answers an unknown opcode only after
// skipping its extras and key as if they were more bytes of the stream, which
// desynchronizes the connection (see package conn).
func memcachedSupports(op memdx.OpCode) bool {
	switch op {
	case memdx.OpGet, memdx.OpSet, memdx.OpAdd, memdx.OpReplace, memdx.OpDelete,
		memdx.OpIncrement, memdx.OpDecrement, memdx.OpAppend, memdx.OpPrepend,
		memdx.OpTouch, memdx.OpGAT, memdx.OpNoop, memdx.OpVersion, memdx.OpStat:
		return true
	}
	return false
}

// Argument checks. Each returns nil or an error naming the argument and its
// value; newOp reports it as the operation's ErrInvalidArgument.

func checkKey(key string) error {
	if key == "" {
		return errors.New("empty key")
	}
	if len(key) > MaxKeyLength {
		return fmt.Errorf("key of %d bytes exceeds %d", len(key), MaxKeyLength)
	}
	return nil
}

// checkKey is checkKey with the limit of col's keys: a named collection's
// are at most MaxCollectionKeyLength long.
func (col *Collection) checkKey(key string) error {
	if !col.isDefault && len(key) > MaxCollectionKeyLength && len(key) <= MaxKeyLength {
		return fmt.Errorf("key of %d bytes exceeds %d, the longest in a collection other than the default one", len(key), MaxCollectionKeyLength)
	}
	return checkKey(key)
}

// expiryValue converts a time to live to the protocol's expiry: seconds up
// to 30 days, an absolute Unix time (read from clock) beyond: the server
// reads values above 30 days as absolute. Sub-second durations round up to
// one second, so that a short TTL never means "never expires"; a negative
// one (a time left computed after its end, say) is refused for the same
// reason: sent as 0 it would keep the document for ever. The clock is read
// only for an absolute expiry: most writes set none, and a reading costs
// more than the rest of this.
func expiryValue(d time.Duration, clock nower) (uint32, error) {
	if d <= 0 {
		if d < 0 {
			return 0, fmt.Errorf("negative expiry %v", d)
		}
		return 0, nil
	}
	secs := int64(math.Ceil(d.Seconds()))
	if secs <= 30*24*3600 {
		return uint32(secs), nil
	}
	abs := clock.Now().Unix() + secs
	if abs > math.MaxUint32 {
		return 0, fmt.Errorf("expiry %v is beyond what the protocol can express", d)
	}
	return uint32(abs), nil
}

// checkTimeout refuses a negative operation Timeout. 0 means the
// client's KVTimeout; a negative one (a time left computed after its end,
// say) is refused rather than replaced by the default, as Connect refuses
// a negative KVTimeout and Scan and WaitUntilReady a negative Timeout.
func checkTimeout(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("negative Timeout %v", d)
	}
	return nil
}

// checkDurability refuses a Durability that is no DurabilityLevel,
// before the request is routed (the codec would refuse it only once it
// was placed on a connection).
func checkDurability(l DurabilityLevel) error {
	if l > DurabilityPersistToMajority {
		return fmt.Errorf("unknown Durability %v", l)
	}
	return nil
}

// durabilityTimeout is the durability timeout a synchronous write sends
// for d: 0 (none: prepare derives one from the time left) for 0; a
// negative d is refused, as a negative Timeout is.
func durabilityTimeout(d time.Duration) (uint16, error) {
	if d < 0 {
		return 0, fmt.Errorf("negative DurabilityTimeout %v", d)
	}
	if d == 0 {
		return 0, nil
	}
	ms := d.Milliseconds()
	if ms < 1 || ms >= math.MaxUint16 {
		return 0, fmt.Errorf("durability timeout %v not in 1ms..65.534s", d)
	}
	return uint16(ms), nil
}

// lockSeconds converts GetAndLock's lock time to whole seconds, rounding
// up. Anything over the server's maximum gets its default: a lock time past
// uint32 seconds becomes the largest one rather than wrapping around to a
// short lock.
func lockSeconds(d time.Duration) (uint32, error) {
	if d < 0 {
		return 0, fmt.Errorf("negative lock time %v", d)
	}
	return uint32(min(math.Ceil(d.Seconds()), math.MaxUint32)), nil
}

// counterExpiry is the expiry sent with a counter: a document Initial
// creates gets expiry; without Initial the server must not create one, and
// an expiry would be ignored, so it is refused. An expiry that is the
// absolute time 0xffffffff is refused too: a counter cannot have it, the
// server reads it as NoCreate.
func counterExpiry(expiry time.Duration, initial *uint64, clock nower) (uint32, error) {
	if initial == nil {
		if expiry != 0 {
			return memdx.NoCreate, fmt.Errorf("expiry %v without Initial: the expiry applies only to a counter Initial creates", expiry)
		}
		return memdx.NoCreate, nil
	}
	exp, err := expiryValue(expiry, clock)
	if err == nil && exp == memdx.NoCreate {
		return 0, fmt.Errorf("expiry %v is Unix time %d, which a counter cannot have: the server reads it as \"do not create\"", expiry, exp)
	}
	return exp, err
}

// nower is what expiryValue reads the time from: the client's clock.
type nower interface{ Now() time.Time }

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// run executes o and releases it; res is called on success to build the
// result while o is still valid. A panic in execute (a bug) leaves o to
// the garbage collector rather than the pool: no defer. Get and the
// stores write it out: a shape-generic call is not inlined, and each call
// between the caller and its connection's DoDeadline costs a return after
// the system calls there, which the processor's return predictions do not
// survive.
func run[T any](ctx context.Context, o *op, res func(*op) T) (T, error) {
	err := o.c.execute(ctx, o)
	var r T
	if err == nil {
		r = res(o)
	}
	putOp(o)
	return r, err
}

// Get reads a document.
func (col *Collection) Get(ctx context.Context, key string, opts *GetOptions) (GetResult, error) {
	var p opParams
	if opts != nil {
		p = opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan}
		if len(opts.Project) > 0 {
			return col.getProjected(ctx, key, opts.Project, p, nil)
		}
	}
	o, err := col.newOp(ctx, "Get", kindGet, key, memdx.NewGet(nil), p)
	if err != nil {
		return GetResult{}, err
	}
	err = o.c.execute(ctx, o) // run, written out (run says why)
	var r GetResult
	if err == nil {
		r = o.getResult()
	}
	putOp(o)
	return r, err
}

// getThen is Get whose result then takes before the operation ends, as
// its last step (GetJSON's decoding): then's error is the operation's,
// its span's and its latency point's as the caller's. The result is
// returned whenever the read succeeded, then failing or not.
func (col *Collection) getThen(ctx context.Context, key string, opts *GetOptions, then func(GetResult) error) (GetResult, error) {
	var p opParams
	if opts != nil {
		p = opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan}
		if len(opts.Project) > 0 {
			return col.getProjected(ctx, key, opts.Project, p, then)
		}
	}
	o, err := col.newOp(ctx, "Get", kindGet, key, memdx.NewGet(nil), p)
	if err != nil {
		return GetResult{}, err
	}
	var r GetResult
	o.cold = true // finish is a cold field
	o.finish = func(o *op) error {
		r = o.getResult()
		return then(r)
	}
	err = o.c.execute(ctx, o)
	putOp(o)
	return r, err
}

// GetAndTouch reads a document and sets its expiry (0: none; a negative
// one is refused, ErrInvalidArgument).
func (col *Collection) GetAndTouch(ctx context.Context, key string, expiry time.Duration, opts *GetAndTouchOptions) (GetResult, error) {
	var p opParams
	if opts != nil {
		p = opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan}
	}
	exp, err := expiryValue(expiry, col.c.clock)
	p.invalid = err
	o, err := col.newOp(ctx, "GetAndTouch", kindGet, key, memdx.NewGAT(nil, exp), p)
	if err != nil {
		return GetResult{}, err
	}
	return run(ctx, o, (*op).getResult)
}

// GetAndLock reads a document and locks it for lockTime, rounded up to
// whole seconds. kv_engine replaces a lock time of 0, or one over its
// maximum (30 s by default, the bucket's getl_max_timeout), with its
// default (15 s, getl_default_timeout): GetAndLock(ctx, key, time.Minute,
// nil) locks for 15 s, not 30. The result's Cas unlocks it; writes with
// any other CAS fail while it is locked. A negative lockTime is
// ErrInvalidArgument.
//
// A document already locked is retried (KV_LOCKED) until the lock ends
// or the operation times out; a strategy that gives up fails with
// ErrDocumentLocked. On a connection without XERROR the server says
// "locked" with TMPFAIL, which is then retried as KV_LOCKED and ends as
// ErrDocumentLocked too (the error's Status is TMPFAIL); with XERROR,
// TMPFAIL is a temporary failure (KV_TEMPORARY_FAILURE,
// ErrTemporaryFailure).
func (col *Collection) GetAndLock(ctx context.Context, key string, lockTime time.Duration, opts *GetAndLockOptions) (GetResult, error) {
	var p opParams
	if opts != nil {
		p = opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan}
	}
	secs, err := lockSeconds(lockTime)
	p.invalid = err
	o, err := col.newOp(ctx, "GetAndLock", kindGet, key, memdx.NewGetLocked(nil, secs), p)
	if err != nil {
		return GetResult{}, err
	}
	return run(ctx, o, (*op).getResult)
}

// Unlock releases a lock taken with GetAndLock. A CAS that is not the
// lock's fails with ErrCasMismatch (never retried, RFC 0049); a document
// that is not locked fails with ErrDocumentNotLocked, at once. Couchbase
// Server before 7.6 says "not locked" with TMPFAIL, which Unlock does not
// retry; without XERROR the server answers TMPFAIL for a lock held with
// another CAS too, and Unlock cannot tell the two apart: both are
// ErrDocumentNotLocked, whose message says so. CAS 0 is refused
// before anything is sent (ErrInvalidArgument), as kv_engine refuses
// UNLOCK_KEY without a CAS.
func (col *Collection) Unlock(ctx context.Context, key string, cas uint64, opts *UnlockOptions) error {
	var p opParams
	if opts != nil {
		p = opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan}
	}
	if cas == 0 {
		p.invalid = errors.New("CAS 0: Unlock needs the CAS GetAndLock returned")
	}
	o, err := col.newOp(ctx, "Unlock", kindCas, key, memdx.NewUnlock(nil, cas), p)
	if err != nil {
		return err
	}
	o.casGiven = true
	_, err = run(ctx, o, func(*op) struct{} { return struct{}{} })
	return err
}

// Touch sets a document's expiry (0: none; a negative one is refused,
// ErrInvalidArgument).
func (col *Collection) Touch(ctx context.Context, key string, expiry time.Duration, opts *TouchOptions) (MutationResult, error) {
	var p opParams
	if opts != nil {
		p = opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan}
	}
	exp, err := expiryValue(expiry, col.c.clock)
	p.invalid = err
	o, err := col.newOp(ctx, "Touch", kindCas, key, memdx.NewTouch(nil, exp), p)
	if err != nil {
		return MutationResult{}, err
	}
	return run(ctx, o, (*op).mutationResult)
}

// Exists reports whether a document exists (GET_META on Couchbase; a GET
// on plain memcached, which has no GET_META). GET_META is a barrier in
// kv_engine under unordered execution: it is not sent behind a synchronous
// write waiting for replication (nor a range scan continue) on its
// connection, which it would wait for while holding every later request
// there; when every connection of the node has one, it is held, unsent,
// until one is free or the bounds of those requests on one of them (a
// write's durability timeout) have passed, then sent, or until its timeout
// (whose error says so).
func (col *Collection) Exists(ctx context.Context, key string, opts *ExistsOptions) (ExistsResult, error) {
	var p opParams
	if opts != nil {
		p = opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan}
	}
	req, kind := memdx.NewGetMeta(nil), kindMeta
	if col.c.memcached {
		req, kind = memdx.NewGet(nil), kindGet
	}
	o, err := col.newOp(ctx, "Exists", kind, key, req, p)
	if err != nil {
		return ExistsResult{}, err
	}
	o.barrier = kind == kindMeta // GET_META is not reordered under UnorderedExecution
	res, err := run(ctx, o, func(o *op) ExistsResult {
		return ExistsResult{Exists: !o.deleted, Cas: o.cas, RetryAttempts: o.st.Attempts(), RetryReasons: retryReasonsOf(o.st.Reasons())}
	})
	if errors.Is(err, ErrDocumentNotFound) {
		var kv *KeyValueError
		errors.As(err, &kv)
		return ExistsResult{Exists: false, RetryAttempts: kv.RetryAttempts, RetryReasons: kv.RetryReasons}, nil
	}
	return res, err
}

func (o *UpsertOptions) params() storeParams {
	if o == nil {
		return storeParams{}
	}
	return storeParams{
		mutParams: mutParams{opParams: opParams{timeout: o.Timeout, strategy: o.RetryStrategy, parent: o.ParentSpan},
			cas: o.Cas, durability: o.Durability, durabilityTimeout: o.DurabilityTimeout},
		expiry: o.Expiry, preserve: o.PreserveExpiry, flags: o.Flags, json: o.JSON,
	}
}

func (o *InsertOptions) params() storeParams {
	if o == nil {
		return storeParams{}
	}
	return storeParams{
		mutParams: mutParams{opParams: opParams{timeout: o.Timeout, strategy: o.RetryStrategy, parent: o.ParentSpan},
			durability: o.Durability, durabilityTimeout: o.DurabilityTimeout},
		expiry: o.Expiry, flags: o.Flags, json: o.JSON,
	}
}

func (o *ReplaceOptions) params() storeParams {
	if o == nil {
		return storeParams{}
	}
	return storeParams{
		mutParams: mutParams{opParams: opParams{timeout: o.Timeout, strategy: o.RetryStrategy, parent: o.ParentSpan},
			cas: o.Cas, durability: o.Durability, durabilityTimeout: o.DurabilityTimeout},
		expiry: o.Expiry, preserve: o.PreserveExpiry, flags: o.Flags, json: o.JSON,
	}
}

// Upsert writes a document, creating or replacing it. value is stored as
// given, with the flags opts says (by default, on a Couchbase bucket,
// CommonFlagsBinary, or CommonFlagsJSON with opts.JSON).
func (col *Collection) Upsert(ctx context.Context, key string, value []byte, opts *UpsertOptions) (MutationResult, error) {
	return col.store(ctx, "Upsert", memdx.OpSet, key, value, opts.params())
}

// Insert creates a document; ErrDocumentExists when it is already there.
// Flags as Upsert.
func (col *Collection) Insert(ctx context.Context, key string, value []byte, opts *InsertOptions) (MutationResult, error) {
	return col.store(ctx, "Insert", memdx.OpAdd, key, value, opts.params())
}

// Replace replaces an existing document; ErrDocumentNotFound when it is
// missing, ErrCasMismatch when opts.Cas is set and does not match. Flags as
// Upsert.
func (col *Collection) Replace(ctx context.Context, key string, value []byte, opts *ReplaceOptions) (MutationResult, error) {
	return col.store(ctx, "Replace", memdx.OpReplace, key, value, opts.params())
}

// store writes a whole document. The flags are p.flags when set or when a
// typed write resolved them; else, on a Couchbase bucket, the common flags
// of the value's format (JSON when p.json, binary otherwise); else 0.
func (col *Collection) store(ctx context.Context, name string, opc memdx.OpCode, key string, value []byte, p storeParams) (MutationResult, error) {
	o, err := col.storeOp(ctx, name, opc, key, value, p)
	if err != nil {
		return MutationResult{}, err
	}
	err = o.c.execute(ctx, o) // run, written out (run says why)
	var r MutationResult
	if err == nil {
		r = o.mutationResult()
	}
	putOp(o)
	return r, err
}

// storeOp builds store's operation, or its error.
func (col *Collection) storeOp(ctx context.Context, name string, opc memdx.OpCode, key string, value []byte, p storeParams) (*op, error) {
	exp, err := expiryValue(p.expiry, col.c.clock)
	p.invalid = firstErr(p.invalid, err)
	flags := p.flags
	if flags == 0 && !p.typed && !col.c.memcached {
		flags = CommonFlagsBinary
		if p.json {
			flags = CommonFlagsJSON
		}
	}
	req := memdx.NewStore(opc, nil, nil, flags, exp)
	o, err := col.mutation(ctx, name, kindMutation, key, req, p.mutParams)
	if err != nil {
		if p.encoded {
			// Refused once its value was encoded: the encoding is its
			// first step, under its span (RFC 0067), as for one sent.
			col.c.unsent(ctx, name, opc, col, p.parent, durabilityAsked(p.durability), p.encStart, p.encEnd,
				col.c.clock.Now(), err)
		}
		return nil, err
	}
	o.raw = value
	o.trace.encStart, o.trace.encEnd = p.encStart, p.encEnd
	if o.raw == nil {
		o.raw = []byte{}
	}
	if p.json {
		o.baseType = memdx.DatatypeJSON
	}
	o.req.PreserveTTL = p.preserve
	return o, nil
}

func (col *Collection) mutation(ctx context.Context, name string, kind opKind, key string, req memdx.Request, p mutParams) (*op, error) {
	dt, err := durabilityTimeout(p.durabilityTimeout)
	p.invalid = firstErr(p.invalid, err, checkDurability(p.durability))
	req.Cas = p.cas
	req.Durability, req.DurabilityTimeout = p.durability.wire(), dt
	o, err := col.newOp(ctx, name, kind, key, req, p.opParams)
	if err != nil {
		return nil, err
	}
	o.casGiven = p.cas != 0
	o.durDefault = p.durability != DurabilityNone && p.durabilityTimeout == 0
	return o, nil
}

// Remove deletes a document.
func (col *Collection) Remove(ctx context.Context, key string, opts *RemoveOptions) (MutationResult, error) {
	var p mutParams
	if opts != nil {
		p = mutParams{opParams: opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan},
			cas: opts.Cas, durability: opts.Durability, durabilityTimeout: opts.DurabilityTimeout}
	}
	o, err := col.mutation(ctx, "Remove", kindMutation, key, memdx.NewDelete(nil), p)
	if err != nil {
		return MutationResult{}, err
	}
	return run(ctx, o, (*op).mutationResult)
}

// Append adds value at the end of an existing document. A missing one
// fails with ErrDocumentNotFound; so does, on memcached://, one the data
// would make larger than memcached's item size limit (-I): memcached
// answers both NOT_STORED, and the error's message names both.
func (col *Collection) Append(ctx context.Context, key string, value []byte, opts *AppendOptions) (MutationResult, error) {
	var p mutParams
	if opts != nil {
		p = mutParams{opParams: opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan},
			cas: opts.Cas, durability: opts.Durability, durabilityTimeout: opts.DurabilityTimeout}
	}
	return col.concat(ctx, "Append", memdx.OpAppend, key, value, p)
}

// Prepend adds value at the start of an existing document; its errors are
// Append's.
func (col *Collection) Prepend(ctx context.Context, key string, value []byte, opts *PrependOptions) (MutationResult, error) {
	var p mutParams
	if opts != nil {
		p = mutParams{opParams: opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan},
			cas: opts.Cas, durability: opts.Durability, durabilityTimeout: opts.DurabilityTimeout}
	}
	return col.concat(ctx, "Prepend", memdx.OpPrepend, key, value, p)
}

func (col *Collection) concat(ctx context.Context, name string, opc memdx.OpCode, key string, value []byte, p mutParams) (MutationResult, error) {
	o, err := col.mutation(ctx, name, kindMutation, key, memdx.NewConcat(opc, nil, nil), p)
	if err != nil {
		return MutationResult{}, err
	}
	o.raw = value
	if o.raw == nil {
		o.raw = []byte{}
	}
	memcached := o.c.memcached
	r, err := run(ctx, o, (*op).mutationResult)
	var kv *KeyValueError
	if memcached && errors.As(err, &kv) && kv.Status == StatusNotStored {
		// memcached's NOT_STORED does not say which (proto_bin.c,
		// complete_update_bin; do_store_item): the sentinel stays
		// ErrDocumentNotFound, the likelier, and the message says both.
		kv.Cause = fmt.Errorf("memcached answers NOT_STORED to %s both when the document does not exist and "+
			"when the result would exceed its item size limit (-I): %w", opc, kv.Cause)
		kv.seal()
	}
	return r, err
}

// Increment adds opts.Delta to a counter document (a decimal number as its
// value) and returns the new value. Delta 0 reads the counter, creating it
// when opts.Initial is set.
func (col *Collection) Increment(ctx context.Context, key string, opts *IncrementOptions) (CounterResult, error) {
	var p counterParams
	if opts != nil {
		p = counterParams{mutParams: mutParams{opParams: opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan},
			durability: opts.Durability, durabilityTimeout: opts.DurabilityTimeout},
			delta: opts.Delta, initial: opts.Initial, expiry: opts.Expiry}
	}
	return col.counter(ctx, "Increment", memdx.OpIncrement, key, p)
}

// Decrement subtracts opts.Delta from a counter document; it stops at 0.
// Delta 0 reads the counter, creating it when opts.Initial is set.
func (col *Collection) Decrement(ctx context.Context, key string, opts *DecrementOptions) (CounterResult, error) {
	var p counterParams
	if opts != nil {
		p = counterParams{mutParams: mutParams{opParams: opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan},
			durability: opts.Durability, durabilityTimeout: opts.DurabilityTimeout},
			delta: opts.Delta, initial: opts.Initial, expiry: opts.Expiry}
	}
	return col.counter(ctx, "Decrement", memdx.OpDecrement, key, p)
}

func (col *Collection) counter(ctx context.Context, name string, opc memdx.OpCode, key string, p counterParams) (CounterResult, error) {
	exp, err := counterExpiry(p.expiry, p.initial, col.c.clock)
	p.invalid = firstErr(p.invalid, err)
	var initial uint64
	if p.initial != nil {
		initial = *p.initial
	}
	o, err := col.mutation(ctx, name, kindCounter, key, memdx.NewCounter(opc, nil, p.delta, initial, exp), p.mutParams)
	if err != nil {
		return CounterResult{}, err
	}
	return run(ctx, o, func(o *op) CounterResult {
		return CounterResult{MutationResult: o.mutationResult(), Value: o.counter}
	})
}
