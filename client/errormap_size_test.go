package client

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// TestConnectSurvivesErrorMapOverMaxBodyLength: a node whose error map is
// larger than the largest body the client reads (memdx.DefaultMaxBodyLength)
// is used without a map, as RFC 0013 says of a corrupt one (reconnect
// without XERROR), instead of failing Connect: the proxy pads the mock's map
// with JSON whitespace past the limit.
func TestConnectSurvivesErrorMapOverMaxBodyLength(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	p, err := faultnode.NewProxy(mc.Node(0).Addr())
	require.NoError(t, err)
	t.Cleanup(p.Close)
	p.RewritePorts(map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(p.Addr())})
	padding := bytes.Repeat([]byte(" "), memdx.DefaultMaxBodyLength)
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if resp.OpCode != memdx.OpGetErrorMap || resp.Status != memdx.StatusSuccess {
			return faultnode.Action{}
		}
		huge := *resp
		huge.Value = append(append([]byte(nil), resp.Value...), padding...)
		return faultnode.Action{Send: []memdx.Packet{huge}}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Connect(ctx, "couchbase://"+p.Addr()+"/"+mockcluster.DefaultBucket,
		testOptions(&Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, ConnectTimeout: 10 * time.Second}))
	require.NoError(t, err, "an oversized error map must not fail Connect")
	t.Cleanup(func() { _ = c.Close() })
	assert.Positive(t, p.Requests(memdx.OpGetErrorMap), "the map was asked for")
	col := c.DefaultCollection()
	_, err = col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	g, err := col.Get(ctx, "k", nil)
	require.NoError(t, err)
	assert.Equal(t, "v", string(g.Value))
}
