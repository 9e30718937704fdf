package memdx

import (
	"bytes"
	"errors"
	"testing"
)

// TestSubdocMultiLookupDocExample decodes the response body of
// SubDocument.md's "Example - Multi Lookups" (BODYLEN 68), written by hand:
// per result status (2), value length (4), value.
func TestSubdocMultiLookupDocExample(t *testing.T) {
	body := append(mustHex(t, "0000"+"0000000a"), `"mnunberg"`...) // SUCCESS, 10 bytes
	body = append(body, mustHex(t, "0000"+"0000000b")...)
	body = append(body, `"couchbase"`...)
	body = append(body, mustHex(t, "00c0"+"00000000")...) // PATH_ENOENT
	body = append(body, mustHex(t, "0000"+"00000011")...)
	body = append(body, `"Subdoc Commands"`...)
	body = append(body, mustHex(t, "0000"+"00000000")...) // EXISTS: no value
	if len(body) != 68 {
		t.Fatalf("example body is %d bytes, the doc says 68", len(body))
	}
	res, err := DecodeSubdocMultiLookup(body, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []SubdocLookupResult{
		{StatusSuccess, []byte(`"mnunberg"`)}, {StatusSuccess, []byte(`"couchbase"`)},
		{StatusSubdocPathNotFound, nil}, {StatusSuccess, []byte(`"Subdoc Commands"`)}, {StatusSuccess, nil},
	}
	if len(res) != len(want) {
		t.Fatalf("%d results, want %d", len(res), len(want))
	}
	for i := range want {
		if res[i].Status != want[i].Status || !bytes.Equal(res[i].Value, want[i].Value) {
			t.Errorf("result %d = %s %q, want %s %q", i, res[i].Status, res[i].Value, want[i].Status, want[i].Value)
		}
	}
	// The encoder gives the same bytes.
	var enc []byte
	for _, r := range want {
		enc = AppendSubdocLookupResult(enc, r.Status, r.Value)
	}
	if !bytes.Equal(enc, body) {
		t.Fatalf("AppendSubdocLookupResult = %x, want %x", enc, body)
	}
	// Decoding into a reused slice appends and does not allocate.
	dst := make([]SubdocLookupResult, 0, 8)
	if n := testingAllocs(func() { dst, _ = DecodeSubdocMultiLookup(body, dst[:0]) }); n != 0 {
		t.Errorf("DecodeSubdocMultiLookup into a reused slice allocated %v times", n)
	}
}

// TestSubdocMultiMutationResults: a success body with results for the
// COUNTER (index 1) and the value-returning spec (index 3), and a failure
// body naming spec 1 with PATH_MISMATCH, as SubDocument.md describes.
func TestSubdocMultiMutationResults(t *testing.T) {
	ok := append(mustHex(t, "01"+"0000"+"00000002"), "42"...)
	ok = append(ok, mustHex(t, "03"+"0000"+"0000000a")...)
	ok = append(ok, `"deleteme"`...)
	res, err := DecodeSubdocMultiMutation(ok, nil)
	if err != nil || len(res) != 2 || res[0].Index != 1 || string(res[0].Value) != "42" ||
		res[1].Index != 3 || res[1].Status != StatusSuccess || string(res[1].Value) != `"deleteme"` {
		t.Fatalf("success results %+v, %v", res, err)
	}
	enc := AppendSubdocMutateResult(nil, 1, StatusSuccess, []byte("42"))
	enc = AppendSubdocMutateResult(enc, 3, StatusSuccess, []byte(`"deleteme"`))
	if !bytes.Equal(enc, ok) {
		t.Fatalf("AppendSubdocMutateResult = %x, want %x", enc, ok)
	}

	fail := mustHex(t, "01"+"00c1")
	res, err = DecodeSubdocMultiMutation(fail, nil)
	if err != nil || len(res) != 1 || res[0].Index != 1 || res[0].Status != StatusSubdocPathMismatch || res[0].Value != nil {
		t.Fatalf("failure result %+v, %v", res, err)
	}
	if enc := AppendSubdocMutateResult(nil, 1, StatusSubdocPathMismatch, []byte("ignored")); !bytes.Equal(enc, fail) {
		t.Fatalf("failure encoding %x", enc)
	}
	if res, err := DecodeSubdocMultiMutation(nil, nil); err != nil || len(res) != 0 {
		t.Fatalf("empty body: %v %v", res, err)
	}
}

func TestSubdocResultRejects(t *testing.T) {
	for _, tc := range []struct{ in, field string }{
		{"00", "header"},
		{"0000000000", "header"},
		{"000000000002aa", "value length"},
		{"0000ffffffff", "value length"},
	} {
		var de *DecodeError
		if _, err := DecodeSubdocMultiLookup(mustHex(t, tc.in), nil); !errors.As(err, &de) || de.Field != tc.field {
			t.Errorf("lookup %s: %v, want field %q", tc.in, err, tc.field)
		}
	}
	for _, tc := range []struct{ in, field string }{
		{"01", "header"},
		{"0100", "header"},
		{"010000", "value length"}, // success needs a length
		{"010000000001", "value length"},
		{"01000000000002aa", "value length"},
		{"010000ffffffff", "value length"},
	} {
		var de *DecodeError
		if _, err := DecodeSubdocMultiMutation(mustHex(t, tc.in), nil); !errors.As(err, &de) || de.Field != tc.field {
			t.Errorf("mutation %s: %v, want field %q", tc.in, err, tc.field)
		}
	}
}

func TestDecodeSubdocRequestRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     Packet
		field string
	}{
		{"single: no extras", Packet{OpCode: OpSubdocGet}, "extras"},
		{"single: 5 bytes of extras", Packet{OpCode: OpSubdocGet, Extras: make([]byte, 5)}, "extras"},
		{"single: path longer than the body", Packet{OpCode: OpSubdocGet, Extras: []byte{0, 4, 0}, Value: []byte("abc")}, "path length"},
		{"lookup: 2 bytes of extras", Packet{OpCode: OpSubdocMultiLookup, Extras: []byte{1, 2}}, "extras"},
		{"lookup: short spec", Packet{OpCode: OpSubdocMultiLookup, Value: []byte{0xc5, 0, 0}}, "header"},
		{"lookup: spec path too long", Packet{OpCode: OpSubdocMultiLookup, Value: []byte{0xc5, 0, 0, 5, 'a'}}, "path length"},
		{"mutation: 3 bytes of extras", Packet{OpCode: OpSubdocMultiMutation, Extras: []byte{1, 2, 3}}, "extras"},
		{"mutation: short spec", Packet{OpCode: OpSubdocMultiMutation, Value: make([]byte, 7)}, "header"},
		{"mutation: spec path too long", Packet{OpCode: OpSubdocMultiMutation, Value: mustHex(t, "c80000020000000061")}, "path length"},
		{"mutation: spec value too long", Packet{OpCode: OpSubdocMultiMutation, Value: mustHex(t, "c80000010000000261"+"62")}, "value length"},
		{"mutation: 4 GiB value", Packet{OpCode: OpSubdocMultiMutation, Value: mustHex(t, "c8000001ffffffff61")}, "value length"},
	} {
		var de *DecodeError
		if _, err := DecodeSubdocRequest(&tc.p); !errors.As(err, &de) || de.Field != tc.field {
			t.Errorf("%s: %v, want a DecodeError on %q", tc.name, err, tc.field)
		}
	}
	// Extras forms: 3, 4 (doc flags), 7 (expiry), 8 (expiry, doc flags).
	for _, tc := range []struct {
		extras    string
		expiry    uint32
		hasExpiry bool
		doc       SubdocDocFlag
	}{
		{"000101", 0, false, 0},
		{"00010120", 0, false, SubdocDocReplicaRead},
		{"0001010000003c", 60, true, 0},
		{"0001010000003c01", 60, true, SubdocDocMkdoc},
	} {
		p := Packet{OpCode: OpSubdocDictUpsert, Extras: mustHex(t, tc.extras), Value: []byte("p1")}
		sd, err := DecodeSubdocRequest(&p)
		if err != nil || string(sd.Path) != "p" || string(sd.Value) != "1" || sd.Flags != SubdocPathMkdirP ||
			sd.Expiry != tc.expiry || sd.HasExpiry != tc.hasExpiry || sd.DocFlags != tc.doc {
			t.Errorf("extras %s: %+v %v", tc.extras, sd, err)
		}
	}
	for _, tc := range []struct {
		extras    string
		expiry    uint32
		hasExpiry bool
		doc       SubdocDocFlag
	}{
		{"", 0, false, 0}, {"02", 0, false, SubdocDocAdd}, {"00000e10", 3600, true, 0}, {"00000e1001", 3600, true, SubdocDocMkdoc},
	} {
		p := Packet{OpCode: OpSubdocMultiMutation, Extras: mustHex(t, tc.extras)}
		sd, err := DecodeSubdocRequest(&p)
		if err != nil || sd.Expiry != tc.expiry || sd.HasExpiry != tc.hasExpiry || sd.DocFlags != tc.doc {
			t.Errorf("multi-mutation extras %s: %+v %v", tc.extras, sd, err)
		}
	}
}

