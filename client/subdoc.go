package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvwire/kvwire/internal/statuspolicy"
	"github.com/kvwire/kvwire/internal/subdoc"
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
	// one with PreserveExpiry; a negative one is refused,
	// ErrInvalidArgument).
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

// subdocState is op's sub-document part (package subdoc's State).
type subdocState = subdoc.State

// subdocDocAccessed reports whether a sub-document response holds per-path
// results (subdoc.DocAccessed).
func subdocDocAccessed(st memdx.Status) bool { return subdoc.DocAccessed(st) }

// onSubdocResponse records a response whose status subdocDocAccessed
// accepts. A lookup takes each of them as its result; a mutation takes
// SUCCESS and SUCCESS_DELETED, and records the failing spec of
// SUBDOC_MULTI_PATH_FAILURE, which ends it (classifyStatus). It runs on the
// goroutine reading the connection: the value is copied once, and the
// results alias the copy.
func (o *op) onSubdocResponse(p *memdx.Packet) error {
	deleted := subdoc.Deleted(p.Status)
	if o.kind == kindMutateIn && subdoc.PathFailure(p.Status) {
		if err := o.sd.OnMutateFailure(p.Value); err != nil {
			return err
		}
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
	}
	return o.sd.OnResults(p, o.kind == kindMutateIn)
}

// subdocError is the error of spec i whose status is st.
func subdocError(op memdx.OpCode, i int, f *subdoc.Field) *SubdocError {
	return &SubdocError{Index: i, Path: f.Path, Xattr: f.Xattr, Status: statusOf(f.Status),
		Err: statuspolicy.Decide(op, false, f.Status, nil).Sentinel}
}

// LookupInResult is the result of LookupIn: the document's CAS and one
// result per spec, in the caller's order: a value, or the path's error.
type LookupInResult struct {
	Cas uint64
	// IsDeleted: the document read is a tombstone (AccessDeleted).
	IsDeleted     bool
	RetryAttempts int
	RetryReasons  RetryReasons
	fields        []subdoc.Field
}

// Len is the number of specs.
func (r *LookupInResult) Len() int { return len(r.fields) }

// ValueAt returns the JSON value spec i read (empty for ExistsSpec), or its
// error: a *SubdocError matching the path's sentinel (ErrPathNotFound,
// ErrPathMismatch, ...). The value is the result's own; it stays valid.
func (r *LookupInResult) ValueAt(i int) ([]byte, error) {
	if i < 0 || i >= len(r.fields) {
		return nil, subdoc.IndexError(i, len(r.fields))
	}
	f := &r.fields[i]
	if f.Status != memdx.StatusSuccess {
		return nil, subdocError(memdx.OpSubdocMultiLookup, i, f)
	}
	return f.Value, nil
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
	return subdoc.DecodeValue(i, r.fields[i].Path, v, out)
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
	fields []subdoc.Field
}

// ValueAt returns spec i's result: the new value of an IncrementSpec or
// DecrementSpec, nil for specs that return none.
func (r *MutateInResult) ValueAt(i int) ([]byte, error) {
	if i < 0 || i >= r.n {
		return nil, subdoc.IndexError(i, r.n)
	}
	if r.fields == nil {
		return nil, nil
	}
	return r.fields[i].Value, nil
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
	return subdoc.DecodeValue(i, r.fields[i].Path, v, out)
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
	o, err := col.lookupInOp(ctx, "LookupIn", key, specs, opParams{timeout: lo.Timeout, strategy: lo.RetryStrategy, parent: lo.ParentSpan}, lo.AccessDeleted, 0)
	if err != nil {
		return LookupInResult{}, err
	}
	return run(ctx, o, (*op).lookupInResult)
}

// lookupInOp builds a LookupIn of copy replica (0: the active copy).
func (col *Collection) lookupInOp(ctx context.Context, name, key string, specs []LookupInSpec, p opParams, accessDeleted bool, replica int) (*op, error) {
	df := subdoc.LookupDocFlags(accessDeleted, replica > 0)
	o, err := col.newOp(ctx, name, kindLookupIn, key, memdx.NewSubdocMultiLookup(nil, df, nil), p)
	if err != nil {
		return nil, err
	}
	o.target.Replica = replica
	if err := o.setLookups(specs); err != nil {
		o.copyRead = p.copyRead
		e := col.argumentRefused(ctx, o, err)
		putOp(o)
		return nil, e
	}
	o.req = memdx.NewSubdocMultiLookup(o.key, df, o.sd.Lookups)
	return o, nil
}

// setLookups checks specs and makes them o's lookups.
func (o *op) setLookups(specs []LookupInSpec) error {
	if err := o.sd.StartLookups(len(specs)); err != nil {
		return err
	}
	for i := range specs {
		if err := o.sd.AddLookup(i, &specs[i].s); err != nil {
			return err
		}
	}
	return nil
}

func (o *op) lookupInResult() LookupInResult {
	return LookupInResult{Cas: o.cas, IsDeleted: o.deleted, RetryAttempts: o.st.Attempts(), RetryReasons: retryReasonsOf(o.st.Reasons()),
		fields: o.sd.LookupFields()}
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
	exp, expErr := expiryValue(mo.Expiry, col.c.clock)
	req := memdx.NewSubdocMultiMutation(nil, df, exp, nil)
	o, err := col.mutation(ctx, "MutateIn", kindMutateIn, key, req, mutParams{
		opParams: opParams{timeout: mo.Timeout, strategy: mo.RetryStrategy, parent: mo.ParentSpan, invalid: firstErr(dfErr, expErr)},
		cas:      mo.Cas, durability: mo.Durability, durabilityTimeout: mo.DurabilityTimeout})
	if err != nil {
		return MutateInResult{}, err
	}
	o.req.PreserveTTL = mo.PreserveExpiry
	o.insert = df&memdx.SubdocDocAdd != 0
	if err := o.setMutations(specs, df, exp); err != nil {
		e := col.argumentRefused(ctx, o, err)
		putOp(o)
		return MutateInResult{}, e
	}
	defer putOp(o)
	if err := o.c.execute(ctx, o); err != nil {
		return MutateInResult{}, o.mutateInError(err)
	}
	return MutateInResult{MutationResult: o.mutationResult(), IsDeleted: o.deleted, n: len(specs), fields: o.sd.Fields}, nil
}

// docFlags checks the options' document-level settings and returns their
// doc flags.
func (mo *MutateInOptions) docFlags() (memdx.SubdocDocFlag, error) {
	return subdoc.Doc{Store: subdoc.StoreSemantics(mo.StoreSemantic), Cas: mo.Cas != 0, Expiry: mo.Expiry > 0,
		PreserveExpiry: mo.PreserveExpiry, AccessDeleted: mo.AccessDeleted, CreateAsDeleted: mo.CreateAsDeleted,
		ReviveDocument: mo.ReviveDocument}.Flags()
}

// setMutations checks specs and makes them the request's.
func (o *op) setMutations(specs []MutateInSpec, df memdx.SubdocDocFlag, exp uint32) error {
	if err := o.sd.StartMutations(len(specs)); err != nil {
		return err
	}
	for i := range specs {
		if err := o.sd.AddMutation(i, &specs[i].s); err != nil {
			return err
		}
	}
	ms := o.sd.Mutations
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
	if !o.sd.Failed || !errors.As(err, &kv) {
		return err
	}
	i, f := o.sd.Failure()
	se := subdocError(memdx.OpSubdocMultiMutation, i, f)
	kv.Err, kv.Cause = se.Err, se
	kv.seal()
	return err
}
