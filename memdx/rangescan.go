package memdx

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"strconv"
)

// KV range scans (Couchbase Server 7.2+), from kv_engine's
// docs/range_scans/range_scan_{create,continue,cancel}.md,
// daemon/protocol/mcbp/range_scan_create_executor.cc and
// protocol/mcbp/range_scan_continue_codec.cc.
//
// RANGE_SCAN_CREATE carries a JSON value (datatype JSON) describing the scan
// of one collection in the request's vbucket and answers a 16-byte scan id.
// RANGE_SCAN_CONTINUE (extras: id, item, time and byte limits) answers with
// any number of SUCCESS responses carrying keys or documents, ended by one
// with RANGE_SCAN_MORE (a limit was reached), RANGE_SCAN_COMPLETE (the scan
// is over and gone from the server) or an error. Every continue response
// has 4 bytes of extras saying whether its value holds keys or documents.
// RANGE_SCAN_CANCEL (extras: the id) ends a scan.

// RangeScanID identifies a range scan on the server that created it: 16
// bytes with no structure, in network order.
type RangeScanID [16]byte

// Limits kv_engine applies to a create request.
const (
	// MaxRangeScanNameLen is the longest "name" a create may give.
	MaxRangeScanNameLen = 50
)

// RangeScanRange is the key range of a range scan. Keys are document keys
// without the collection prefix. Start is inclusive unless ExclusiveStart,
// End inclusive unless ExclusiveEnd.
type RangeScanRange struct {
	Start, End                   []byte
	ExclusiveStart, ExclusiveEnd bool
}

// RangeScanSampling asks for a random sample: kv_engine includes each key
// of the collection with probability Samples / (keys in the vbucket's
// collection), drawing from a PRNG seeded with Seed, and returns the whole
// collection when it holds no more than Samples keys.
type RangeScanSampling struct {
	Samples uint64
	Seed    uint32
}

// RangeScanSnapshot are the requirements the vbucket must meet for the scan
// to be created: its UUID must be VbUUID and Seqno must be persisted (and,
// with SeqnoExists, still stored). TimeoutMs is how long the server waits for
// Seqno to be persisted (0: it fails at once).
type RangeScanSnapshot struct {
	VbUUID      uint64
	Seqno       uint64
	SeqnoExists bool
	TimeoutMs   uint32
}

// RangeScanCreate is the configuration RANGE_SCAN_CREATE sends as its JSON
// value. Range and Sampling are exclusive; with neither the server scans the
// whole collection (keys "\x00" to "\xff", inclusive).
type RangeScanCreate struct {
	CollectionID uint32
	KeyOnly      bool
	Range        *RangeScanRange
	Sampling     *RangeScanSampling
	Snapshot     *RangeScanSnapshot
	// Name is an optional label for the server's logs and stats (at most
	// MaxRangeScanNameLen bytes).
	Name string
}

