package client

import (
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/transcode"
	"github.com/kvwire/kvwire/memdx"
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
func FormatOf(flags uint32) Format { return Format(transcode.FormatOf(flags)) }

func (f Format) String() string { return transcode.Format(f).String() }

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
func (d Datatype) String() string { return memdx.Datatype(d).String() }

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
func (JSONTranscoder) Encode(v any) ([]byte, uint32, error) { return transcode.EncodeJSON(v) }

// Decode implements Transcoder.
func (JSONTranscoder) Decode(value []byte, flags uint32, out any) error {
	return transcode.DecodeJSON(value, flags, out)
}

// RawBinaryTranscoder stores []byte as given with CommonFlagsBinary and
// decodes only binary values, into *[]byte or *any.
type RawBinaryTranscoder struct{}

// Encode implements Transcoder.
func (RawBinaryTranscoder) Encode(v any) ([]byte, uint32, error) { return transcode.EncodeBinary(v) }

// Decode implements Transcoder.
func (RawBinaryTranscoder) Decode(value []byte, flags uint32, out any) error {
	return transcode.DecodeBinary(value, flags, out)
}

// RawStringTranscoder stores strings as given with CommonFlagsString and
// decodes only string values, into *string or *any.
type RawStringTranscoder struct{}

// Encode implements Transcoder.
func (RawStringTranscoder) Encode(v any) ([]byte, uint32, error) { return transcode.EncodeString(v) }

// Decode implements Transcoder.
func (RawStringTranscoder) Decode(value []byte, flags uint32, out any) error {
	return transcode.DecodeString(value, flags, out)
}

// RawJSONTranscoder stores JSON text ([]byte, string, json.RawMessage) as
// given, unparsed, with CommonFlagsJSON, and decodes only JSON values (and
// flags 0), unparsed, into *[]byte, *string or *json.RawMessage.
type RawJSONTranscoder struct{}

// Encode implements Transcoder.
func (RawJSONTranscoder) Encode(v any) ([]byte, uint32, error) { return transcode.EncodeRawJSON(v) }

// Decode implements Transcoder.
func (RawJSONTranscoder) Decode(value []byte, flags uint32, out any) error {
	return transcode.DecodeRawJSON(value, flags, out)
}
