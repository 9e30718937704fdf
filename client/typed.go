package client

import (
	"context"

	"github.com/kvwire/kvwire/internal/transcode"
	"github.com/kvwire/kvwire/memdx"
)

// Typed reads and writes: values encoded by a Transcoder, with the common
// flags other Couchbase SDKs read. The *JSON helpers always use
// JSONTranscoder; ContentAs and the *Value helpers use the client's
// (Options.Transcoder). A value that cannot be encoded fails before
// anything is sent with a *KeyValueError (Op, Key) matching
// ErrEncodingFailure; one GetJSON cannot decode with a *KeyValueError
// (Op, Key) matching ErrDecodingFailure, whose cause is the Transcoder's
// error (encoding/json's, errors.As). Either failure is the operation's
// outcome to its observers: its span fails with that error.type, and so
// does its latency point.

// UpsertJSON writes v encoded with encoding/json (json.RawMessage as given),
// with CommonFlagsJSON (unless opts.Flags is set) and the JSON datatype.
func UpsertJSON(ctx context.Context, col *Collection, key string, v any, opts *UpsertOptions) (MutationResult, error) {
	return col.storeTyped(ctx, "Upsert", memdx.OpSet, key, v, JSONTranscoder{}, opts.params())
}

// InsertJSON is Insert of v encoded as UpsertJSON does.
func InsertJSON(ctx context.Context, col *Collection, key string, v any, opts *InsertOptions) (MutationResult, error) {
	return col.storeTyped(ctx, "Insert", memdx.OpAdd, key, v, JSONTranscoder{}, opts.params())
}

// ReplaceJSON is Replace of v encoded as UpsertJSON does.
func ReplaceJSON(ctx context.Context, col *Collection, key string, v any, opts *ReplaceOptions) (MutationResult, error) {
	return col.storeTyped(ctx, "Replace", memdx.OpReplace, key, v, JSONTranscoder{}, opts.params())
}

// UpsertString writes s as UTF-8 text, with CommonFlagsString (unless
// opts.Flags is set).
func UpsertString(ctx context.Context, col *Collection, key, s string, opts *UpsertOptions) (MutationResult, error) {
	return col.storeTyped(ctx, "Upsert", memdx.OpSet, key, s, RawStringTranscoder{}, opts.params())
}

// UpsertValue writes v encoded with the client's Transcoder, with the flags
// it gives (unless opts.Flags is set) and, for a JSON format, the JSON
// datatype.
func UpsertValue(ctx context.Context, col *Collection, key string, v any, opts *UpsertOptions) (MutationResult, error) {
	return col.storeTyped(ctx, "Upsert", memdx.OpSet, key, v, col.c.opts.Transcoder, opts.params())
}

// InsertValue is Insert of v encoded as UpsertValue does.
func InsertValue(ctx context.Context, col *Collection, key string, v any, opts *InsertOptions) (MutationResult, error) {
	return col.storeTyped(ctx, "Insert", memdx.OpAdd, key, v, col.c.opts.Transcoder, opts.params())
}

// ReplaceValue is Replace of v encoded as UpsertValue does.
func ReplaceValue(ctx context.Context, col *Collection, key string, v any, opts *ReplaceOptions) (MutationResult, error) {
	return col.storeTyped(ctx, "Replace", memdx.OpReplace, key, v, col.c.opts.Transcoder, opts.params())
}

// GetJSON reads a document and decodes it into a T with JSONTranscoder: a
// JSON document (or one with flags 0) with encoding/json; a binary or
// string one only when T can hold it ([]byte, string, any), else
// ErrDecodingFailure. The GetResult is returned whenever the read
// succeeded, decoded or not. The decoding is part of the operation: a
// failure to decode is its outcome to its observers too (its span fails
// with error.type DecodingFailure, and so does its latency point).
//
//	type User struct{ Name string }
//	u, _, err := client.GetJSON[User](ctx, users, "u:1", nil)
//	if err != nil {
//		return err
//	}
//	fmt.Println(u.Name)
func GetJSON[T any](ctx context.Context, col *Collection, key string, opts *GetOptions) (T, GetResult, error) {
	var v T
	r, err := col.getThen(ctx, key, opts, func(r GetResult) error {
		if err := (JSONTranscoder{}).Decode(r.Value, r.Flags, &v); err != nil {
			return col.decodingFailed("Get", getOpCode(opts), key, r, err)
		}
		return nil
	})
	return v, r, err
}

// getOpCode is the request a Get with opts sends: a LookupIn for a
// projection, a GET otherwise.
func getOpCode(opts *GetOptions) memdx.OpCode {
	if opts != nil && len(opts.Project) > 0 {
		return memdx.OpSubdocMultiLookup
	}
	return memdx.OpGet
}

// decodingFailed is the error of a typed read (name, sent as opc) of key
// whose result r did not decode (cause): the operation's *KeyValueError,
// matching ErrDecodingFailure, with the read's retries. The read itself
// succeeded: no status, nothing ambiguous.
func (col *Collection) decodingFailed(name string, opc memdx.OpCode, key string, r GetResult, cause error) *KeyValueError {
	e := col.c.refused(name, opc, col, key, ErrDecodingFailure, cause)
	e.RetryAttempts, e.RetryReasons = r.RetryAttempts, r.RetryReasons
	return e
}

// ContentAs decodes the value into out (a non-nil pointer) with the
// client's Transcoder (JSONTranscoder unless Options.Transcoder says
// otherwise), by the value's flags. out may share Value's bytes.
func (r GetResult) ContentAs(out any) error {
	tc := r.transcoder
	if tc == nil {
		tc = JSONTranscoder{}
	}
	return tc.Decode(r.Value, r.Flags, out)
}

// durabilityAsked is the level a write asked for l shows its observers:
// none for a level refused (checkDurability), which names none.
func durabilityAsked(l DurabilityLevel) memdx.DurabilityLevel {
	if checkDurability(l) != nil {
		return memdx.DurabilityNone
	}
	return l.wire()
}

// storeTyped encodes v with tc and writes it. Flags the caller set win
// over tc's; the JSON datatype is set when the flags written say JSON, or
// the caller said so.
func (col *Collection) storeTyped(ctx context.Context, name string, opc memdx.OpCode, key string, v any, tc Transcoder, p storeParams) (MutationResult, error) {
	start := col.c.clock.Now()
	value, flags, err := tc.Encode(v)
	end := col.c.clock.Now()
	if err != nil {
		e := col.c.refused(name, opc, col, key, ErrEncodingFailure, err)
		col.c.unsent(ctx, name, opc, col, p.parent, durabilityAsked(p.durability), start, end, end, e)
		return MutationResult{}, e
	}
	p.encStart, p.encEnd, p.encoded = start, end, true
	p.flags, p.json = transcode.StoreFlags(p.flags, flags, p.json)
	p.typed = true
	return col.store(ctx, name, opc, key, value, p)
}
