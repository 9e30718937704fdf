package client

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

func TestTLS(t *testing.T) {
	mc := newMock(t, mockcluster.Options{TLS: true})
	require.True(t, strings.HasPrefix(mc.ConnString(), "couchbases://"))
	c := connect(t, mc, &Options{TLSConfig: &tls.Config{RootCAs: mc.RootCAs()}})
	ctx := context.Background()
	_, err := c.DefaultCollection().Upsert(ctx, "k", []byte("over tls"), nil)
	require.NoError(t, err)
	g, err := c.DefaultCollection().Get(ctx, "k", nil)
	require.NoError(t, err)
	assert.Equal(t, "over tls", string(g.Value))
	for _, n := range c.Nodes() {
		assert.Contains(t, mc.TLSAddrs(), n, "every node is reached on its TLS port (kvSSL)")
	}

	// A certificate the client does not trust: refused at once, not by
	// timeout.
	start := time.Now()
	_, err = Connect(ctx, mc.ConnString()+"/default", testOptions(&Options{Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword, ConnectTimeout: 30 * time.Second}))
	assert.ErrorIs(t, err, ErrTLS)
	assert.Less(t, time.Since(start), 10*time.Second)

	// tls_verify=none: insecure, but explicit.
	c2, err := Connect(ctx, mc.ConnString()+"/default?tls_verify=none", testOptions(&Options{Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword}))
	require.NoError(t, err)
	require.NoError(t, c2.Close())
}
