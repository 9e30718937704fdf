package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/kvwire/kvwire/internal/statuspolicy"
	"github.com/kvwire/kvwire/memdx"
)

// Sub-document operations (kv_engine docs/SubDocument.md): LookupIn reads
// paths of a document, MutateIn changes them, atomically, in one
// SUBDOC_MULTI_LOOKUP or SUBDOC_MULTI_MUTATION. A path is N1QL-style
// ("a.b[2].c", backticks quote a component with dots or brackets); with the
// xattr flag its first component names an extended attribute, and "$document"
// is the virtual attribute holding the document's metadata (CAS, exptime,
// seqno, value size, deleted, ...).
//
// Each operation takes 1 to MaxSubdocSpecs specs, extended-attribute specs
// first, as the server requires: a longer list, an empty one, or an xattr
// spec after a body spec is refused before anything is sent
// (ErrInvalidArgument; a misordered list also matches ErrXattrInvalidOrder).

// MaxSubdocSpecs is the number of specs a LookupIn or MutateIn may hold
// (kv_engine's SUBDOC_MULTI_MAX_PATHS).
const MaxSubdocSpecs = 16

// The codec's limit is the server's; the client refuses longer lists first.
var _ = [1]struct{}{}[MaxSubdocSpecs-memdx.SubdocMultiMaxPaths]

// LookupInOptions are the options of LookupIn. nil means the defaults.
type LookupInOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
	// AccessDeleted reads a deleted document's extended attributes (a
	// tombstone); the result's IsDeleted says whether it was one.
	AccessDeleted bool
}

// StoreSemantics says what MutateIn does about the document as a whole.
type StoreSemantics uint8

// Store semantics.
const (
	// StoreSemanticsReplace changes an existing document; a missing one
	// fails with ErrDocumentNotFound. The default.
	StoreSemanticsReplace StoreSemantics = iota
	// StoreSemanticsUpsert creates the document when missing (starting
	// from {} or [], whichever the first body spec needs), and creates
	// missing parents of every path.
	StoreSemanticsUpsert
	// StoreSemanticsInsert creates the document and fails with
	// ErrDocumentExists when it exists.
	StoreSemanticsInsert
)

// MutateInOptions are the options of MutateIn. nil means the defaults.
type MutateInOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
	// StoreSemantic: replace (default), upsert or insert the document.
	StoreSemantic StoreSemantics
	// Cas makes the change conditional on the document's CAS
	// (ErrCasMismatch); not with StoreSemanticsInsert.
	Cas uint64
	// Expiry sets the document's time to live (0: none, or the current
	// one with PreserveExpiry).
	Expiry time.Duration
	// PreserveExpiry keeps the document's expiry; not with Expiry, nor
	// with StoreSemanticsInsert.
	PreserveExpiry bool
	// Durability makes the write synchronous (see UpsertOptions).
	Durability        DurabilityLevel
	DurabilityTimeout time.Duration
	// AccessDeleted lets the mutation change a deleted document (a
	// tombstone); it stays deleted unless ReviveDocument is set.
	AccessDeleted bool
	// CreateAsDeleted creates a missing document as a tombstone (with
	// StoreSemanticsUpsert or StoreSemanticsInsert); its specs may write
	// only extended attributes.
	CreateAsDeleted bool
	// ReviveDocument makes a deleted document live again (implies
	// AccessDeleted); a live one fails with ErrDocumentAlreadyAlive.
	ReviveDocument bool
}

// subdocField is the result of one spec: its status and value (aliasing
// the operation's one copy of the response), with the spec's path for
// errors.
type subdocField struct {
	status memdx.Status
	value  []byte
	path   string
	xattr  bool
}

// subdocState is a sub-document operation's part of op: the specs the
// request encodes on every attempt, and the decoded response.
type subdocState struct {
	lookups   []memdx.SubdocLookupOp
	mutations []memdx.SubdocMutateOp
	fields    []subdocField
	// failed: a MutateIn's SUBDOC_MULTI_PATH_FAILURE named spec failIndex
	// with failStatus.
	failed     bool
	failIndex  int
	failStatus memdx.Status
}

