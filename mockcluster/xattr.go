package mockcluster

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kvwire/kvwire/memdx"
)

// Extended attributes (kv_engine docs/ExtendedAttributes.md). A document
// keeps its xattrs apart from its body, in the order they were created;
// sub-document commands reach them with the XATTR path flag, the first path
// component naming the xattr.

// xattr is one extended attribute: its key and its value's JSON text.
type xattr struct {
	key   string
	value []byte
}

const (
	// xattrKeyMax is the longest xattr key.
	xattrKeyMax = 16
	// maxSystemXattrSize is the system xattrs' own quota per document
	// (kv_engine's max_system_xattr_size).
	maxSystemXattrSize = 1 << 20
)

func isSystemXattr(k string) bool { return strings.HasPrefix(k, "_") }

// firstSystemXattrSpec returns the index of the first spec of specs whose
// path is in a system xattr, or -1.
func firstSystemXattrSpec(specs []sdSpec) int {
	for i := range specs {
		if specs[i].xattr() && isSystemXattr(xattrKeyOf(specs[i].path)) {
			return i
		}
	}
	return -1
}

// userXattrs returns xs without the system xattrs (a copy when it has some).
func userXattrs(xs []xattr) []xattr {
	out := xs[:0:0]
	for _, x := range xs {
		if !isSystemXattr(x.key) {
			out = append(out, x)
		}
	}
	return out
}

// xattrsSize is the size of xattrs as kv_engine encodes them (a 4-byte
// total, then per pair a 4-byte length, key, NUL, value, NUL), split into
// user and system parts; user xattrs count against the document size
// limit with the body.
func xattrsSize(xs []xattr) (user, system int) {
	for _, x := range xs {
		n := 4 + len(x.key) + 1 + len(x.value) + 1
		if isSystemXattr(x.key) {
			system += n
		} else {
			user += n
		}
	}
	if len(xs) > 0 {
		user += 4
	}
	return user, system
}

// validXattrKey checks an xattr key as kv_engine's key validator does: 1
// to 16 bytes of UTF-8, not starting with punctuation (but '_' for system
// and '$' for virtual xattrs) or a control character. The mock also refuses
// keys that JSON would need to escape ('"', '\\', control characters), as
// it keeps xattrs as one JSON object while operating on them.
func validXattrKey(k string) bool {
	if k == "" || len(k) > xattrKeyMax || !utf8.ValidString(k) {
		return false
	}
	c := k[0]
	if c != '_' && c != '$' && (c < 0x20 || c == 0x7f || strings.IndexByte("!\"#%&'()*+,-./:;<=>?@[\\]^`{|}~", c) >= 0) {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] == '"' || k[i] == '\\' {
			return false
		}
	}
	return true
}

// xattrKeyOf returns the xattr key of an xattr path: its text up to the
// first '.' or '['.
func xattrKeyOf(path []byte) string {
	for i, c := range path {
		if c == '.' || c == '[' {
			return string(path[:i])
		}
	}
	return string(path)
}

// xattrBlob renders xattrs as one JSON object, which sub-document
// operations edit like a body.
func xattrBlob(xs []xattr) []byte {
	b := []byte{'{'}
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, x.key...)
		b = append(b, '"', ':')
		b = append(b, x.value...)
	}
	return append(b, '}')
}

// xattrsFromBlob reads xattrs back from an object xattrBlob rendered (and
// sub-document operations edited).
func xattrsFromBlob(b []byte) []xattr {
	root, st := parseJSON(b, subdocMaxDepth+1)
	if st != memdx.StatusSuccess || root.kind != jObject {
		return nil
	}
	xs := make([]xattr, 0, len(root.kids))
	for i := range root.kids {
		k := &root.kids[i]
		xs = append(xs, xattr{key: k.key(b), value: append([]byte(nil), b[k.start:k.end]...)})
	}
	return xs
}

