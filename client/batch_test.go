package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/mockcluster"
)

// batchKeys returns n keys with prefix, and writes the first stored of
// them with the value "v-<key>".
func batchKeys(t *testing.T, col *Collection, prefix string, n, stored int) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%03d", prefix, i)
		if i < stored {
			_, err := col.Upsert(context.Background(), keys[i], []byte("v-"+keys[i]), nil)
			require.NoError(t, err)
		}
	}
	return keys
}

func TestGetManyReturnsEveryKeyInOrderWithHitsAndMisses(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "gm", 60, 40)
	keys = append(keys, keys[3]) // a key given twice is read twice
	res := col.GetMany(context.Background(), keys, nil)
	require.Len(t, res, len(keys))
	for i, r := range res {
		require.Equal(t, keys[i], r.Key)
		if i < 40 || i == 60 {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			assert.NotZero(t, r.Cas)
			assert.Equal(t, CommonFlagsBinary, r.Flags)
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
		var kv *KeyValueError
		require.ErrorAs(t, r.Err, &kv)
		assert.Equal(t, r.Key, kv.Key)
		assert.Equal(t, "Get", kv.Op)
	}
	assert.Empty(t, col.GetMany(context.Background(), nil, nil))
}

// On memcached:// the gets of a batch are quiet (GETQ) and a NOOP after
// them settles the misses: hits, misses and a key given twice each get
// their own outcome, and the connection serves single operations after.
func TestGetManyMemcachedQuietGetsSettleMissesByNoop(t *testing.T) {
	addr := memcachedtest.Start(t)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, nil)
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	prefix := fmt.Sprintf("kvwire-gm-%d", time.Now().UnixNano())
	keys := batchKeys(t, col, prefix, 100, 50)
	for i := range keys {
		if i%2 == 1 { // interleave hits and misses
			keys[i], keys[len(keys)-1-i] = keys[len(keys)-1-i], keys[i]
		}
	}
	keys = append(keys, keys[0], keys[1])
	res := col.GetMany(ctx, keys, nil)
	require.Len(t, res, len(keys))
	stored := func(k string) bool { var n int; fmt.Sscanf(k[len(prefix)+1:], "%d", &n); return n < 50 }
	hits := 0
	for i, r := range res {
		require.Equal(t, keys[i], r.Key)
		if stored(r.Key) {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			hits++
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
	}
	assert.Greater(t, hits, 40)
	_, err = col.Get(ctx, keys[0], nil)
	require.Equal(t, stored(keys[0]), err == nil, "%v", err)
	for _, k := range keys[:100] {
		_, _ = col.Remove(ctx, k, nil)
	}
}