// keep returns what a pooled op keeps: the spec buffers, emptied (so that
// they hold no caller's path or value) unless they grew past MaxSubdocSpecs.
func (s *subdocState) keep() subdocState {
	var k subdocState
	if cap(s.lookups) <= MaxSubdocSpecs {
		k.lookups = s.lookups[:0]
		clear(k.lookups[:cap(k.lookups)])
	}
	if cap(s.mutations) <= MaxSubdocSpecs {
		k.mutations = s.mutations[:0]
		clear(k.mutations[:cap(k.mutations)])
	}
	return k
}

// subdocDocAccessed reports whether a sub-document response status says
// the document was reached: its body holds per-path results.
func subdocDocAccessed(st memdx.Status) bool {
	switch st {
	case memdx.StatusSuccess, memdx.StatusSubdocSuccessDeleted,
		memdx.StatusSubdocMultiPathFailure, memdx.StatusSubdocMultiPathFailureDeleted:
		return true
	}
	return false
}

// bytesOf returns s's bytes without copying; they are never written.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// onSubdocResponse records a response whose status subdocDocAccessed
// accepts. A lookup takes each of them as its result; a mutation takes
// SUCCESS and SUCCESS_DELETED, and records the failing spec of
// SUBDOC_MULTI_PATH_FAILURE, which ends it (classifyStatus). It runs on the
// goroutine reading the connection: the value is copied once, and the
// results alias the copy.
func (o *op) onSubdocResponse(p *memdx.Packet) error {
	st := p.Status
	deleted := st == memdx.StatusSubdocSuccessDeleted || st == memdx.StatusSubdocMultiPathFailureDeleted
	failure := st == memdx.StatusSubdocMultiPathFailure || st == memdx.StatusSubdocMultiPathFailureDeleted
	if o.kind == kindMutateIn && failure {
		i, pst, err := decodeMutateInFailure(p.Value, len(o.sd.mutations))
		if err != nil {
			return err
		}
		o.sd.failed, o.sd.failIndex, o.sd.failStatus = true, i, pst
		o.deleted = deleted
		return nil
	}
	o.accepted = true
	o.cas = p.Cas
	o.deleted = deleted
	if o.kind == kindMutateIn {
		tok, ok, err := memdx.DecodeMutationToken(p)
		if err != nil {
			return err
		}
		o.token, o.hasToken = tok, ok
		if len(p.Value) == 0 {
			return nil
		}
	}
	var value []byte
	if p.Datatype.Has(memdx.DatatypeSnappy) {
		v, err := memdx.DecompressSnappy(nil, p.Value, 0)
		if err != nil {
			return err
		}
		value = v
	} else {
		value = append(make([]byte, 0, len(p.Value)), p.Value...)
	}
	var err error
	if o.kind == kindLookupIn {
		o.sd.fields, err = decodeLookupIn(value, len(o.sd.lookups))
	} else {
		o.sd.fields, err = decodeMutateIn(value, len(o.sd.mutations))
	}
	return err
}

// decodeLookupIn decodes a SUBDOC_MULTI_LOOKUP response value that must hold
// one result per spec (n). Values alias value.
func decodeLookupIn(value []byte, n int) ([]subdocField, error) {
	fields := make([]subdocField, n)
	for i := range n {
		r, rest, err := memdx.NextSubdocLookupResult(value)
		if err != nil {
			return nil, fmt.Errorf("lookup result %d of %d: %w", i, n, err)
		}
		fields[i].status, fields[i].value = r.Status, r.Value
		value = rest
	}
	if len(value) > 0 {
		return nil, fmt.Errorf("%w: SUBDOC_MULTI_LOOKUP response: %d bytes after the %d results the request asked for",
			memdx.ErrMalformed, len(value), n)
	}
	return fields, nil
}

