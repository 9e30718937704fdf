// Package subdoc is the spec side of client's sub-document operations
// (LookupIn, MutateIn, kv_engine docs/SubDocument.md): the specs the
// constructors make (path flags, macro expansion, the checks of their
// arguments), the spec lists a SUBDOC_MULTI_LOOKUP or SUBDOC_MULTI_MUTATION
// carries (count, xattr-first order, doc flags), and the decoding of the
// per-path results of a response.
//
// It does no I/O and knows no operation: client's op holds a State, encodes
// its request from State's spec lists on every attempt, and hands the
// response to State's decoders. Client's public spec and result types wrap
// this package's and keep their documentation.
package subdoc

import (
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/transcode"
	"github.com/kvwire/kvwire/memdx"
)

// MaxSpecs is the number of specs one operation may hold (kv_engine's
// SUBDOC_MULTI_MAX_PATHS; client.MaxSubdocSpecs).
const MaxSpecs = memdx.SubdocMultiMaxPaths

// Field is the result of one spec: its status and value (aliasing the
// operation's one copy of the response), with the spec's path for errors.
type Field struct {
	Status memdx.Status
	Value  []byte
	Path   string
	Xattr  bool
}

// State is a sub-document operation's part of an op: the specs the request
// encodes on every attempt, and the decoded response.
type State struct {
	Lookups   []memdx.SubdocLookupOp
	Mutations []memdx.SubdocMutateOp
	Fields    []Field
	// Failed: a MutateIn's SUBDOC_MULTI_PATH_FAILURE named spec FailIndex
	// with FailStatus.
	Failed     bool
	FailIndex  int
	FailStatus memdx.Status
	// body is the first body (non-xattr) spec added, -1 for none.
	body int
}

// Keep returns what a pooled op keeps: the spec buffers, emptied (so that
// they hold no caller's path or value) unless they grew past MaxSpecs.
func (s *State) Keep() State {
	var k State
	if cap(s.Lookups) <= MaxSpecs {
		k.Lookups = s.Lookups[:0]
		clear(k.Lookups[:cap(k.Lookups)])
	}
	if cap(s.Mutations) <= MaxSpecs {
		k.Mutations = s.Mutations[:0]
		clear(k.Mutations[:cap(k.Mutations)])
	}
	return k
}

// bytesOf returns s's bytes without copying; they are never written.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// checkSpecCount refuses an empty or too long spec list.
func checkSpecCount(n int) error {
	switch {
	case n == 0:
		return errors.New("no specs")
	case n > MaxSpecs:
		return fmt.Errorf("%d specs; at most %d per operation", n, MaxSpecs)
	}
	return nil
}

// xattrOrderError is the error of spec i, an xattr spec after body spec
// body.
func xattrOrderError(i int, path string, body int) error {
	return fmt.Errorf("spec %d (xattr %q) follows body spec %d: %w", i, path, body, kverr.ErrXattrInvalidOrder)
}

// order checks that spec i (of path, an xattr spec or not) does not follow
// a body spec, and records the first body spec.
func (s *State) order(i int, path string, xattr bool) error {
	if xattr {
		if s.body >= 0 {
			return xattrOrderError(i, path, s.body)
		}
	} else if s.body < 0 {
		s.body = i
	}
	return nil
}

// StartLookups checks the length (n) of a LookupIn's spec list and empties
// the lookups for AddLookup.
func (s *State) StartLookups(n int) error {
	s.Lookups, s.body = s.Lookups[:0], -1
	return checkSpecCount(n)
}

// AddLookup checks spec i and appends it to the lookups.
func (s *State) AddLookup(i int, sp *LookupSpec) error {
	if !sp.made {
		return fmt.Errorf("spec %d was not made by GetSpec, ExistsSpec or CountSpec", i)
	}
	if sp.err != "" {
		return fmt.Errorf("spec %d (path %q): %s", i, sp.path, sp.err)
	}
	flags := memdx.SubdocPathFlag(0)
	if sp.xattr {
		flags = memdx.SubdocPathXattr
	}
	if err := s.order(i, sp.path, sp.xattr); err != nil {
		return err
	}
	s.Lookups = append(s.Lookups, memdx.SubdocLookupOp{Op: sp.op, Flags: flags, Path: bytesOf(sp.path)})
	return nil
}

