package cluster

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// A brief cluster-map notification whose epoch is -1 ("not yet set",
// memdx.ClusterConfigVersion; kv_engine's config version in a cluster whose
// configs carry no revEpoch, MB-51612) announces a newer revision of the
// configs the cluster holds, which carry no revEpoch either (Parse reads
// the missing epoch as 0): it is fetched, as the 4-byte form without an
// epoch is. Judged by its epoch it would be older than the held config
// ({-1, 6} < {0, 5}) and ignored, and the cluster would learn the new
// config only at the next poll.
func TestBriefNotificationWithUnsetEpochIsFetched(t *testing.T) {
	c, n := clusterHolding(t, `"rev":5`)
	require.Equal(t, vbmap.Version{Epoch: 0, Rev: 5}, c.Topology().Config().Version())

	c.onNotification(n, memdx.ClustermapNotification{Bucket: []byte("default"),
		Version: memdx.ClusterConfigVersion{Epoch: -1, Revision: 6}, HasEpoch: true})

	announced, rev := c.Announced()
	assert.True(t, announced, "a notification of rev 6 in an unset epoch, with rev 5 held, was not fetched")
	assert.Equal(t, uint64(6), rev)
}

// A notification with a negative revision announces nothing: read as a
// uint64 it was the newest version there can be, fetched and, once given up
// on, the version every later announcement of the epoch was judged against
// (and ignored).
func TestBriefNotificationWithNegativeRevisionIsIgnored(t *testing.T) {
	c, n := clusterHolding(t, `"rev":5,"revEpoch":1`)

	c.onNotification(n, memdx.ClustermapNotification{Bucket: []byte("default"),
		Version: memdx.ClusterConfigVersion{Epoch: 1, Revision: -1}, HasEpoch: true})

	announced, rev := c.Announced()
	assert.False(t, announced, "revision -1 announced as %d", rev)
}

// kv_engine pushes the global (bucketless) config's notifications, with
// an empty key, to every connection that asked for notifications, a
// bucket's too (push_cluster_config; ClusterConfigTest
// ClustermapChangeNotificationBrief_Global). Its version is not the
// bucket's: taken for the bucket's, a newer one was fetched from the node
// MaxAnnouncedFetches times, logged as a config the node announced and
// never served, and then every announcement of the bucket's own configs up
// to that version was ignored (learnt only at the next poll). A full one
// went to the config loop, where it replaced a bucket config waiting
// there and was rejected for having no vbucket map.
func TestNotificationOfAnotherConfigIsIgnored(t *testing.T) {
	c, n := clusterHolding(t, `"rev":5,"revEpoch":1`)
	for _, bucket := range []string{"", "other"} {
		c.onNotification(n, memdx.ClustermapNotification{Bucket: []byte(bucket),
			Version: memdx.ClusterConfigVersion{Epoch: 2, Revision: 532}, HasEpoch: true})
		announced, rev := c.Announced()
		assert.False(t, announced, "bucket %q's rev %d announced as the bucket's", bucket, rev)

		c.onNotification(n, memdx.ClustermapNotification{Bucket: []byte(bucket),
			Version: memdx.ClusterConfigVersion{Epoch: 2, Revision: 532}, HasEpoch: true,
			Config: []byte(`{"rev":532,"revEpoch":2,"nodesExt":[{"hostname":"127.0.0.1","services":{"kv":11210}}]}`)})
		assert.False(t, c.newerOnItsWay(c.Topology().Config().Version()), "bucket %q's config offered as the bucket's", bucket)
	}
	// The bucket's own still are.
	c.onNotification(n, memdx.ClustermapNotification{Bucket: []byte("default"),
		Version: memdx.ClusterConfigVersion{Epoch: 1, Revision: 6}, HasEpoch: true})
	announced, rev := c.Announced()
	assert.True(t, announced)
	assert.Equal(t, uint64(6), rev)
}

// clusterHolding is a Cluster, not connected, that holds a one-node config
// whose version fields are version (`"rev":5`, say), and that node (never
// dialed: a fetch from it finds no connection). The test closes it.
func clusterHolding(t *testing.T, version string) (*Cluster, *Node) {
	t.Helper()
	c := &Cluster{
		cfg: Config{Bucket: "default", Clock: retry.RealClock(), Logger: slog.New(slog.DiscardHandler),
			NodeError: func(addr string, err error) error { return &nodeError{addr, err} }},
		nodes:       map[string]*Node{},
		fetches:     map[*Node]*fetchState{},
		unreachable: make(chan struct{}, 1),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	t.Cleanup(c.Close)
	cfg, err := vbmap.Parse([]byte(`{`+version+`,"name":"default","nodeLocator":"vbucket",
		"nodesExt":[{"hostname":"127.0.0.1","services":{"kv":11210}}],
		"vBucketServerMap":{"serverList":["127.0.0.1:11210"],"vBucketMap":[[0]]}}`), "127.0.0.1")
	require.NoError(t, err)
	c.topo.Store(&Topology{cfg: cfg})
	c.kvConfigs.Store(true)
	return c, newNode(c, "127.0.0.1:11210")
}