// AppendRangeScanCreateValue appends c as the JSON value of a
// RANGE_SCAN_CREATE request. Fields appear in a fixed order and zero-valued
// optional fields are left out (the collection when it is the default one,
// key_only when false, a zero seed, seqno_exists when false, timeout_ms when
// 0), so the same configuration always encodes to the same bytes. It refuses
// (an *EncodeError, dst unchanged) a configuration the server would reject
// as invalid: both Range and Sampling, a range key over 250 bytes, zero
// samples, a name over MaxRangeScanNameLen bytes.
func AppendRangeScanCreateValue(dst []byte, c *RangeScanCreate) ([]byte, error) {
	if c.Range != nil && c.Sampling != nil {
		return dst, badRequest("range scan", "range and sampling are exclusive")
	}
	if r := c.Range; r != nil && (len(r.Start) > maxRangeScanKeyLen || len(r.End) > maxRangeScanKeyLen) {
		return dst, badRequest("range scan range", "keys of %d and %d bytes, at most %d", len(r.Start), len(r.End), maxRangeScanKeyLen)
	}
	if c.Sampling != nil && c.Sampling.Samples == 0 {
		return dst, badRequest("range scan sampling", "samples must not be 0")
	}
	if len(c.Name) > MaxRangeScanNameLen {
		return dst, badRequest("range scan name", "%d bytes, at most %d", len(c.Name), MaxRangeScanNameLen)
	}
	out := append(dst, '{')
	sep := func() {
		if out[len(out)-1] != '{' {
			out = append(out, ',')
		}
	}
	if c.CollectionID != 0 {
		out = append(out, `"collection":"`...)
		out = strconv.AppendUint(out, uint64(c.CollectionID), 16)
		out = append(out, '"')
	}
	if c.KeyOnly {
		sep()
		out = append(out, `"key_only":true`...)
	}
	if r := c.Range; r != nil {
		sep()
		out = append(out, `"range":{`...)
		out = appendB64Field(out, r.ExclusiveStart, "start", r.Start)
		out = append(out, ',')
		out = appendB64Field(out, r.ExclusiveEnd, "end", r.End)
		out = append(out, '}')
	}
	if s := c.Sampling; s != nil {
		sep()
		out = append(out, `"sampling":{"samples":`...)
		out = strconv.AppendUint(out, s.Samples, 10)
		if s.Seed != 0 {
			out = append(out, `,"seed":`...)
			out = strconv.AppendUint(out, uint64(s.Seed), 10)
		}
		out = append(out, '}')
	}
	if s := c.Snapshot; s != nil {
		sep()
		out = append(out, `"snapshot_requirements":{"vb_uuid":"`...)
		out = strconv.AppendUint(out, s.VbUUID, 10)
		out = append(out, `","seqno":`...)
		out = strconv.AppendUint(out, s.Seqno, 10)
		if s.SeqnoExists {
			out = append(out, `,"seqno_exists":true`...)
		}
		if s.TimeoutMs != 0 {
			out = append(out, `,"timeout_ms":`...)
			out = strconv.AppendUint(out, uint64(s.TimeoutMs), 10)
		}
		out = append(out, '}')
	}
	if c.Name != "" {
		sep()
		out = append(out, `"name":`...)
		nb, _ := json.Marshal(c.Name) // a string always marshals
		out = append(out, nb...)
	}
	return append(out, '}'), nil
}

// maxRangeScanKeyLen is the longest start or end key (the longest document
// key), counted without the collection's LEB128 prefix: kv_engine's
// range_scan_create_executor checks the decoded key alone against
// KEY_MAX_LENGTH, and prefixes the collection after.
const maxRangeScanKeyLen = 250

