package client

import (
	"encoding/json"
	"fmt"

	"github.com/kvwire/kvwire/internal/kverr"
)

// Couchbase common flags: the format of a document's value, in the top byte
// of its flags, as every Couchbase SDK writes and reads them. The low bits
// are free: the Node.js SDK, for one, also sets its own legacy format there
// (0x03000002 for a Buffer), and a reader goes by the top byte alone.
//
// kvwire writes them on couchbase:// and couchbases:// unless the caller
// sets Flags: Upsert, Insert and Replace write CommonFlagsBinary, or
// CommonFlagsJSON with the JSON option; UpsertJSON and the other JSON
// helpers CommonFlagsJSON; UpsertString CommonFlagsString. On memcached://
// the []byte writes store flags 0 unless Flags is set, as other memcached
// clients do; the typed helpers write their format's flags there too, so
// that the value reads back as it was written.
const (
	CommonFlagsJSON   uint32 = 0x02000000
	CommonFlagsBinary uint32 = 0x03000000
	CommonFlagsString uint32 = 0x04000000
)

const (
	commonFlagsMask       = 0xff000000
	commonFlagsFormatMask = 0x0f000000
	// commonFlagsCompressionMask: bits the specification reserves for a
	// compression of the value; none is defined, so set bits make the
	// flags unreadable.
	commonFlagsCompressionMask = 0xe0000000
	commonFlagsPrivate         = 0x01000000
)

// Format is the format of a value as its flags give it.
type Format uint8

// Formats.
const (
	// FormatUnknown: flags that are not common flags (a legacy value other
	// than 0, an undefined format, or compression bits).
	FormatUnknown Format = iota
	// FormatPrivate: a value an SDK wrote in its own private format (Java
	// serialization, say).
	FormatPrivate
	// FormatJSON: a JSON document. Flags 0 (no common flags) also read as
	// JSON, as gocbcore and the other SDKs read them.
	FormatJSON
	// FormatBinary: raw bytes.
	FormatBinary
	// FormatString: UTF-8 text.
	FormatString
)