// decodeMutateIn decodes a successful SUBDOC_MULTI_MUTATION response value:
// results of specs that return one, each naming its spec (below n, in
// increasing order, with status SUCCESS). The fields are one per spec;
// values alias value.
func decodeMutateIn(value []byte, n int) ([]subdocField, error) {
	fields := make([]subdocField, n)
	next := 0
	for len(value) > 0 {
		r, rest, err := memdx.NextSubdocMutateResult(value)
		if err != nil {
			return nil, err
		}
		i := int(r.Index)
		switch {
		case r.Status != memdx.StatusSuccess:
			return nil, fmt.Errorf("%w: SUBDOC_MULTI_MUTATION success response: result for spec %d has status %s",
				memdx.ErrMalformed, i, r.Status)
		case i >= n:
			return nil, fmt.Errorf("%w: SUBDOC_MULTI_MUTATION response: result for spec %d of %d",
				memdx.ErrMalformed, i, n)
		case i < next:
			return nil, fmt.Errorf("%w: SUBDOC_MULTI_MUTATION response: result for spec %d after spec %d",
				memdx.ErrMalformed, i, next-1)
		}
		fields[i].value = r.Value
		next = i + 1
		value = rest
	}
	return fields, nil
}

// decodeMutateInFailure decodes a SUBDOC_MULTI_PATH_FAILURE response value
// of a SUBDOC_MULTI_MUTATION: exactly one result, naming a spec below n
// with a failure status.
func decodeMutateInFailure(value []byte, n int) (int, memdx.Status, error) {
	r, rest, err := memdx.NextSubdocMutateResult(value)
	switch {
	case err != nil:
		return 0, 0, err
	case len(rest) > 0:
		return 0, 0, fmt.Errorf("%w: SUBDOC_MULTI_MUTATION failure response: %d bytes after its one result",
			memdx.ErrMalformed, len(rest))
	case int(r.Index) >= n:
		return 0, 0, fmt.Errorf("%w: SUBDOC_MULTI_MUTATION failure response: spec %d of %d failed",
			memdx.ErrMalformed, r.Index, n)
	case r.Status == memdx.StatusSuccess:
		return 0, 0, fmt.Errorf("%w: SUBDOC_MULTI_MUTATION failure response: the failed spec has status SUCCESS",
			memdx.ErrMalformed)
	}
	return int(r.Index), r.Status, nil
}

// subdocError is the error of spec i whose status is st.
func subdocError(op memdx.OpCode, i int, f *subdocField) *SubdocError {
	return &SubdocError{Index: i, Path: f.path, Xattr: f.xattr, Status: statusOf(f.status),
		Err: statuspolicy.Decide(op, false, f.status, nil).Sentinel}
}

// LookupInResult is the result of LookupIn: the document's CAS and one
// result per spec, in the caller's order: a value, or the path's error.
type LookupInResult struct {
	Cas uint64
	// IsDeleted: the document read is a tombstone (AccessDeleted).
	IsDeleted     bool
	RetryAttempts int
	RetryReasons  RetryReasons
	fields        []subdocField
}

// Len is the number of specs.
func (r *LookupInResult) Len() int { return len(r.fields) }

// ValueAt returns the JSON value spec i read (empty for ExistsSpec), or its
// error: a *SubdocError matching the path's sentinel (ErrPathNotFound,
// ErrPathMismatch, ...). The value is the result's own; it stays valid.
func (r *LookupInResult) ValueAt(i int) ([]byte, error) {
	if i < 0 || i >= len(r.fields) {
		return nil, fmt.Errorf("%w: spec index %d out of range [0, %d)", ErrInvalidArgument, i, len(r.fields))
	}
	f := &r.fields[i]
	if f.status != memdx.StatusSuccess {
		return nil, subdocError(memdx.OpSubdocMultiLookup, i, f)
	}
	return f.value, nil
}

