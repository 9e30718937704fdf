package memdx

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
)

// docSections are the body sections kv_engine's documentation gives for
// each example packet (by line in packets/kv_engine_doc_packet_examples.json),
// read off the doc captions and field listings, not off the bytes.
var docSections = map[int]struct {
	extras, key, value string // hex for extras, text for key and value
	opaque             uint32
	cas                uint64
}{
	657:  {value: "Not found"},
	740:  {key: "Hello"},
	781:  {extras: "deadbeef", value: "World", cas: 1},
	826:  {extras: "deadbeef", key: "Hello", value: "World", cas: 1}, // the erratum
	934:  {extras: "deadbeef00000e10", key: "Hello", value: "World"},
	985:  {cas: 1},
	1056: {key: "Hello"},
	1181: {extras: "0000000000000001" + "0000000000000000" + "00000e10", key: "counter"},
	1237: {value: "\x00\x00\x00\x00\x00\x00\x00\x00", cas: 5},
	1294: {},
	1371: {extras: "00000e10"},
	1430: {},
	1489: {},
	1523: {value: "1.3.1"},
	1600: {key: "Hello", value: "!"},
	1670: {},
	1708: {key: "pid", value: "3078"},
	1871: {key: "mchello v1.0", value: "\x00\x01\x00\x02\x00\x03\x00\x04\x00\x05"},
	1924: {value: "\x00\x03\x00\x04"},
	2300: {opaque: 0xefbeadde},
	2331: {value: "engineering marketing sales", opaque: 0xefbeadde},
	2402: {key: "engineering", opaque: 0xefbeadde},
	// docs/sasl.md
	33:  {},
	82:  {value: "SCRAM-SHA1 CRAM-MD5 PLAIN"},
	174: {key: "PLAIN", value: "\x00user\x00pencil"},
	213: {},
	253: {key: "SCRAM-SHA1", value: "n,,n=user,r=d40a02e348040590"},
	302: {value: "r=d40a02e348040590ec8ac784d46faf9d,s=fw3GRQYlFy6QEqT5y7Of4XbGaGg=,i=10"},
	367: {key: "SCRAM-SHA1", value: "c=biws,r=d40a02e348040590ec8ac784d46faf9d,p=co6kWwNhpVYuuFHWQv5VVcWrPJM="},
	438: {value: "v=inZJ2d0Ms4dnENnHwPaqVfNn7DY="},
}

func parseHex8(t *testing.T, s string) uint8 {
	t.Helper()
	v, err := strconv.ParseUint(s, 0, 8)
	if err != nil {
		t.Fatalf("bad hex byte %q", s)
	}
	return uint8(v)
}

func parseHex16(t *testing.T, s string) uint16 {
	t.Helper()
	v, err := strconv.ParseUint(s, 0, 16)
	if err != nil {
		t.Fatalf("bad hex %q", s)
	}
	return uint16(v)
}

// decodeWhole decodes b as exactly one packet and fails when bytes are left
// over: what a test (or a tool reading one packet per buffer) wants.
func decodeWhole(b []byte) (Packet, error) {
	p, n, err := DecodePacket(b, 0)
	if err != nil {
		return p, err
	}
	if n != len(b) {
		return p, &DecodeError{What: "packet", Field: "body length",
			Reason: "header says " + strconv.Itoa(n-HeaderSize) + " body bytes but " + strconv.Itoa(len(b)-HeaderSize) + " follow"}
	}
	return p, nil
}