// FormatOf returns the format flags say.
func FormatOf(flags uint32) Format {
	if flags&commonFlagsMask == 0 {
		if flags == 0 {
			return FormatJSON
		}
		return FormatUnknown
	}
	if flags&commonFlagsCompressionMask != 0 {
		return FormatUnknown
	}
	switch flags & commonFlagsFormatMask {
	case commonFlagsPrivate:
		return FormatPrivate
	case CommonFlagsJSON:
		return FormatJSON
	case CommonFlagsBinary:
		return FormatBinary
	case CommonFlagsString:
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

// Datatype is the datatype of a value read: bits the server keeps with the
// document. GetResult.Datatype never has DatatypeSnappy: compressed values
// are decompressed before the caller sees them.
type Datatype uint8

// Datatype bits.
const (
	DatatypeJSON   Datatype = 0x01
	DatatypeSnappy Datatype = 0x02
	DatatypeXattr  Datatype = 0x04
)

// Has reports whether every bit of f is set in d.
func (d Datatype) Has(f Datatype) bool { return d&f == f }

// String names the bits: "raw" for none, else "json", "snappy", "xattr"
// joined with |.
func (d Datatype) String() string {
	if d == 0 {
		return "raw"
	}
	s := ""
	add := func(n string) {
		if s != "" {
			s += "|"
		}
		s += n
	}
	if d.Has(DatatypeJSON) {
		add("json")
	}
	if d.Has(DatatypeSnappy) {
		add("snappy")
	}
	if d.Has(DatatypeXattr) {
		add("xattr")
	}
	if rest := d &^ (DatatypeJSON | DatatypeSnappy | DatatypeXattr); rest != 0 {
		add(fmt.Sprintf("0x%02x", uint8(rest)))
	}
	return s
}

// Encoding and decoding errors.
var (
	// ErrEncodingFailure: a Transcoder could not encode a value (a type it
	// does not take, or a JSON encoding error). Nothing was sent.
	ErrEncodingFailure = kverr.ErrEncodingFailure
	// ErrDecodingFailure: a Transcoder could not decode a value: its flags
	// say a format the destination cannot hold (binary into a struct, say),
	// or the bytes do not parse.
	ErrDecodingFailure = kverr.ErrDecodingFailure
)

// Transcoder turns values into the bytes and flags stored with a document,
// and back. Options.Transcoder sets the client's, used by GetResult.ContentAs
// and by UpsertValue, InsertValue and ReplaceValue; the default is
// JSONTranscoder. A Transcoder must be safe for concurrent use.
//
// Encode returns the bytes to store for v and their flags (common flags, see
// CommonFlagsJSON); a value it cannot encode is an error matching
// ErrEncodingFailure. The write also sets the JSON datatype when the flags'
// format is FormatJSON.
//
// Decode decodes value, stored with flags, into out, a non-nil pointer. It
// goes by the flags' format and refuses, with an error matching
// ErrDecodingFailure, a format out cannot hold. value is the caller's own
// (GetResult.Value): Decode may keep it in out without copying.
type Transcoder interface {
	Encode(v any) (value []byte, flags uint32, err error)
	Decode(value []byte, flags uint32, out any) error
}

// JSONTranscoder is the default Transcoder. It decodes by the value's
// flags, as the Couchbase SDKs' default transcoders do, so that documents
// any of them wrote read back:
//
//   - JSON (and flags 0): into *[]byte as the JSON text itself, else with
//     encoding/json (json.Unmarshal into out);
//   - binary: into *[]byte, or *any (a []byte);
//   - string: into *string, *[]byte, or *any (a string);
//   - anything else, or a format out cannot hold (binary into a struct):
//     ErrDecodingFailure, naming the flags and out's type.
//
// It encodes json.RawMessage as given and any other value with
// encoding/json, with CommonFlagsJSON; a []byte is refused
// (ErrEncodingFailure), since encoding/json would store it as a base64
// string: write bytes with Collection.Upsert or RawBinaryTranscoder, JSON
// text with json.RawMessage or RawJSONTranscoder.
type JSONTranscoder struct{}

// Encode implements Transcoder.
func (JSONTranscoder) Encode(v any) ([]byte, uint32, error) {
	switch v := v.(type) {
	case json.RawMessage:
		return v, CommonFlagsJSON, nil
	case *json.RawMessage:
		if v != nil {
			return *v, CommonFlagsJSON, nil
		}
	case []byte, *[]byte:
		return nil, 0, fmt.Errorf("%w: JSONTranscoder does not encode %T (encoding/json would store base64): use json.RawMessage for JSON text, Collection.Upsert or RawBinaryTranscoder for bytes", ErrEncodingFailure, v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrEncodingFailure, err)
	}
	return b, CommonFlagsJSON, nil
}

// Decode implements Transcoder.
func (JSONTranscoder) Decode(value []byte, flags uint32, out any) error {
	switch f := FormatOf(flags); f {
	case FormatJSON:
		if p, ok := out.(*[]byte); ok && p != nil {
			*p = value
			return nil
		}
		if err := json.Unmarshal(value, out); err != nil {
			return fmt.Errorf("%w: JSON value (flags 0x%08x) into %T: %w", ErrDecodingFailure, flags, out, err)
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

// RawBinaryTranscoder stores []byte as given with CommonFlagsBinary and
// decodes only binary values, into *[]byte or *any.
type RawBinaryTranscoder struct{}

// Encode implements Transcoder.
func (RawBinaryTranscoder) Encode(v any) ([]byte, uint32, error) {
	switch v := v.(type) {
	case []byte:
		return v, CommonFlagsBinary, nil
	case *[]byte:
		if v != nil {
			return *v, CommonFlagsBinary, nil
		}
	}
	return nil, 0, fmt.Errorf("%w: RawBinaryTranscoder encodes []byte, not %T", ErrEncodingFailure, v)
}

// Decode implements Transcoder.
func (RawBinaryTranscoder) Decode(value []byte, flags uint32, out any) error {
	if FormatOf(flags) == FormatBinary && decodeBytes(value, out) {
		return nil
	}
	return mismatch("RawBinaryTranscoder", value, flags, out)
}

// RawStringTranscoder stores strings as given with CommonFlagsString and
// decodes only string values, into *string or *any.
type RawStringTranscoder struct{}

// Encode implements Transcoder.
func (RawStringTranscoder) Encode(v any) ([]byte, uint32, error) {
	switch v := v.(type) {
	case string:
		return []byte(v), CommonFlagsString, nil
	case *string:
		if v != nil {
			return []byte(*v), CommonFlagsString, nil
		}
	}
	return nil, 0, fmt.Errorf("%w: RawStringTranscoder encodes string, not %T", ErrEncodingFailure, v)
}

// Decode implements Transcoder.
func (RawStringTranscoder) Decode(value []byte, flags uint32, out any) error {
	if FormatOf(flags) == FormatString && decodeString(value, out) {
		return nil
	}
	return mismatch("RawStringTranscoder", value, flags, out)
}

// RawJSONTranscoder stores JSON text ([]byte, string, json.RawMessage) as
// given, unparsed, with CommonFlagsJSON, and decodes only JSON values (and
// flags 0), unparsed, into *[]byte, *string or *json.RawMessage.
type RawJSONTranscoder struct{}

// Encode implements Transcoder.
func (RawJSONTranscoder) Encode(v any) ([]byte, uint32, error) {
	switch v := v.(type) {
	case []byte:
		return v, CommonFlagsJSON, nil
	case json.RawMessage:
		return v, CommonFlagsJSON, nil
	case string:
		return []byte(v), CommonFlagsJSON, nil
	case *[]byte:
		if v != nil {
			return *v, CommonFlagsJSON, nil
		}
	case *json.RawMessage:
		if v != nil {
			return *v, CommonFlagsJSON, nil
		}
	case *string:
		if v != nil {
			return []byte(*v), CommonFlagsJSON, nil
		}
	}
	return nil, 0, fmt.Errorf("%w: RawJSONTranscoder encodes []byte, string or json.RawMessage, not %T", ErrEncodingFailure, v)
}

// Decode implements Transcoder.
func (RawJSONTranscoder) Decode(value []byte, flags uint32, out any) error {
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
		return fmt.Errorf("%w: %s: flags 0x%08x are not Couchbase common flags of a known format (%d-byte value)", ErrDecodingFailure, tc, flags, len(value))
	}
	return fmt.Errorf("%w: %s cannot decode a %s value (flags 0x%08x) into %T", ErrDecodingFailure, tc, f, flags, out)
}
