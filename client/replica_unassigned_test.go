package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// TestReplicaReadsSkipUnassignedCopies: replica reads fan out only to the
// copies the map assigns. On 1 node with 1 replica (the replica entry is
// -1) and on 2 nodes with 2 replicas (replica 2 is -1), GetAllReplicas
// answers with the copies that exist and GetAnyReplica with not-found,
// without waiting for the missing copy: on a client clock that never
// moves, a retry wait for it would end only with the context, whose minute
// bounds a broken client: the test fails when it has ended.
func TestReplicaReadsSkipUnassignedCopies(t *testing.T) {
	for _, tc := range []struct {
		nodes, replicas, want int
	}{
		{1, 1, 1},
		{2, 2, 2},
	} {
		mc := newMock(t, mockcluster.Options{Nodes: tc.nodes,
			Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumReplicas: tc.replicas}}})
		fc := retry.NewFakeClock(time.Now())
		c := connect(t, mc, fakeClockOptions(fc))
		col := c.DefaultCollection()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := col.Upsert(ctx, "k", []byte("v"), nil)
		require.NoError(t, err)
		ri := c.Route("k")
		require.Len(t, ri.Replicas, tc.replicas)
		assert.Equal(t, "", ri.Replicas[tc.replicas-1], "the map has no server for the last replica")

		opts := &GetReplicaOptions{Timeout: 20 * time.Second}
		all, err := col.GetAllReplicas(ctx, "k", opts)
		require.NoError(t, err)
		require.NoError(t, ctx.Err(), "%d nodes: GetAllReplicas waited for a copy that does not exist", tc.nodes)
		require.Len(t, all, tc.want)
		assert.False(t, all[0].IsReplica, "active first")
		for _, r := range all {
			assert.Equal(t, "v", string(r.Value))
		}

		_, err = col.GetAnyReplica(ctx, "missing", opts)
		assert.ErrorIs(t, err, ErrDocumentNotFound)
		assert.NoError(t, ctx.Err(), "%d nodes: GetAnyReplica waited for a copy that does not exist", tc.nodes)
	}
}
