package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/vbmap"
)

// In a cluster whose configs carry no revEpoch (below 7.0 compatibility,
// during an upgrade), kv_engine holds them at epoch -1, and returns a
// config to a GET_CLUSTER_CONFIG with a known version only when its own
// version is newer, epoch first (cluster_config_executor.cc). A fetch says
// epoch -1 for a config held without revEpoch, and so gets each newer
// revision; said as 0 (Parse's epoch for the missing field) it would be
// newer than every version the node has, answered with nothing, poll after
// poll, and the node would take {0, rev} as the version the connection
// knows, leaving newer configs out of its notifications and NOT_MY_VBUCKET
// answers.
func TestFetchWithoutRevEpochGetsNewerRevisions(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes, NoRevEpoch: true})
	b := mc.Bucket(mockcluster.DefaultBucket)
	c := connectCluster(t, testConfig(mc)) // polls an hour apart: the test fetches
	held := c.Topology().Config()
	require.False(t, held.HasRevEpoch())
	require.Equal(t, int64(0), held.Version().Epoch)
	n := c.Topology().Nodes()[0]
	cn, _, err := n.Pick()
	require.NoError(t, err)
	require.True(t, cn.Features().Has(memdx.FeatureGetClusterConfigWithKnownVersion))

	got, _, _ := c.fetchConfig(n, false, new(time.Time))
	assert.Equal(t, OfferStale, got, "the config held, fetched again")
	moveVbucket(t, mc, "k", (b.VbucketMap()[b.VbucketForKey([]byte("k"))][0]+1)%3)
	got, v, peeked := c.fetchConfig(n, false, new(time.Time))
	require.Equal(t, OfferNewer, got, "a newer revision without revEpoch, fetched with the known version")
	assert.True(t, peeked)
	assert.Equal(t, vbmap.Version{Epoch: 0, Rev: uint64(b.Rev())}, v)
	awaitRev(t, c, b.Rev())

	// The poll's fetch, on the node's fetcher, gets the next one too.
	moveVbucket(t, mc, "k", (b.VbucketMap()[b.VbucketForKey([]byte("k"))][0]+1)%3)
	c.requestFetch(n, vbmap.Version{})
	awaitRev(t, c, b.Rev())
}

// A node that left the config keeps no fetch state: a NOT_MY_VBUCKET or a
// notification from it that arrives late (its connections drain for up to
// the longest operation timeout after it left, and stay subscribed) asks
// it for nothing. Its fetch state would otherwise stay in the cluster's
// map until Close, with the node it keys (and so its pool), one entry for
// every node that ever left and spoke after.
func TestDepartedNodeKeepsNoFetchState(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	c := connectCluster(t, testConfig(mc))
	gone := c.Node(mc.Node(0).Addr())
	require.NotNil(t, gone)
	r, err := mc.StartRebalance(mockcluster.RebalanceOptions{Nodes: []int{1, 2}})
	require.NoError(t, err)
	require.NoError(t, r.Finish())
	c.requestFetch(c.Node(mc.Node(1).Addr()), vbmap.Version{}) // a poll brings the config without node 0
	awaitTopology(t, c, "node 0 out", func(top *Topology) bool { return len(top.Nodes()) == 2 })
	require.Nil(t, c.Node(gone.Addr()))
	held := c.Topology().Config().Version()

	kept := func() bool {
		c.fetchMu.Lock()
		defer c.fetchMu.Unlock()
		_, ok := c.fetches[gone]
		return ok
	}
	require.False(t, kept(), "fetch state of node 0 after it left")

	// A NOT_MY_VBUCKET routed by the topology that still had node 0,
	// handled before the newer one was installed (NotMyVbucket loaded the
	// topology held then), asks node 0 for its config after it left.
	c.requestFetch(gone, held)
	assert.False(t, kept(), "fetch state made for a NOT_MY_VBUCKET from a node that left")
	// A brief notification of a newer version on one of node 0's draining
	// connections.
	c.onNotification(gone, memdx.ClustermapNotification{Bucket: []byte(mockcluster.DefaultBucket), HasEpoch: true,
		Version: memdx.ClusterConfigVersion{Epoch: held.Epoch, Revision: int64(held.Rev) + 1}})
	assert.False(t, kept(), "fetch state made for a notification from a node that left")
}

// kv_engine refuses (EINVAL) a GET_CLUSTER_CONFIG whose known version has
// a revision below 1 or an epoch neither -1 nor at least 1
// (mcbp_validators.cc, GetClusterConfigPayload::validate). A held config
// whose version cannot be said so (no rev, "revEpoch":0, or a rev above
// 2^63-1, which went out negative) made every fetch and poll fail, and the
// cluster never learned a newer config from them: a config held at rev 0
// is fetched without a known version, epoch 0 (however spelled) is the
// node's unset epoch -1, and a rev above 2^63-1 is said as 2^63-1, above
// which the node holds no revision.
func TestFetchKnownVersionTheNodeAccepts(t *testing.T) {
	for _, version := range []string{
		`"rev":0`,
		`"rev":0,"revEpoch":1`,
		`"rev":5,"revEpoch":0`,
		`"rev":9223372036854775809`,
		`"rev":18446744073709551615,"revEpoch":0`,
	} {
		t.Run(version, func(t *testing.T) {
			// One node, the seed: no other connection offers a
			// config that the config loop would install meanwhile.
			mc := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
			c := connectCluster(t, testConfig(mc))
			n := c.Topology().Nodes()[0]
			held, err := vbmap.Parse([]byte(`{`+version+`,"name":"default","nodeLocator":"vbucket",
				"nodesExt":[{"hostname":"127.0.0.1","services":{"kv":11210}}],
				"vBucketServerMap":{"serverList":["127.0.0.1:11210"],"vBucketMap":[[0]]}}`), "127.0.0.1")
			require.NoError(t, err)
			c.mu.Lock()
			top := *c.Topology()
			top.cfg = held
			c.topo.Store(&top)
			c.mu.Unlock()
			got, v, _ := c.fetchConfig(n, false, new(time.Time))
			assert.Equal(t, OfferNewer, got, "the node's config %v, fetched holding %v", v, held.Version())
		})
	}
}
