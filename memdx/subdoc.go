package memdx

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// Sub-document commands (kv_engine docs/SubDocument.md, "Wire Protocol
// Format"; include/memcached/protocol_binary.h).
//
// A single-path command (OpSubdocGet ... OpSubdocReplaceBodyWithXattr) has
// extras of path length (2), path flags (1), then an optional expiry (4, for
// mutations) and optional doc flags (1), so 3, 4, 7 or 8 bytes; its body is
// the key, the path, then the value. The response value is the result (GET,
// COUNTER, GET_COUNT) and the extras a mutation token (DecodeMutationToken).
//
// A multi-path command carries its paths as a list of specs in the value:
//   - SUBDOC_MULTI_LOOKUP: extras are the doc flags (0 or 1 byte); each spec
//     is opcode (1), path flags (1), path length (2), path. Each result in
//     the response is status (2), value length (4), value, one per spec.
//   - SUBDOC_MULTI_MUTATION: extras are an expiry (4) then the doc flags
//     (1), each optional (0, 1, 4 or 5 bytes); each spec is opcode (1), path
//     flags (1), path length (2), value length (4), path, value. The response
//     holds, on success, one result per spec that returns a value: index (1),
//     status (2), value length (4), value; on failure exactly one result,
//     index (1) and status (2), for the first spec that failed.

// SubdocMultiMaxPaths is the number of specs kv_engine accepts in one
// multi-path command. memdx does not enforce it: the server answers a longer
// list with SUBDOC_INVALID_COMBO.
const SubdocMultiMaxPaths = 16

// SubdocPathFlag is the flag byte of one path.
type SubdocPathFlag uint8

// Path flags.
const (
	// SubdocPathMkdirP creates missing intermediate objects (mutations).
	SubdocPathMkdirP SubdocPathFlag = 0x01
	// SubdocPathXattr makes the path refer to an extended attribute.
	SubdocPathXattr SubdocPathFlag = 0x04
	// SubdocPathExpandMacros expands macros such as "${Mutation.CAS}" in the
	// value; only valid with SubdocPathXattr.
	SubdocPathExpandMacros SubdocPathFlag = 0x10
	// SubdocPathBinaryValue says the value is binary, not JSON (HELLO
	// SubdocBinaryXattr).
	SubdocPathBinaryValue SubdocPathFlag = 0x20
)

func (f SubdocPathFlag) String() string {
	return flagString(uint8(f), []flagName{
		{uint8(SubdocPathMkdirP), "mkdir_p"}, {uint8(SubdocPathXattr), "xattr"},
		{uint8(SubdocPathExpandMacros), "expand_macros"}, {uint8(SubdocPathBinaryValue), "binary_value"},
	})
}

// SubdocDocFlag is the doc-flags byte of a sub-document command.
type SubdocDocFlag uint8

// Doc flags.
const (
	// SubdocDocMkdoc creates the document if it is missing (upsert
	// semantics; implies SubdocPathMkdirP on every path).
	SubdocDocMkdoc SubdocDocFlag = 0x01
	// SubdocDocAdd creates the document and fails if it exists (insert
	// semantics). Not valid with SubdocDocMkdoc.
	SubdocDocAdd SubdocDocFlag = 0x02
	// SubdocDocAccessDeleted allows access to a deleted document's
	// extended attributes.
	SubdocDocAccessDeleted SubdocDocFlag = 0x04
	// SubdocDocCreateAsDeleted creates a missing document as deleted
	// (with Mkdoc or Add).
	SubdocDocCreateAsDeleted SubdocDocFlag = 0x08
	// SubdocDocReviveDocument makes a deleted document live again.
	SubdocDocReviveDocument SubdocDocFlag = 0x10
	// SubdocDocReplicaRead runs a lookup on a replica vbucket.
	SubdocDocReplicaRead SubdocDocFlag = 0x20
)

func (f SubdocDocFlag) String() string {
	return flagString(uint8(f), []flagName{
		{uint8(SubdocDocMkdoc), "mkdoc"}, {uint8(SubdocDocAdd), "add"},
		{uint8(SubdocDocAccessDeleted), "access_deleted"}, {uint8(SubdocDocCreateAsDeleted), "create_as_deleted"},
		{uint8(SubdocDocReviveDocument), "revive_document"}, {uint8(SubdocDocReplicaRead), "replica_read"},
	})
}