// StartMutations checks the length (n) of a MutateIn's spec list and
// empties the mutations for AddMutation.
func (s *State) StartMutations(n int) error {
	s.Mutations, s.body = s.Mutations[:0], -1
	return checkSpecCount(n)
}

// AddMutation checks spec i and appends it to the mutations.
func (s *State) AddMutation(i int, sp *MutateSpec) error {
	if sp.op == 0 {
		return fmt.Errorf("spec %d was not made by a MutateInSpec constructor (UpsertSpec, ...)", i)
	}
	if sp.err != "" {
		return fmt.Errorf("spec %d (path %q): %s", i, sp.path, sp.err)
	}
	if err := s.order(i, sp.path, sp.flags&memdx.SubdocPathXattr != 0); err != nil {
		return err
	}
	s.Mutations = append(s.Mutations, memdx.SubdocMutateOp{Op: sp.op, Flags: sp.flags, Path: bytesOf(sp.path), Value: sp.value})
	return nil
}

// LookupDocFlags are the doc flags of a LookupIn: of a deleted document
// too (accessDeleted), on a replica (replica).
func LookupDocFlags(accessDeleted, replica bool) memdx.SubdocDocFlag {
	var df memdx.SubdocDocFlag
	if accessDeleted {
		df |= memdx.SubdocDocAccessDeleted
	}
	if replica {
		df |= memdx.SubdocDocReplicaRead
	}
	return df
}

// StoreSemantics is what a MutateIn does about the document as a whole,
// with client.StoreSemantics' values.
type StoreSemantics uint8

// Store semantics.
const (
	StoreReplace StoreSemantics = iota
	StoreUpsert
	StoreInsert
)

// Doc is a MutateIn's document-level settings (client.MutateInOptions').
type Doc struct {
	Store StoreSemantics
	// Cas, Expiry: the caller set a CAS, an expiry.
	Cas, Expiry     bool
	PreserveExpiry  bool
	AccessDeleted   bool
	CreateAsDeleted bool
	ReviveDocument  bool
}

// Flags checks d and returns its doc flags.
func (d Doc) Flags() (memdx.SubdocDocFlag, error) {
	bad := func(why string) (memdx.SubdocDocFlag, error) {
		return 0, errors.New(why)
	}
	var df memdx.SubdocDocFlag
	switch d.Store {
	case StoreReplace:
		if d.CreateAsDeleted {
			return bad("CreateAsDeleted needs StoreSemanticsUpsert or StoreSemanticsInsert")
		}
	case StoreUpsert:
		df |= memdx.SubdocDocMkdoc
	case StoreInsert:
		if d.Cas {
			return bad("StoreSemanticsInsert takes no CAS")
		}
		if d.PreserveExpiry {
			return bad("StoreSemanticsInsert has no expiry to preserve")
		}
		df |= memdx.SubdocDocAdd
	default:
		return bad("unknown StoreSemantic " + strconv.Itoa(int(d.Store)))
	}
	if d.PreserveExpiry && d.Expiry {
		return bad("PreserveExpiry with an Expiry")
	}
	if d.AccessDeleted || d.ReviveDocument {
		df |= memdx.SubdocDocAccessDeleted
	}
	if d.CreateAsDeleted {
		if d.ReviveDocument {
			return bad("CreateAsDeleted with ReviveDocument")
		}
		df |= memdx.SubdocDocCreateAsDeleted
	}
	if d.ReviveDocument {
		df |= memdx.SubdocDocReviveDocument
	}
	return df, nil
}

// IndexError is the error of a result's spec index i outside [0, n).
func IndexError(i, n int) error {
	return fmt.Errorf("%w: spec index %d out of range [0, %d)", kverr.ErrInvalidArgument, i, n)
}

// DecodeValue decodes spec i's JSON value v (of path) into out, as
// client.JSONTranscoder decodes a JSON document.
func DecodeValue(i int, path string, v []byte, out any) error {
	if err := transcode.DecodeJSON(v, transcode.FlagsJSON, out); err != nil {
		return fmt.Errorf("sub-document spec %d (path %q): %w", i, path, err)
	}
	return nil
}
