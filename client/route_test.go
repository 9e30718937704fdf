package client

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

func TestRoute(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 3})
	c := connect(t, mc, nil)
	b := mc.Bucket("default")
	ri := c.Route("some-key")
	vb := b.VbucketForKey([]byte("some-key"))
	assert.Equal(t, vb, ri.Vbucket)
	vbm := b.VbucketMap()[vb]
	assert.Equal(t, mc.Node(vbm[0]).Addr(), ri.Active)
	require.Len(t, ri.Replicas, 1)
	assert.Equal(t, mc.Node(vbm[1]).Addr(), ri.Replicas[0])
	assert.False(t, ri.HasForwardMap)
}