type flagName struct {
	bit  uint8
	name string
}

func flagString(v uint8, names []flagName) string {
	if v == 0 {
		return "none"
	}
	var parts []string
	for _, n := range names {
		if v&n.bit != 0 {
			parts = append(parts, n.name)
			v &^= n.bit
		}
	}
	if v != 0 {
		parts = append(parts, fmt.Sprintf("0x%02x", v))
	}
	return strings.Join(parts, "|")
}

// SubdocLookupOp is one spec of a SUBDOC_MULTI_LOOKUP.
type SubdocLookupOp struct {
	// Op is OpSubdocGet, OpSubdocExists, OpSubdocGetCount, or OpGet with an
	// empty path for the whole document.
	Op    OpCode
	Flags SubdocPathFlag
	Path  []byte
}

// SubdocMutateOp is one spec of a SUBDOC_MULTI_MUTATION.
type SubdocMutateOp struct {
	// Op is a single-path mutation opcode (OpSubdocDictUpsert, ...), or OpSet
	// / OpDelete with an empty path for the whole document.
	Op    OpCode
	Flags SubdocPathFlag
	Path  []byte
	Value []byte
}

// subdocExtras builds single-path extras: path length, path flags, optional
// expiry and optional doc flags.
func subdocExtras(r *Request, pathLen int, flags SubdocPathFlag, docFlags SubdocDocFlag, expiry uint32) {
	var e [8]byte
	binary.BigEndian.PutUint16(e[0:2], uint16(pathLen)) // AppendTo refuses paths over 65535
	e[2] = byte(flags)
	n := 3
	if expiry != 0 {
		binary.BigEndian.PutUint32(e[3:7], expiry)
		n = 7
	}
	if docFlags != 0 {
		e[n] = byte(docFlags)
		n++
	}
	r.setExtras(e[:n])
}

// NewSubdocLookup builds a single-path lookup (OpSubdocGet, OpSubdocExists,
// OpSubdocGetCount): extras are path length, path flags and, when non-zero,
// the doc flags. The response value is the result.
func NewSubdocLookup(op OpCode, key, path []byte, flags SubdocPathFlag, docFlags SubdocDocFlag) Request {
	r := Request{OpCode: op, Key: key, subdocPath: path}
	subdocExtras(&r, len(path), flags, docFlags, 0)
	return r
}

// NewSubdocMutation builds a single-path mutation (OpSubdocDictAdd,
// OpSubdocDictUpsert, OpSubdocDelete, OpSubdocReplace, the array ops,
// OpSubdocCounter, OpSubdocReplaceBodyWithXattr): extras are path length,
// path flags, the expiry when non-zero and the doc flags when non-zero; the
// body is key, path, value. Cas guards it when non-zero.
func NewSubdocMutation(op OpCode, key, path, value []byte, flags SubdocPathFlag, docFlags SubdocDocFlag, expiry uint32) Request {
	r := Request{OpCode: op, Key: key, Value: value, subdocPath: path}
	subdocExtras(&r, len(path), flags, docFlags, expiry)
	return r
}

// NewSubdocMultiLookup builds SUBDOC_MULTI_LOOKUP: extras are the doc flags
// when non-zero, the value the specs, which AppendTo encodes from ops (ops is
// read, not copied: keep it unchanged while the request may be re-encoded).
// Decode the response with DecodeSubdocMultiLookup.
func NewSubdocMultiLookup(key []byte, docFlags SubdocDocFlag, ops []SubdocLookupOp) Request {
	r := Request{OpCode: OpSubdocMultiLookup, Key: key, lookups: ops}
	if docFlags != 0 {
		r.setExtras([]byte{byte(docFlags)})
	}
	return r
}

