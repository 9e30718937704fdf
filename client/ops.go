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
// accept (in bytes, without the collection prefix).
const MaxKeyLength = 250

// GetOptions are the options of reads (Get, GetAndTouch, GetAndLock,
// Exists, the replica reads), Touch and Unlock. nil means the defaults.
type GetOptions struct {
	// Timeout overrides the client's KVTimeout; the context's deadline
	// still wins when earlier.
	Timeout time.Duration
	// RetryStrategy overrides the client's strategy for this operation.
	RetryStrategy RetryStrategy
}

// MutateOptions are the options of Upsert, Insert, Replace, Remove, Append
// and Prepend. nil means the defaults.
type MutateOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	// Cas makes the write conditional on the document's current CAS
	// (Replace, Remove, Append, Prepend, and Upsert); a mismatch fails with
	// ErrCasMismatch. Insert refuses it.
	Cas uint64
	// Expiry is the document's time to live (0: none). Durations over 30
	// days are sent as an absolute time, as the server requires. Not used
	// by Remove, Append and Prepend.
	Expiry time.Duration
	// PreserveExpiry keeps the document's current expiry (Upsert, Replace).
	PreserveExpiry bool
	// Flags are the document's flags, stored with it and returned by Get.
	Flags uint32
	// JSON marks the value as JSON (the datatype bit), when the server
	// negotiated JSON.
	JSON bool
	// Durability makes the write synchronous; DurabilityTimeout bounds it
	// on the server (0: 90% of the time the operation has left, sent with
	// each attempt, so that the server answers before the client's
	// deadline).
	Durability        DurabilityLevel
	DurabilityTimeout time.Duration
}

// CounterOptions are the options of Increment and Decrement.
type CounterOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	// Delta is added (Increment) or subtracted (Decrement); 0 means 1.
	Delta uint64
	// Initial, when not nil, is the value a missing document is created
	// with (the delta is not applied to it). nil: a missing document fails
	// with ErrDocumentNotFound.
	Initial *uint64
	// Expiry of a document the counter creates.
	Expiry            time.Duration
	Durability        DurabilityLevel
	DurabilityTimeout time.Duration
}

// GetResult is a document read. Value is the caller's own copy.
type GetResult struct {
	Value    []byte
	Cas      uint64
	Flags    uint32
	Datatype memdx.Datatype
	// Attempts is the number of retries; RetryReasons why they were made.
	Attempts     int
	RetryReasons RetryReasons
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
	Token        MutationToken
	Attempts     int
	RetryReasons RetryReasons
}

// CounterResult is the outcome of Increment or Decrement.
type CounterResult struct {
	MutationResult
	Value uint64
}

// ExistsResult says whether a document exists.
type ExistsResult struct {
	Exists       bool
	Cas          uint64
	Attempts     int
	RetryReasons RetryReasons
}

func (o *op) getResult() GetResult {
	return GetResult{Value: o.value, Cas: o.cas, Flags: o.flags, Datatype: o.datatype,
		Attempts: o.st.Attempts(), RetryReasons: retryReasonsOf(o.st.Reasons())}
}

func (o *op) mutationResult() MutationResult {
	r := MutationResult{Cas: o.cas, Attempts: o.st.Attempts(), RetryReasons: retryReasonsOf(o.st.Reasons())}
	if o.hasToken {
		r.Token = MutationToken{Bucket: o.c.opts.Bucket, Vbucket: o.vb, VbUUID: o.token.VbUUID, Seqno: o.token.Seqno}
	}
	return r
}

func (col *Collection) newOp(name string, kind opKind, key string, req memdx.Request, timeout time.Duration, strategy RetryStrategy) (*op, error) {
	o := col.c.getOp(name, kind, col, key)
	o.req, o.timeout = req, timeout
	o.strategy = internalStrategy(strategy, &o.userStrategy)
	o.req.Key = o.key
	if err := checkKey(key); err != nil {
		e := col.c.finalError(o, ErrInvalidArgument, err)
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
			e := col.c.finalError(o, ErrFeatureNotAvailable, errors.New(why))
			putOp(o)
			return nil, e
		}
	}
	return o, nil
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

