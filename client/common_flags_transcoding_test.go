package client

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// The flags other SDKs write, as gocbcore (EncodeCommonFlags) and the Node.js
// SDK (common flags with its own format in the low byte) write them, and
// what they mean.
func TestFormatOfReadsOtherSDKsFlags(t *testing.T) {
	for _, tc := range []struct {
		flags uint32
		want  Format
	}{
		{0, FormatJSON},                        // legacy: no common flags; read as JSON
		{0x02000000, FormatJSON},               // gocbcore JSON, Node JSON (CF_JSON|NF_JSON)
		{0x03000000, FormatBinary},             // gocbcore binary
		{0x03000002, FormatBinary},             // Node Buffer (CF_RAW|NF_RAW)
		{0x04000000, FormatString},             // gocbcore string
		{0x04000004, FormatString},             // Node string (CF_UTF8|NF_UTF8)
		{0x01000001, FormatPrivate},            // Java serialized object
		{0x02000000 | 1<<29, FormatUnknown},    // a compression bit: no compression is defined
		{0x05000000, FormatUnknown},            // an undefined format
		{7, FormatUnknown},                     // legacy flags other than 0
		{0x00000100, FormatUnknown},            // legacy flags other than 0
		{CommonFlagsJSON | 0x1234, FormatJSON}, // low bits are free
	} {
		assert.Equal(t, tc.want, FormatOf(tc.flags), "flags 0x%08x", tc.flags)
	}
}

type user struct {
	Name string `json:"name"`
	Age  int    `json:"age"`
}

func TestJSONTranscoderDecodesByFlags(t *testing.T) {
	tc := JSONTranscoder{}
	var u user
	require.NoError(t, tc.Decode([]byte(`{"name":"Ada","age":36}`), CommonFlagsJSON, &u))
	assert.Equal(t, user{"Ada", 36}, u)
	u = user{}
	require.NoError(t, tc.Decode([]byte(`{"name":"Ada"}`), 0, &u), "flags 0 read as JSON")
	assert.Equal(t, "Ada", u.Name)
	var raw []byte
	require.NoError(t, tc.Decode([]byte(`{"a":1}`), CommonFlagsJSON, &raw))
	assert.Equal(t, `{"a":1}`, string(raw), "JSON into *[]byte is the text itself")
	var s string
	require.NoError(t, tc.Decode([]byte(`"hi"`), CommonFlagsJSON, &s))
	assert.Equal(t, "hi", s)

	raw = nil
	require.NoError(t, tc.Decode([]byte{0, 1, 2}, 0x03000002, &raw), "a Node Buffer")
	assert.Equal(t, []byte{0, 1, 2}, raw)
	var anyv any
	require.NoError(t, tc.Decode([]byte{9}, CommonFlagsBinary, &anyv))
	assert.Equal(t, []byte{9}, anyv)
	s = ""
	require.NoError(t, tc.Decode([]byte("héllo"), 0x04000004, &s), "a Node string")
	assert.Equal(t, "héllo", s)
	anyv = nil
	require.NoError(t, tc.Decode([]byte("x"), CommonFlagsString, &anyv))
	assert.Equal(t, "x", anyv)

	for _, bad := range []struct {
		value []byte
		flags uint32
		out   any
		says  []string
	}{
		{[]byte{0, 1}, CommonFlagsBinary, &u, []string{"binary value", "0x03000000", "*client.user"}},
		{[]byte("abc"), CommonFlagsString, &u, []string{"string value", "0x04000000", "*client.user"}},
		{[]byte("abc"), 7, &raw, []string{"0x00000007", "not Couchbase common flags"}},
		{[]byte("x"), 0x01000001, &anyv, []string{"private value"}},
		{[]byte("not json"), CommonFlagsJSON, &u, []string{"JSON value", "*client.user", "invalid character"}},
		{[]byte(`{"name":1}`), CommonFlagsJSON, &u, []string{"JSON value", "cannot unmarshal number"}},
	} {
		err := tc.Decode(bad.value, bad.flags, bad.out)
		require.ErrorIs(t, err, ErrDecodingFailure, "flags 0x%08x into %T", bad.flags, bad.out)
		for _, w := range bad.says {
			assert.Contains(t, err.Error(), w)
		}
	}
}

