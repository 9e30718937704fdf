package client

import (
	"github.com/kvwire/kvwire/internal/subdoc"
	"github.com/kvwire/kvwire/memdx"
)

// The specs of LookupIn and MutateIn (subdoc.go), made by their
// constructors.

// LookupInSpec is one path of a LookupIn, made by GetSpec, ExistsSpec or
// CountSpec. The zero value is refused.
type LookupInSpec struct{ s subdoc.LookupSpec }

// GetSpecOptions are the options of GetSpec.
type GetSpecOptions struct {
	// IsXattr makes the path name an extended attribute.
	IsXattr bool
}

// GetSpec reads the value at path, as JSON. An empty path (without
// IsXattr) reads the whole document body; with IsXattr, LookupIn refuses
// it (an xattr path starts with its key), as it does an empty path of
// ExistsSpec.
func GetSpec(path string, opts *GetSpecOptions) LookupInSpec {
	return LookupInSpec{subdoc.Get(path, opts != nil && opts.IsXattr)}
}

// ExistsSpecOptions are the options of ExistsSpec.
type ExistsSpecOptions struct {
	IsXattr bool
}

// ExistsSpec checks that path exists (LookupInResult.Exists). The path
// must not be empty (LookupIn refuses it, as kv_engine would).
func ExistsSpec(path string, opts *ExistsSpecOptions) LookupInSpec {
	return LookupInSpec{subdoc.Lookup("ExistsSpec", memdx.OpSubdocExists, path, opts != nil && opts.IsXattr)}
}

// CountSpecOptions are the options of CountSpec.
type CountSpecOptions struct {
	IsXattr bool
}

// CountSpec counts the elements of the array or the keys of the object at
// path (the result is a JSON number); an empty path (without IsXattr)
// counts the document's root.
func CountSpec(path string, opts *CountSpecOptions) LookupInSpec {
	return LookupInSpec{subdoc.Lookup("CountSpec", memdx.OpSubdocGetCount, path, opts != nil && opts.IsXattr)}
}

// MutateInSpec is one change of a MutateIn, made by InsertSpec,
// UpsertSpec, ReplaceSpec, RemoveSpec, the Array*Spec functions,
// IncrementSpec or DecrementSpec. The zero value is refused, and so is an
// empty path where kv_engine needs one (every spec but ReplaceSpec and
// RemoveSpec of the whole body and the array appends, prepends and
// add-unique of a document that is an array; no xattr spec), before
// anything is sent.
//
// Values are JSON text, sent as given (the server checks them): a string
// is []byte(`"text"`), null is []byte("null"). The array specs take one
// value or several separated by commas (`1,2,3`).
type MutateInSpec struct{ s subdoc.MutateSpec }

// MutationMacro is a value the server replaces when it stores a mutation,
// in an extended attribute written with ExpandMacros.
type MutationMacro string

// Mutation macros.
const (
	// MutationMacroCAS is the mutation's CAS, as a hex string.
	MutationMacroCAS MutationMacro = `"${Mutation.CAS}"`
	// MutationMacroSeqNo is the mutation's sequence number, as a hex string.
	MutationMacroSeqNo MutationMacro = `"${Mutation.seqno}"`
	// MutationMacroValueCRC32c is the CRC32-C of the new document body.
	MutationMacroValueCRC32c MutationMacro = `"${Mutation.value_crc32c}"`
)

// Bytes returns the macro as a spec value.
func (m MutationMacro) Bytes() []byte { return []byte(m) }

// InsertSpecOptions are the options of InsertSpec.
type InsertSpecOptions struct {
	// CreatePath creates missing parent objects of the path.
	CreatePath bool
	IsXattr    bool
	// ExpandMacros expands macros (MutationMacroCAS, ...) in the value;
	// only with IsXattr.
	ExpandMacros bool
}

// InsertSpec adds path with value; the path must not exist (else
// ErrPathExists). The path must not be empty.
func InsertSpec(path string, value []byte, opts *InsertSpecOptions) MutateInSpec {
	var o InsertSpecOptions
	if opts != nil {
		o = *opts
	}
	return MutateInSpec{subdoc.AddPath("InsertSpec", memdx.OpSubdocDictAdd, path, value, o.IsXattr, o.CreatePath, o.ExpandMacros)}
}

// UpsertSpecOptions are the options of UpsertSpec.
type UpsertSpecOptions struct {
	CreatePath   bool
	IsXattr      bool
	ExpandMacros bool
}

// UpsertSpec sets path to value, adding it if missing. The path must not
// be empty.
func UpsertSpec(path string, value []byte, opts *UpsertSpecOptions) MutateInSpec {
	var o UpsertSpecOptions
	if opts != nil {
		o = *opts
	}
	return MutateInSpec{subdoc.AddPath("UpsertSpec", memdx.OpSubdocDictUpsert, path, value, o.IsXattr, o.CreatePath, o.ExpandMacros)}
}

// ReplaceSpecOptions are the options of ReplaceSpec.
type ReplaceSpecOptions struct {
	IsXattr      bool
	ExpandMacros bool
}

