package client

import (
	"context"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/mockcluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Couchbase Server allows 250-byte keys in _default but 246 in any other
// collection (kv_engine's MaxCollectionsLogicalKeyLen); kvwire checks only
// the 250, so a longer key in a named collection comes back from the server
// as EINVAL, as it does from the mock.
func TestKeyLengthInNamedCollection(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	addCollections(t, mc, "app", "users")
	c := connect(t, mc, nil)
	ctx := context.Background()
	users := c.Scope("app").Collection("users")

	_, err := users.Upsert(ctx, strings.Repeat("k", 246), []byte("v"), nil)
	require.NoError(t, err, "246 bytes fit any collection")
	_, err = users.Upsert(ctx, strings.Repeat("k", 247), []byte("v"), nil)
	assert.ErrorIs(t, err, ErrInvalidArgument, "247 bytes exceed a named collection's 246")
	_, err = c.DefaultCollection().Upsert(ctx, strings.Repeat("k", 250), []byte("v"), nil)
	require.NoError(t, err, "250 bytes fit _default")
}
