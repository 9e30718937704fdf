package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/capella"
	"github.com/kvwire/kvwire/mockcluster"
)

// CapellaRootCAPEM gives callers a copy of the PEM.
func TestCapellaRootCAPEMIsACopy(t *testing.T) {
	pem := CapellaRootCAPEM()
	pem[0] = 'x'
	assert.Equal(t, byte('-'), CapellaRootCAPEM()[0], "callers get a copy")
}

// trusts reports whether pool has the self-signed ca: it verifies against
// the pool exactly when it is one of the pool's roots.
func trusts(pool *x509.CertPool, ca *x509.Certificate) bool {
	_, err := ca.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: ca.NotBefore.Add(time.Hour)})
	return err == nil
}

// couchbases:// trusts the system roots and Capella's root CA, unless the
// caller gives roots of its own; no other scheme gets Capella's.
func TestCouchbasesTrustsCapellaRootCA(t *testing.T) {
	ca, err := capella.RootCA()
	require.NoError(t, err)
	resolve := func(connStr string, o Options) Options {
		t.Helper()
		cs, err := ParseConnStr(connStr)
		require.NoError(t, err)
		r, err := o.resolved(cs)
		require.NoError(t, err)
		return r
	}

	o := resolve("couchbases://cb.abc.cloud.couchbase.com/travel", Options{})
	require.NotNil(t, o.TLSConfig)
	require.NotNil(t, o.TLSConfig.RootCAs)
	assert.True(t, trusts(o.TLSConfig.RootCAs, ca), "Capella's root CA is in the pool")
	want, err := x509.SystemCertPool()
	require.NoError(t, err)
	want.AddCert(ca)
	assert.True(t, want.Equal(o.TLSConfig.RootCAs), "the pool is the system roots and Capella's")

	// A config without roots of its own (a ServerName, say) gets them too,
	// in a clone: the caller's config is not changed.
	mine := &tls.Config{ServerName: "cb.abc.cloud.couchbase.com"}
	o = resolve("couchbases://h/b", Options{TLSConfig: mine})
	assert.True(t, trusts(o.TLSConfig.RootCAs, ca))
	assert.Equal(t, "cb.abc.cloud.couchbase.com", o.TLSConfig.ServerName)
	assert.Nil(t, mine.RootCAs, "the caller's config is left as it was")

	// The caller's own CA replaces them.
	own := x509.NewCertPool()
	o = resolve("couchbases://h/b", Options{TLSConfig: &tls.Config{RootCAs: own}})
	assert.Same(t, own, o.TLSConfig.RootCAs)
	assert.False(t, trusts(o.TLSConfig.RootCAs, ca))

	// memcached over TLS is not Capella: the system roots only.
	o = resolve("memcacheds://h", Options{})
	assert.Nil(t, o.TLSConfig.RootCAs)
	o = resolve("couchbase://h/b", Options{})
	assert.Nil(t, o.TLSConfig)
}

// A cluster with its own CA is still reached with that CA (the mock's),
// and not without it: Capella's root CA adds trust in Capella only.
func TestCouchbasesWithOwnCAStillVerifies(t *testing.T) {
	mc := newMock(t, mockcluster.Options{TLS: true})
	ctx := context.Background()
	c, err := Connect(ctx, mc.ConnString()+"/default", testOptions(&Options{Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword, TLSConfig: &tls.Config{RootCAs: mc.RootCAs()}}))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	_, err = Connect(ctx, mc.ConnString()+"/default", testOptions(&Options{Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword, ConnectTimeout: 2 * time.Second}))
	assert.ErrorIs(t, err, ErrTLS)
}

// wan_development sets gocb's and the C++ core's timeouts where nothing
// else does; what the connection string or Options set wins.
func TestWANDevelopmentProfileTimeouts(t *testing.T) {
	resolve := func(connStr string, o Options) (Options, error) {
		t.Helper()
		cs, err := ParseConnStr(connStr)
		require.NoError(t, err)
		return o.resolved(cs)
	}
	for _, c := range []struct {
		connStr       string
		opts          Options
		kv, connect   time.Duration
		wantedProfile ConfigProfile
	}{
		{"couchbase://h/b", Options{}, DefaultKVTimeout, DefaultConnectTimeout, ""},
		{"couchbase://h/b?profile=wan_development", Options{}, 20 * time.Second, 20 * time.Second, ProfileWANDevelopment},
		{"couchbase://h/b", Options{Profile: ProfileWANDevelopment}, 20 * time.Second, 20 * time.Second, ProfileWANDevelopment},
		{"couchbase://h/b?profile=wan_development&kv_timeout=5s", Options{}, 5 * time.Second, 20 * time.Second, ProfileWANDevelopment},
		{"couchbase://h/b?profile=wan_development", Options{KVTimeout: 3 * time.Second}, 3 * time.Second, 20 * time.Second, ProfileWANDevelopment},
		{"couchbase://h/b?profile=wan_development", Options{ConnectTimeout: time.Minute}, 20 * time.Second, time.Minute, ProfileWANDevelopment},
	} {
		o, err := resolve(c.connStr, c.opts)
		require.NoError(t, err, c.connStr)
		assert.Equal(t, c.kv, o.KVTimeout, "%s %+v", c.connStr, c.opts)
		assert.Equal(t, c.connect, o.ConnectTimeout, "%s %+v", c.connStr, c.opts)
		assert.Equal(t, c.wantedProfile, o.Profile)
	}

	_, err := resolve("couchbase://h/b?profile=lan", Options{})
	assert.ErrorIs(t, err, ErrInvalidConnStr)
	assert.ErrorContains(t, err, `"profile=lan": unknown configuration profile (known: wan_development)`)
	_, err = resolve("couchbase://h/b", Options{Profile: "lan"})
	assert.ErrorIs(t, err, ErrInvalidArgument)

	// A client connected with the profile runs its operations with it.
	mc := newMock(t, mockcluster.Options{})
	c, err := Connect(context.Background(), mc.ConnString()+"/default?profile=wan_development", testOptions(&Options{
		Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword}))
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, 20*time.Second, c.opts.KVTimeout)
	assert.Equal(t, 20*time.Second, c.opts.ConnectTimeout)
}