// TestDocPacketExamples decodes every packet diagram of kv_engine's
// BinaryProtocol.md and sasl.md to the header fields and body sections the
// documentation gives, re-encodes it to the same bytes, and rejects the one
// whose header disagrees with its own body (the GetK erratum).
func TestDocPacketExamples(t *testing.T) {
	pkts := loadDocPackets(t)
	if len(pkts) != 30 {
		t.Fatalf("%d doc packets, want 30", len(pkts))
	}
	erratum := 0
	for _, dp := range pkts {
		raw := mustHex(t, dp.Hex)
		name := "line " + strconv.Itoa(dp.Line)
		if len(raw) != dp.Length {
			t.Fatalf("%s: %d bytes, JSON says %d", name, len(raw), dp.Length)
		}
		h, err := DecodeHeader(raw, 0)
		if err != nil {
			t.Fatalf("%s: DecodeHeader: %v", name, err)
		}
		if h.Magic != Magic(parseHex8(t, dp.Magic)) || h.Opcode != parseHex8(t, dp.Opcode) || h.BodyLen != dp.HeaderTotalBody {
			t.Errorf("%s: header %+v does not match magic %s opcode %s body %d", name, h, dp.Magic, dp.Opcode, dp.HeaderTotalBody)
		}
		if (dp.Direction == "request") != h.Magic.IsRequest() {
			t.Errorf("%s: direction %s, magic %s", name, dp.Direction, h.Magic)
		}
		if dp.Status != nil && h.VbucketOrStatus != parseHex16(t, *dp.Status) {
			t.Errorf("%s: status 0x%04x, want %s", name, h.VbucketOrStatus, *dp.Status)
		}
		want, ok := docSections[dp.Line]
		if !ok {
			t.Fatalf("%s: no documented sections in the test table", name)
		}

		if !dp.HeaderConsistent {
			erratum++
			// The header claims 9 body bytes (4 extras + 5 key), the example
			// has 14 (the 5-byte value "World" too). A stream decoder takes
			// the header at its word: the packet ends after the key and the
			// value's bytes would be read as the next packet's header...
			p, n, err := DecodePacket(raw, 0)
			if err != nil {
				t.Fatalf("%s: DecodePacket: %v", name, err)
			}
			if n != HeaderSize+int(dp.HeaderTotalBody) || n == len(raw) {
				t.Fatalf("%s: consumed %d of %d bytes", name, n, len(raw))
			}
			if string(p.Key) != want.key || len(p.Value) != 0 || string(raw[n:]) != want.value {
				t.Fatalf("%s: decoded key %q value %q, rest %q", name, p.Key, p.Value, raw[n:])
			}
			// ...and a whole-buffer decode refuses it, naming the field.
			var de *DecodeError
			if _, err := decodeWhole(raw); !errors.As(err, &de) || de.Field != "body length" || !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: whole-buffer decode of the erratum: %v", name, err)
			}
			continue
		}

		p, err := decodeWhole(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(p.Extras, mustHex(t, want.extras)) || string(p.Key) != want.key || string(p.Value) != want.value {
			t.Errorf("%s: extras %x key %q value %q; want %s %q %q", name, p.Extras, p.Key, p.Value, want.extras, want.key, want.value)
		}
		if p.Opaque != want.opaque || p.Cas != want.cas {
			t.Errorf("%s: opaque 0x%x cas %d; want 0x%x %d", name, p.Opaque, p.Cas, want.opaque, want.cas)
		}
		again, err := AppendPacket(nil, &p)
		if err != nil || !bytes.Equal(again, raw) {
			t.Errorf("%s: re-encoded\n%x\nwant\n%x (%v)", name, again, raw, err)
		}

		// The op-specific decoders on the documented responses.
		switch dp.Line {
		case 781:
			if f, err := DecodeGetFlags(&p); err != nil || f != 0xdeadbeef {
				t.Errorf("GET flags = %x, %v", f, err)
			}
		case 1237:
			if v, err := DecodeCounterValue(&p); err != nil || v != 0 {
				t.Errorf("INCREMENT value = %d, %v", v, err)
			}
		case 1924:
			if f, err := DecodeHelloFeatures(p.Value); err != nil || len(f) != 2 || f[0] != FeatureTCPNoDelay || f[1] != FeatureMutationSeqno {
				t.Errorf("HELLO features = %v, %v", f, err)
			}
		case 82:
			if m := DecodeSASLMechanisms(p.Value); len(m) != 3 || m[0] != MechScramSHA1 || m[2] != MechPlain {
				t.Errorf("SASL mechanisms = %q", m)
			}
		case 174:
			if az, u, pw, err := DecodePlainPayload(p.Value); err != nil || az != "" || u != "user" || pw != "pencil" {
				t.Errorf("PLAIN = %q %q %q %v", az, u, pw, err)
			}
		case 302:
			if p.Status != StatusAuthContinue {
				t.Errorf("SCRAM first response status %s", p.Status)
			}
		}
	}
	if erratum != 1 {
		t.Fatalf("%d inconsistent examples, want 1", erratum)
	}
}

