package client

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// Couchbase Server allows 250-byte keys in _default but 246 in any other
// collection (kv_engine's MaxCollectionsLogicalKeyLen). kvwire refuses a
// longer key in a named collection itself, with ErrInvalidArgument naming
// the limit, before anything is sent, as it refuses one over 250 anywhere.
func TestKeyLengthInNamedCollection(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	addCollections(t, mc, "app", "users")
	c := connect(t, mc, nil)
	ctx := context.Background()
	users := c.Scope("app").Collection("users")

	_, err := users.Upsert(ctx, strings.Repeat("k", 246), []byte("v"), nil)
	require.NoError(t, err, "246 bytes fit any collection")
	sets := mc.RequestCount(memdx.OpSet)
	_, err = users.Upsert(ctx, strings.Repeat("k", 247), []byte("v"), nil)
	assert.ErrorIs(t, err, ErrInvalidArgument, "247 bytes exceed a named collection's 246")
	assert.ErrorContains(t, err, "key of 247 bytes exceeds 246")
	_, err = users.Get(ctx, strings.Repeat("k", MaxKeyLength), nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = users.Upsert(ctx, strings.Repeat("k", MaxKeyLength+1), []byte("v"), nil)
	assert.ErrorContains(t, err, "key of 251 bytes exceeds 250")
	assert.Equal(t, sets, mc.RequestCount(memdx.OpSet), "refused before anything was sent")

	_, err = c.DefaultCollection().Upsert(ctx, strings.Repeat("k", MaxKeyLength), []byte("v"), nil)
	require.NoError(t, err, "250 bytes fit _default")
}
