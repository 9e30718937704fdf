package memdx

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i + 1)
	}
	return b
}

// frameGolden: (id, data length) and the hand-written header bytes from
// BinaryProtocol.md's rules: high nibble id, low nibble length, 15 in either
// is an escape (value = 15 + next byte), the id's escape byte first.
var frameGolden = []struct {
	id     uint16
	n      int
	header string
}{
	{0, 0, "00"},         // barrier / server duration id, no data
	{1, 1, "11"},         // durability, 1 byte
	{1, 3, "13"},         // durability with timeout
	{5, 0, "50"},         // preserve TTL
	{0, 2, "02"},         // server duration
	{14, 14, "ee"},       // largest unescaped id and length
	{15, 0, "f000"},      // id 15: escape, 15+0
	{16, 2, "f201"},      // id escaped (16-15=1), length 2 in the nibble
	{270, 0, "f0ff"},     // largest id: 15+255
	{2, 15, "2f00"},      // length 15: escape, 15+0
	{2, 29, "2f0e"},      // length 29
	{2, 30, "2f0f"},      // length 30: 15+15
	{3, 270, "3fff"},     // largest length: 15+255
	{20, 29, "ff050e"},   // both escaped: id byte (20-15=5) then length byte (29-15=14)
	{270, 270, "ffffff"}, // both at their largest
	{15, 15, "ff0000"},   // both at the first escaped value
}

func TestFrameInfoGolden(t *testing.T) {
	for _, g := range frameGolden {
		data := seq(g.n)
		want := append(mustHex(t, g.header), data...)
		got, err := AppendFrameInfo([]byte{}, g.id, data)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("AppendFrameInfo(id %d, %d bytes) = %x, %v; want %x", g.id, g.n, got, err, want[:len(g.header)/2])
			continue
		}
		// Decode, with a following frame to show where this one ends.
		next := []byte{0x50}
		id, d, rest, err := NextFrameInfo(append(want, next...))
		if err != nil || id != g.id || !bytes.Equal(d, data) || !bytes.Equal(rest, next) {
			t.Errorf("NextFrameInfo(%x...) = %d, %d bytes, rest %x, %v", want[:len(g.header)/2], id, len(d), rest, err)
		}
		if cap(d) != len(d) {
			t.Errorf("id %d: data slice capacity %d reaches into the next frame", g.id, cap(d))
		}
	}
}

func TestFrameInfoLimits(t *testing.T) {
	for _, tc := range []struct {
		id    uint16
		n     int
		field string
	}{
		{271, 0, "frame info id"},
		{math.MaxUint16, 0, "frame info id"},
		{0, 271, "frame info length"},
	} {
		out, err := AppendFrameInfo([]byte("x"), tc.id, make([]byte, tc.n))
		var ee *EncodeError
		if !errors.As(err, &ee) || ee.Field != tc.field || string(out) != "x" {
			t.Errorf("AppendFrameInfo(id %d, %d bytes) = %x, %v", tc.id, tc.n, out, err)
		}
	}
}

func TestNextFrameInfoRejects(t *testing.T) {
	for _, tc := range []struct {
		in    string
		field string
	}{
		{"", "header"},
		{"f0", "id"},       // id escape byte missing
		{"0f", "length"},   // length escape byte missing
		{"ff05", "length"}, // id escaped, length escape byte missing
		{"02aa", "length"}, // 2 bytes of data promised, 1 present
		{"2f0f" + strings.Repeat("00", 29), "length"},
	} {
		_, _, _, err := NextFrameInfo(mustHex(t, tc.in))
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != tc.field || !errors.Is(err, ErrMalformed) {
			t.Errorf("NextFrameInfo(%s) = %v, want a DecodeError on %q", tc.in, err, tc.field)
		}
	}
}

