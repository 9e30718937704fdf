package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/vbmap"
)

func oneVbucketTopology(t *testing.T, row string) *Topology {
	t.Helper()
	cfg, err := vbmap.Parse([]byte(`{"rev":1,"name":"b","nodeLocator":"vbucket","nodesExt":[{"hostname":"h","services":{"kv":11210}},{"hostname":"i","services":{"kv":11210}}],`+
		`"vBucketServerMap":{"numReplicas":2,"serverList":["h:11210","i:11210"],"vBucketMap":[`+row+`]}}`), "h")
	require.NoError(t, err)
	return &Topology{cfg: cfg}
}

// Copies lists the copies the map assigns to a server, active first, and
// the active copy alone when the map assigns none (or there is no map).
func TestCopiesSkipsTheCopiesWithoutAServer(t *testing.T) {
	assert.Equal(t, []int{0, 2}, oneVbucketTopology(t, `[1,-1,0]`).Copies([]byte("k")))
	assert.Equal(t, []int{1}, oneVbucketTopology(t, `[-1,0,-1]`).Copies([]byte("k")), "a replica without its active copy")
	assert.Equal(t, []int{0}, oneVbucketTopology(t, `[-1,-1,-1]`).Copies([]byte("k")), "none assigned: the active copy's read waits")
	assert.Equal(t, []int{0}, (*Topology)(nil).Copies([]byte("k")), "no topology yet")
}
