package memdx

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestSnappyRoundTrip(t *testing.T) {
	src := []byte(strings.Repeat(`{"name":"kvwire","n":1}`, 50))
	c := CompressSnappy(nil, src)
	if len(c) >= len(src) {
		t.Fatalf("compressed %d -> %d", len(src), len(c))
	}
	out, err := DecompressSnappy(nil, c, 0)
	if err != nil || !bytes.Equal(out, src) {
		t.Fatalf("round trip: %v", err)
	}
	// With room in dst, both directions write into it.
	buf := make([]byte, 0, 4096)
	c2 := CompressSnappy(buf, src)
	if &c2[0] != &buf[:1][0] || !bytes.Equal(c2, c) {
		t.Fatal("CompressSnappy did not use dst")
	}
	dbuf := make([]byte, 0, 4096)
	out, _ = DecompressSnappy(dbuf, c, 0)
	if &out[0] != &dbuf[:1][0] {
		t.Fatal("DecompressSnappy did not use dst")
	}
	if n := testingAllocs(func() { out, _ = DecompressSnappy(dbuf, c, 0) }); n != 0 {
		t.Errorf("DecompressSnappy into a large dst allocated %v times", n)
	}
}

func TestSnappyRejects(t *testing.T) {
	src := bytes.Repeat([]byte("a"), 1000)
	c := CompressSnappy(nil, src)
	// The declared length is checked against the limit before decoding.
	_, err := DecompressSnappy(nil, c, 999)
	wantField(t, "over the limit", err, "decoded length")
	if _, err := DecompressSnappy(nil, c, 1000); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	// A header claiming 4 GiB is refused without allocating it.
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x00}
	_, err = DecompressSnappy(nil, huge, 0)
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("4 GiB header: %v", err)
	}
	_, err = DecompressSnappy(nil, []byte{0x80}, 0)
	wantField(t, "bad varint", err, "header")
	_, err = DecompressSnappy(nil, append([]byte{10}, 0xff, 0xff), 0)
	wantField(t, "bad data", err, "data")
	_, err = DecompressSnappy(nil, c[:len(c)-1], 0)
	wantField(t, "truncated", err, "data")
}

// An empty value compressed (snappy's one byte, a zero length) inflates to
// an empty, non-nil slice, as an empty value sent uncompressed reads back:
// nil is no value at all (CopyGetValue's contract).
func TestSnappyEmptyValueIsNotNil(t *testing.T) {
	z := CompressSnappy(nil, nil)
	out, err := DecompressSnappy(nil, z, 0)
	if err != nil || out == nil || len(out) != 0 {
		t.Fatalf("DecompressSnappy of an empty value: %#v, %v; want an empty non-nil slice", out, err)
	}
	p := &Packet{OpCode: OpGet, Datatype: DatatypeSnappy | DatatypeJSON, Extras: make([]byte, 4), Value: z}
	v, _, dt, err := CopyGetValue(p, nil)
	if err != nil || v == nil || len(v) != 0 || dt != DatatypeJSON {
		t.Fatalf("CopyGetValue of an empty snappy value: %#v %s %v; want an empty non-nil slice", v, dt, err)
	}
}