// TestDocRequestExamplesFromBuilders encodes the documented requests with
// the New* builders and compares with the documentation's bytes.
func TestDocRequestExamplesFromBuilders(t *testing.T) {
	byLine := map[int][]byte{}
	for _, dp := range loadDocPackets(t) {
		byLine[dp.Line] = mustHex(t, dp.Hex)
	}
	for _, tc := range []struct {
		line   int
		req    Request
		opaque uint32
	}{
		{740, NewGet([]byte("Hello")), 0},
		{934, NewStore(OpAdd, []byte("Hello"), []byte("World"), 0xdeadbeef, 3600), 0},
		{1056, NewDelete([]byte("Hello")), 0},
		{1181, NewCounter(OpIncrement, []byte("counter"), 1, 0, 3600), 0},
		{1294, NewQuit(), 0},
		{1430, NewNoop(), 0},
		{1489, NewVersion(), 0},
		{1600, NewConcat(OpAppend, []byte("Hello"), []byte("!")), 0},
		{1670, NewStat(nil), 0},
		{1871, NewHello([]byte("mchello v1.0"), []HelloFeature{1, 2, 3, 4, 5}), 0},
		{2300, Request{OpCode: OpListBuckets}, 0xefbeadde},
		{2402, NewSelectBucket("engineering"), 0xefbeadde},
		{33, NewSASLListMechs(), 0},
		{174, NewSASLAuth(MechPlain, PlainPayload("user", "pencil")), 0},
		{253, NewSASLAuth(MechScramSHA1, []byte("n,,n=user,r=d40a02e348040590")), 0},
		{367, NewSASLStep(MechScramSHA1, []byte("c=biws,r=d40a02e348040590ec8ac784d46faf9d,p=co6kWwNhpVYuuFHWQv5VVcWrPJM=")), 0},
	} {
		want, ok := byLine[tc.line]
		if !ok {
			t.Fatalf("no doc packet at line %d", tc.line)
		}
		got, err := tc.req.AppendTo(nil, tc.opaque)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("line %d (%s): encoded\n%x\nwant\n%x (%v)", tc.line, tc.req.OpCode, got, want, err)
		}
		if n := tc.req.EncodedLen(); n != len(want) {
			t.Errorf("line %d: EncodedLen %d, want %d", tc.line, n, len(want))
		}
	}
}