// NewSubdocMultiMutation builds SUBDOC_MULTI_MUTATION: extras are the expiry
// when non-zero, then the doc flags when non-zero; the value is the specs,
// encoded by AppendTo from ops (read, not copied). Cas guards it when
// non-zero. Decode the response with DecodeSubdocMultiMutation.
func NewSubdocMultiMutation(key []byte, docFlags SubdocDocFlag, expiry uint32, ops []SubdocMutateOp) Request {
	r := Request{OpCode: OpSubdocMultiMutation, Key: key, mutations: ops}
	var e [5]byte
	n := 0
	if expiry != 0 {
		binary.BigEndian.PutUint32(e[0:4], expiry)
		n = 4
	}
	if docFlags != 0 {
		e[n] = byte(docFlags)
		n++
	}
	if n > 0 {
		r.setExtras(e[:n])
	}
	return r
}

// specsLen is the encoded size of the request's multi-path specs.
func (r *Request) specsLen() (int, error) {
	n := 0
	for i := range r.lookups {
		if l := len(r.lookups[i].Path); l > math.MaxUint16 {
			return 0, badRequest("sub-document spec path", "spec %d: %d bytes exceed 65535", i, l)
		}
		n += 4 + len(r.lookups[i].Path)
	}
	for i := range r.mutations {
		m := &r.mutations[i]
		if len(m.Path) > math.MaxUint16 {
			return 0, badRequest("sub-document spec path", "spec %d: %d bytes exceed 65535", i, len(m.Path))
		}
		if uint64(len(m.Value)) > math.MaxUint32 {
			return 0, badRequest("sub-document spec value", "spec %d: %d bytes exceed 4 GiB", i, len(m.Value))
		}
		n += 8 + len(m.Path) + len(m.Value)
	}
	return n, nil
}

// appendSpecs appends the request's multi-path specs (already validated by
// specsLen).
func (r *Request) appendSpecs(dst []byte) []byte {
	for i := range r.lookups {
		l := &r.lookups[i]
		dst = append(dst, byte(l.Op), byte(l.Flags))
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(l.Path)))
		dst = append(dst, l.Path...)
	}
	for i := range r.mutations {
		m := &r.mutations[i]
		dst = append(dst, byte(m.Op), byte(m.Flags))
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(m.Path)))
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.Value)))
		dst = append(dst, m.Path...)
		dst = append(dst, m.Value...)
	}
	return dst
}

// SubdocLookupResult is one result of a SUBDOC_MULTI_LOOKUP response.
type SubdocLookupResult struct {
	Status Status
	// Value aliases the decoded buffer; empty for EXISTS and failures.
	Value []byte
}

// NextSubdocLookupResult decodes the lookup result at the start of b and
// returns it with the rest of b.
func NextSubdocLookupResult(b []byte) (SubdocLookupResult, []byte, error) {
	if len(b) < 6 {
		return SubdocLookupResult{}, nil, malformed("SUBDOC_MULTI_LOOKUP result", "header",
			"%d bytes, want at least 6 (status, value length)", len(b))
	}
	st := Status(binary.BigEndian.Uint16(b[0:2]))
	vl := binary.BigEndian.Uint32(b[2:6])
	if uint64(vl) > uint64(len(b)-6) {
		return SubdocLookupResult{}, nil, malformed("SUBDOC_MULTI_LOOKUP result", "value length",
			"%d does not fit in the %d bytes left", vl, len(b)-6)
	}
	end := 6 + int(vl)
	return SubdocLookupResult{Status: st, Value: b[6:end:end]}, b[end:], nil
}

// DecodeSubdocMultiLookup appends the results in a SUBDOC_MULTI_LOOKUP
// response value (status SUCCESS or SUBDOC_MULTI_PATH_FAILURE and their
// _DELETED forms) to dst, one per spec of the request, in spec order. Values
// alias value; with a dst of enough capacity it allocates nothing.
func DecodeSubdocMultiLookup(value []byte, dst []SubdocLookupResult) ([]SubdocLookupResult, error) {
	for len(value) > 0 {
		r, rest, err := NextSubdocLookupResult(value)
		if err != nil {
			return dst, err
		}
		dst = append(dst, r)
		value = rest
	}
	return dst, nil
}

// AppendSubdocLookupResult appends one lookup result (for servers and
// tests).
func AppendSubdocLookupResult(dst []byte, status Status, value []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(status))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(value)))
	return append(dst, value...)
}