// ContentAt decodes spec i's value, a JSON value, into out as
// JSONTranscoder decodes a JSON document (encoding/json; a *[]byte gets
// the JSON text), or returns the spec's error (see ValueAt). A value out
// cannot hold fails with ErrDecodingFailure.
func (r *LookupInResult) ContentAt(i int, out any) error {
	v, err := r.ValueAt(i)
	if err != nil {
		return err
	}
	return decodeSpecValue(i, r.fields[i].path, v, out)
}

// decodeSpecValue decodes spec i's JSON value v (of path) into out.
func decodeSpecValue(i int, path string, v []byte, out any) error {
	if err := (JSONTranscoder{}).Decode(v, CommonFlagsJSON, out); err != nil {
		return fmt.Errorf("sub-document spec %d (path %q): %w", i, path, err)
	}
	return nil
}

// Exists reports whether spec i's path exists (for any spec; ExistsSpec
// asks only that): true when the spec succeeded, false with a nil error
// when the document does not have the path (ErrPathNotFound). Any other
// failure of the spec (a path mismatch, a document that is not JSON, an
// unknown virtual attribute, ...) says nothing about the path and is
// returned as the spec's error (see ValueAt), with false; so is an index
// outside the list (ErrInvalidArgument).
func (r *LookupInResult) Exists(i int) (bool, error) {
	_, err := r.ValueAt(i)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrPathNotFound):
		return false, nil
	}
	return false, err
}

// MutateInResult is the result of MutateIn: the document's new CAS and
// mutation token, and the values of the specs that return one (counters).
type MutateInResult struct {
	MutationResult
	// IsDeleted: the document is a tombstone after the change
	// (CreateAsDeleted, or AccessDeleted without ReviveDocument).
	IsDeleted bool
	// n is the number of specs; fields holds their values when any spec
	// returned one.
	n      int
	fields []subdocField
}

// ValueAt returns spec i's result: the new value of an IncrementSpec or
// DecrementSpec, nil for specs that return none.
func (r *MutateInResult) ValueAt(i int) ([]byte, error) {
	if i < 0 || i >= r.n {
		return nil, fmt.Errorf("%w: spec index %d out of range [0, %d)", ErrInvalidArgument, i, r.n)
	}
	if r.fields == nil {
		return nil, nil
	}
	return r.fields[i].value, nil
}

// ContentAt decodes spec i's result into out as LookupInResult.ContentAt
// does (ErrDecodingFailure when out cannot hold it); a spec that returned
// nothing is an error.
func (r *MutateInResult) ContentAt(i int, out any) error {
	v, err := r.ValueAt(i)
	if err != nil {
		return err
	}
	if v == nil {
		return fmt.Errorf("%w: spec %d returned no value", ErrInvalidArgument, i)
	}
	return decodeSpecValue(i, r.fields[i].path, v, out)
}

// checkSpecCount refuses an empty or too long spec list.
func checkSpecCount(n int) error {
	switch {
	case n == 0:
		return errors.New("no specs")
	case n > MaxSubdocSpecs:
		return fmt.Errorf("%d specs; at most %d per operation", n, MaxSubdocSpecs)
	}
	return nil
}

// xattrOrderError is the error of spec i, an xattr spec after body spec
// body.
func xattrOrderError(i int, path string, body int) error {
	return fmt.Errorf("spec %d (xattr %q) follows body spec %d: %w", i, path, body, ErrXattrInvalidOrder)
}

// LookupIn reads the paths specs name from one version of the document
// key. A path that fails (not found, mismatch, ...) fails only its own
// result (LookupInResult.ValueAt); the operation fails when the document
// cannot be read (ErrDocumentNotFound, ...). It is idempotent: retried as
// reads are.
func (col *Collection) LookupIn(ctx context.Context, key string, specs []LookupInSpec, opts *LookupInOptions) (LookupInResult, error) {
	var lo LookupInOptions
	if opts != nil {
		lo = *opts
	}
	o, err := col.lookupInOp("LookupIn", key, specs, opParams{timeout: lo.Timeout, strategy: lo.RetryStrategy, parent: lo.ParentSpan}, lo.AccessDeleted, 0)
	if err != nil {
		return LookupInResult{}, err
	}
	return run(ctx, o, (*op).lookupInResult)
}