// TestJVMPackets decodes the couchbase-jvm-clients captures to the header
// fields the corpus gives, rejects the deliberately broken one, and checks
// bodies: snappy values decompress to JSON, error maps are JSON, HELLO and
// SASL bodies decode, framing extras hold a server duration.
func TestJVMPackets(t *testing.T) {
	pkts := loadJVMPackets(t)
	if len(pkts) != 19 {
		t.Fatalf("%d jvm packets, want 19", len(pkts))
	}
	rejected := 0
	for _, jp := range pkts {
		raw := mustHex(t, jp.Hex)
		name := jp.File + "#" + strconv.Itoa(jp.Index)
		if len(raw) != jp.Length {
			t.Fatalf("%s: %d bytes, JSON says %d", name, len(raw), jp.Length)
		}
		if !Magic(parseHex8(t, jp.Magic)).Valid() {
			rejected++
			var de *DecodeError
			if _, err := DecodeHeader(raw, 0); !errors.As(err, &de) || de.Field != "magic" {
				t.Fatalf("%s: bad magic %s not rejected: %v", name, jp.Magic, err)
			}
			if _, _, err := DecodePacket(raw, 0); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: DecodePacket accepted bad magic: %v", name, err)
			}
			continue
		}
		h, err := DecodeHeader(raw, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cas := binary.BigEndian.Uint64(mustHex(t, jp.CasHex))
		if h.Magic != Magic(parseHex8(t, jp.Magic)) || h.Opcode != parseHex8(t, jp.Opcode) ||
			int(h.FramingExtrasLen) != jp.FramingExtrasLen || int(h.KeyLen) != jp.KeyLen ||
			int(h.ExtrasLen) != jp.ExtrasLen || h.Datatype != Datatype(parseHex8(t, jp.Datatype)) ||
			h.VbucketOrStatus != parseHex16(t, jp.StatusOrVbucket) || h.Opaque != jp.Opaque ||
			h.Cas != cas || h.BodyLen != jp.HeaderTotalBody {
			t.Errorf("%s: header %+v does not match %+v", name, h, jp)
		}
		p, err := decodeWhole(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again, err := AppendPacket(nil, &p)
		if err != nil || !bytes.Equal(again, raw) {
			t.Errorf("%s: re-encoding differs (%v)", name, err)
		}
		if len(p.FramingExtras) > 0 {
			if _, found, err := ServerDuration(p.FramingExtras); err != nil || !found {
				t.Errorf("%s: framing extras %x: server duration found=%v err=%v", name, p.FramingExtras, found, err)
			}
		}
		if p.Datatype.Has(DatatypeSnappy) {
			v, err := DecompressSnappy(nil, p.Value, 0)
			if err != nil {
				t.Fatalf("%s: snappy value: %v", name, err)
			}
			if !json.Valid(v) {
				t.Errorf("%s: decompressed value is not JSON: %.60q", name, v)
			}
			if f, err := DecodeGetFlags(&p); err != nil {
				t.Errorf("%s: flags: %v", name, err)
			} else if f != 0x02000000 {
				t.Errorf("%s: flags 0x%08x, want 0x02000000 (JSON common flags)", name, f)
			}
		}
		switch {
		case p.OpCode == OpGetErrorMap && p.Status == StatusSuccess && len(p.Value) > 0:
			if !json.Valid(p.Value) {
				t.Errorf("%s: error map is not JSON", name)
			}
		case p.OpCode == OpHello && p.Status == StatusSuccess:
			f, err := DecodeHelloFeatures(p.Value)
			want := []HelloFeature{FeatureTCPNoDelay, FeatureXattr, FeatureXerror, FeatureSelectBucket, FeatureSnappy, FeatureTracing}
			if err != nil || len(f) != len(want) {
				t.Fatalf("%s: features %v, %v", name, f, err)
			}
			for i := range want {
				if f[i] != want[i] {
					t.Errorf("%s: feature %d = %s, want %s", name, i, f[i], want[i])
				}
			}
		case p.OpCode == OpSASLListMechs && len(p.Value) > 0:
			m := DecodeSASLMechanisms(p.Value)
			if len(m) != 4 || m[0] != MechScramSHA512 && m[0] != "FLAUN" {
				t.Errorf("%s: mechanisms %q", name, m)
			}
		}
	}
	if rejected != 1 {
		t.Fatalf("%d packets rejected for their magic, want 1", rejected)
	}
}

// TestStreamOfConformancePackets decodes every valid conformance packet from
// one concatenated buffer, as a connection's reader would.
func TestStreamOfConformancePackets(t *testing.T) {
	var stream []byte
	var sizes []int
	for _, dp := range loadDocPackets(t) {
		if dp.HeaderConsistent {
			raw := mustHex(t, dp.Hex)
			stream = append(stream, raw...)
			sizes = append(sizes, len(raw))
		}
	}
	for _, jp := range loadJVMPackets(t) {
		raw := mustHex(t, jp.Hex)
		if Magic(raw[0]).Valid() {
			stream = append(stream, raw...)
			sizes = append(sizes, len(raw))
		}
	}
	for i, want := range sizes {
		// Every prefix shorter than the packet is "short", never malformed.
		for _, cut := range []int{0, 1, HeaderSize - 1, HeaderSize, want - 1} {
			if cut < 0 || cut >= want {
				continue
			}
			if _, _, err := DecodePacket(stream[:cut], 0); !errors.Is(err, ErrShortBuffer) || errors.Is(err, ErrMalformed) {
				t.Fatalf("packet %d cut at %d: %v", i, cut, err)
			}
		}
		n, err := PacketSize(stream, 0)
		if err != nil || n != want {
			t.Fatalf("packet %d: PacketSize %d, %v; want %d", i, n, err, want)
		}
		_, m, err := DecodePacket(stream, 0)
		if err != nil || m != want {
			t.Fatalf("packet %d: consumed %d, %v", i, m, err)
		}
		stream = stream[m:]
	}
	if len(stream) != 0 {
		t.Fatalf("%d bytes left over", len(stream))
	}
}

func header(magic, op byte, keyLen uint16, extLen, dt byte, vb uint16, body, opaque uint32, cas uint64) []byte {
	b := make([]byte, HeaderSize)
	b[0], b[1] = magic, op
	binary.BigEndian.PutUint16(b[2:4], keyLen)
	b[4], b[5] = extLen, dt
	binary.BigEndian.PutUint16(b[6:8], vb)
	binary.BigEndian.PutUint32(b[8:12], body)
	binary.BigEndian.PutUint32(b[12:16], opaque)
	binary.BigEndian.PutUint64(b[16:24], cas)
	return b
}

func TestDecodeHeaderRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     []byte
		max   uint32
		field string
	}{
		{"bad magic", header(0x17, 0, 0, 0, 0, 0, 0, 0, 0), 0, "magic"},
		{"zero magic", header(0x00, 0, 0, 0, 0, 0, 0, 0, 0), 0, "magic"},
		{"body over limit", header(0x81, 0, 0, 0, 0, 0, 101, 0, 0), 100, "body length"},
		{"body over default limit", header(0x81, 0, 0, 0, 0, 0, DefaultMaxBodyLength+1, 0, 0), 0, "body length"},
		{"4 GiB body", header(0x81, 0, 0, 0, 0, 0, 0xffffffff, 0, 0), 0, "body length"},
		{"key over body", header(0x80, 0, 6, 0, 0, 0, 5, 0, 0), 0, "key length"},
		{"extras over body", header(0x81, 0, 0, 6, 0, 0, 5, 0, 0), 0, "extras length"},
		{"extras+key over body", header(0x81, 0, 3, 3, 0, 0, 5, 0, 0), 0, "key length"},
		// Flexible framing: byte 2 is the framing-extras length, byte 3 the key length.
		{"framing over body", header(0x18, 0, 0x0600, 0, 0, 0, 5, 0, 0), 0, "framing extras length"},
		{"framing+extras over body", header(0x08, 0, 0x0300, 3, 0, 0, 5, 0, 0), 0, "extras length"},
		{"framing+key over body", header(0x08, 0, 0x0303, 0, 0, 0, 5, 0, 0), 0, "key length"},
	} {
		_, err := DecodeHeader(tc.b, tc.max)
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != tc.field || !errors.Is(err, ErrMalformed) || errors.Is(err, ErrShortBuffer) {
			t.Errorf("%s: err = %v, want a DecodeError on %q", tc.name, err, tc.field)
		}
		if _, err := PacketSize(tc.b, tc.max); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: PacketSize err = %v", tc.name, err)
		}
		// Only an over-limit body matches ErrBodyTooLarge: a reader tells
		// "larger than I accept" from a corrupt header by it.
		if tooLarge := tc.field == "body length"; errors.Is(err, ErrBodyTooLarge) != tooLarge {
			t.Errorf("%s: errors.Is(err, ErrBodyTooLarge) = %v, want %v", tc.name, !tooLarge, tooLarge)
		}
	}
	for n := range HeaderSize {
		if _, err := DecodeHeader(make([]byte, n), 0); !errors.Is(err, ErrShortBuffer) {
			t.Errorf("%d-byte header: %v", n, err)
		}
	}
}

