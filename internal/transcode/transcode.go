// Package transcode is the value side of client's Transcoders: the
// Couchbase common flags (the format of a document's value, in the top byte
// of its flags), and the encoding and decoding of values by them that
// client.JSONTranscoder, RawBinaryTranscoder, RawStringTranscoder and
// RawJSONTranscoder do. Pure: no I/O, no state.
//
// Client's public types (Format, the transcoders, the CommonFlags
// constants) delegate here; their values are this package's (client's
// public_types_test checks every one).
package transcode

import (
	"encoding/json"
	"fmt"

	"github.com/kvwire/kvwire/internal/kverr"
)

// Couchbase common flags: the format of a document's value, in the top byte
// of its flags, as every Couchbase SDK writes and reads them. The low bits
// are free, and a reader goes by the top byte alone.
const (
	FlagsJSON   uint32 = 0x02000000
	FlagsBinary uint32 = 0x03000000
	FlagsString uint32 = 0x04000000
)

const (
	flagsMask       = 0xff000000
	flagsFormatMask = 0x0f000000
	// flagsCompressionMask: bits the specification reserves for a
	// compression of the value; none is defined, so set bits make the
	// flags unreadable.
	flagsCompressionMask = 0xe0000000
	flagsPrivate         = 0x01000000
)

// Format is the format of a value as its flags give it.
type Format uint8

// Formats, with client.Format's values (its documentation says what each
// is): unknown flags, an SDK's private format, JSON (flags 0 too), binary,
// UTF-8 text.
const (
	FormatUnknown Format = iota
	FormatPrivate
	FormatJSON
	FormatBinary
	FormatString
)

// FormatOf returns the format flags say.
func FormatOf(flags uint32) Format {
	if flags&flagsMask == 0 {
		if flags == 0 {
			return FormatJSON
		}
		return FormatUnknown
	}
	if flags&flagsCompressionMask != 0 {
		return FormatUnknown
	}
	switch flags & flagsFormatMask {
	case flagsPrivate:
		return FormatPrivate
	case FlagsJSON:
		return FormatJSON
	case FlagsBinary:
		return FormatBinary
	case FlagsString:
		return FormatString
	}
	return FormatUnknown
}

func (f Format) String() string {
	switch f {
	case FormatPrivate:
		return "private"
	case FormatJSON:
		return "JSON"
	case FormatBinary:
		return "binary"
	case FormatString:
		return "string"
	}
	return "unknown"
}

// StoreFlags gives the flags and JSON datatype of a typed write: the
// caller's flags win over the encoder's (encoded); the JSON datatype is
// set when the flags written say JSON, or the caller said so (json).
func StoreFlags(caller, encoded uint32, json bool) (uint32, bool) {
	if caller == 0 {
		caller = encoded
	}
	return caller, json || (caller != 0 && FormatOf(caller) == FormatJSON)
}

