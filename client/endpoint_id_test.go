package client

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// awaitReport returns the first report ok accepts, waiting on the
// cluster's change signal between reports.
func awaitReport(t *testing.T, c *Client, what string, ok func(*DiagnosticsResult) bool) *DiagnosticsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		changed := c.cl.HealthChanged()
		d := c.Diagnostics(nil)
		if ok(d) {
			return d
		}
		select {
		case <-changed:
		case <-ctx.Done():
			b, _ := json.Marshal(d)
			t.Fatalf("no report %s: %s", what, b)
		}
	}
}

// With several connections per node, an endpoint's id is the place its
// connection fills in the node's pool, the same while it lives and for
// its replacement (RFC 0034: the id "should stay the same across
// reconnect attempts"): when the node's first connection ends, the
// second keeps its id, and the first's replacement takes the first's,
// rather than every later connection's id shifting down by one.
func TestEndpointIDsStayWhenAnotherConnectionEnds(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, &Options{ConnectionsPerNode: 3})
	require.NoError(t, c.WaitUntilReady(context.Background(), nil))
	node := mc.Node(0).Addr()

	d := c.Diagnostics(nil)
	require.Len(t, d.Endpoints, 3)
	ids := map[string]string{} // local id -> endpoint id
	for i, e := range d.Endpoints {
		assert.Equal(t, node+"/"+strconv.Itoa(i), e.ID)
		ids[e.LocalID] = e.ID
	}
	first := d.Endpoints[0].LocalID
	var closed bool
	for _, cn := range c.cl.Topology().Nodes()[0].Conns() {
		if cn.ID() == first {
			require.NoError(t, cn.Close())
			closed = true
		}
	}
	require.True(t, closed, "the first endpoint's connection is the node's")

	d = awaitReport(t, c, "with three connections, the first one replaced", func(d *DiagnosticsResult) bool {
		if len(d.Endpoints) != 3 {
			return false
		}
		for _, e := range d.Endpoints {
			if e.State != EndpointConnected || e.LocalID == first {
				return false
			}
		}
		return true
	})
	for _, e := range d.Endpoints {
		if was, ok := ids[e.LocalID]; ok {
			assert.Equal(t, was, e.ID, "a connection that lives on keeps its id")
		} else {
			assert.Equal(t, node+"/0", e.ID, "the replacement takes the ended connection's id")
		}
	}
}