func TestDecodeHeaderFlexibleKeyLength(t *testing.T) {
	// 0x08: byte 2 = framing extras (3), byte 3 = key length (5); a classic
	// reading would take 0x0305 = 773 as the key length.
	b := header(0x08, 0x01, 0x0305, 4, 0, 9, 3+4+5+2, 1, 0)
	h, err := DecodeHeader(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.FramingExtrasLen != 3 || h.KeyLen != 5 || h.ExtrasLen != 4 || h.VbucketOrStatus != 9 {
		t.Fatalf("header %+v", h)
	}
	// The server-initiated magics use the classic 2-byte key length.
	b = header(0x82, 0x01, 0x0305, 0, 0, 0, 0x0305, 0, 0)
	h, err = DecodeHeader(b, 0)
	if err != nil || h.KeyLen != 0x0305 || h.FramingExtrasLen != 0 {
		t.Fatalf("server request header %+v, %v", h, err)
	}
}

func TestDecodePacketSlicesDoNotOverlap(t *testing.T) {
	p := Packet{Magic: MagicResExt, OpCode: OpGet, FramingExtras: []byte{0x02, 0x00, 0x10},
		Extras: []byte{1, 2, 3, 4}, Key: []byte("key"), Value: []byte("value")}
	b, err := AppendPacket(nil, &p)
	if err != nil {
		t.Fatal(err)
	}
	d, n, err := DecodePacket(b, 0)
	if err != nil || n != len(b) {
		t.Fatal(n, err)
	}
	_ = append(d.FramingExtras, 0xff)
	_ = append(d.Extras, 0xff)
	_ = append(d.Key, 0xff)
	if !bytes.Equal(b, mustAppend(t, &p)) {
		t.Fatal("appending to a decoded section overwrote the next one")
	}
	// Empty sections are nil.
	d, _, _ = DecodePacket(mustAppend(t, &Packet{Magic: MagicRes}), 0)
	if d.FramingExtras != nil || d.Extras != nil || d.Key != nil || d.Value != nil {
		t.Fatalf("empty sections not nil: %+v", d)
	}
}

func mustAppend(t *testing.T, p *Packet) []byte {
	t.Helper()
	b, err := AppendPacket(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAppendPacketMagic(t *testing.T) {
	fe := []byte{0x02, 0x00, 0x10}
	for _, tc := range []struct {
		in, out Magic
	}{
		{MagicReq, MagicReqExt}, {MagicRes, MagicResExt}, {MagicReqExt, MagicReqExt}, {MagicResExt, MagicResExt},
	} {
		b := mustAppend(t, &Packet{Magic: tc.in, FramingExtras: fe, Key: []byte("k")})
		if Magic(b[0]) != tc.out || b[2] != 3 || b[3] != 1 {
			t.Errorf("%s with framing extras encoded as %x", tc.in, b[:4])
		}
	}
	// Without framing extras the magic is kept as given.
	for _, m := range []Magic{MagicReq, MagicRes, MagicReqExt, MagicResExt, MagicServerReq, MagicServerRes} {
		b := mustAppend(t, &Packet{Magic: m, Key: []byte("k")})
		if Magic(b[0]) != m {
			t.Errorf("%s encoded as 0x%02x", m, b[0])
		}
	}
	// Server-initiated packets carry ServerOpCode and, for requests, a vbucket.
	b := mustAppend(t, &Packet{Magic: MagicServerReq, OpCode: OpSet, ServerOpCode: ServerOpClustermapChangeNotification})
	if b[1] != 0x01 {
		t.Errorf("server request opcode 0x%02x", b[1])
	}
}

func TestAppendPacketErrors(t *testing.T) {
	big := make([]byte, 256)
	for _, tc := range []struct {
		name  string
		p     Packet
		field string
	}{
		{"framing on server magic", Packet{Magic: MagicServerReq, FramingExtras: []byte{0}}, "framing extras"},
		{"invalid magic", Packet{Magic: 0x17}, "magic"},
		{"framing over 255", Packet{Magic: MagicReq, FramingExtras: big}, "framing extras"},
		{"extras over 255", Packet{Magic: MagicReq, Extras: big}, "extras"},
		{"flex key over 255", Packet{Magic: MagicReqExt, Key: big}, "key"},
		{"key over 65535", Packet{Magic: MagicReq, Key: make([]byte, 65536)}, "key"},
	} {
		dst := []byte("prefix")
		out, err := AppendPacket(dst, &tc.p)
		var ee *EncodeError
		if !errors.As(err, &ee) || ee.Field != tc.field || !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: err = %v, want an EncodeError on %q", tc.name, err, tc.field)
		}
		if string(out) != "prefix" {
			t.Errorf("%s: dst changed to %q", tc.name, out)
		}
	}
	// A classic key of 256..65535 bytes is fine.
	if _, err := AppendPacket(nil, &Packet{Magic: MagicReq, Key: big}); err != nil {
		t.Errorf("256-byte classic key: %v", err)
	}
}

func TestAppendPacketAppends(t *testing.T) {
	dst := make([]byte, 3, 64)
	copy(dst, "abc")
	out := mustAppendTo(t, dst, &Packet{Magic: MagicRes, OpCode: OpNoop, Opaque: 9})
	if string(out[:3]) != "abc" || len(out) != 3+HeaderSize || &out[0] != &dst[0] {
		t.Fatalf("AppendPacket did not append in place: %x", out)
	}
}

func mustAppendTo(t *testing.T, dst []byte, p *Packet) []byte {
	t.Helper()
	b, err := AppendPacket(dst, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