func appendB64Field(dst []byte, exclusive bool, name string, key []byte) []byte {
	dst = append(dst, '"')
	if exclusive {
		dst = append(dst, "excl_"...)
	}
	dst = append(dst, name...)
	dst = append(dst, `":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, key)
	return append(dst, '"')
}

// NewRangeScanCreate builds RANGE_SCAN_CREATE for the request's vbucket (set
// Vbucket): no key, no extras, datatype JSON and the configuration as the
// value. It allocates the value. The connection must have negotiated HELLO
// JSON. The response value is the scan's RangeScanID
// (DecodeRangeScanCreateResponse).
func NewRangeScanCreate(c *RangeScanCreate) (Request, error) {
	v, err := AppendRangeScanCreateValue(nil, c)
	if err != nil {
		return Request{}, err
	}
	return Request{OpCode: OpRangeScanCreate, Datatype: DatatypeJSON, Value: v}, nil
}

// DecodeRangeScanCreateResponse reads the scan id of a successful
// RANGE_SCAN_CREATE response.
func DecodeRangeScanCreateResponse(p *Packet) (RangeScanID, error) {
	var id RangeScanID
	if len(p.Value) != len(id) {
		return id, malformed("RANGE_SCAN_CREATE response", "value", "%d bytes, want 16 (scan id)", len(p.Value))
	}
	copy(id[:], p.Value)
	return id, nil
}

// DecodeRangeScanCreateValue parses a RANGE_SCAN_CREATE value as kv_engine
// does: a JSON object whose unknown keys are ignored; "collection" a hex
// string; "key_only" a bool; "range" an object with exactly one of
// "start"/"excl_start" and one of "end"/"excl_end", each base64 of a key of
// at most 250 bytes; "sampling" an object with an unsigned "samples" and an
// optional unsigned "seed"; "snapshot_requirements" an object with "vb_uuid"
// (a string of decimal digits), an unsigned "seqno", an optional bool
// "seqno_exists" and an optional unsigned "timeout_ms"; "name" a string of at
// most 50 bytes. "range" and "sampling" together are refused. A seed or
// timeout above 2^32-1 keeps its low 32 bits, as the server's conversion
// does. Errors are *DecodeError naming the field (the server answers EINVAL).
// The returned keys are copies.
func DecodeRangeScanCreateValue(value []byte) (RangeScanCreate, error) {
	const what = "RANGE_SCAN_CREATE value"
	var c RangeScanCreate
	var root map[string]json.RawMessage
	if err := json.Unmarshal(value, &root); err != nil || root == nil {
		return c, malformed(what, "value", "not a JSON object")
	}
	if raw, ok := root["collection"]; ok {
		s, err := jsonString(raw)
		if err != nil {
			return c, malformed(what, "collection", "%v", err)
		}
		cid, err := strconv.ParseUint(s, 16, 32)
		if err != nil || s == "" || s[0] == '+' || s[0] == '-' {
			return c, malformed(what, "collection", "%q is not a hex collection id", s)
		}
		c.CollectionID = uint32(cid)
	}
	if raw, ok := root["key_only"]; ok {
		b, err := jsonBool(raw)
		if err != nil {
			return c, malformed(what, "key_only", "%v", err)
		}
		c.KeyOnly = b
	}
	rawRange, hasRange := root["range"]
	rawSampling, hasSampling := root["sampling"]
	if hasRange && !isJSONObject(rawRange) {
		return c, malformed(what, "range", "not an object")
	}
	if hasSampling && !isJSONObject(rawSampling) {
		return c, malformed(what, "sampling", "not an object")
	}
	if hasRange && hasSampling {
		return c, malformed(what, "range", "range and sampling are exclusive")
	}
	if hasRange {
		var obj map[string]json.RawMessage
		_ = json.Unmarshal(rawRange, &obj)
		c.Range = &RangeScanRange{}
		var err error
		if c.Range.Start, c.Range.ExclusiveStart, err = rangeKey(obj, "start"); err != nil {
			return c, err
		}
		if c.Range.End, c.Range.ExclusiveEnd, err = rangeKey(obj, "end"); err != nil {
			return c, err
		}
	}
	if hasSampling {
		var err error
		if c.Sampling, err = decodeRangeScanSampling(rawSampling); err != nil {
			return c, err
		}
	}
	if raw, ok := root["snapshot_requirements"]; ok {
		var err error
		if c.Snapshot, err = decodeRangeScanSnapshot(raw); err != nil {
			return c, err
		}
	}
	if raw, ok := root["name"]; ok {
		s, err := jsonString(raw)
		if err != nil {
			return c, malformed(what, "name", "%v", err)
		}
		if len(s) > MaxRangeScanNameLen {
			return c, malformed(what, "name", "%d bytes, at most %d", len(s), MaxRangeScanNameLen)
		}
		c.Name = s
	}
	return c, nil
}

// decodeRangeScanSampling reads the "sampling" object (checked to be one) of
// a RANGE_SCAN_CREATE value.
func decodeRangeScanSampling(raw json.RawMessage) (*RangeScanSampling, error) {
	const what = "RANGE_SCAN_CREATE value"
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(raw, &obj)
	rawSamples, ok := obj["samples"]
	if !ok {
		return nil, malformed(what, "sampling.samples", "missing")
	}
	n, err := jsonUnsigned(rawSamples)
	if err != nil {
		return nil, malformed(what, "sampling.samples", "%v", err)
	}
	sm := &RangeScanSampling{Samples: n}
	if rawSeed, ok := obj["seed"]; ok {
		seed, err := jsonUnsigned(rawSeed)
		if err != nil {
			return nil, malformed(what, "sampling.seed", "%v", err)
		}
		sm.Seed = uint32(seed)
	}
	return sm, nil
}

// decodeRangeScanSnapshot reads the "snapshot_requirements" object of a
// RANGE_SCAN_CREATE value.
func decodeRangeScanSnapshot(raw json.RawMessage) (*RangeScanSnapshot, error) {
	const what = "RANGE_SCAN_CREATE value"
	if !isJSONObject(raw) {
		return nil, malformed(what, "snapshot_requirements", "not an object")
	}
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(raw, &obj)
	s := &RangeScanSnapshot{}
	rawUUID, ok := obj["vb_uuid"]
	if !ok {
		return nil, malformed(what, "snapshot_requirements.vb_uuid", "missing")
	}
	str, err := jsonString(rawUUID)
	if err != nil {
		return nil, malformed(what, "snapshot_requirements.vb_uuid", "%v", err)
	}
	if s.VbUUID, err = parseDecimal(str); err != nil {
		return nil, malformed(what, "snapshot_requirements.vb_uuid", "%q is not a decimal uint64", str)
	}
	rawSeqno, ok := obj["seqno"]
	if !ok {
		return nil, malformed(what, "snapshot_requirements.seqno", "missing")
	}
	if s.Seqno, err = jsonUnsigned(rawSeqno); err != nil {
		return nil, malformed(what, "snapshot_requirements.seqno", "%v", err)
	}
	if rawExists, ok := obj["seqno_exists"]; ok {
		if s.SeqnoExists, err = jsonBool(rawExists); err != nil {
			return nil, malformed(what, "snapshot_requirements.seqno_exists", "%v", err)
		}
	}
	if rawTimeout, ok := obj["timeout_ms"]; ok {
		t, err := jsonUnsigned(rawTimeout)
		if err != nil {
			return nil, malformed(what, "snapshot_requirements.timeout_ms", "%v", err)
		}
		s.TimeoutMs = uint32(t)
	}
	return s, nil
}

// rangeKey reads "<name>" or "excl_<name>" (exactly one) of a range object.
func rangeKey(obj map[string]json.RawMessage, name string) ([]byte, bool, error) {
	const what = "RANGE_SCAN_CREATE value"
	incl, hasIncl := obj[name]
	excl, hasExcl := obj["excl_"+name]
	field := "range." + name
	switch {
	case hasIncl && hasExcl:
		return nil, false, malformed(what, field, "both %s and excl_%s", name, name)
	case !hasIncl && !hasExcl:
		return nil, false, malformed(what, field, "neither %s nor excl_%s", name, name)
	case hasExcl:
		incl, field = excl, "range.excl_"+name
	}
	s, err := jsonString(incl)
	if err != nil {
		return nil, false, malformed(what, field, "%v", err)
	}
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, false, malformed(what, field, "not base64: %v", err)
	}
	if len(k) > maxRangeScanKeyLen {
		return nil, false, malformed(what, field, "key of %d bytes, at most %d", len(k), maxRangeScanKeyLen)
	}
	return k, hasExcl, nil
}

type jsonTypeError string

func (e jsonTypeError) Error() string { return string(e) }

func isJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

func jsonString(raw json.RawMessage) (string, error) {
	var s string
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", jsonTypeError("not a string")
	}
	return s, nil
}

func jsonBool(raw json.RawMessage) (bool, error) {
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, jsonTypeError("not a bool")
}

// jsonUnsigned reads a JSON number that is a non-negative integer without
// fraction or exponent and fits 64 bits (nlohmann's number_unsigned).
func jsonUnsigned(raw json.RawMessage) (uint64, error) {
	n, err := parseDecimal(string(bytes.TrimSpace(raw)))
	if err != nil {
		return 0, jsonTypeError("not an unsigned integer")
	}
	return n, nil
}

// parseDecimal parses 1 to 20 decimal digits into a uint64.
func parseDecimal(s string) (uint64, error) {
	if s == "" || len(s) > 20 {
		return 0, jsonTypeError("not decimal")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, jsonTypeError("not decimal")
		}
	}
	return strconv.ParseUint(s, 10, 64)
}

// RangeScanContinue are the extras of a RANGE_SCAN_CONTINUE request. A zero
// limit is no limit; ItemLimit counts keys or documents, TimeLimitMs is how
// long the continue may run, ByteLimit counts key (and value) bytes. The
// server always returns whole keys or documents, and at least one unless the
// scan ends or fails.
type RangeScanContinue struct {
	ID          RangeScanID
	ItemLimit   uint32
	TimeLimitMs uint32
	ByteLimit   uint32
}

// rangeScanContinueExtrasLen is the size of RANGE_SCAN_CONTINUE's extras.
const rangeScanContinueExtrasLen = 28

// NewRangeScanContinue builds RANGE_SCAN_CONTINUE (set Vbucket to the
// scan's vbucket): extras are the id (16 bytes) and the item, time (ms) and
// byte limits (4 bytes each); no key, no value.
func NewRangeScanContinue(c RangeScanContinue) Request {
	r := Request{OpCode: OpRangeScanContinue}
	var e [rangeScanContinueExtrasLen]byte
	copy(e[:16], c.ID[:])
	binary.BigEndian.PutUint32(e[16:20], c.ItemLimit)
	binary.BigEndian.PutUint32(e[20:24], c.TimeLimitMs)
	binary.BigEndian.PutUint32(e[24:28], c.ByteLimit)
	r.setExtras(e[:])
	return r
}

// DecodeRangeScanContinueRequest reads a RANGE_SCAN_CONTINUE request (the
// server side): 28 bytes of extras, no key, no value.
func DecodeRangeScanContinueRequest(p *Packet) (RangeScanContinue, error) {
	var c RangeScanContinue
	if len(p.Extras) != rangeScanContinueExtrasLen {
		return c, malformed("RANGE_SCAN_CONTINUE request", "extras", "%d bytes, want 28 (id, item, time and byte limits)", len(p.Extras))
	}
	if len(p.Key) != 0 || len(p.Value) != 0 {
		return c, malformed("RANGE_SCAN_CONTINUE request", "body", "takes no key and no value")
	}
	copy(c.ID[:], p.Extras[:16])
	c.ItemLimit = binary.BigEndian.Uint32(p.Extras[16:20])
	c.TimeLimitMs = binary.BigEndian.Uint32(p.Extras[20:24])
	c.ByteLimit = binary.BigEndian.Uint32(p.Extras[24:28])
	return c, nil
}

// NewRangeScanCancel builds RANGE_SCAN_CANCEL (set Vbucket to the scan's
// vbucket): the extras are the id; no key, no value.
func NewRangeScanCancel(id RangeScanID) Request {
	r := Request{OpCode: OpRangeScanCancel}
	r.setExtras(id[:])
	return r
}

// DecodeRangeScanCancelRequest reads a RANGE_SCAN_CANCEL request (the server
// side): 16 bytes of extras, no key, no value.
func DecodeRangeScanCancelRequest(p *Packet) (RangeScanID, error) {
	var id RangeScanID
	if len(p.Extras) != len(id) {
		return id, malformed("RANGE_SCAN_CANCEL request", "extras", "%d bytes, want 16 (scan id)", len(p.Extras))
	}
	if len(p.Key) != 0 || len(p.Value) != 0 {
		return id, malformed("RANGE_SCAN_CANCEL request", "body", "takes no key and no value")
	}
	copy(id[:], p.Extras)
	return id, nil
}

// RangeScanContent is the 4-byte flags extras of every RANGE_SCAN_CONTINUE
// response: what its value holds.
type RangeScanContent uint32

const (
	// RangeScanKeys: the value is keys (a key_only scan).
	RangeScanKeys RangeScanContent = 0
	// RangeScanDocuments: the value is documents.
	RangeScanDocuments RangeScanContent = 1
)

// AppendRangeScanContent appends the extras of a continue response.
func AppendRangeScanContent(dst []byte, c RangeScanContent) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(c))
}

// DecodeRangeScanContent reads the extras of a RANGE_SCAN_CONTINUE response
// (every one has them, whatever its status).
func DecodeRangeScanContent(p *Packet) (RangeScanContent, error) {
	if len(p.Extras) != 4 {
		return 0, malformed("RANGE_SCAN_CONTINUE response", "extras", "%d bytes, want 4 (flags)", len(p.Extras))
	}
	c := RangeScanContent(binary.BigEndian.Uint32(p.Extras))
	if c != RangeScanKeys && c != RangeScanDocuments {
		return 0, malformed("RANGE_SCAN_CONTINUE response", "extras", "flags %d are neither keys (0) nor documents (1)", c)
	}
	return c, nil
}

// AppendRangeScanKey appends one key of a key-only continue response: its
// length as unsigned LEB128, then the key (without collection prefix).
func AppendRangeScanKey(dst, key []byte) []byte {
	dst = AppendULEB128(dst, uint32(len(key)))
	return append(dst, key...)
}

// rangeScanDocMetaLen is the fixed metadata before each document's key.
const rangeScanDocMetaLen = 25

// RangeScanDocument is one document of a continue response. Flags are the
// document's flags as a GET returns them; Datatype tells how to read Value
// (snappy-compressed when it has DatatypeSnappy).
type RangeScanDocument struct {
	Flags    uint32
	Expiry   uint32
	Seqno    uint64
	Cas      uint64
	Datatype Datatype
	Key      []byte
	Value    []byte
}

// AppendRangeScanDocument appends one document of a continue response:
// flags, expiry, seqno, CAS, datatype (25 bytes, network order), then the
// key and the value, each after its length as unsigned LEB128.
func AppendRangeScanDocument(dst []byte, d *RangeScanDocument) []byte {
	dst = binary.BigEndian.AppendUint32(dst, d.Flags)
	dst = binary.BigEndian.AppendUint32(dst, d.Expiry)
	dst = binary.BigEndian.AppendUint64(dst, d.Seqno)
	dst = binary.BigEndian.AppendUint64(dst, d.Cas)
	dst = append(dst, byte(d.Datatype))
	dst = AppendRangeScanKey(dst, d.Key)
	dst = AppendULEB128(dst, uint32(len(d.Value)))
	return append(dst, d.Value...)
}

// DecodeRangeScanKeys appends the keys of a key-only continue response's
// value to dst. Keys alias value (capacity capped). A key of length 0, a
// length running past the value or a malformed LEB128 is a *DecodeError.
func DecodeRangeScanKeys(dst [][]byte, value []byte) ([][]byte, error) {
	for i := 0; i < len(value); {
		k, n, err := rangeScanField(value[i:], "key")
		if err != nil {
			return dst, err
		}
		if len(k) == 0 {
			return dst, malformed("range scan keys", "key", "empty key at offset %d", i)
		}
		dst = append(dst, k)
		i += n
	}
	return dst, nil
}

// DecodeRangeScanDocuments appends the documents of a continue response's
// value to dst. Keys and values alias value (capacity capped). A document
// cut short, an empty key or a malformed LEB128 is a *DecodeError.
func DecodeRangeScanDocuments(dst []RangeScanDocument, value []byte) ([]RangeScanDocument, error) {
	for i := 0; i < len(value); {
		b := value[i:]
		if len(b) < rangeScanDocMetaLen {
			return dst, malformed("range scan documents", "metadata", "%d bytes left at offset %d, want 25", len(b), i)
		}
		d := RangeScanDocument{
			Flags:    binary.BigEndian.Uint32(b[0:4]),
			Expiry:   binary.BigEndian.Uint32(b[4:8]),
			Seqno:    binary.BigEndian.Uint64(b[8:16]),
			Cas:      binary.BigEndian.Uint64(b[16:24]),
			Datatype: Datatype(b[24]),
		}
		off := rangeScanDocMetaLen
		k, n, err := rangeScanField(b[off:], "key")
		if err != nil {
			return dst, err
		}
		if len(k) == 0 {
			return dst, malformed("range scan documents", "key", "empty key at offset %d", i)
		}
		off += n
		v, n, err := rangeScanField(b[off:], "value")
		if err != nil {
			return dst, err
		}
		off += n
		d.Key, d.Value = k, v
		dst = append(dst, d)
		i += off
	}
	return dst, nil
}

// rangeScanField reads a LEB128 length and that many bytes.
func rangeScanField(b []byte, field string) ([]byte, int, error) {
	l, n, err := DecodeULEB128(b)
	if err != nil {
		return nil, 0, malformed("range scan "+field, "length", "%v", err)
	}
	if uint64(l) > uint64(len(b)-n) {
		return nil, 0, malformed("range scan "+field, "length", "%d bytes, only %d left", l, len(b)-n)
	}
	end := n + int(l)
	return b[n:end:end], end, nil
}
