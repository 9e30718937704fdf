package subdoc

import (
	"math"
	"strconv"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// LookupSpec is one path of a LookupIn (client.LookupInSpec's).
type LookupSpec struct {
	op    memdx.OpCode
	path  string
	xattr bool
	// made: built by a constructor (the zero op is GET, the whole document).
	made bool
	// err is why the constructor refused its arguments; LookupIn reports it.
	err string
}

// Op is the spec's opcode.
func (s *LookupSpec) Op() memdx.OpCode { return s.op }

// Path is the spec's path.
func (s *LookupSpec) Path() string { return s.path }

// Get reads path (client.GetSpec): the whole document body for an empty
// path without xattr.
func Get(path string, xattr bool) LookupSpec {
	if path == "" && !xattr {
		return LookupSpec{op: memdx.OpGet, made: true}
	}
	return Lookup("GetSpec", memdx.OpSubdocGet, path, xattr)
}

// Lookup is a spec of op on path (name: its constructor, client.ExistsSpec
// or CountSpec, for the error). An empty path is refused where kv_engine
// refuses it (its subdoc traits' allow_empty_path: only SUBDOC_GET_COUNT
// takes one, counting the root; SUBDOC_GET and SUBDOC_EXISTS answer EINVAL,
// "Request must include path"), and for an xattr, whose path starts with
// its key (an empty key is XATTR_EINVAL, "Request XATTR key invalid").
func Lookup(name string, op memdx.OpCode, path string, xattr bool) LookupSpec {
	s := LookupSpec{op: op, path: path, xattr: xattr, made: true}
	if path == "" && (xattr || op != memdx.OpSubdocGetCount) {
		s.err = name + " needs a path"
		if xattr {
			s.err += " (an xattr's key)"
		}
	}
	return s
}

// MutateSpec is one change of a MutateIn (client.MutateInSpec's).
type MutateSpec struct {
	op    memdx.OpCode
	flags memdx.SubdocPathFlag
	path  string
	value []byte
	// err is why the constructor refused its arguments; MutateIn reports it.
	err string
}

// Op is the spec's opcode.
func (s *MutateSpec) Op() memdx.OpCode { return s.op }

// Path is the spec's path.
func (s *MutateSpec) Path() string { return s.path }

// Mutate is a spec of op setting path to value, with the path flags
// xattr, mkdir (create missing parents) and macros (expand macros) say; a
// spec with no value, or with macros on a body path, is refused.
func Mutate(op memdx.OpCode, path string, value []byte, xattr, mkdir, macros bool) MutateSpec {
	s := MutateSpec{op: op, path: path, value: value}
	if xattr {
		s.flags |= memdx.SubdocPathXattr
	}
	if mkdir {
		s.flags |= memdx.SubdocPathMkdirP
	}
	if macros {
		s.flags |= memdx.SubdocPathExpandMacros
	}
	switch {
	case len(value) == 0:
		s.err = "no value (JSON null is []byte(\"null\"))"
	case macros && !xattr:
		s.err = "ExpandMacros needs IsXattr: " + kverr.ErrXattrInvalidFlagCombo.Error()
	default:
		s.err = pathRefused(op, path, xattr)
	}
	return s
}

// pathRefused says why kv_engine refuses a mutation spec of op with path
// (an xattr's, with xattr), or returns "": an empty path is taken only by
// the array appends, prepends and add-unique (the root array; its subdoc
// traits' allow_empty_path), never for an xattr, whose path starts with
// its key (an empty key is XATTR_EINVAL, "Request XATTR key invalid").
func pathRefused(op memdx.OpCode, path string, xattr bool) string {
	if path != "" {
		return ""
	}
	if xattr {
		return specName(op) + " needs a path (an xattr's key)"
	}
	switch op {
	case memdx.OpSubdocArrayPushLast, memdx.OpSubdocArrayPushFirst, memdx.OpSubdocArrayAddUnique,
		memdx.OpSet, memdx.OpDelete: // the whole body: ReplaceSpec(""), RemoveSpec("")
		return ""
	}
	return specName(op) + " needs a path"
}

// specName is the client's constructor of a mutation spec of op.
func specName(op memdx.OpCode) string {
	switch op {
	case memdx.OpSubdocDictAdd:
		return "InsertSpec"
	case memdx.OpSubdocDictUpsert:
		return "UpsertSpec"
	case memdx.OpSubdocReplace:
		return "ReplaceSpec"
	case memdx.OpSubdocDelete:
		return "RemoveSpec"
	case memdx.OpSubdocArrayPushLast:
		return "ArrayAppendSpec"
	case memdx.OpSubdocArrayPushFirst:
		return "ArrayPrependSpec"
	case memdx.OpSubdocArrayInsert:
		return "ArrayInsertSpec"
	case memdx.OpSubdocArrayAddUnique:
		return "ArrayAddUniqueSpec"
	case memdx.OpSubdocCounter:
		return "IncrementSpec or DecrementSpec"
	}
	return op.String()
}

// AddPath is Mutate of a dictionary add or upsert (op), which needs a path
// unless xattr (name: the constructor, for the error).
func AddPath(name string, op memdx.OpCode, path string, value []byte, xattr, mkdir, macros bool) MutateSpec {
	s := Mutate(op, path, value, xattr, mkdir, macros)
	if path == "" && !xattr && len(value) > 0 && !macros { // Mutate's error is the path's
		s.err = name + " needs a path (the whole document is written by ReplaceSpec(\"\", ...))"
	}
	return s
}

// Replace replaces the value at path, or sets the whole document body for
// an empty path without xattr.
func Replace(path string, value []byte, xattr, macros bool) MutateSpec {
	op := memdx.OpSubdocReplace
	if path == "" && !xattr {
		op = memdx.OpSet
	}
	return Mutate(op, path, value, xattr, false, macros)
}

// Remove removes path, or deletes the whole document for an empty path
// without xattr.
func Remove(path string, xattr bool) MutateSpec {
	op := memdx.OpSubdocDelete
	if path == "" && !xattr {
		op = memdx.OpDelete
	}
	s := MutateSpec{op: op, path: path, err: pathRefused(op, path, xattr)}
	if xattr {
		s.flags |= memdx.SubdocPathXattr
	}
	return s
}

// Counter adds delta to the integer at path.
func Counter(path string, delta int64, xattr, mkdir bool) MutateSpec {
	return Mutate(memdx.OpSubdocCounter, path, strconv.AppendInt(nil, delta, 10), xattr, mkdir, false)
}

// Decrement subtracts delta from the integer at path; math.MinInt64,
// which has no negation, is refused.
func Decrement(path string, delta int64, xattr, mkdir bool) MutateSpec {
	if delta == math.MinInt64 {
		return MutateSpec{op: memdx.OpSubdocCounter, path: path,
			err: "DecrementSpec: delta " + strconv.FormatInt(delta, 10) + " cannot be negated"}
	}
	return Counter(path, -delta, xattr, mkdir)
}
