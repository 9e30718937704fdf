package memdx

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendToErrorsLeaveDstAlone(t *testing.T) {
	long := make([]byte, 300)
	for _, tc := range []struct {
		name  string
		r     func() Request
		field string
	}{
		{"bad durability level", func() Request { r := NewDelete([]byte("k")); r.Durability = 7; return r }, "durability level"},
		{"reserved durability timeout", func() Request {
			r := NewDelete([]byte("k"))
			r.Durability, r.DurabilityTimeout = DurabilityMajority, 0xffff
			return r
		}, "durability timeout"},
		{"key over 255 with frame infos", func() Request { r := NewGet(long); r.PreserveTTL = true; return r }, "key"},
		{"key over 255 with prefix and frames", func() Request {
			r := NewGet(long[:254])
			r.Collections, r.CollectionID, r.Durability = true, 0x80, DurabilityMajority
			return r
		}, "key"},
		{"raw extras over 255", func() Request { return Request{OpCode: OpSet, Extras: long} }, "extras"},
		{"framing extras over 255", func() Request { return Request{OpCode: OpSet, FramingExtras: long} }, "framing extras"},
		{"subdoc path over 65535", func() Request {
			return NewSubdocLookup(OpSubdocGet, []byte("k"), make([]byte, 65536), 0, 0)
		}, "sub-document path"},
		{"lookup spec path over 65535", func() Request {
			return NewSubdocMultiLookup([]byte("k"), 0, []SubdocLookupOp{{Op: OpSubdocGet, Path: make([]byte, 65536)}})
		}, "sub-document spec path"},
		{"mutation spec path over 65535", func() Request {
			return NewSubdocMultiMutation([]byte("k"), 0, 0, []SubdocMutateOp{{Op: OpSubdocDictUpsert, Path: make([]byte, 65536)}})
		}, "sub-document spec path"},
	} {
		r := tc.r()
		dst := []byte("prefix")
		out, err := r.AppendTo(dst, 1)
		var ee *EncodeError
		if !errors.As(err, &ee) || ee.Field != tc.field || !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: err = %v, want an EncodeError on %q", tc.name, err, tc.field)
		}
		if string(out) != "prefix" {
			t.Errorf("%s: dst changed", tc.name)
		}
	}
	// 255 bytes of prefix + key with frame infos is the limit, and fine.
	r := NewGet(long[:253])
	r.Collections, r.CollectionID, r.PreserveTTL = true, 0x80, true
	if b, err := r.AppendTo(nil, 1); err != nil || b[3] != 255 {
		t.Fatalf("255-byte flexible key: %v", err)
	}
}