func TestTranscodersEncode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tc    Transcoder
		in    any
		value string
		flags uint32
	}{
		{"json struct", JSONTranscoder{}, user{"Ada", 36}, `{"name":"Ada","age":36}`, CommonFlagsJSON},
		{"json string", JSONTranscoder{}, "hi", `"hi"`, CommonFlagsJSON},
		{"json raw", JSONTranscoder{}, json.RawMessage(`[1]`), `[1]`, CommonFlagsJSON},
		{"binary", RawBinaryTranscoder{}, []byte{1, 2}, "\x01\x02", CommonFlagsBinary},
		{"string", RawStringTranscoder{}, "héllo", "héllo", CommonFlagsString},
		{"raw json bytes", RawJSONTranscoder{}, []byte(`{}`), `{}`, CommonFlagsJSON},
		{"raw json string", RawJSONTranscoder{}, `{"a":1}`, `{"a":1}`, CommonFlagsJSON},
	} {
		v, f, err := tc.tc.Encode(tc.in)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.value, string(v), tc.name)
		assert.Equal(t, tc.flags, f, tc.name)
	}
	for _, bad := range []struct {
		tc Transcoder
		in any
	}{
		{JSONTranscoder{}, []byte("{}")}, // would be stored as base64
		{JSONTranscoder{}, make(chan int)},
		{RawBinaryTranscoder{}, "s"},
		{RawStringTranscoder{}, []byte("b")},
		{RawJSONTranscoder{}, user{}},
	} {
		_, _, err := bad.tc.Encode(bad.in)
		assert.ErrorIs(t, err, ErrEncodingFailure, "%T of %T", bad.tc, bad.in)
	}
	// The raw transcoders decode their own format only.
	var b []byte
	var s string
	assert.NoError(t, RawBinaryTranscoder{}.Decode([]byte("x"), CommonFlagsBinary, &b))
	assert.ErrorIs(t, RawBinaryTranscoder{}.Decode([]byte("x"), CommonFlagsJSON, &b), ErrDecodingFailure)
	assert.NoError(t, RawStringTranscoder{}.Decode([]byte("x"), CommonFlagsString, &s))
	assert.ErrorIs(t, RawStringTranscoder{}.Decode([]byte("x"), CommonFlagsBinary, &s), ErrDecodingFailure)
	assert.NoError(t, RawJSONTranscoder{}.Decode([]byte("{}"), 0, &s))
	assert.Equal(t, "{}", s)
	assert.ErrorIs(t, RawJSONTranscoder{}.Decode([]byte("x"), CommonFlagsString, &s), ErrDecodingFailure)
}

// What each write stores on a Couchbase bucket: the common flags of the
// value's format unless the caller set Flags, and the JSON datatype for
// JSON; and what the typed reads make of it.
func TestWritesStoreCommonFlags(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	stored := func(key string) mockcluster.Document {
		t.Helper()
		d, ok := mc.Bucket(mockcluster.DefaultBucket).Get("_default", "_default", key)
		require.True(t, ok, key)
		return d
	}

	_, err := col.Upsert(ctx, "bin", []byte{0, 1, 2}, nil)
	require.NoError(t, err)
	assert.Equal(t, CommonFlagsBinary, stored("bin").Flags, "raw bytes are binary")
	assert.Zero(t, stored("bin").Datatype)
	_, err = col.Insert(ctx, "j", []byte(`{"a":1}`), &InsertOptions{JSON: true})
	require.NoError(t, err)
	assert.Equal(t, CommonFlagsJSON, stored("j").Flags)
	assert.Equal(t, memdx.DatatypeJSON, stored("j").Datatype)
	_, err = col.Replace(ctx, "j", []byte("x"), &ReplaceOptions{Flags: 7})
	require.NoError(t, err)
	assert.Equal(t, uint32(7), stored("j").Flags, "the caller's flags win")

	m, err := UpsertJSON(ctx, col, "u", user{"Ada", 36}, nil)
	require.NoError(t, err)
	assert.NotZero(t, m.Cas)
	assert.Equal(t, CommonFlagsJSON, stored("u").Flags)
	assert.Equal(t, memdx.DatatypeJSON, stored("u").Datatype)
	assert.JSONEq(t, `{"name":"Ada","age":36}`, string(stored("u").Value))
	u, r, err := GetJSON[user](ctx, col, "u", nil)
	require.NoError(t, err)
	assert.Equal(t, user{"Ada", 36}, u)
	assert.Equal(t, m.Cas, r.Cas)
	assert.True(t, r.Datatype.Has(DatatypeJSON))

	_, err = InsertJSON(ctx, col, "u", user{}, nil)
	assert.ErrorIs(t, err, ErrDocumentExists)
	_, err = ReplaceJSON(ctx, col, "u", map[string]int{"age": 37}, &ReplaceOptions{Cas: m.Cas})
	require.NoError(t, err)
	u, _, err = GetJSON[user](ctx, col, "u", nil)
	require.NoError(t, err)
	assert.Equal(t, user{Age: 37}, u)
	_, err = UpsertJSON(ctx, col, "u", []byte("{}"), nil)
	assert.ErrorIs(t, err, ErrEncodingFailure, "bytes are not JSON")

	_, err = UpsertString(ctx, col, "s", "héllo", nil)
	require.NoError(t, err)
	assert.Equal(t, CommonFlagsString, stored("s").Flags)
	assert.Zero(t, stored("s").Datatype)
	g, err := col.Get(ctx, "s", nil)
	require.NoError(t, err)
	var s string
	require.NoError(t, g.ContentAs(&s))
	assert.Equal(t, "héllo", s)

	// A binary document read as a struct: the read succeeds, the decoding
	// says why it cannot.
	_, r, err = GetJSON[user](ctx, col, "bin", nil)
	require.ErrorIs(t, err, ErrDecodingFailure)
	assert.Contains(t, err.Error(), "binary value (flags 0x03000000) into *client.user")
	assert.Equal(t, []byte{0, 1, 2}, r.Value, "the GetResult of the read comes back")
	b, _, err := GetJSON[[]byte](ctx, col, "bin", nil)
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 1, 2}, b)
}

