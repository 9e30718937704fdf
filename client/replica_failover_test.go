package client

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// TestReplicaReadEndsWhenItsCopyLosesItsServer: a replica read retrying a
// NOT_MY_VBUCKET from the replica's node ends once a config arrives whose
// map has no server for that replica (its node failed over), as a read of
// a copy the map leaves unassigned at the start is skipped
// (TestReplicaReadsSkipUnassignedCopies): GetAllReplicas answers with the
// active copy instead of waiting out the replica read's timeout.
func TestReplicaReadEndsWhenItsCopyLosesItsServer(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2,
		Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumReplicas: 1}}})
	b := mc.Bucket(mockcluster.DefaultBucket)
	vbm := b.VbucketMap()
	key := ""
	for i := 0; key == ""; i++ {
		if k := "k" + strconv.Itoa(i); vbm[b.VbucketForKey([]byte(k))][0] == 0 {
			key = k
		}
	}
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	_, err := col.Upsert(context.Background(), key, []byte("v"), nil)
	require.NoError(t, err)

	hit := make(chan struct{}, 1)
	mc.Control(mockcluster.Match{Nodes: []int{1}, OpCodes: []memdx.OpCode{memdx.OpGetReplica}}, 0,
		func(*mockcluster.Request) (mockcluster.Action, bool) {
			select {
			case hit <- struct{}{}:
			default:
			}
			return mockcluster.Action{Status: memdx.StatusNotMyVbucket}, true
		})

	// No deadline but the read's hour: the test's own bound (10 s) fails
	// a read that waits for the replica.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type res struct {
		all []GetReplicaResult
		err error
	}
	done := make(chan res, 1)
	go func() {
		all, err := col.GetAllReplicas(ctx, key, &GetReplicaOptions{Timeout: time.Hour})
		done <- res{all, err}
	}()
	select {
	case <-hit:
	case <-time.After(10 * time.Second):
		t.Fatal("the replica read never reached node 1")
	}
	require.NoError(t, mc.Failover(1))

	var r res
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("GetAllReplicas waited for a replica the map no longer has")
	}
	require.NoError(t, r.err)
	require.Len(t, r.all, 1)
	assert.False(t, r.all[0].IsReplica)
	assert.Equal(t, "v", string(r.all[0].Value))
}
