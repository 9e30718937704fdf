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
	// timeout: each seed is dialed once (each failed dial is logged), not
	// again until ConnectTimeout.
	logs := newLogWatch()
	_, err = Connect(ctx, mc.ConnString()+"/default", testOptions(&Options{Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword, ConnectTimeout: 30 * time.Second, Logger: logs.logger()}))
	assert.ErrorIs(t, err, ErrTLS)
	assert.NotErrorIs(t, err, ErrTimeout)
	cs, err := ParseConnStr(mc.ConnString())
	require.NoError(t, err)
	require.NotEmpty(t, cs.Hosts)
	for _, seed := range cs.Hosts {
		dials, _ := logs.count("kvwire: bootstrap from a seed failed", seed)
		assert.Equal(t, 1, dials, "dials of seed %s", seed)
	}

	// tls_verify=none: insecure, but explicit.
	c2, err := Connect(ctx, mc.ConnString()+"/default?tls_verify=none", testOptions(&Options{Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword}))
	require.NoError(t, err)
	require.NoError(t, c2.Close())
}
