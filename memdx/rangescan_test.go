package memdx

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var goldenScanID = RangeScanID{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}

func mustCreate(c *RangeScanCreate) Request {
	r, err := NewRangeScanCreate(c)
	if err != nil {
		panic(err)
	}
	return r
}

// docKeysValue is the key-only continue value of
// docs/range_scans/range_scan_continue.md: "key0", "key11" and a 128-byte
// key "key2222...3" (its length takes two LEB128 bytes).
func docKeysValue() ([]byte, [][]byte) {
	long := []byte("key" + strings.Repeat("2", 124) + "3")
	v := append([]byte{0x04}, "key0"...)
	v = append(v, 0x05)
	v = append(v, "key11"...)
	v = append(v, 0x80, 0x01)
	v = append(v, long...)
	return v, [][]byte{[]byte("key0"), []byte("key11"), long}
}

func TestRangeScanKeysGolden(t *testing.T) {
	v, want := docKeysValue()
	if len(v) != 141 { // the doc's layout ends at offset 140
		t.Fatalf("golden value is %d bytes", len(v))
	}
	got, err := DecodeRangeScanKeys(nil, v)
	if err != nil || len(got) != 3 {
		t.Fatalf("DecodeRangeScanKeys = %q, %v", got, err)
	}
	var again []byte
	for i, k := range got {
		if !bytes.Equal(k, want[i]) {
			t.Errorf("key %d = %q, want %q", i, k, want[i])
		}
		if cap(k) != len(k) {
			t.Errorf("key %d capacity not capped", i)
		}
		again = AppendRangeScanKey(again, k)
	}
	if !bytes.Equal(again, v) {
		t.Fatalf("keys re-encode as %x", again)
	}
}

func TestRangeScanDocumentsGolden(t *testing.T) {
	// The doc's example document (key0, value0) with concrete metadata,
	// followed by a document with an empty value.
	v := unhex("02000001" + "00000e10" + "0000000000000007" + "1122334455667788" + "01" + "04" + "6b657930" + "06" + "76616c756530" +
		"00000000" + "00000000" + "0000000000000008" + "0000000000000009" + "00" + "01" + "6b" + "00")
	got, err := DecodeRangeScanDocuments(nil, v)
	if err != nil || len(got) != 2 {
		t.Fatalf("DecodeRangeScanDocuments = %+v, %v", got, err)
	}
	d := got[0]
	if d.Flags != 0x02000001 || d.Expiry != 3600 || d.Seqno != 7 || d.Cas != 0x1122334455667788 || d.Datatype != DatatypeJSON ||
		string(d.Key) != "key0" || string(d.Value) != "value0" {
		t.Errorf("document 0 = %+v", d)
	}
	if string(got[1].Key) != "k" || len(got[1].Value) != 0 || got[1].Seqno != 8 || got[1].Cas != 9 {
		t.Errorf("document 1 = %+v", got[1])
	}
	var again []byte
	for i := range got {
		again = AppendRangeScanDocument(again, &got[i])
	}
	if !bytes.Equal(again, v) {
		t.Fatalf("documents re-encode as %x", again)
	}
}

func TestRangeScanContinueResponseDecodersRejectMalformed(t *testing.T) {
	keys := map[string][]byte{
		"empty key":          {0x00},
		"length past end":    {0x05, 'a', 'b'},
		"unterminated leb":   {0x80},
		"non-canonical leb":  {0x81, 0x00, 'a'},
		"second key cut off": {0x01, 'a', 0x02, 'b'},
	}
	for name, v := range keys {
		if _, err := DecodeRangeScanKeys(nil, v); !errors.Is(err, ErrMalformed) {
			t.Errorf("keys %s: %v", name, err)
		}
	}
	doc := AppendRangeScanDocument(nil, &RangeScanDocument{Key: []byte("k"), Value: []byte("v")})
	docs := map[string][]byte{
		"short metadata": doc[:24],
		"no key length":  doc[:25],
		"value cut":      doc[:len(doc)-1],
		"empty key":      append(append(append([]byte{}, doc[:25]...), 0x00, 0x01), 'v'),
	}
	for name, v := range docs {
		if _, err := DecodeRangeScanDocuments(nil, v); !errors.Is(err, ErrMalformed) {
			t.Errorf("documents %s: %v", name, err)
		}
	}
	for _, ext := range [][]byte{nil, {0, 0, 0}, {0, 0, 0, 2}} {
		p := Packet{OpCode: OpRangeScanContinue, Extras: ext}
		if _, err := DecodeRangeScanContent(&p); !errors.Is(err, ErrMalformed) {
			t.Errorf("content %x: %v", ext, err)
		}
	}
	for _, c := range []RangeScanContent{RangeScanKeys, RangeScanDocuments} {
		p := Packet{OpCode: OpRangeScanContinue, Extras: AppendRangeScanContent(nil, c)}
		if got, err := DecodeRangeScanContent(&p); err != nil || got != c {
			t.Errorf("content %d decodes as %d, %v", c, got, err)
		}
	}
	p := Packet{OpCode: OpRangeScanCreate, Value: goldenScanID[:15]}
	if _, err := DecodeRangeScanCreateResponse(&p); !errors.Is(err, ErrMalformed) {
		t.Errorf("15-byte scan id: %v", err)
	}
	p.Value = goldenScanID[:]
	if id, err := DecodeRangeScanCreateResponse(&p); err != nil || id != goldenScanID {
		t.Errorf("scan id %x, %v", id, err)
	}
}

