package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// Empty scope and collection names mean _default, as in gocbcore
// (isDefaultCollection) and kv_engine's manifest lookups: each empty name
// on its own, on either scheme. On couchbase:// the default collection
// needs no COLLECTIONS_GET_ID (its id is 0); on memcached:// it is the one
// keyspace there is, not a collection memcached lacks.
func TestEmptyScopeAndCollectionNamesAreTheDefault(t *testing.T) {
	ctx := context.Background()
	cols := func(c *Client) map[string]*Collection {
		return map[string]*Collection{
			`Scope("").Collection("")`:         c.Scope("").Collection(""),
			`Scope("").Collection("_default")`: c.Scope("").Collection(DefaultCollection),
			`Scope("_default").Collection("")`: c.Scope(DefaultScope).Collection(""),
		}
	}
	t.Run("couchbase", func(t *testing.T) {
		mc := newMock(t, mockcluster.Options{Nodes: 1})
		c := connect(t, mc, nil)
		for name, col := range cols(c) {
			assert.Equal(t, DefaultScope, col.ScopeName(), name)
			assert.Equal(t, DefaultCollection, col.Name(), name)
			lookups := countOp(mc, memdx.OpCollectionsGetID)
			_, err := col.Upsert(ctx, "empty-names", []byte("v"), nil)
			require.NoError(t, err, name)
			r, err := c.DefaultCollection().Get(ctx, "empty-names", nil)
			require.NoError(t, err, name)
			assert.Equal(t, "v", string(r.Value), name)
			assert.Equal(t, lookups, countOp(mc, memdx.OpCollectionsGetID), "%s: no collection id lookup", name)
		}
	})
	t.Run("memcached", func(t *testing.T) {
		c := textClient(t, memcachedtest.Start(t), nil)
		for name, col := range cols(c) {
			_, err := col.Upsert(ctx, "empty-names", []byte("v-"+name), nil)
			require.NoError(t, err, name)
			r, err := c.DefaultCollection().Get(ctx, "empty-names", nil)
			require.NoError(t, err, name)
			assert.Equal(t, "v-"+name, string(r.Value), name)
			res := col.GetMany(ctx, []string{"empty-names"}, nil)
			require.NoError(t, res[0].Err, name)
		}
		_, err := c.Scope("").Collection("users").Get(ctx, "k", nil)
		assert.ErrorIs(t, err, ErrFeatureNotAvailable, "a named collection is still one memcached lacks")
	})
}