// EncodeJSON is client.JSONTranscoder's Encode: json.RawMessage as given,
// any other value with encoding/json, with FlagsJSON; a []byte is refused,
// since encoding/json would store it as a base64 string.
func EncodeJSON(v any) ([]byte, uint32, error) {
	switch v := v.(type) {
	case json.RawMessage:
		return v, FlagsJSON, nil
	case *json.RawMessage:
		if v != nil {
			return *v, FlagsJSON, nil
		}
	case []byte, *[]byte:
		return nil, 0, fmt.Errorf("%w: JSONTranscoder does not encode %T (encoding/json would store base64): use json.RawMessage for JSON text, Collection.Upsert or RawBinaryTranscoder for bytes", kverr.ErrEncodingFailure, v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", kverr.ErrEncodingFailure, err)
	}
	return b, FlagsJSON, nil
}

// DecodeJSON is client.JSONTranscoder's Decode: by the flags' format, JSON
// (and flags 0) into *[]byte as the text itself, else with encoding/json;
// binary into *[]byte or *any; string into *string, *[]byte or *any.
func DecodeJSON(value []byte, flags uint32, out any) error {
	switch f := FormatOf(flags); f {
	case FormatJSON:
		if p, ok := out.(*[]byte); ok && p != nil {
			*p = value
			return nil
		}
		if err := json.Unmarshal(value, out); err != nil {
			return fmt.Errorf("%w: JSON value (flags 0x%08x) into %T: %w", kverr.ErrDecodingFailure, flags, out, err)
		}
		return nil
	case FormatBinary:
		if decodeBytes(value, out) {
			return nil
		}
	case FormatString:
		if decodeString(value, out) || decodeBytes(value, out) {
			return nil
		}
	}
	return mismatch("JSONTranscoder", value, flags, out)
}

// EncodeBinary is client.RawBinaryTranscoder's Encode: []byte as given,
// with FlagsBinary.
func EncodeBinary(v any) ([]byte, uint32, error) {
	if b, ok := given[[]byte](v); ok {
		return b, FlagsBinary, nil
	}
	return nil, 0, fmt.Errorf("%w: RawBinaryTranscoder encodes []byte, not %T", kverr.ErrEncodingFailure, v)
}

// DecodeBinary is client.RawBinaryTranscoder's Decode: binary values only,
// into *[]byte or *any.
func DecodeBinary(value []byte, flags uint32, out any) error {
	if FormatOf(flags) == FormatBinary && decodeBytes(value, out) {
		return nil
	}
	return mismatch("RawBinaryTranscoder", value, flags, out)
}

// EncodeString is client.RawStringTranscoder's Encode: a string as given,
// with FlagsString.
func EncodeString(v any) ([]byte, uint32, error) {
	if str, ok := given[string](v); ok {
		return []byte(str), FlagsString, nil
	}
	return nil, 0, fmt.Errorf("%w: RawStringTranscoder encodes string, not %T", kverr.ErrEncodingFailure, v)
}

// DecodeString is client.RawStringTranscoder's Decode: string values only,
// into *string or *any.
func DecodeString(value []byte, flags uint32, out any) error {
	if FormatOf(flags) == FormatString && decodeString(value, out) {
		return nil
	}
	return mismatch("RawStringTranscoder", value, flags, out)
}

// EncodeRawJSON is client.RawJSONTranscoder's Encode: JSON text ([]byte,
// string, json.RawMessage) as given, unparsed, with FlagsJSON.
func EncodeRawJSON(v any) ([]byte, uint32, error) {
	if b, ok := given[[]byte](v); ok {
		return b, FlagsJSON, nil
	}
	if b, ok := given[json.RawMessage](v); ok {
		return b, FlagsJSON, nil
	}
	if str, ok := given[string](v); ok {
		return []byte(str), FlagsJSON, nil
	}
	return nil, 0, fmt.Errorf("%w: RawJSONTranscoder encodes []byte, string or json.RawMessage, not %T", kverr.ErrEncodingFailure, v)
}

// given returns v when it is a T, or what it points to when it is a
// non-nil *T.
func given[T any](v any) (T, bool) {
	switch v := v.(type) {
	case T:
		return v, true
	case *T:
		if v != nil {
			return *v, true
		}
	}
	var zero T
	return zero, false
}

// DecodeRawJSON is client.RawJSONTranscoder's Decode: JSON values (and
// flags 0) only, unparsed, into *[]byte, *string or *json.RawMessage.
func DecodeRawJSON(value []byte, flags uint32, out any) error {
	if FormatOf(flags) == FormatJSON {
		switch p := out.(type) {
		case *[]byte:
			if p != nil {
				*p = value
				return nil
			}
		case *json.RawMessage:
			if p != nil {
				*p = value
				return nil
			}
		case *string:
			if p != nil {
				*p = string(value)
				return nil
			}
		}
	}
	return mismatch("RawJSONTranscoder", value, flags, out)
}

// decodeBytes stores value in out when out is a *[]byte or an *any.
func decodeBytes(value []byte, out any) bool {
	switch p := out.(type) {
	case *[]byte:
		if p != nil {
			*p = value
			return true
		}
	case *any:
		if p != nil {
			*p = value
			return true
		}
	}
	return false
}

// decodeString stores value as a string in out when out is a *string or
// an *any.
func decodeString(value []byte, out any) bool {
	switch p := out.(type) {
	case *string:
		if p != nil {
			*p = string(value)
			return true
		}
	case *any:
		if p != nil {
			*p = string(value)
			return true
		}
	}
	return false
}

// mismatch is the error of a transcoder that cannot decode a value with
// flags into out.
func mismatch(tc string, value []byte, flags uint32, out any) error {
	f := FormatOf(flags)
	if f == FormatUnknown {
		return fmt.Errorf("%w: %s: flags 0x%08x are not Couchbase common flags of a known format (%d-byte value)", kverr.ErrDecodingFailure, tc, flags, len(value))
	}
	return fmt.Errorf("%w: %s cannot decode a %s value (flags 0x%08x) into %T", kverr.ErrDecodingFailure, tc, f, flags, out)
}