// systemXattrs returns the system xattrs of xs, which a deleted document
// keeps.
func systemXattrs(xs []xattr) []xattr {
	var out []xattr
	for _, x := range xs {
		if isSystemXattr(x.key) {
			out = append(out, x)
		}
	}
	return out
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// docInfo is what the virtual xattrs report about a document.
type docInfo struct {
	cas, seqno, vbUUID, revid uint64
	exptime, flags            uint32
	body                      []byte
	datatype                  memdx.Datatype
	hasXattrs, deleted        bool
}

func hex64(v uint64) string { return fmt.Sprintf("0x%016x", v) }
func hex32(v uint32) string { return fmt.Sprintf("0x%08x", v) }

// datatypeNames lists a datatype as kv_engine's $document.datatype does.
func datatypeNames(dt memdx.Datatype, hasXattrs bool) []string {
	var out []string
	if dt.Has(memdx.DatatypeJSON) {
		out = append(out, "json")
	}
	if dt.Has(memdx.DatatypeSnappy) {
		out = append(out, "snappy")
	}
	if hasXattrs {
		out = append(out, "xattr")
	}
	if len(out) == 0 {
		out = append(out, "raw")
	}
	return out
}

// documentVattr renders $document (kv_engine's SubdocExecutionContext
// get_document_vattr): its members sorted by name, as nlohmann::json
// writes them.
func documentVattr(d docInfo) []byte {
	m := map[string]any{
		"CAS":           hex64(d.cas),
		"vbucket_uuid":  hex64(d.vbUUID),
		"seqno":         hex64(d.seqno),
		"revid":         strconv.FormatUint(d.revid, 10),
		"exptime":       d.exptime,
		"flags":         d.flags,
		"value_bytes":   len(d.body),
		"datatype":      datatypeNames(d.datatype, d.hasXattrs),
		"deleted":       d.deleted,
		"last_modified": strconv.FormatUint(d.cas/1e9, 10),
		"value_crc32c":  hex32(crc32.Checksum(d.body, castagnoli)),
	}
	b, _ := json.Marshal(m) // encoding/json sorts map keys
	return b
}

// vattrDoc returns the JSON object {"<name>": ...} that a lookup of the
// virtual xattr name walks, or false for an unknown one.
func vattrDoc(name string, d docInfo, xs []xattr, hlcNow uint64) ([]byte, bool) {
	switch name {
	case "$document":
		return append(append([]byte(`{"$document":`), documentVattr(d)...), '}'), true
	case "$vbucket":
		return []byte(`{"$vbucket":{"HLC":{"now":"` + strconv.FormatUint(hlcNow/1e9, 10) + `","mode":"real"}}}`), true
	case "$XTOC":
		keys := make([]string, 0, len(xs))
		for _, x := range xs {
			keys = append(keys, x.key)
		}
		b, _ := json.Marshal(map[string][]string{"$XTOC": keys})
		return b, true
	}
	return nil, false
}

// Macros an XATTR mutation may expand (with SubdocPathExpandMacros; the
// whole value must be the macro, quotes included).
const (
	macroCAS   = `"${Mutation.CAS}"`
	macroSeqno = `"${Mutation.seqno}"`
	macroCRC   = `"${Mutation.value_crc32c}"`
)

// validMacro reports whether v is a macro kv_engine's validator accepts.
func validMacro(v []byte) bool {
	s := string(v)
	switch s {
	case macroCAS, macroSeqno, macroCRC:
		return true
	}
	return strings.HasPrefix(s, `"${$document`) && strings.HasSuffix(s, `}"`)
}

// expandVirtualMacro expands "${$document...}" against the document as it
// was before the mutation; false for an unknown one.
func expandVirtualMacro(v []byte, d docInfo) ([]byte, bool) {
	s := string(v)
	if s == `"${$document}"` {
		return documentVattr(d), true
	}
	field, ok := strings.CutPrefix(s, `"${$document.`)
	if !ok {
		return nil, false
	}
	field = strings.TrimSuffix(field, `}"`)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(documentVattr(d), &m); err != nil {
		return nil, false
	}
	r, ok := m[field]
	return r, ok
}

// macroExpansion is the text each mutation macro becomes once the new
// document's CAS and seqno are known: the CAS as kv_engine writes it (the
// bytes in network order read as a little-endian number, so the hex looks
// byte-swapped), the seqno and the CRC32C of the body.
func macroExpansion(macro string, cas, seqno uint64, body []byte) string {
	switch macro {
	case macroCAS:
		return `"` + hex64(bits.ReverseBytes64(cas)) + `"`
	case macroSeqno:
		return `"` + hex64(seqno) + `"`
	case macroCRC:
		return `"` + hex32(crc32.Checksum(body, castagnoli)) + `"`
	}
	return macro
}

// Xattrs returns the xattrs of scope.collection/key as one JSON object (in
// the order they were created) and whether the document is a tombstone. It
// reports false when there is neither a live document nor a tombstone. An
// expired document is reported deleted, with the system xattrs its expiry
// keeps; reading it does not process the expiry.
func (b *Bucket) Xattrs(scope, collection, key string) (xattrs []byte, deleted, ok bool) {
	cid, found := b.snap.Load().manifest.lookup(scope, collection)
	if !found {
		return nil, false, false
	}
	vb := b.storeFor(key)
	if vb == nil {
		return nil, false, false
	}
	mk := mapKey(cid, key)
	now := b.c.clock.Now()
	vb.mu.Lock()
	defer vb.mu.Unlock()
	if d := vb.docs[mk]; d != nil {
		if !d.expired(now) {
			return xattrBlob(d.xattrs), false, true
		}
		if !vb.memcached {
			return xattrBlob(systemXattrs(d.xattrs)), true, true
		}
	}
	if d := vb.tomb(mk, now); d != nil {
		return xattrBlob(d.xattrs), true, true
	}
	return nil, false, false
}
