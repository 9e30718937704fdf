package memdx

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// leb128Golden: unsigned LEB128, 7 bits per byte, least significant first,
// high bit set on every byte but the last.
var leb128Golden = []struct {
	v   uint32
	hex string
}{
	{0, "00"},
	{1, "01"},
	{8, "08"}, // a typical user collection id
	{0x7f, "7f"},
	{0x80, "8001"},
	{0xff, "ff01"},
	{0x3fff, "ff7f"},
	{0x4000, "808001"},
	{0x1234567, "e78a8d09"},
	{0x0fffffff, "ffffff7f"},
	{0x10000000, "8080808001"},
	{math.MaxUint32, "ffffffff0f"},
}

func TestULEB128Golden(t *testing.T) {
	for _, g := range leb128Golden {
		want := mustHex(t, g.hex)
		if got := AppendULEB128([]byte{}, g.v); !bytes.Equal(got, want) {
			t.Errorf("AppendULEB128(%#x) = %x, want %s", g.v, got, g.hex)
		}
		var buf [MaxLEB128Len]byte
		if n := putULEB128(&buf, g.v); !bytes.Equal(buf[:n], want) {
			t.Errorf("putULEB128(%#x) = %x", g.v, buf[:n])
		}
		if n := uleb128Len(g.v); n != len(want) {
			t.Errorf("uleb128Len(%#x) = %d", g.v, n)
		}
		v, n, err := DecodeULEB128(append(want, 'k', 'e', 'y'))
		if err != nil || v != g.v || n != len(want) {
			t.Errorf("DecodeULEB128(%s...) = %#x, %d, %v", g.hex, v, n, err)
		}
	}
}

// TestULEB128Rejects: no stop byte within the input or within 5 bytes, a
// value over 32 bits, and non-canonical encodings (a redundant trailing zero
// group, which would let two byte strings name one document).
func TestULEB128Rejects(t *testing.T) {
	for _, tc := range []struct{ in, field string }{
		{"", "length"},
		{"80", "length"},
		{"ffff", "length"},
		{"ffffffff", "length"},
		{"ffffffff8f", "length"}, // 5th byte continues
		{"8080808080", "length"}, // 5th byte continues
		{"ffffffff10", "value"},  // 33 bits
		{"ffffffff7f", "value"},  // 35 bits
		{"8000", "byte 1"},       // 0 in two bytes
		{"818000", "byte 2"},     // 1 in three bytes
		{"ffffff8000", "byte 4"}, // redundant zero fifth group
		{"8080808000", "byte 4"}, // 0 in five bytes
	} {
		_, _, err := DecodeULEB128(mustHex(t, tc.in))
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != tc.field || !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeULEB128(%s) = %v, want a DecodeError on %q", tc.in, err, tc.field)
		}
	}
}

func TestCollectionKey(t *testing.T) {
	k := AppendCollectionKey([]byte("x"), 0x80, []byte("doc"))
	if !bytes.Equal(k, mustHex(t, "788001646f63")) {
		t.Fatalf("AppendCollectionKey = %x", k)
	}
	cid, key, err := SplitCollectionKey(k[1:])
	if err != nil || cid != 0x80 || string(key) != "doc" {
		t.Fatalf("SplitCollectionKey = %d %q %v", cid, key, err)
	}
	// An empty document key after the prefix is allowed (the server decides).
	if cid, key, err := SplitCollectionKey([]byte{0}); err != nil || cid != 0 || len(key) != 0 {
		t.Fatalf("prefix only: %d %q %v", cid, key, err)
	}
	if _, _, err := SplitCollectionKey(nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("empty key: %v", err)
	}
}