// lookupInOp builds a LookupIn of copy replica (0: the active copy).
func (col *Collection) lookupInOp(name, key string, specs []LookupInSpec, p opParams, accessDeleted bool, replica int) (*op, error) {
	var df memdx.SubdocDocFlag
	if accessDeleted {
		df |= memdx.SubdocDocAccessDeleted
	}
	if replica > 0 {
		df |= memdx.SubdocDocReplicaRead
	}
	o, err := col.newOp(name, kindLookupIn, key, memdx.NewSubdocMultiLookup(nil, df, nil), p)
	if err != nil {
		return nil, err
	}
	o.target.Replica = replica
	if err := o.setLookups(specs); err != nil {
		e := col.argumentRefused(o, err)
		putOp(o)
		return nil, e
	}
	o.req = memdx.NewSubdocMultiLookup(o.key, df, o.sd.lookups)
	return o, nil
}

// setLookups checks specs and makes them o's lookups.
func (o *op) setLookups(specs []LookupInSpec) error {
	if err := checkSpecCount(len(specs)); err != nil {
		return err
	}
	ls := o.sd.lookups[:0]
	body := -1
	for i, s := range specs {
		if !s.made {
			return fmt.Errorf("spec %d was not made by GetSpec, ExistsSpec or CountSpec", i)
		}
		flags := memdx.SubdocPathFlag(0)
		if s.xattr {
			flags = memdx.SubdocPathXattr
			if body >= 0 {
				return xattrOrderError(i, s.path, body)
			}
		} else if body < 0 {
			body = i
		}
		ls = append(ls, memdx.SubdocLookupOp{Op: s.op, Flags: flags, Path: bytesOf(s.path)})
	}
	o.sd.lookups = ls
	return nil
}

func (o *op) lookupInResult() LookupInResult {
	for i := range o.sd.fields {
		s := &o.sd.lookups[i]
		f := &o.sd.fields[i]
		f.path, f.xattr = unsafe.String(unsafe.SliceData(s.Path), len(s.Path)), s.Flags&memdx.SubdocPathXattr != 0
	}
	return LookupInResult{Cas: o.cas, IsDeleted: o.deleted, RetryAttempts: o.st.Attempts(), RetryReasons: retryReasonsOf(o.st.Reasons()),
		fields: o.sd.fields}
}

// MutateIn changes the paths specs name in the document key, atomically:
// every spec applies or none does. A spec that fails fails the operation
// with its path's sentinel (ErrPathExists, ErrPathNotFound, ...) and a
// *SubdocError naming it; the document is unchanged. It follows the rules
// of other mutations: a request that may have been applied is never resent
// silently, and its error then matches ErrAmbiguous.
func (col *Collection) MutateIn(ctx context.Context, key string, specs []MutateInSpec, opts *MutateInOptions) (MutateInResult, error) {
	var mo MutateInOptions
	if opts != nil {
		mo = *opts
	}
	df, dfErr := mo.docFlags()
	exp, expErr := expiryValue(mo.Expiry, col.c.clock.Now())
	req := memdx.NewSubdocMultiMutation(nil, df, exp, nil)
	o, err := col.mutation("MutateIn", kindMutateIn, key, req, mutParams{
		opParams: opParams{timeout: mo.Timeout, strategy: mo.RetryStrategy, parent: mo.ParentSpan, invalid: firstErr(dfErr, expErr)},
		cas:      mo.Cas, durability: mo.Durability, durabilityTimeout: mo.DurabilityTimeout})
	if err != nil {
		return MutateInResult{}, err
	}
	o.req.PreserveTTL = mo.PreserveExpiry
	if err := o.setMutations(specs, df, exp); err != nil {
		e := col.argumentRefused(o, err)
		putOp(o)
		return MutateInResult{}, e
	}
	defer putOp(o)
	if err := o.c.execute(ctx, o); err != nil {
		return MutateInResult{}, o.mutateInError(err)
	}
	return MutateInResult{MutationResult: o.mutationResult(), IsDeleted: o.deleted, n: len(specs), fields: o.sd.fields}, nil
}