func TestSubdocFlagStrings(t *testing.T) {
	if s := (SubdocPathMkdirP | SubdocPathXattr | 0x40).String(); s != "mkdir_p|xattr|0x40" {
		t.Errorf("path flags %q", s)
	}
	if s := SubdocPathFlag(0).String(); s != "none" {
		t.Errorf("no path flags %q", s)
	}
	if s := (SubdocDocMkdoc | SubdocDocAccessDeleted | SubdocDocReplicaRead).String(); s != "mkdoc|access_deleted|replica_read" {
		t.Errorf("doc flags %q", s)
	}
	for f, v := range map[SubdocDocFlag]uint8{SubdocDocMkdoc: 1, SubdocDocAdd: 2, SubdocDocAccessDeleted: 4,
		SubdocDocCreateAsDeleted: 8, SubdocDocReviveDocument: 0x10, SubdocDocReplicaRead: 0x20} {
		if uint8(f) != v {
			t.Errorf("%s = %#x", f, uint8(f))
		}
	}
	for f, v := range map[SubdocPathFlag]uint8{SubdocPathMkdirP: 1, SubdocPathXattr: 4, SubdocPathExpandMacros: 0x10, SubdocPathBinaryValue: 0x20} {
		if uint8(f) != v {
			t.Errorf("%s = %#x", f, uint8(f))
		}
	}
}

// TestSubdocSingleResponse: a single-path response carries the result in the
// value and a mutation token in the extras.
func TestSubdocSingleResponse(t *testing.T) {
	b := mustHex(t, "81cf0000100000000000001300000001000000000000002a"+
		"0000000000000abc"+"0000000000000007"+"313233")
	p, err := decodeWhole(b)
	if err != nil {
		t.Fatal(err)
	}
	tok, ok, err := DecodeMutationToken(&p)
	if err != nil || !ok || tok.VbUUID != 0xabc || tok.Seqno != 7 || string(p.Value) != "123" || p.Cas != 42 {
		t.Fatalf("token %+v %v %v value %q", tok, ok, err, p.Value)
	}
}
