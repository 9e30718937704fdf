package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A batch over a named collection needs the collection's id before it
// sends any key: the first key's lookup gives it to every key of the
// batch (one COLLECTIONS_GET_ID per batch), and a lookup that fails gives
// its outcome to every key of the round instead of each key sending a
// lookup of its own, one after the other. Over a collection the server
// does not know, every key fails with ErrCollectionNotFound after one
// lookup, and no mutation is written.
func TestBatchLooksUpItsCollectionOncePerRound(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	addCollections(t, mc, "app", "users")
	c := connect(t, mc, nil)
	users := c.Scope("app").Collection("users")
	keys := batchKeys(t, users, "u", 200, 100)
	c.cl.Collections().Invalidate(users.path)

	lookups := countOp(mc, memdx.OpCollectionsGetID)
	for i, r := range users.GetMany(context.Background(), keys, nil) {
		if i < 100 {
			require.NoError(t, r.Err, r.Key)
		}
	}
	assert.Equal(t, lookups+1, countOp(mc, memdx.OpCollectionsGetID), "one lookup for the batch")

	missing := c.Scope("app").Collection("missing")
	lookups = countOp(mc, memdx.OpCollectionsGetID)
	for _, r := range missing.GetMany(context.Background(), keys, nil) {
		require.ErrorIs(t, r.Err, ErrCollectionNotFound, r.Key)
	}
	assert.Equal(t, lookups+1, countOp(mc, memdx.OpCollectionsGetID), "one lookup for the batch's keys, not one each")

	items := make([]UpsertManyItem, len(keys))
	for i, k := range keys {
		items[i] = UpsertManyItem{Key: k, Value: []byte("x")}
	}
	lookups, sets := countOp(mc, memdx.OpCollectionsGetID), countOp(mc, memdx.OpSet)
	for _, r := range missing.UpsertMany(context.Background(), items, nil) {
		require.ErrorIs(t, r.Err, ErrCollectionNotFound, r.Key)
		assert.NotErrorIs(t, r.Err, ErrAmbiguous, "never written")
	}
	assert.Equal(t, lookups+1, countOp(mc, memdx.OpCollectionsGetID))
	assert.Equal(t, sets, countOp(mc, memdx.OpSet), "nothing written")
}
