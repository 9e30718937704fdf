package transcode

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/kvwire/kvwire/internal/kverr"
)

func TestFormatOf(t *testing.T) {
	for flags, want := range map[uint32]Format{
		0:                      FormatJSON,
		1:                      FormatUnknown, // a legacy value other than 0
		FlagsJSON:              FormatJSON,
		FlagsBinary | 0x02:     FormatBinary, // low bits are free (Node.js's legacy format)
		FlagsString:            FormatString,
		flagsPrivate:           FormatPrivate,
		0x05000000:             FormatUnknown,
		FlagsJSON | 0x20000000: FormatUnknown, // compression bits
	} {
		if got := FormatOf(flags); got != want {
			t.Errorf("FormatOf(0x%08x) = %v, want %v", flags, got, want)
		}
	}
}

func TestStoreFlags(t *testing.T) {
	for _, c := range []struct {
		caller, encoded uint32
		json            bool
		flags           uint32
		wantJSON        bool
	}{
		{0, FlagsJSON, false, FlagsJSON, true},
		{0, FlagsBinary, false, FlagsBinary, false},
		{FlagsBinary, FlagsJSON, false, FlagsBinary, false}, // the caller's flags win
		{FlagsBinary, FlagsJSON, true, FlagsBinary, true},   // and so does the caller's JSON
		{0, 0, false, 0, false},                             // flags 0 read as JSON, but say nothing when written
	} {
		flags, json := StoreFlags(c.caller, c.encoded, c.json)
		if flags != c.flags || json != c.wantJSON {
			t.Errorf("StoreFlags(0x%08x, 0x%08x, %v) = 0x%08x, %v; want 0x%08x, %v",
				c.caller, c.encoded, c.json, flags, json, c.flags, c.wantJSON)
		}
	}
}

func TestMismatchNamesTheFormat(t *testing.T) {
	var n int
	err := DecodeJSON([]byte("abc"), FlagsBinary, &n)
	if !errors.Is(err, kverr.ErrDecodingFailure) || err.Error() != "decoding failure: JSONTranscoder cannot decode a binary value (flags 0x03000000) into *int" {
		t.Errorf("binary into *int: %v", err)
	}
	err = DecodeBinary([]byte("abc"), 7, new([]byte))
	if !errors.Is(err, kverr.ErrDecodingFailure) || err.Error() != "decoding failure: RawBinaryTranscoder: flags 0x00000007 are not Couchbase common flags of a known format (3-byte value)" {
		t.Errorf("unknown flags: %v", err)
	}
}

// Each encoder takes its types, as values or non-nil pointers, and
// refuses the rest (a nil pointer included) with ErrEncodingFailure.
func TestEncoders(t *testing.T) {
	b, str, raw := []byte("b"), "s", json.RawMessage(`{}`)
	var nilBytes *[]byte
	var nilString *string
	for _, c := range []struct {
		name  string
		enc   func(any) ([]byte, uint32, error)
		v     any
		want  string
		flags uint32
	}{
		{"binary []byte", EncodeBinary, b, "b", FlagsBinary},
		{"binary *[]byte", EncodeBinary, &b, "b", FlagsBinary},
		{"binary nil *[]byte", EncodeBinary, nilBytes, "", 0},
		{"binary string", EncodeBinary, str, "", 0},
		{"binary RawMessage", EncodeBinary, raw, "", 0},
		{"string string", EncodeString, str, "s", FlagsString},
		{"string *string", EncodeString, &str, "s", FlagsString},
		{"string nil *string", EncodeString, nilString, "", 0},
		{"string []byte", EncodeString, b, "", 0},
		{"raw []byte", EncodeRawJSON, b, "b", FlagsJSON},
		{"raw *[]byte", EncodeRawJSON, &b, "b", FlagsJSON},
		{"raw RawMessage", EncodeRawJSON, raw, "{}", FlagsJSON},
		{"raw *RawMessage", EncodeRawJSON, &raw, "{}", FlagsJSON},
		{"raw string", EncodeRawJSON, str, "s", FlagsJSON},
		{"raw *string", EncodeRawJSON, &str, "s", FlagsJSON},
		{"raw nil *string", EncodeRawJSON, nilString, "", 0},
		{"raw int", EncodeRawJSON, 1, "", 0},
		{"json RawMessage", EncodeJSON, raw, "{}", FlagsJSON},
		{"json int", EncodeJSON, 1, "1", FlagsJSON},
		{"json []byte", EncodeJSON, b, "", 0},
		{"json chan", EncodeJSON, make(chan int), "", 0},
	} {
		got, flags, err := c.enc(c.v)
		if c.flags == 0 {
			if !errors.Is(err, kverr.ErrEncodingFailure) {
				t.Errorf("%s: %q, %v; want ErrEncodingFailure", c.name, got, err)
			}
			continue
		}
		if err != nil || string(got) != c.want || flags != c.flags {
			t.Errorf("%s: %q, 0x%08x, %v; want %q, 0x%08x", c.name, got, flags, err, c.want, c.flags)
		}
	}
}