func TestRangeScanRequestDecodersRejectMalformed(t *testing.T) {
	cont := NewRangeScanContinue(RangeScanContinue{ID: goldenScanID})
	p := Packet{OpCode: OpRangeScanContinue, Extras: cont.ExtrasBytes()[:27]}
	if _, err := DecodeRangeScanContinueRequest(&p); !errors.Is(err, ErrMalformed) {
		t.Errorf("27-byte continue extras: %v", err)
	}
	p = Packet{OpCode: OpRangeScanContinue, Extras: cont.ExtrasBytes(), Key: []byte("k")}
	if _, err := DecodeRangeScanContinueRequest(&p); !errors.Is(err, ErrMalformed) {
		t.Errorf("continue with a key: %v", err)
	}
	p = Packet{OpCode: OpRangeScanCancel, Extras: goldenScanID[:8]}
	if _, err := DecodeRangeScanCancelRequest(&p); !errors.Is(err, ErrMalformed) {
		t.Errorf("8-byte cancel extras: %v", err)
	}
	p = Packet{OpCode: OpRangeScanCancel, Extras: goldenScanID[:], Value: []byte("v")}
	if _, err := DecodeRangeScanCancelRequest(&p); !errors.Is(err, ErrMalformed) {
		t.Errorf("cancel with a value: %v", err)
	}
}

func TestRangeScanCreateValueParsesAsKvEngine(t *testing.T) {
	ok := []struct {
		json string
		want RangeScanCreate
	}{
		{`{}`, RangeScanCreate{}},
		{`{"collection":"abc","key_only":false,"unknown":[1,2]}`, RangeScanCreate{CollectionID: 2748}},
		{`{"collection":"ABC"}`, RangeScanCreate{CollectionID: 2748}},
		{`{"range":{"start":"","excl_end":"/w=="}}`, RangeScanCreate{Range: &RangeScanRange{Start: []byte{}, End: []byte{0xff}, ExclusiveEnd: true}}},
		{`{"sampling":{"samples":10}}`, RangeScanCreate{Sampling: &RangeScanSampling{Samples: 10}}},
		{`{"sampling":{"samples":10,"seed":4294967297}}`, RangeScanCreate{Sampling: &RangeScanSampling{Samples: 10, Seed: 1}}},
		{`{"snapshot_requirements":{"vb_uuid":"18446744073709551615","seqno":0,"seqno_exists":true,"timeout_ms":5}}`,
			RangeScanCreate{Snapshot: &RangeScanSnapshot{VbUUID: 1<<64 - 1, SeqnoExists: true, TimeoutMs: 5}}},
		{`{"name":"` + strings.Repeat("n", 50) + `"}`, RangeScanCreate{Name: strings.Repeat("n", 50)}},
	}
	for _, c := range ok {
		got, err := DecodeRangeScanCreateValue([]byte(c.json))
		if err != nil {
			t.Errorf("%s: %v", c.json, err)
			continue
		}
		if !createEqual(&got, &c.want) {
			t.Errorf("%s decoded as %+v", c.json, got)
		}
	}
	bad := map[string]string{
		`[]`:                         "value",
		`{"collection":8}`:           "collection",
		`{"collection":"-1"}`:        "collection",
		`{"collection":"100000000"}`: "collection",
		`{"key_only":"true"}`:        "key_only",
		`{"range":{},"sampling":{}}`: "range",
		`{"range":[]}`:               "range",
		`{"range":{"end":"YQ=="}}`:   "range.start",
		`{"range":{"start":"YQ==","excl_start":"YQ==","end":"YQ=="}}`:           "range.start",
		`{"range":{"start":"YQ==","end":"!!"}}`:                                 "range.end",
		`{"range":{"start":"YQ==","excl_end":1}}`:                               "range.excl_end",
		`{"range":{"start":"` + strings.Repeat("QUFB", 84) + `","end":"YQ=="}}`: "range.start",
		`{"sampling":{"seed":1}}`:                                               "sampling.samples",
		`{"sampling":{"samples":-1}}`:                                           "sampling.samples",
		`{"sampling":{"samples":1.5}}`:                                          "sampling.samples",
		`{"sampling":{"samples":1,"seed":"1"}}`:                                 "sampling.seed",
		`{"snapshot_requirements":{"seqno":1}}`:                                 "snapshot_requirements.vb_uuid",
		`{"snapshot_requirements":{"vb_uuid":12,"seqno":1}}`:                    "snapshot_requirements.vb_uuid",
		`{"snapshot_requirements":{"vb_uuid":"1x","seqno":1}}`:                  "snapshot_requirements.vb_uuid",
		`{"snapshot_requirements":{"vb_uuid":"1"}}`:                             "snapshot_requirements.seqno",
		`{"snapshot_requirements":{"vb_uuid":"1","seqno":1,"timeout_ms":-5}}`:   "snapshot_requirements.timeout_ms",
		`{"name":"` + strings.Repeat("n", 51) + `"}`:                            "name",
	}
	for in, field := range bad {
		_, err := DecodeRangeScanCreateValue([]byte(in))
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != field {
			t.Errorf("%s: %v, want a DecodeError on %s", in, err, field)
		}
	}
}

