package client

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// silentListener accepts connections and never answers, so a Connect that
// dials it hangs until its ConnectTimeout. dialed returns how many
// connections were made to it so far: it makes one of its own and counts
// those accepted before it (the kernel hands connections to Accept in the
// order they were made), so a connection made before the call is counted
// even if Accept had not reached it yet. A test tells an argument refused
// before dialing from one refused after by dialed, not by the time taken.
func silentListener(t *testing.T) (addr string, dialed func(*testing.T) int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var peers []string // remote addresses, in the order accepted
	changed := make(chan struct{})
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
			mu.Lock()
			peers = append(peers, c.RemoteAddr().String())
			close(changed)
			changed = make(chan struct{})
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	fences := map[string]bool{} // the connections dialed makes
	dialed = func(t *testing.T) int {
		t.Helper()
		fence, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer fence.Close()
		fences[fence.LocalAddr().String()] = true
		for {
			mu.Lock()
			n, reached, ch := 0, false, changed
			for _, p := range peers {
				if p == fence.LocalAddr().String() {
					reached = true
					break
				}
				if !fences[p] {
					n++
				}
			}
			mu.Unlock()
			if reached {
				return n
			}
			<-ch
		}
	}
	return ln.Addr().String(), dialed
}

// TestTLSFollowsScheme: couchbase:// and memcached:// never use TLS, and a
// TLS setting with them is refused at once, before any dial, saying to use
// couchbases://.
func TestTLSFollowsScheme(t *testing.T) {
	addr, dialed := silentListener(t)
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
			before := dialed(t)
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
			assert.Equal(t, before, dialed(t), "refused before dialing")
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
	addr, dialed := silentListener(t)
	for _, cs := range []string{"couchbase://" + addr, "couchbases://" + addr, "couchbase://" + addr + "/"} {
		t.Run(cs, func(t *testing.T) {
			before := dialed(t)
			c, err := Connect(context.Background(), cs, &Options{ConnectTimeout: 20 * time.Second})
			if c != nil {
				_ = c.Close()
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidArgument)
			assert.Contains(t, err.Error(), "no bucket")
			assert.Equal(t, before, dialed(t), "refused before dialing")
		})
	}
}

// memcached:// pointed at Couchbase KV ports is refused at Connect, at once
// and whatever the credentials, with an error that says to use
// couchbase://: its connections would have no bucket, and every operation
// would fail with NO_BUCKET.
func TestMemcachedSchemeAtCouchbasePortsRefused(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	hosts := strings.TrimSuffix(strings.TrimPrefix(mc.ConnString(), "couchbase://"), "/")
	for _, user := range []string{"", mockcluster.DefaultUser} {
		o := testOptions(&Options{Username: user, Password: mockcluster.DefaultPassword,
			AllowPlainAuthWithoutTLS: true, ConnectTimeout: time.Hour})
		c, err := Connect(context.Background(), "memcached://"+hosts, o)
		if c != nil {
			_ = c.Close()
		}
		require.Error(t, err, "user %q", user)
		assert.Contains(t, err.Error(), "connect with couchbase://", "user %q", user)
		assert.NotContains(t, err.Error(), "NO_BUCKET", "user %q", user)
	}
}