// docFlags checks the options' document-level settings and returns their
// doc flags.
func (mo *MutateInOptions) docFlags() (memdx.SubdocDocFlag, error) {
	bad := func(why string) (memdx.SubdocDocFlag, error) {
		return 0, errors.New(why)
	}
	var df memdx.SubdocDocFlag
	switch mo.StoreSemantic {
	case StoreSemanticsReplace:
		if mo.CreateAsDeleted {
			return bad("CreateAsDeleted needs StoreSemanticsUpsert or StoreSemanticsInsert")
		}
	case StoreSemanticsUpsert:
		df |= memdx.SubdocDocMkdoc
	case StoreSemanticsInsert:
		if mo.Cas != 0 {
			return bad("StoreSemanticsInsert takes no CAS")
		}
		if mo.PreserveExpiry {
			return bad("StoreSemanticsInsert has no expiry to preserve")
		}
		df |= memdx.SubdocDocAdd
	default:
		return bad("unknown StoreSemantic " + strconv.Itoa(int(mo.StoreSemantic)))
	}
	if mo.PreserveExpiry && mo.Expiry > 0 {
		return bad("PreserveExpiry with an Expiry")
	}
	if mo.AccessDeleted || mo.ReviveDocument {
		df |= memdx.SubdocDocAccessDeleted
	}
	if mo.CreateAsDeleted {
		if mo.ReviveDocument {
			return bad("CreateAsDeleted with ReviveDocument")
		}
		df |= memdx.SubdocDocCreateAsDeleted
	}
	if mo.ReviveDocument {
		df |= memdx.SubdocDocReviveDocument
	}
	return df, nil
}

// setMutations checks specs and makes them the request's.
func (o *op) setMutations(specs []MutateInSpec, df memdx.SubdocDocFlag, exp uint32) error {
	if err := checkSpecCount(len(specs)); err != nil {
		return err
	}
	ms := o.sd.mutations[:0]
	body := -1
	for i := range specs {
		s := &specs[i]
		if s.op == 0 {
			return fmt.Errorf("spec %d was not made by a MutateInSpec constructor (UpsertSpec, ...)", i)
		}
		if s.err != "" {
			return fmt.Errorf("spec %d (path %q): %s", i, s.path, s.err)
		}
		if s.flags&memdx.SubdocPathXattr != 0 {
			if body >= 0 {
				return xattrOrderError(i, s.path, body)
			}
		} else if body < 0 {
			body = i
		}
		ms = append(ms, memdx.SubdocMutateOp{Op: s.op, Flags: s.flags, Path: bytesOf(s.path), Value: s.value})
	}
	o.sd.mutations = ms
	r := memdx.NewSubdocMultiMutation(o.key, df, exp, ms)
	r.Cas, r.Durability, r.DurabilityTimeout, r.PreserveTTL = o.req.Cas, o.req.Durability, o.req.DurabilityTimeout, o.req.PreserveTTL
	o.req = r
	return nil
}

// mutateInError is the error of a MutateIn that failed: one that ended on
// SUBDOC_MULTI_PATH_FAILURE takes the failing spec's sentinel, with a
// *SubdocError naming the spec as its cause.
func (o *op) mutateInError(err error) error {
	var kv *KeyValueError
	if !o.sd.failed || !errors.As(err, &kv) {
		return err
	}
	s := &o.sd.mutations[o.sd.failIndex]
	se := subdocError(memdx.OpSubdocMultiMutation, o.sd.failIndex, &subdocField{status: o.sd.failStatus,
		path: string(s.Path), xattr: s.Flags&memdx.SubdocPathXattr != 0})
	kv.Err, kv.Cause = se.Err, se
	return err
}