func TestFrameInfosWalk(t *testing.T) {
	var b []byte
	b, _ = AppendDurabilityFrame(b, DurabilityMajority, 0)
	b = append(b, 0x50)
	b, _ = AppendFrameInfo(b, 300-30, seq(40))
	var ids []uint16
	var lens []int
	if err := FrameInfos(b, func(id uint16, d []byte) error {
		ids, lens = append(ids, id), append(lens, len(d))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || ids[0] != 1 || ids[1] != 5 || ids[2] != 270 || lens[0] != 1 || lens[1] != 0 || lens[2] != 40 {
		t.Fatalf("walked %v %v", ids, lens)
	}
	stop := errors.New("stop")
	calls := 0
	if err := FrameInfos(b, func(uint16, []byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("callback error: %v after %d calls", err, calls)
	}
	if err := FrameInfos(append(b, 0x0f), func(uint16, []byte) error { return nil }); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated trailing frame: %v", err)
	}
	if err := FrameInfos(nil, func(uint16, []byte) error { t.Fatal("called"); return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestDurabilityFrame(t *testing.T) {
	for _, tc := range []struct {
		level   DurabilityLevel
		timeout uint16
		want    string
	}{
		{DurabilityMajority, 0, "1101"},
		{DurabilityMajorityAndPersistOnMaster, 0, "1102"},
		{DurabilityPersistToMajority, 0, "1103"},
		{DurabilityMajority, 1, "13010001"},
		{DurabilityPersistToMajority, 0xfffe, "1303fffe"},
	} {
		got, err := AppendDurabilityFrame(nil, tc.level, tc.timeout)
		if err != nil || !bytes.Equal(got, mustHex(t, tc.want)) {
			t.Errorf("AppendDurabilityFrame(%s, %d) = %x, %v; want %s", tc.level, tc.timeout, got, err, tc.want)
		}
		l, to, err := DecodeDurabilityFrame(got[1:])
		if err != nil || l != tc.level || to != tc.timeout {
			t.Errorf("DecodeDurabilityFrame(%x) = %s %d %v", got[1:], l, to, err)
		}
	}
	for _, tc := range []struct {
		level   DurabilityLevel
		timeout uint16
		field   string
	}{
		{DurabilityNone, 0, "durability level"},
		{4, 0, "durability level"},
		{DurabilityMajority, 0xffff, "durability timeout"},
	} {
		var ee *EncodeError
		if _, err := AppendDurabilityFrame(nil, tc.level, tc.timeout); !errors.As(err, &ee) || ee.Field != tc.field {
			t.Errorf("AppendDurabilityFrame(%d, %d) = %v", tc.level, tc.timeout, err)
		}
	}
	for _, tc := range []struct{ in, field string }{
		{"", "length"}, {"0102", "length"}, {"01020304", "length"},
		{"00", "level"}, {"04", "level"}, {"010000", "timeout"}, {"01ffff", "timeout"},
	} {
		var de *DecodeError
		if _, _, err := DecodeDurabilityFrame(mustHex(t, tc.in)); !errors.As(err, &de) || de.Field != tc.field {
			t.Errorf("DecodeDurabilityFrame(%s) = %v, want field %q", tc.in, err, tc.field)
		}
	}
	for l, name := range map[DurabilityLevel]string{0: "none", 1: "majority", 2: "majorityAndPersistActive",
		3: "persistToMajority", 9: "DurabilityLevel(9)"} {
		if l.String() != name {
			t.Errorf("DurabilityLevel(%d).String() = %q", l, l.String())
		}
	}
}

// The golden values are kv_engine's Tracer::encodeMicros and decodeMicros
// (daemon/tracing/tracer.cc) computed independently: encoded =
// round((micros*2)^(1/1.74)) with micros clamped to 120125042, decoded =
// floor(encoded^1.74 / 2) microseconds.
func TestServerDurationGolden(t *testing.T) {
	for _, tc := range []struct {
		micros int64
		enc    uint16
	}{
		{0, 0}, {1, 1}, {2, 2}, {10, 6}, {22, 9}, {100, 21}, {1000, 79},
		{500_000, 2807}, {700_000, 3406}, {120_125_042, 0xffff}, {1_000_000_000, 0xffff},
	} {
		if got := EncodeServerDuration(time.Duration(tc.micros) * time.Microsecond); got != tc.enc {
			t.Errorf("EncodeServerDuration(%dus) = %d, want %d", tc.micros, got, tc.enc)
		}
	}
	// Sub-microsecond parts are dropped before encoding, as the server
	// counts whole microseconds; a negative duration encodes as 0.
	if got := EncodeServerDuration(1999 * time.Nanosecond); got != 1 {
		t.Errorf("EncodeServerDuration(1.999us) = %d, want 1 (1us)", got)
	}
	if EncodeServerDuration(-time.Second) != 0 {
		t.Error("a negative duration must encode as 0")
	}
	for _, tc := range []struct {
		enc    uint16
		micros int64
	}{
		{0, 0}, {1, 0}, {2, 1}, {3, 3}, {8, 18}, {9, 22}, {0x12, 76}, {0x4c, 936}, {79, 1001},
		{0x58, 1208}, {100, 1509}, {1000, 82979}, {0xffff, 120_125_042},
	} {
		if got := DecodeServerDuration(tc.enc); got != time.Duration(tc.micros)*time.Microsecond {
			t.Errorf("DecodeServerDuration(%d) = %v, want %dus", tc.enc, got, tc.micros)
		}
	}
	// Round trip within the encoding's precision: each step of the
	// encoded value is about 1.74/enc of the duration.
	for _, us := range []int64{100, 1000, 12345, 700_000, 1_000_000, 100_000_000} {
		in := time.Duration(us) * time.Microsecond
		out := DecodeServerDuration(EncodeServerDuration(in))
		if diff := math.Abs(float64(out-in)) / float64(in); diff > 0.01 {
			t.Errorf("%v round-tripped to %v (%.2f%%)", in, out, 100*diff)
		}
	}
}

func TestServerDurationFrame(t *testing.T) {
	frame := AppendServerDurationFrame(nil, time.Millisecond)
	if want := []byte{0x02, 0x00, 79}; !bytes.Equal(frame, want) {
		t.Fatalf("AppendServerDurationFrame(1ms) = % x, want % x", frame, want)
	}
	if got, found, err := ServerDuration(frame); err != nil || !found || got != 1001*time.Microsecond {
		t.Errorf("ServerDuration(% x) = %v %v %v", frame, got, found, err)
	}

	framing := []byte{0x50} // a frame ServerDuration must skip: id 5, no data
	framing = append(framing, 0x02, 0x00, 0x09)
	got, found, err := ServerDuration(framing)
	if err != nil || !found || got != 22*time.Microsecond {
		t.Errorf("ServerDuration after another frame = %v %v %v", got, found, err)
	}
	if _, found, err := ServerDuration([]byte{0x50}); found || err != nil {
		t.Errorf("no duration frame: found %v err %v", found, err)
	}
	if _, _, err := ServerDuration([]byte{0x01, 0x09}); !errors.Is(err, ErrMalformed) {
		t.Errorf("1-byte duration frame: %v", err)
	}
	if _, _, err := ServerDuration([]byte{0x02, 0x00}); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated duration frame: %v", err)
	}
	b := binary.BigEndian.AppendUint16([]byte{0x02}, 0xffff)
	if d, _, _ := ServerDuration(b); d != 120125042*time.Microsecond {
		t.Errorf("largest duration %v", d)
	}
}

func TestPacketServerDuration(t *testing.T) {
	resp := Packet{Magic: MagicResExt, OpCode: OpGet, FramingExtras: AppendServerDurationFrame(nil, 700*time.Millisecond)}
	b, err := AppendPacket(nil, &resp)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := DecodePacket(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := p.ServerDuration()
	if !ok || d < 699*time.Millisecond || d > 701*time.Millisecond {
		t.Errorf("ServerDuration() of a 700ms frame = %v %v", d, ok)
	}
	if v, ok := p.ServerDurationEncoded(); !ok || v != EncodeServerDuration(700*time.Millisecond) || DecodeServerDuration(v) != d {
		t.Errorf("ServerDurationEncoded() = %d %v, want %d, which decodes to %v", v, ok, EncodeServerDuration(700*time.Millisecond), d)
	}
	for name, p := range map[string]Packet{
		"classic response": {Magic: MagicRes, OpCode: OpGet},
		"other frame only": {Magic: MagicResExt, FramingExtras: []byte{0x12, 0x00, 0x01}},
		"malformed frame":  {Magic: MagicResExt, FramingExtras: []byte{0x05}},
		"request barrier":  {Magic: MagicReqExt, FramingExtras: []byte{0x00}},
	} {
		if d, ok := p.ServerDuration(); ok {
			t.Errorf("%s: ServerDuration() = %v, true", name, d)
		}
		if v, ok := p.ServerDurationEncoded(); ok {
			t.Errorf("%s: ServerDurationEncoded() = %d, true", name, v)
		}
	}
}

// The server durations in real captures (couchbase-jvm-clients' core-io
// test packets, all from Couchbase Server with HELLO Tracing) decode to
// kv_engine's values.
func TestServerDurationConformance(t *testing.T) {
	want := map[string]time.Duration{
		"compressed_get_response.txt":           22 * time.Microsecond,
		"compressed_get_and_lock_response.txt":  18 * time.Microsecond,
		"compressed_get_and_touch_response.txt": 936 * time.Microsecond,
		"response_extras_and_value.txt":         76 * time.Microsecond,
	}
	seen := 0
	for _, jp := range loadJVMPackets(t) {
		if jp.FramingExtrasLen == 0 {
			continue
		}
		raw, err := hex.DecodeString(jp.Hex)
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := DecodePacket(raw, 0)
		if err != nil {
			t.Fatalf("%s: %v", jp.File, err)
		}
		d, ok := p.ServerDuration()
		if !ok {
			t.Errorf("%s: no server duration in framing extras % x", jp.File, p.FramingExtras)
			continue
		}
		if w, listed := want[jp.File]; listed {
			seen++
			if d != w {
				t.Errorf("%s: server duration %v, want %v", jp.File, d, w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("checked %d of the %d listed captures", seen, len(want))
	}
}