func TestRangeScanCreateValueRefusesWhatTheServerRejects(t *testing.T) {
	bad := []*RangeScanCreate{
		{Range: &RangeScanRange{}, Sampling: &RangeScanSampling{Samples: 1}},
		{Range: &RangeScanRange{Start: make([]byte, 251)}},
		{Sampling: &RangeScanSampling{}},
		{Name: strings.Repeat("x", 51)},
	}
	for _, c := range bad {
		out, err := AppendRangeScanCreateValue([]byte("pre"), c)
		if !errors.Is(err, ErrInvalidRequest) || string(out) != "pre" {
			t.Errorf("%+v: %v, %q", c, err, out)
		}
	}
}

func createEqual(a, b *RangeScanCreate) bool {
	if a.CollectionID != b.CollectionID || a.KeyOnly != b.KeyOnly || a.Name != b.Name ||
		(a.Range == nil) != (b.Range == nil) || (a.Sampling == nil) != (b.Sampling == nil) || (a.Snapshot == nil) != (b.Snapshot == nil) {
		return false
	}
	if a.Range != nil && (!bytes.Equal(a.Range.Start, b.Range.Start) || !bytes.Equal(a.Range.End, b.Range.End) ||
		a.Range.ExclusiveStart != b.Range.ExclusiveStart || a.Range.ExclusiveEnd != b.Range.ExclusiveEnd) {
		return false
	}
	if a.Sampling != nil && *a.Sampling != *b.Sampling {
		return false
	}
	return a.Snapshot == nil || *a.Snapshot == *b.Snapshot
}

// rangeScanFuzzSeeds are the seeds of the range scan fuzz targets.
func rangeScanFuzzSeeds() map[string][][]any {
	keys, _ := docKeysValue()
	doc := AppendRangeScanDocument(nil, &RangeScanDocument{Flags: 1, Expiry: 2, Seqno: 3, Cas: 4, Datatype: DatatypeJSON,
		Key: []byte("key0"), Value: []byte(`{"a":1}`)})
	doc = AppendRangeScanDocument(doc, &RangeScanDocument{Key: []byte("k"), Value: nil})
	creates := [][]any{
		{[]byte(`{"collection":"f2","key_only":true,"range":{"start":"dXNlcg==","end":"dXNlcv8="},"snapshot_requirements":{"vb_uuid":"16627788222","seqno":1000,"timeout_ms":2000}}`)},
		{[]byte(`{"collection":"f2","sampling":{"samples":512,"seed":18111}}`)},
		{[]byte(`{"range":{"excl_start":"YQ==","excl_end":"Yg=="},"name":"n"}`)},
		{[]byte(`{"range":{"start":"YQ==","end":"Yg=="},"sampling":{"samples":1}}`)},
		{[]byte(`{"snapshot_requirements":{"vb_uuid":"1","seqno":1.5}}`)},
	}
	cont := NewRangeScanContinue(RangeScanContinue{ID: goldenScanID, ItemLimit: 500, TimeLimitMs: 10, ByteLimit: 4096})
	return map[string][][]any{
		"FuzzRangeScanCreateValue": creates,
		"FuzzRangeScanContinueValue": {
			{keys, false}, {doc, true}, {[]byte{0x00}, false}, {doc[:30], true},
		},
		"FuzzRangeScanRequests": {
			{byte(OpRangeScanContinue), cont.ExtrasBytes()},
			{byte(OpRangeScanCancel), goldenScanID[:]},
			{byte(OpRangeScanContinue), goldenScanID[:]},
		},
	}
}