func checkKey(key string) error {
	if key == "" {
		return errors.New("empty key")
	}
	if len(key) > MaxKeyLength {
		return fmt.Errorf("key of %d bytes exceeds %d", len(key), MaxKeyLength)
	}
	return nil
}

func getOpts(o *GetOptions) (time.Duration, RetryStrategy) {
	if o == nil {
		return 0, nil
	}
	return o.Timeout, o.RetryStrategy
}

// expiryValue converts a time to live to the protocol's expiry: seconds up
// to 30 days, an absolute Unix time beyond (the server reads values above
// 30 days as absolute). Sub-second durations round up to one second, so that
// a short TTL never means "never expires".
func expiryValue(d time.Duration) (uint32, error) {
	if d <= 0 {
		return 0, nil
	}
	secs := int64(math.Ceil(d.Seconds()))
	if secs <= 30*24*3600 {
		return uint32(secs), nil
	}
	abs := time.Now().Unix() + secs
	if abs > math.MaxUint32 {
		return 0, fmt.Errorf("%w: expiry %v is beyond what the protocol can express", ErrInvalidArgument, d)
	}
	return uint32(abs), nil
}

func durabilityTimeout(d time.Duration) (uint16, error) {
	if d <= 0 {
		return 0, nil
	}
	ms := d.Milliseconds()
	if ms < 1 || ms >= math.MaxUint16 {
		return 0, fmt.Errorf("%w: durability timeout %v not in 1ms..65.534s", ErrInvalidArgument, d)
	}
	return uint16(ms), nil
}

// run executes o and releases it; res is called on success to build the
// result while o is still valid.
func run[T any](ctx context.Context, o *op, res func(*op) T) (T, error) {
	defer putOp(o)
	if err := o.c.execute(ctx, o); err != nil {
		var zero T
		return zero, err
	}
	return res(o), nil
}

// Get reads a document.
func (col *Collection) Get(ctx context.Context, key string, opts *GetOptions) (GetResult, error) {
	t, s := getOpts(opts)
	o, err := col.newOp("Get", kindGet, key, memdx.NewGet(nil), t, s)
	if err != nil {
		return GetResult{}, err
	}
	return run(ctx, o, (*op).getResult)
}

