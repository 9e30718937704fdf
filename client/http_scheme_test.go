package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// RFC 0011's http:// scheme, which clients must accept (gocbcore does):
// http://host:port with a port other than 8091 names the cluster
// manager's REST port, as host:port=http does, and Connect bootstraps
// from it over HTTP, then uses the KV service the config names. It used
// to fail as an unknown scheme.
func TestConnectHTTPScheme(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	c, err := connectString(t, "http://"+mc.MgmtAddrs()[0]+"/"+mockcluster.DefaultBucket, nil)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), mc.RESTRequestCount("/pools/default/b/"+mockcluster.DefaultBucket), "the first config, over HTTP")
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err = col.Upsert(ctx, "http-scheme", []byte("v"), nil)
	require.NoError(t, err)
	got, err := col.Get(ctx, "http-scheme", nil)
	require.NoError(t, err)
	assert.Equal(t, []byte("v"), got.Value)

	cs, err := ParseConnStr("http://h1,h2:9000/b")
	require.NoError(t, err)
	assert.Equal(t, SchemeCouchbase, cs.Scheme)
	assert.Equal(t, []string{"h1:11210"}, cs.Hosts)
	assert.Equal(t, []string{"h2:9000"}, cs.HTTPHosts)
}
