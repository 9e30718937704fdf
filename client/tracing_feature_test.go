package client

import (
	"context"
	"testing"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/stretchr/testify/require"
)

// Every connection the client opens to a Couchbase node negotiates HELLO
// Tracing, so that each response carries the server's time on it.
func TestConnectionsNegotiateTracing(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	_, err := c.DefaultCollection().Upsert(context.Background(), "k", []byte("v"), nil)
	require.NoError(t, err)
	seen := 0
	for _, n := range c.cl.Topology().Nodes() {
		for _, cn := range n.Conns() {
			require.True(t, cn.Features().Has(memdx.FeatureTracing), "%s: granted %v", n, cn.Features())
			seen++
		}
	}
	require.NotZero(t, seen, "no connection to check")
}