// GetAndTouch reads a document and sets its expiry.
func (col *Collection) GetAndTouch(ctx context.Context, key string, expiry time.Duration, opts *GetOptions) (GetResult, error) {
	exp, err := expiryValue(expiry)
	if err != nil {
		return GetResult{}, err
	}
	t, s := getOpts(opts)
	o, err := col.newOp("GetAndTouch", kindGet, key, memdx.NewGAT(nil, exp), t, s)
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
// any other CAS fail while it is locked.
func (col *Collection) GetAndLock(ctx context.Context, key string, lockTime time.Duration, opts *GetOptions) (GetResult, error) {
	if lockTime < 0 {
		return GetResult{}, fmt.Errorf("%w: negative lock time", ErrInvalidArgument)
	}
	// Anything over the server's maximum gets its default: a lock time
	// past uint32 seconds becomes the largest one rather than wrapping
	// around to a short lock.
	secs := uint32(min(math.Ceil(lockTime.Seconds()), math.MaxUint32))
	t, s := getOpts(opts)
	o, err := col.newOp("GetAndLock", kindGet, key, memdx.NewGetLocked(nil, secs), t, s)
	if err != nil {
		return GetResult{}, err
	}
	return run(ctx, o, (*op).getResult)
}

// Unlock releases a lock taken with GetAndLock. A CAS that is not the
// lock's fails with ErrCasMismatch (never retried, RFC 0049); a document
// that is not locked fails with ErrDocumentNotLocked.
func (col *Collection) Unlock(ctx context.Context, key string, cas uint64, opts *GetOptions) error {
	t, s := getOpts(opts)
	o, err := col.newOp("Unlock", kindCas, key, memdx.NewUnlock(nil, cas), t, s)
	if err != nil {
		return err
	}
	o.casGiven = true
	_, err = run(ctx, o, func(*op) struct{} { return struct{}{} })
	return err
}

// Touch sets a document's expiry.
func (col *Collection) Touch(ctx context.Context, key string, expiry time.Duration, opts *GetOptions) (MutationResult, error) {
	exp, err := expiryValue(expiry)
	if err != nil {
		return MutationResult{}, err
	}
	t, s := getOpts(opts)
	o, err := col.newOp("Touch", kindCas, key, memdx.NewTouch(nil, exp), t, s)
	if err != nil {
		return MutationResult{}, err
	}
	return run(ctx, o, (*op).mutationResult)
}

// Exists reports whether a document exists (GET_META on Couchbase; a GET
// on plain memcached, which has no GET_META).
func (col *Collection) Exists(ctx context.Context, key string, opts *GetOptions) (ExistsResult, error) {
	t, s := getOpts(opts)
	req, kind := memdx.NewGetMeta(nil), kindMeta
	if col.c.memcached {
		req, kind = memdx.NewGet(nil), kindGet
	}
	o, err := col.newOp("Exists", kind, key, req, t, s)
	if err != nil {
		return ExistsResult{}, err
	}
	res, err := run(ctx, o, func(o *op) ExistsResult {
		return ExistsResult{Exists: !o.deleted, Cas: o.cas, Attempts: o.st.Attempts(), RetryReasons: retryReasonsOf(o.st.Reasons())}
	})
	if errors.Is(err, ErrDocumentNotFound) {
		var kv *KeyValueError
		errors.As(err, &kv)
		return ExistsResult{Exists: false, Attempts: kv.Attempts, RetryReasons: kv.RetryReasons}, nil
	}
	return res, err
}

// Upsert writes a document, creating or replacing it.
func (col *Collection) Upsert(ctx context.Context, key string, value []byte, opts *MutateOptions) (MutationResult, error) {
	return col.store(ctx, "Upsert", memdx.OpSet, key, value, opts)
}

// Insert creates a document; ErrDocumentExists when it is already there.
func (col *Collection) Insert(ctx context.Context, key string, value []byte, opts *MutateOptions) (MutationResult, error) {
	if opts != nil && opts.Cas != 0 {
		return MutationResult{}, fmt.Errorf("%w: Insert takes no CAS", ErrInvalidArgument)
	}
	return col.store(ctx, "Insert", memdx.OpAdd, key, value, opts)
}

// Replace replaces an existing document; ErrDocumentNotFound when it is
// missing, ErrCasMismatch when opts.Cas is set and does not match.
func (col *Collection) Replace(ctx context.Context, key string, value []byte, opts *MutateOptions) (MutationResult, error) {
	return col.store(ctx, "Replace", memdx.OpReplace, key, value, opts)
}

func (col *Collection) store(ctx context.Context, name string, opc memdx.OpCode, key string, value []byte, opts *MutateOptions) (MutationResult, error) {
	var mo MutateOptions
	if opts != nil {
		mo = *opts
	}
	exp, err := expiryValue(mo.Expiry)
	if err != nil {
		return MutationResult{}, err
	}
	req := memdx.NewStore(opc, nil, nil, mo.Flags, exp)
	o, err := col.mutation(name, kindMutation, key, req, &mo)
	if err != nil {
		return MutationResult{}, err
	}
	o.raw = value
	if o.raw == nil {
		o.raw = []byte{}
	}
	if mo.JSON {
		o.baseType = memdx.DatatypeJSON
	}
	o.req.PreserveTTL = mo.PreserveExpiry && opc != memdx.OpAdd
	return run(ctx, o, (*op).mutationResult)
}

func (col *Collection) mutation(name string, kind opKind, key string, req memdx.Request, mo *MutateOptions) (*op, error) {
	dt, err := durabilityTimeout(mo.DurabilityTimeout)
	if err != nil {
		return nil, err
	}
	req.Cas = mo.Cas
	req.Durability, req.DurabilityTimeout = mo.Durability.wire(), dt
	o, err := col.newOp(name, kind, key, req, mo.Timeout, mo.RetryStrategy)
	if err != nil {
		return nil, err
	}
	o.casGiven = mo.Cas != 0
	o.durDefault = mo.Durability != DurabilityNone && mo.DurabilityTimeout <= 0
	return o, nil
}

// Remove deletes a document.
func (col *Collection) Remove(ctx context.Context, key string, opts *MutateOptions) (MutationResult, error) {
	var mo MutateOptions
	if opts != nil {
		mo = *opts
	}
	o, err := col.mutation("Remove", kindMutation, key, memdx.NewDelete(nil), &mo)
	if err != nil {
		return MutationResult{}, err
	}
	return run(ctx, o, (*op).mutationResult)
}

// Append adds value at the end of an existing document.
func (col *Collection) Append(ctx context.Context, key string, value []byte, opts *MutateOptions) (MutationResult, error) {
	return col.concat(ctx, "Append", memdx.OpAppend, key, value, opts)
}

// Prepend adds value at the start of an existing document.
func (col *Collection) Prepend(ctx context.Context, key string, value []byte, opts *MutateOptions) (MutationResult, error) {
	return col.concat(ctx, "Prepend", memdx.OpPrepend, key, value, opts)
}

func (col *Collection) concat(ctx context.Context, name string, opc memdx.OpCode, key string, value []byte, opts *MutateOptions) (MutationResult, error) {
	var mo MutateOptions
	if opts != nil {
		mo = *opts
	}
	o, err := col.mutation(name, kindMutation, key, memdx.NewConcat(opc, nil, nil), &mo)
	if err != nil {
		return MutationResult{}, err
	}
	o.raw = value
	if o.raw == nil {
		o.raw = []byte{}
	}
	return run(ctx, o, (*op).mutationResult)
}

// Increment adds to a counter document (a decimal number as its value).
func (col *Collection) Increment(ctx context.Context, key string, opts *CounterOptions) (CounterResult, error) {
	return col.counter(ctx, "Increment", memdx.OpIncrement, key, opts)
}

// Decrement subtracts from a counter document; it stops at 0.
func (col *Collection) Decrement(ctx context.Context, key string, opts *CounterOptions) (CounterResult, error) {
	return col.counter(ctx, "Decrement", memdx.OpDecrement, key, opts)
}

func (col *Collection) counter(ctx context.Context, name string, opc memdx.OpCode, key string, opts *CounterOptions) (CounterResult, error) {
	var co CounterOptions
	if opts != nil {
		co = *opts
	}
	if co.Delta == 0 {
		co.Delta = 1
	}
	exp, err := expiryValue(co.Expiry)
	if err != nil {
		return CounterResult{}, err
	}
	var initial uint64
	if co.Initial != nil {
		initial = *co.Initial
	} else {
		exp = memdx.NoCreate
	}
	mo := MutateOptions{Timeout: co.Timeout, RetryStrategy: co.RetryStrategy,
		Durability: co.Durability, DurabilityTimeout: co.DurabilityTimeout}
	o, err := col.mutation(name, kindCounter, key, memdx.NewCounter(opc, nil, co.Delta, initial, exp), &mo)
	if err != nil {
		return CounterResult{}, err
	}
	return run(ctx, o, func(o *op) CounterResult {
		return CounterResult{MutationResult: o.mutationResult(), Value: o.counter}
	})
}
