package client

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// A key group ("key <doc> <vb>", "key-byid", "vkey") names a vbucket:
// kv_engine answers it from that vbucket (parseStatKeyArg reads it from
// the group; the request header's vbucket is not used) and a node that
// does not hold it answers NOT_MY_VBUCKET. Stats sent it to every node,
// and one node's NOT_MY_VBUCKET failed the call ("server failure (status
// 0x07 NOT_MY_VBUCKET) ... vb=0") though the owning node had answered.
// Without Node, a key group goes to the node the client's map names
// active for that vbucket.
func TestStatsKeyGroupAsksTheVbucketsNode(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 3})
	c := connect(t, mc, nil)
	b := mc.Bucket(mockcluster.DefaultBucket)
	cas, err := b.Set("", "", "doc", []byte(`{"a":1}`), 0, 0)
	require.NoError(t, err)
	vb := b.VbucketForKey([]byte("doc"))
	active := mc.Node(b.VbucketMap()[vb][0]).Addr()
	n := strconv.Itoa(int(vb))
	ctx := context.Background()
	for _, g := range []string{"key doc " + n, "vkey doc " + n, "key-byid doc " + n + " 0x0", "vkey-byid doc " + n + " 0x00"} {
		s, err := c.Stats(ctx, g, nil)
		require.NoError(t, err, g)
		require.Len(t, s, 1, g)
		assert.Equal(t, active, s[0].Node, g)
		assert.Equal(t, strconv.FormatUint(cas, 10), s[0].Stats["key_cas"], g)
	}
}

// Asked of a node that does not hold the group's vbucket (Node set), the
// error names that vbucket and the node, not the request header's vb=0.
func TestStatsKeyGroupNotMyVbucketNamesTheGroupsVbucket(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 3})
	c := connect(t, mc, nil)
	b := mc.Bucket(mockcluster.DefaultBucket)
	_, err := b.Set("", "", "doc", []byte(`{}`), 0, 0)
	require.NoError(t, err)
	vb := b.VbucketForKey([]byte("doc"))
	chain := b.VbucketMap()[vb]
	other := -1
	for i := range 3 {
		if i != chain[0] && i != chain[1] {
			other = i
		}
	}
	require.NotEqual(t, -1, other)
	g := "key doc " + strconv.Itoa(int(vb))
	s, err := c.Stats(context.Background(), g, &StatsOptions{Node: mc.Node(other).Addr()})
	require.Error(t, err)
	require.Len(t, s, 1)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, StatusNotMyVbucket, kv.Status)
	assert.Equal(t, vb, kv.Vbucket, "the group's vbucket")
	assert.Contains(t, err.Error(), "vbucket "+strconv.Itoa(int(vb)))
	assert.Contains(t, err.Error(), `"`+g+`"`)
}