// ReplaceSpec replaces the value at path, which must exist (else
// ErrPathNotFound). An empty path (without IsXattr) sets the whole
// document body. An empty value is refused before sending, as for every
// spec that carries one: kv_engine refuses such a spec (EINVAL, "Request
// must include value"), the whole-body set included, and an empty body is
// no JSON document.
func ReplaceSpec(path string, value []byte, opts *ReplaceSpecOptions) MutateInSpec {
	var o ReplaceSpecOptions
	if opts != nil {
		o = *opts
	}
	return MutateInSpec{subdoc.Replace(path, value, o.IsXattr, o.ExpandMacros)}
}

// RemoveSpecOptions are the options of RemoveSpec.
type RemoveSpecOptions struct {
	IsXattr bool
}

// RemoveSpec removes path. An empty path (without IsXattr) deletes the
// whole document: its body and user xattrs; a document with system xattrs
// ("_name") stays as a tombstone holding them.
func RemoveSpec(path string, opts *RemoveSpecOptions) MutateInSpec {
	return MutateInSpec{subdoc.Remove(path, opts != nil && opts.IsXattr)}
}

// ArrayAppendSpecOptions are the options of ArrayAppendSpec.
type ArrayAppendSpecOptions struct {
	// CreatePath creates the array (and its parents) when missing.
	CreatePath   bool
	IsXattr      bool
	ExpandMacros bool
}

// ArrayAppendSpec adds values (one JSON value, or several separated by
// commas) at the end of the array at path ("" is a document that is an
// array).
func ArrayAppendSpec(path string, values []byte, opts *ArrayAppendSpecOptions) MutateInSpec {
	var o ArrayAppendSpecOptions
	if opts != nil {
		o = *opts
	}
	return MutateInSpec{subdoc.Mutate(memdx.OpSubdocArrayPushLast, path, values, o.IsXattr, o.CreatePath, o.ExpandMacros)}
}

// ArrayPrependSpecOptions are the options of ArrayPrependSpec.
type ArrayPrependSpecOptions struct {
	CreatePath   bool
	IsXattr      bool
	ExpandMacros bool
}

// ArrayPrependSpec adds values at the start of the array at path.
func ArrayPrependSpec(path string, values []byte, opts *ArrayPrependSpecOptions) MutateInSpec {
	var o ArrayPrependSpecOptions
	if opts != nil {
		o = *opts
	}
	return MutateInSpec{subdoc.Mutate(memdx.OpSubdocArrayPushFirst, path, values, o.IsXattr, o.CreatePath, o.ExpandMacros)}
}

// ArrayInsertSpecOptions are the options of ArrayInsertSpec.
type ArrayInsertSpecOptions struct {
	IsXattr      bool
	ExpandMacros bool
}

// ArrayInsertSpec inserts values at the array position path names
// ("list[2]"); the index may equal the array's length (append), no more.
func ArrayInsertSpec(path string, values []byte, opts *ArrayInsertSpecOptions) MutateInSpec {
	var o ArrayInsertSpecOptions
	if opts != nil {
		o = *opts
	}
	return MutateInSpec{subdoc.Mutate(memdx.OpSubdocArrayInsert, path, values, o.IsXattr, false, o.ExpandMacros)}
}

// ArrayAddUniqueSpecOptions are the options of ArrayAddUniqueSpec.
type ArrayAddUniqueSpecOptions struct {
	CreatePath bool
	IsXattr    bool
}

// ArrayAddUniqueSpec adds value, a JSON primitive, to the array at path
// unless it is there already (ErrPathExists); the array must hold only
// primitives (else ErrPathMismatch).
func ArrayAddUniqueSpec(path string, value []byte, opts *ArrayAddUniqueSpecOptions) MutateInSpec {
	var o ArrayAddUniqueSpecOptions
	if opts != nil {
		o = *opts
	}
	return MutateInSpec{subdoc.Mutate(memdx.OpSubdocArrayAddUnique, path, value, o.IsXattr, o.CreatePath, false)}
}

// CounterSpecOptions are the options of IncrementSpec and DecrementSpec.
type CounterSpecOptions struct {
	CreatePath bool
	IsXattr    bool
}

// IncrementSpec adds delta to the integer at path (a missing path starts
// at 0); the new value is the spec's result (MutateInResult.ContentAt). A
// delta of 0 fails with ErrDeltaInvalid.
func IncrementSpec(path string, delta int64, opts *CounterSpecOptions) MutateInSpec {
	var o CounterSpecOptions
	if opts != nil {
		o = *opts
	}
	return MutateInSpec{subdoc.Counter(path, delta, o.IsXattr, o.CreatePath)}
}

// DecrementSpec subtracts delta from the integer at path (see
// IncrementSpec).
func DecrementSpec(path string, delta int64, opts *CounterSpecOptions) MutateInSpec {
	var o CounterSpecOptions
	if opts != nil {
		o = *opts
	}
	return MutateInSpec{subdoc.Decrement(path, delta, o.IsXattr, o.CreatePath)}
}
