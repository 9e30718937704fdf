package client

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// silentListener accepts connections and never answers, so a Connect that
// dials it hangs until its ConnectTimeout: a test can tell an argument
// refused before dialing from one refused after.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}

// TestTLSFollowsScheme: couchbase:// and memcached:// never use TLS, and a
// TLS setting with them is refused at once, before any dial, saying to use
// couchbases://.
func TestTLSFollowsScheme(t *testing.T) {
	addr := silentListener(t)
	ctx := context.Background()
	cases := []struct {
		name    string
		connStr string
		opts    *Options
	}{
		{"tls_verify=none couchbase", "couchbase://" + addr + "/default?tls_verify=none", nil},
		{"tls_verify=peer couchbase", "couchbase://" + addr + "/default?tls_verify=peer", nil},
		{"tls_verify memcached", "memcached://" + addr + "?tls_verify=none", nil},
		{"TLSConfig couchbase", "couchbase://" + addr + "/default", &Options{TLSConfig: &tls.Config{}}},
		{"TLSConfig memcached", "memcached://" + addr, &Options{TLSConfig: &tls.Config{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			if o == nil {
				o = &Options{}
			}
			o.ConnectTimeout = 20 * time.Second
			start := time.Now()
			c, err := Connect(ctx, tc.connStr, o)
			if c != nil {
				_ = c.Close()
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidArgument)
			want := "couchbases://"
			if strings.HasPrefix(tc.connStr, "memcached") {
				want = "memcacheds://"
			}
			assert.Contains(t, err.Error(), want)
			assert.Less(t, time.Since(start), 10*time.Second, "refused before dialing, not after the connect timeout")
			if strings.Contains(tc.connStr, "tls_verify") {
				var cse *ConnStrError
				assert.True(t, errors.As(err, &cse), "a connection-string option: also a *ConnStrError")
			}
		})
	}
}

// TestPlainSchemeDialsPlain: a couchbase:// client talks plaintext to the
// plain port of a cluster that also has TLS ports, and is told the plain
// addresses of every node.
func TestPlainSchemeDialsPlain(t *testing.T) {
	mc := newMock(t, mockcluster.Options{TLS: true})
	c, err := Connect(context.Background(), "couchbase://"+mc.Node(0).Addr()+"/default", testOptions(&Options{Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword}))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.DefaultCollection().Upsert(context.Background(), "k", []byte("plain"), nil)
	require.NoError(t, err)
	for _, n := range c.Nodes() {
		assert.NotContains(t, mc.TLSAddrs(), n, "couchbase:// uses the plain KV port")
	}
}

// TestConnectWithoutBucket: couchbase:// and couchbases:// need a bucket;
// without one Connect fails at once (before dialing) with
// ErrInvalidArgument instead of returning a client whose every operation
// times out.
func TestConnectWithoutBucket(t *testing.T) {
	addr := silentListener(t)
	for _, cs := range []string{"couchbase://" + addr, "couchbases://" + addr, "couchbase://" + addr + "/"} {
		t.Run(cs, func(t *testing.T) {
			start := time.Now()
			c, err := Connect(context.Background(), cs, &Options{ConnectTimeout: 20 * time.Second})
			if c != nil {
				_ = c.Close()
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidArgument)
			assert.Contains(t, err.Error(), "no bucket")
			assert.Less(t, time.Since(start), 10*time.Second, "refused before dialing")
		})
	}
}
