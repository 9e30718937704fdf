package subdoc

import (
	"fmt"
	"unsafe"

	"github.com/kvwire/kvwire/memdx"
)

// DocAccessed reports whether a sub-document response status says the
// document was reached: its body holds per-path results.
func DocAccessed(st memdx.Status) bool {
	switch st {
	case memdx.StatusSuccess, memdx.StatusSubdocSuccessDeleted,
		memdx.StatusSubdocMultiPathFailure, memdx.StatusSubdocMultiPathFailureDeleted:
		return true
	}
	return false
}

// Deleted reports whether a status DocAccessed accepts says the document is
// a tombstone.
func Deleted(st memdx.Status) bool {
	return st == memdx.StatusSubdocSuccessDeleted || st == memdx.StatusSubdocMultiPathFailureDeleted
}

// PathFailure reports whether a status DocAccessed accepts says a spec
// failed (SUBDOC_MULTI_PATH_FAILURE, of a live or a deleted document).
func PathFailure(st memdx.Status) bool {
	return st == memdx.StatusSubdocMultiPathFailure || st == memdx.StatusSubdocMultiPathFailureDeleted
}

// OnMutateFailure records the failing spec a MutateIn's
// SUBDOC_MULTI_PATH_FAILURE response value names.
func (s *State) OnMutateFailure(value []byte) error {
	i, st, err := decodeMutateInFailure(value, len(s.Mutations))
	if err != nil {
		return err
	}
	s.Failed, s.FailIndex, s.FailStatus = true, i, st
	return nil
}

// OnResults decodes the results of a LookupIn's response p (one per
// spec) into Fields, or, for a MutateIn (mutation), those of the specs that
// returned one (none: Fields stay nil). It runs on the goroutine reading the
// connection: the value is copied (or decompressed) once, and the fields
// alias the copy.
func (s *State) OnResults(p *memdx.Packet, mutation bool) error {
	if mutation && len(p.Value) == 0 {
		return nil
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
	if mutation {
		s.Fields, err = decodeMutateIn(value, len(s.Mutations))
	} else {
		s.Fields, err = decodeLookupIn(value, len(s.Lookups))
	}
	return err
}

// LookupFields returns a LookupIn's fields, each with its spec's path.
func (s *State) LookupFields() []Field {
	for i := range s.Fields {
		l := &s.Lookups[i]
		f := &s.Fields[i]
		f.Path, f.Xattr = unsafe.String(unsafe.SliceData(l.Path), len(l.Path)), l.Flags&memdx.SubdocPathXattr != 0
	}
	return s.Fields
}

// Failure returns the field of the spec a MutateIn's
// SUBDOC_MULTI_PATH_FAILURE named (Failed), with its index.
func (s *State) Failure() (int, *Field) {
	m := &s.Mutations[s.FailIndex]
	return s.FailIndex, &Field{Status: s.FailStatus, Path: string(m.Path), Xattr: m.Flags&memdx.SubdocPathXattr != 0}
}

// decodeLookupIn decodes a SUBDOC_MULTI_LOOKUP response value that must hold
// one result per spec (n). Values alias value.
func decodeLookupIn(value []byte, n int) ([]Field, error) {
	fields := make([]Field, n)
	for i := range n {
		r, rest, err := memdx.NextSubdocLookupResult(value)
		if err != nil {
			return nil, fmt.Errorf("lookup result %d of %d: %w", i, n, err)
		}
		fields[i].Status, fields[i].Value = r.Status, r.Value
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
func decodeMutateIn(value []byte, n int) ([]Field, error) {
	fields := make([]Field, n)
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
		fields[i].Value = r.Value
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
