package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lookup spec with an empty path where kv_engine requires one (its
// subdoc traits: SUBDOC_GET and SUBDOC_EXISTS do not allow an empty path,
// "Request must include path"; an xattr path must be a valid xattr key,
// "Request XATTR key invalid") is refused before sending, naming the spec,
// rather than failing the whole LookupIn with the server's EINVAL. The
// empty paths kv_engine takes are still sent: GetSpec("") (the whole body,
// a GET) and CountSpec("") (the root's elements, SUBDOC_GET_COUNT allows
// an empty path).
func TestLookupInSpecWithAnEmptyPathTheServerRefusesIsRefusedFirst(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	e.seed(t, "doc", `{"a":1,"b":[1,2]}`)
	sent := len(e.rec.attempts())
	for name, tc := range map[string]struct {
		spec LookupInSpec
		text string
	}{
		"ExistsSpec":       {ExistsSpec("", nil), `spec 1 (path ""): ExistsSpec needs a path`},
		"xattr ExistsSpec": {ExistsSpec("", &ExistsSpecOptions{IsXattr: true}), `spec 1 (path ""): ExistsSpec needs a path`},
		"xattr GetSpec":    {GetSpec("", xa()), `spec 1 (path ""): GetSpec needs a path`},
		"xattr CountSpec":  {CountSpec("", &CountSpecOptions{IsXattr: true}), `spec 1 (path ""): CountSpec needs a path`},
	} {
		specs := []LookupInSpec{GetSpec("_x", xa()), tc.spec}
		_, err := e.col.LookupIn(ctx, "doc", specs, nil)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ErrInvalidArgument, name)
		assert.ErrorContains(t, err, tc.text, name)
		var kv *KeyValueError
		assert.ErrorAs(t, err, &kv, name)
	}
	assert.Equal(t, sent, len(e.rec.attempts()), "nothing was sent")

	r, err := e.col.LookupIn(ctx, "doc", []LookupInSpec{CountSpec("", nil), GetSpec("", nil)}, nil)
	require.NoError(t, err)
	v, err := r.ValueAt(0)
	require.NoError(t, err)
	assert.Equal(t, "2", string(v), "the root's keys")
	v, err = r.ValueAt(1)
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":1,"b":[1,2]}`, string(v))
}

// The same for mutation specs: kv_engine takes an empty path only for the
// array appends, prepends and add-unique (the root array), never for an
// xattr; ReplaceSpec("") and RemoveSpec("") are the whole body (a SET, a
// DELETE).
func TestMutateInSpecWithAnEmptyPathTheServerRefusesIsRefusedFirst(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	e.seed(t, "doc", `[1,2]`)
	sent := len(e.rec.attempts())
	xu := &UpsertSpecOptions{IsXattr: true}
	for name, tc := range map[string]struct {
		spec MutateInSpec
		text string
	}{
		"IncrementSpec":       {IncrementSpec("", 1, nil), `spec 1 (path ""): IncrementSpec or DecrementSpec needs a path`},
		"ArrayInsertSpec":     {ArrayInsertSpec("", []byte("1"), nil), `spec 1 (path ""): ArrayInsertSpec needs a path`},
		"xattr UpsertSpec":    {UpsertSpec("", []byte("1"), xu), `spec 1 (path ""): UpsertSpec needs a path (an xattr's key)`},
		"xattr ReplaceSpec":   {ReplaceSpec("", []byte("1"), &ReplaceSpecOptions{IsXattr: true}), `spec 1 (path ""): ReplaceSpec needs a path`},
		"xattr RemoveSpec":    {RemoveSpec("", &RemoveSpecOptions{IsXattr: true}), `spec 1 (path ""): RemoveSpec needs a path`},
		"xattr ArrayAppend":   {ArrayAppendSpec("", []byte("1"), &ArrayAppendSpecOptions{IsXattr: true}), `spec 1 (path ""): ArrayAppendSpec needs a path`},
		"xattr IncrementSpec": {IncrementSpec("", 1, &CounterSpecOptions{IsXattr: true}), `spec 1 (path ""): IncrementSpec or DecrementSpec needs a path`},
	} {
		_, err := e.col.MutateIn(ctx, "doc", []MutateInSpec{UpsertSpec("_x", []byte("1"), xu), tc.spec}, nil)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ErrInvalidArgument, name)
		assert.ErrorContains(t, err, tc.text, name)
	}
	assert.Equal(t, sent, len(e.rec.attempts()), "nothing was sent")

	_, err := e.col.MutateIn(ctx, "doc", []MutateInSpec{ArrayAppendSpec("", []byte("3"), nil),
		ArrayPrependSpec("", []byte("0"), nil), ArrayAddUniqueSpec("", []byte("4"), nil)}, nil)
	require.NoError(t, err)
	assert.JSONEq(t, `[0,1,2,3,4]`, e.body(t, "doc"))
	_, err = e.col.MutateIn(ctx, "doc", []MutateInSpec{ReplaceSpec("", []byte(`{"a":1}`), nil)}, nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":1}`, e.body(t, "doc"))
}
