package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

func TestRoute(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{Nodes: 2})
	b := mc.Bucket(mockcluster.DefaultBucket)
	addr := func(id int) string { return mc.Node(id).Addr() }

	// The rebalance below moves every vbucket's active copy to a new
	// node, so the forward line differs from the current one.
	_, err := mc.AddNode()
	require.NoError(t, err)
	var target [][]int
	for range b.NumVbuckets() {
		target = append(target, []int{2, 0})
	}

	key := "route-me"
	vb := b.VbucketForKey([]byte(key))
	cur := b.VbucketMap()[vb]

	r := runKV(t, env, "", "route", key)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, fmt.Sprintf("vbucket   %d (config rev %d)\n", vb, b.Rev()))
	assert.Contains(t, r.stdout, "active    "+addr(cur[0])+"\n")
	assert.Contains(t, r.stdout, "replicas  "+addr(cur[1])+"\n")
	assert.Contains(t, r.stdout, "forward   none")

	// During a rebalance the config carries the forward map: every vbucket
	// moves to node 2 (active) with a replica on node 0.
	rb, err := mc.StartRebalance(mockcluster.RebalanceOptions{Targets: map[string][][]int{mockcluster.DefaultBucket: target}})
	require.NoError(t, err)
	defer func() { _ = rb.Finish() }()
	require.NotNil(t, b.ForwardMap())

	r = runKV(t, env, "", "route", key)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "active    "+addr(cur[0])+"\n", "the current map is unchanged until the vbucket moves")
	assert.Contains(t, r.stdout, "forward   active "+addr(2)+", replicas "+addr(0)+" (a rebalance is moving the vbucket)\n")

	r = runKV(t, env, "", "route", key, "--json")
	require.Equal(t, exitOK, r.code, r)
	var jr jsonResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &jr), r.stdout)
	require.NotNil(t, jr.Route)
	require.NotNil(t, jr.Route.Vbucket)
	assert.Equal(t, vb, *jr.Route.Vbucket)
	assert.Equal(t, addr(cur[0]), jr.Route.Active)
	assert.True(t, jr.Route.HasForwardMap)
	assert.Equal(t, addr(2), jr.Route.ForwardActive)
	assert.Equal(t, []string{addr(0)}, jr.Route.ForwardReplicas)
	assert.Equal(t, uint64(b.Rev()), jr.Route.ConfigRev)
	assert.False(t, strings.Contains(r.stdout, "ketama"))
}
