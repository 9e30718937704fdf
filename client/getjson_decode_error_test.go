package client

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// GetJSON's decoding error is the operation's error, as the package doc
// says of every operation's error: a *KeyValueError (errors.As, as the
// README's example reads it) naming the Get and its key, matching
// ErrDecodingFailure, with encoding/json's own error still reachable.
func TestGetJSONDecodingErrorIsAKeyValueError(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "bad-json", []byte(`{"name":`), &UpsertOptions{Flags: CommonFlagsJSON})
	require.NoError(t, err)
	_, err = col.Upsert(ctx, "bin", []byte{0, 1, 2}, nil)
	require.NoError(t, err)
	type user struct{ Name string }

	_, r, err := GetJSON[user](ctx, col, "bad-json", nil)
	require.ErrorIs(t, err, ErrDecodingFailure)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, "Get", kv.Op)
	assert.Equal(t, "bad-json", kv.Key)
	assert.Equal(t, "GET", kv.OpCode.String())
	assert.Equal(t, DefaultCollection, kv.Collection)
	assert.False(t, kv.Ambiguous)
	var syn *json.SyntaxError
	assert.ErrorAs(t, err, &syn, "encoding/json's error is the cause")
	assert.Equal(t, `{"name":`, string(r.Value), "the GetResult of the read comes back")

	_, _, err = GetJSON[user](ctx, col, "bin", nil)
	require.ErrorIs(t, err, ErrDecodingFailure)
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, "bin", kv.Key)
	assert.Contains(t, err.Error(), "binary value (flags 0x03000000) into *client.user")
}
