package cluster

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A recovery round asks its candidates at once: a seed whose SYNs are
// dropped, asked first, does not hold back the next one for the whole
// ConnectTimeout (five minutes here: the test's bound of a minute would end first
// if the dials went in turn).
func TestRecoveryAsksEveryCandidateAtOnce(t *testing.T) {
	hole, err := faultnode.NewSynHole()
	require.NoError(t, err)
	defer hole.Close()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	cfg := testConfig(mc)
	cfg.ConnectTimeout = 5 * time.Minute
	cfg.Conn.Features = slices.DeleteFunc(slices.Clone(cfg.Conn.Features), func(f memdx.HelloFeature) bool {
		return f == memdx.FeatureClustermapChangeNotificationBrief // the new config comes by the round alone
	})
	c := connectCluster(t, cfg)
	held := c.Topology()
	b := mc.Bucket(mockcluster.DefaultBucket)
	_, err = b.AddScope("moved-on") // the cluster's config moves past the one held
	require.NoError(t, err)

	c.wg.Add(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.recoverConfig(held, []string{hole.Addr(), mc.Node(0).Addr()}, nil)
	}()
	awaitTopology(t, c, "the config the reachable candidate serves", func(top *Topology) bool {
		return top.Config().Version().Rev == uint64(b.Rev())
	})
	<-done // the hole's dial ends with the round
}