// SubdocMutateResult is one result of a SUBDOC_MULTI_MUTATION response.
type SubdocMutateResult struct {
	// Index is the position of the spec in the request.
	Index uint8
	// Status is SUCCESS for the results of a successful multi-mutation, and
	// the failing spec's status in the single result of a failed one.
	Status Status
	// Value aliases the decoded buffer; a failure result has none.
	Value []byte
}

// NextSubdocMutateResult decodes the mutation result at the start of b and
// returns it with the rest of b: index (1) and status (2), then value length
// (4) and value only when the status is SUCCESS.
func NextSubdocMutateResult(b []byte) (SubdocMutateResult, []byte, error) {
	if len(b) < 3 {
		return SubdocMutateResult{}, nil, malformed("SUBDOC_MULTI_MUTATION result", "header",
			"%d bytes, want at least 3 (index, status)", len(b))
	}
	r := SubdocMutateResult{Index: b[0], Status: Status(binary.BigEndian.Uint16(b[1:3]))}
	if r.Status != StatusSuccess {
		return r, b[3:], nil
	}
	if len(b) < 7 {
		return SubdocMutateResult{}, nil, malformed("SUBDOC_MULTI_MUTATION result", "value length",
			"a success result needs 7 bytes, %d left", len(b))
	}
	vl := binary.BigEndian.Uint32(b[3:7])
	if uint64(vl) > uint64(len(b)-7) {
		return SubdocMutateResult{}, nil, malformed("SUBDOC_MULTI_MUTATION result", "value length",
			"%d does not fit in the %d bytes left", vl, len(b)-7)
	}
	end := 7 + int(vl)
	r.Value = b[7:end:end]
	return r, b[end:], nil
}

// DecodeSubdocMultiMutation appends the results in a SUBDOC_MULTI_MUTATION
// response value to dst. On success (header status SUCCESS) there is one
// result per spec that returns a value (a COUNTER, say); on
// SUBDOC_MULTI_PATH_FAILURE there is one, naming the first spec that failed.
// Values alias value; with a dst of enough capacity it allocates nothing.
func DecodeSubdocMultiMutation(value []byte, dst []SubdocMutateResult) ([]SubdocMutateResult, error) {
	for len(value) > 0 {
		r, rest, err := NextSubdocMutateResult(value)
		if err != nil {
			return dst, err
		}
		dst = append(dst, r)
		value = rest
	}
	return dst, nil
}

// AppendSubdocMutateResult appends one mutation result (for servers and
// tests): the short failure form when status is not SUCCESS.
func AppendSubdocMutateResult(dst []byte, index uint8, status Status, value []byte) []byte {
	dst = append(dst, index)
	dst = binary.BigEndian.AppendUint16(dst, uint16(status))
	if status != StatusSuccess {
		return dst
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(value)))
	return append(dst, value...)
}

// SubdocRequest is a decoded sub-document request, for servers (the mock
// cluster) and tests. Slices alias the packet.
type SubdocRequest struct {
	// Path and Value are those of a single-path command.
	Path  []byte
	Value []byte
	// Flags are a single-path command's path flags.
	Flags    SubdocPathFlag
	DocFlags SubdocDocFlag
	// Expiry is set when HasExpiry (mutations only).
	Expiry    uint32
	HasExpiry bool
	// Lookups or Mutations are the specs of a multi-path command.
	Lookups   []SubdocLookupOp
	Mutations []SubdocMutateOp
}

