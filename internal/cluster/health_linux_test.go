package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/mockcluster"
)

// A memcached:// server whose dial at Connect failed (its SYNs dropped:
// the dial ran out of its share of Connect's time) is reconnecting, with
// that error, while its first redial is under way (five minutes here, the
// ConnectTimeout): RFC 0034's "connecting" is a first attempt, which it
// had.
func TestMemcachedServerDownAtConnectIsReconnecting(t *testing.T) {
	hole, err := faultnode.NewSynHole()
	require.NoError(t, err)
	defer hole.Close()
	cfg := testConfig(newMock(t, mockcluster.Options{}))
	cfg.Memcached = true
	cfg.ConnectTimeout = 5 * time.Minute
	cfg.Seeds = []string{memcachedtest.Start(t), hole.Addr()}
	cfg.Conn = conn.Options{Memcached: true, ProbeTimeout: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := Connect(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	eps := c.Endpoints()
	require.Len(t, eps, 2)
	for _, e := range eps {
		if e.Node != hole.Addr() {
			assert.Equal(t, EndpointConnected, e.State, e.Node)
			continue
		}
		assert.Equal(t, EndpointReconnecting, e.State, "the server whose dial failed")
		assert.Error(t, e.Err)
	}
}
