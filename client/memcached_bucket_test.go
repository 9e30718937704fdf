package client

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// newMemcachedBucketMock starts a mock with the default bucket and a
// memcached bucket "cache".
func newMemcachedBucketMock(t *testing.T) *mockcluster.Cluster {
	return newMock(t, mockcluster.Options{Nodes: 3, Buckets: []mockcluster.BucketOptions{
		{Name: mockcluster.DefaultBucket},
		{Name: "cache", Type: mockcluster.MemcachedBucket},
	}})
}

// A memcached bucket over couchbase://, from =http seeds (the config comes
// over HTTP only) and from KV seeds beside them (GET_CLUSTER_CONFIG answers
// KEY_ENOENT, and the client turns to HTTP): each key is on the node the
// bucket's ketama ring gives it, GetMany and Stats work, and what a
// memcached bucket has not (sub-documents, durability, replicas, named
// collections, range scans) fails at once with ErrFeatureNotAvailable
// naming the bucket type, nothing sent. The same with bootstrap_on=http.
func TestMemcachedBucketOverCouchbaseScheme(t *testing.T) {
	mc := newMemcachedBucketMock(t)
	kvAndHTTP := strings.TrimSuffix(mc.ConnString(), "/") + "," + strings.TrimPrefix(mc.HTTPConnString(), "couchbase://")
	for name, cs := range map[string]string{"http": mc.HTTPConnString() + "/cache", "kv+http": kvAndHTTP + "/cache",
		// Each KV connection asks for its node's config at bootstrap, to
		// vet it; a memcached bucket's answer is KEY_ENOENT.
		"bootstrap_on=http": mc.HTTPConnString() + "/cache?bootstrap_on=http"} {
		t.Run(name, func(t *testing.T) {
			c, err := connectString(t, cs, nil)
			require.NoError(t, err)
			checkMemcachedBucket(t, mc, c)
		})
	}
}

func checkMemcachedBucket(t *testing.T, mc *mockcluster.Cluster, c *Client) {
	ctx := context.Background()
	col := c.DefaultCollection()
	b := mc.Bucket("cache")
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = "mcb-" + string(rune('a'+i%26)) + strings.Repeat("x", i)
		// The key goes to the node the bucket's ring gives it.
		assert.Equal(t, b.NodeForKey([]byte(keys[i])), nodeOfSet(t, mc, func() {
			_, err := col.Upsert(ctx, keys[i], []byte("v-"+keys[i]), nil)
			require.NoError(t, err)
		}), keys[i])
	}
	for _, k := range keys {
		got, err := col.Get(ctx, k, nil)
		require.NoError(t, err)
		assert.Equal(t, "v-"+k, string(got.Value))
	}
	for i, r := range col.GetMany(ctx, keys, nil) {
		require.NoError(t, r.Err, keys[i])
		assert.Equal(t, "v-"+keys[i], string(r.Value))
	}
	stats, err := c.Stats(ctx, "", nil)
	require.NoError(t, err)
	require.Len(t, stats, 3)
	for _, s := range stats {
		require.NoError(t, s.Err)
		assert.NotEmpty(t, s.Stats)
	}

	sent := func() uint64 {
		return mc.RequestCount(memdx.OpSubdocMultiLookup) + mc.RequestCount(memdx.OpSubdocMultiMutation) +
			mc.RequestCount(memdx.OpSubdocGet) + mc.RequestCount(memdx.OpGetReplica) + mc.RequestCount(memdx.OpSet)
	}
	before := sent()
	refused := map[string]error{}
	_, refused["LookupIn"] = col.LookupIn(ctx, keys[0], []LookupInSpec{GetSpec("a", nil)}, nil)
	_, refused["MutateIn"] = col.MutateIn(ctx, keys[0], []MutateInSpec{UpsertSpec("a", []byte("1"), nil)}, nil)
	_, refused["durable Upsert"] = col.Upsert(ctx, keys[0], []byte("x"), &UpsertOptions{Durability: DurabilityMajority})
	_, refused["GetAnyReplica"] = col.GetAnyReplica(ctx, keys[0], nil)
	_, refused["GetAllReplicas"] = col.GetAllReplicas(ctx, keys[0], nil)
	_, refused["named collection"] = c.Scope("s").Collection("c").Get(ctx, keys[0], nil)
	_, refused["Scan"] = col.Scan(ctx, RangeScan{}, nil)
	for op, err := range refused {
		assert.True(t, errors.Is(err, ErrFeatureNotAvailable), "%s: %v", op, err)
		if err != nil {
			assert.Contains(t, err.Error(), "memcached bucket", op)
		}
	}
	assert.Equal(t, before, sent(), "nothing sent for what was refused")
}

// nodeOfSet is the id of the one mock node that received a SET while
// upsert ran.
func nodeOfSet(t *testing.T, mc *mockcluster.Cluster, upsert func()) int {
	t.Helper()
	nodes := mc.Nodes()
	before := make([]uint64, len(nodes))
	for i, n := range nodes {
		before[i] = n.RequestCount(memdx.OpSet)
	}
	upsert()
	got := -1
	for i, n := range nodes {
		if n.RequestCount(memdx.OpSet) != before[i] {
			require.Equal(t, -1, got, "SETs on two nodes")
			got = i
		}
	}
	return got
}