// DecodeSubdocRequest decodes the sub-document part of a request packet: the
// extras, and the path and value of a single-path command or the specs of a
// multi-path one. It allocates the spec slices.
func DecodeSubdocRequest(p *Packet) (SubdocRequest, error) {
	var r SubdocRequest
	what := p.OpCode.String() + " request"
	switch p.OpCode {
	case OpSubdocMultiLookup:
		switch len(p.Extras) {
		case 0:
		case 1:
			r.DocFlags = SubdocDocFlag(p.Extras[0])
		default:
			return r, malformed(what, "extras", "%d bytes, want 0 or 1 (doc flags)", len(p.Extras))
		}
		for b := p.Value; len(b) > 0; {
			op, rest, err := NextSubdocLookupOp(b)
			if err != nil {
				return SubdocRequest{}, err
			}
			r.Lookups = append(r.Lookups, op)
			b = rest
		}
		return r, nil
	case OpSubdocMultiMutation:
		e := p.Extras
		switch len(e) {
		case 0, 1, 4, 5:
		default:
			return r, malformed(what, "extras", "%d bytes, want 0, 1, 4 or 5 (expiry, doc flags)", len(e))
		}
		if len(e) >= 4 {
			r.Expiry, r.HasExpiry = binary.BigEndian.Uint32(e[0:4]), true
			e = e[4:]
		}
		if len(e) == 1 {
			r.DocFlags = SubdocDocFlag(e[0])
		}
		for b := p.Value; len(b) > 0; {
			op, rest, err := NextSubdocMutateOp(b)
			if err != nil {
				return SubdocRequest{}, err
			}
			r.Mutations = append(r.Mutations, op)
			b = rest
		}
		return r, nil
	}
	e := p.Extras
	switch len(e) {
	case 3, 4, 7, 8:
	default:
		return r, malformed(what, "extras", "%d bytes, want 3, 4, 7 or 8 (path length, flags, expiry, doc flags)", len(e))
	}
	pl := int(binary.BigEndian.Uint16(e[0:2]))
	r.Flags = SubdocPathFlag(e[2])
	if len(e) >= 7 {
		r.Expiry, r.HasExpiry = binary.BigEndian.Uint32(e[3:7]), true
	}
	if len(e) == 4 || len(e) == 8 {
		r.DocFlags = SubdocDocFlag(e[len(e)-1])
	}
	if pl > len(p.Value) {
		return SubdocRequest{}, malformed(what, "path length", "%d exceeds the %d bytes after the key", pl, len(p.Value))
	}
	r.Path = p.Value[:pl:pl]
	if pl < len(p.Value) {
		r.Value = p.Value[pl:]
	}
	return r, nil
}

// NextSubdocLookupOp decodes the lookup spec at the start of b (opcode,
// flags, path length, path) and returns it with the rest of b.
func NextSubdocLookupOp(b []byte) (SubdocLookupOp, []byte, error) {
	if len(b) < 4 {
		return SubdocLookupOp{}, nil, malformed("SUBDOC_MULTI_LOOKUP spec", "header",
			"%d bytes, want at least 4 (opcode, flags, path length)", len(b))
	}
	pl := int(binary.BigEndian.Uint16(b[2:4]))
	if pl > len(b)-4 {
		return SubdocLookupOp{}, nil, malformed("SUBDOC_MULTI_LOOKUP spec", "path length",
			"%d does not fit in the %d bytes left", pl, len(b)-4)
	}
	end := 4 + pl
	return SubdocLookupOp{Op: OpCode(b[0]), Flags: SubdocPathFlag(b[1]), Path: b[4:end:end]}, b[end:], nil
}

// NextSubdocMutateOp decodes the mutation spec at the start of b (opcode,
// flags, path length, value length, path, value) and returns it with the
// rest of b.
func NextSubdocMutateOp(b []byte) (SubdocMutateOp, []byte, error) {
	if len(b) < 8 {
		return SubdocMutateOp{}, nil, malformed("SUBDOC_MULTI_MUTATION spec", "header",
			"%d bytes, want at least 8 (opcode, flags, path length, value length)", len(b))
	}
	pl := uint64(binary.BigEndian.Uint16(b[2:4]))
	vl := uint64(binary.BigEndian.Uint32(b[4:8]))
	if pl > uint64(len(b)-8) {
		return SubdocMutateOp{}, nil, malformed("SUBDOC_MULTI_MUTATION spec", "path length",
			"%d does not fit in the %d bytes left", pl, len(b)-8)
	}
	if pl+vl > uint64(len(b)-8) {
		return SubdocMutateOp{}, nil, malformed("SUBDOC_MULTI_MUTATION spec", "value length",
			"%d does not fit in the %d bytes left after the path", vl, uint64(len(b)-8)-pl)
	}
	pe := 8 + int(pl)
	ve := pe + int(vl)
	op := SubdocMutateOp{Op: OpCode(b[0]), Flags: SubdocPathFlag(b[1]), Path: b[8:pe:pe]}
	if vl > 0 {
		op.Value = b[pe:ve:ve]
	}
	return op, b[ve:], nil
}