// upperTranscoder stores strings upper-cased with a private format, to show
// which calls use Options.Transcoder.
type upperTranscoder struct{}

func (upperTranscoder) Encode(v any) ([]byte, uint32, error) {
	s, ok := v.(string)
	if !ok {
		return nil, 0, fmt.Errorf("%w: want a string", ErrEncodingFailure)
	}
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return b, 0x01000000, nil
}

func (upperTranscoder) Decode(value []byte, flags uint32, out any) error {
	if FormatOf(flags) != FormatPrivate {
		return fmt.Errorf("%w: flags 0x%08x", ErrDecodingFailure, flags)
	}
	*out.(*string) = "decoded:" + string(value)
	return nil
}

func TestOptionsTranscoderEncodesValuesAndDecodesContentAs(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, &Options{Transcoder: upperTranscoder{}}).DefaultCollection()
	ctx := context.Background()
	_, err := UpsertValue(ctx, col, "k", "abc", nil)
	require.NoError(t, err)
	d, _ := mc.Bucket(mockcluster.DefaultBucket).Get("_default", "_default", "k")
	assert.Equal(t, "ABC", string(d.Value))
	assert.Equal(t, uint32(0x01000000), d.Flags)
	_, err = InsertValue(ctx, col, "k", 1, nil)
	assert.ErrorIs(t, err, ErrEncodingFailure)
	_, err = ReplaceValue(ctx, col, "k", "def", &ReplaceOptions{Expiry: time.Hour})
	require.NoError(t, err)
	g, err := col.Get(ctx, "k", nil)
	require.NoError(t, err)
	var s string
	require.NoError(t, g.ContentAs(&s))
	assert.Equal(t, "decoded:DEF", s)
	// The JSON helpers do not depend on it.
	_, err = UpsertJSON(ctx, col, "j", []int{1}, nil)
	require.NoError(t, err)
	v, _, err := GetJSON[[]int](ctx, col, "j", nil)
	require.NoError(t, err)
	assert.Equal(t, []int{1}, v)
}

// A typed write whose value does not encode fails before anything is sent
// with a *KeyValueError naming the operation and key, matching
// ErrEncodingFailure.
func TestTypedWriteEncodingFailureIsAKeyValueError(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	for _, tc := range []struct {
		op  string
		run func() error
	}{
		{"Upsert", func() error { _, err := UpsertJSON(ctx, col, "u", make(chan int), nil); return err }},
		{"Insert", func() error { _, err := InsertJSON(ctx, col, "u", []byte("x"), nil); return err }},
		{"Replace", func() error { _, err := ReplaceValue(ctx, col, "u", func() {}, nil); return err }},
	} {
		err := tc.run()
		require.ErrorIs(t, err, ErrEncodingFailure, tc.op)
		var kv *KeyValueError
		require.ErrorAs(t, err, &kv, tc.op)
		assert.Equal(t, tc.op, kv.Op)
		assert.Equal(t, "u", kv.Key)
		assert.Equal(t, mockcluster.DefaultBucket, kv.Bucket)
		assert.Empty(t, kv.Node, "nothing was sent")
	}
	for _, n := range mc.Nodes() {
		assert.Zero(t, n.RequestCount(memdx.OpSet)+n.RequestCount(memdx.OpAdd)+n.RequestCount(memdx.OpReplace))
	}
}
