package client

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// movedConfig returns the one-node bucket's config with a higher rev and
// its node moved to addr's port (on the same host).
func movedConfig(t *testing.T, mc *mockcluster.Cluster, rev int64, addr string) []byte {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(mc.Bucket(mockcluster.DefaultBucket).ConfigJSON(0), &m))
	m["rev"] = rev
	vsm := m["vBucketServerMap"].(map[string]any)
	vsm["serverList"] = []any{"$HOST:" + port}
	m["nodes"].([]any)[0].(map[string]any)["ports"] = map[string]any{"direct": p}
	m["nodesExt"].([]any)[0].(map[string]any)["services"].(map[string]any)["kv"] = p
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	return raw
}

// An NMV carries a newer config whose only node is new and drops SYNs: its
// dial neither connects nor fails (for ConnectTimeout, five minutes here),
// and every operation finds it "has no connection yet". Once no node of
// that config has connected for the probe timeout (on the client's clock,
// a fake one here), the client asks the seeds and the nodes it knew, as
// when every node's dial has failed: the seed serves the cluster's newer
// config and the Get waiting meanwhile succeeds, with no wait for the
// dial's timeout.
func TestConfigWhoseOnlyNodeDropsSynsRecoversFromSeeds(t *testing.T) {
	hole, err := faultnode.NewSynHole()
	require.NoError(t, err)
	defer hole.Close()
	mc := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConnectTimeout: 5 * time.Minute})
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	b := mc.Bucket(mockcluster.DefaultBucket)
	moved := movedConfig(t, mc, b.Rev()+1, hole.Addr())
	nmv := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"},
		Action: mockcluster.Action{Status: memdx.StatusNotMyVbucket, Value: moved}, Times: 1})
	defer nmv.Remove()

	got := make(chan error, 1)
	go func() {
		_, err := col.Get(ctx, "k", &GetOptions{Timeout: time.Hour})
		got <- err
	}()
	waitFor(t, "the moved config", func() bool { return c.ConfigVersion().Rev == uint64(b.Rev()+1) })
	require.Equal(t, []string{hole.Addr()}, c.Nodes())
	for b.Rev() <= int64(c.ConfigVersion().Rev) { // the cluster moves past it
		_, err := b.AddScope("s" + strconv.FormatInt(b.Rev(), 10))
		require.NoError(t, err)
	}
	fc.Advance(inProcessProbeTimeout) // the probe timeout testOptions sets
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatalf("the Get still waits for the node that drops SYNs (config rev %s, nodes %v)", c.ConfigVersion(), c.Nodes())
	}
	assert.Equal(t, uint64(b.Rev()), c.ConfigVersion().Rev)
	assert.Equal(t, []string{mc.Node(0).Addr()}, c.Nodes())
}
