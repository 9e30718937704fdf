package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// TestReplicaReadsSkipUnassignedCopies: replica reads fan out only to the
// copies the map assigns. On 1 node with 1 replica (the replica entry is
// -1) and on 2 nodes with 2 replicas (replica 2 is -1), GetAllReplicas
// answers with the copies that exist and GetAnyReplica with not-found, long
// before the 20 s timeout they would otherwise have waited for the missing
// copy.
func TestReplicaReadsSkipUnassignedCopies(t *testing.T) {
	for _, tc := range []struct {
		nodes, replicas, want int
	}{
		{1, 1, 1},
		{2, 2, 2},
	} {
		mc := newMock(t, mockcluster.Options{Nodes: tc.nodes,
			Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumReplicas: tc.replicas}}})
		c := connect(t, mc, nil)
		col := c.DefaultCollection()
		ctx := context.Background()
		_, err := col.Upsert(ctx, "k", []byte("v"), nil)
		require.NoError(t, err)
		ri := c.Route("k")
		require.Len(t, ri.Replicas, tc.replicas)
		assert.Equal(t, "", ri.Replicas[tc.replicas-1], "the map has no server for the last replica")

		opts := &GetReplicaOptions{Timeout: 20 * time.Second}
		start := time.Now()
		all, err := col.GetAllReplicas(ctx, "k", opts)
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 10*time.Second, "%d nodes: GetAllReplicas waited for a copy that does not exist", tc.nodes)
		require.Len(t, all, tc.want)
		assert.False(t, all[0].IsReplica, "active first")
		for _, r := range all {
			assert.Equal(t, "v", string(r.Value))
		}

		start = time.Now()
		_, err = col.GetAnyReplica(ctx, "missing", opts)
		assert.ErrorIs(t, err, ErrDocumentNotFound)
		assert.Less(t, time.Since(start), 10*time.Second, "%d nodes: GetAnyReplica waited for a copy that does not exist", tc.nodes)
	}
}