func TestCollectionsOnlyOnDocumentKeys(t *testing.T) {
	for _, tc := range []struct {
		r      Request
		prefix bool
	}{
		{NewGet([]byte("k")), true},
		{NewSubdocMultiLookup([]byte("k"), 0, nil), true},
		{NewHello([]byte("agent"), nil), false},
		{NewSASLAuth(MechPlain, nil), false},
		{NewSelectBucket("b"), false},
		{NewStat([]byte("vbucket-seqno")), false},
		{NewGetRandomKey(true, 9), false},
	} {
		r := tc.r
		r.Collections, r.CollectionID = true, 9
		b, err := r.AppendTo(nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		p, _, _ := DecodePacket(b, 0)
		hasPrefix := len(p.Key) == len(r.Key)+1 && p.Key[0] == 9
		if hasPrefix != tc.prefix || (!tc.prefix && !bytes.Equal(p.Key, r.Key)) {
			t.Errorf("%s: key %x (prefix expected %v)", r.OpCode, p.Key, tc.prefix)
		}
		if r.EncodedLen() != len(b) {
			t.Errorf("%s: EncodedLen %d, encoded %d", r.OpCode, r.EncodedLen(), len(b))
		}
	}
}

func TestEncodedLenExact(t *testing.T) {
	for _, cid := range []uint32{0, 0x7f, 0x80, 0x3fff, 0x4000, 1 << 21, 1 << 28, 0xffffffff} {
		for _, dur := range []DurabilityLevel{DurabilityNone, DurabilityMajority} {
			for _, timeout := range []uint16{0, 100} {
				r := NewStore(OpSet, []byte("key"), []byte("value"), 1, 2)
				r.Collections, r.CollectionID = true, cid
				r.Durability, r.DurabilityTimeout = dur, timeout
				r.PreserveTTL = timeout == 0
				b, err := r.AppendTo(nil, 0)
				if err != nil {
					t.Fatal(err)
				}
				if r.EncodedLen() != len(b) {
					t.Errorf("cid %#x dur %s timeout %d: EncodedLen %d, encoded %d", cid, dur, timeout, r.EncodedLen(), len(b))
				}
			}
		}
	}
}

func TestRequestIsAValue(t *testing.T) {
	a := NewGetClusterConfigKnown(1, 2)
	b := a
	b.setExtras([]byte{9})
	if len(a.ExtrasBytes()) != 16 || a.ExtrasBytes()[15] != 2 {
		t.Fatal("changing a copy's inline extras changed the original")
	}
	o := NewObserveSeqno(1, 0x0102030405060708)
	o2 := o
	o2.setValue([]byte{1})
	if !bytes.Equal(o.ValueBytes(), []byte{1, 2, 3, 4, 5, 6, 7, 8}) || o.Value != nil {
		t.Fatalf("ObserveSeqno value %x", o.ValueBytes())
	}
	// Raw Extras are used only when no builder set typed extras.
	g := NewGet([]byte("k"))
	g.Extras = []byte{1, 2}
	if !bytes.Equal(g.ExtrasBytes(), []byte{1, 2}) {
		t.Fatal("raw extras ignored on a request without typed extras")
	}
	s := NewTouch([]byte("k"), 5)
	s.Extras = []byte{1, 2}
	if len(s.ExtrasBytes()) != 4 {
		t.Fatal("raw extras replaced typed extras")
	}
}

func TestHelloKey(t *testing.T) {
	k := HelloKey("kvwire/1.0 (go1.26)", "0123456789abcdef/0000000000000001")
	var m map[string]string
	if err := json.Unmarshal(k, &m); err != nil || m["a"] != "kvwire/1.0 (go1.26)" || m["i"] != "0123456789abcdef/0000000000000001" || len(m) != 2 {
		t.Fatalf("HelloKey = %s (%v)", k, err)
	}
	// Long values are cut, never in the middle of a character.
	agent := strings.Repeat("a", MaxHelloAgentLen-1) + "é and more"
	id := strings.Repeat("9", 40)
	a, i := DecodeHelloKey(HelloKey(agent, id))
	if len(a) > MaxHelloAgentLen || !utf8.ValidString(a) || a != strings.Repeat("a", MaxHelloAgentLen-1) {
		t.Errorf("agent cut to %d bytes %q", len(a), a[len(a)-3:])
	}
	if i != id[:MaxHelloConnectionIDLen] {
		t.Errorf("id cut to %q", i)
	}
	// Characters JSON must escape survive.
	a, i = DecodeHelloKey(HelloKey(`q"u\o<te>`, "x"))
	if a != `q"u\o<te>` || i != "x" {
		t.Errorf("escaping: %q %q", a, i)
	}
	// A key that is not JSON is the agent name, as kv_engine reads it.
	if a, i := DecodeHelloKey([]byte("mchello v1.0")); a != "mchello v1.0" || i != "" {
		t.Errorf("plain key: %q %q", a, i)
	}
	if a, _ := DecodeHelloKey([]byte("{not json")); a != "{not json" {
		t.Errorf("broken JSON key: %q", a)
	}
	if got := AppendHelloFeatures([]byte{0xaa}, []HelloFeature{FeatureXerror, 0x1234}); !bytes.Equal(got, []byte{0xaa, 0, 7, 0x12, 0x34}) {
		t.Errorf("AppendHelloFeatures = %x", got)
	}
}
