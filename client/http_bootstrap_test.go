package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// connectString opens a client on connStr with the mock's credentials.
func connectString(t *testing.T, connStr string, o *Options) (*Client, error) {
	t.Helper()
	o = testOptions(o)
	o.Username, o.Password = mockcluster.DefaultUser, mockcluster.DefaultPassword
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, connStr, o)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// awaitConfig waits, event by event (each topology's Changed), until the
// client holds config revision rev, and returns how long that took; it
// fails the test after limit, which only a client that never sees the
// config reaches.
func awaitConfig(t *testing.T, c *Client, rev int64, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	timeout := time.After(limit)
	for {
		topo := c.cl.Topology()
		if int64(c.ConfigVersion().Rev) >= rev {
			return time.Since(start)
		}
		select {
		case <-topo.Changed():
		case <-timeout:
			t.Fatalf("config rev %d not installed within %v (holding %v)", rev, limit, c.ConfigVersion())
		}
	}
}

// A client given only the cluster manager's REST ports (host:port=http)
// reads the first config from /pools/default/b/<bucket> (with
// bootstrap_on=http its KV connections ask for one only in their
// bootstrap, to vet the node), and sees a rebalance's configs through the stream
// (/pools/default/bs/<bucket>) as the mock publishes them: with the
// client's clock stopped (no poll, fetch or retry timer can fire) and no
// operation running (no NOT_MY_VBUCKET), the stream is the only way they
// can come.
func TestHTTPSeedsOnlyBootstrapAndStream(t *testing.T) {
	for _, on := range []string{"", "?bootstrap_on=http"} {
		t.Run("bootstrap_on="+on, func(t *testing.T) {
			mc := newMock(t, mockcluster.Options{Nodes: 3})
			fc := retry.NewFakeClock(time.Now())
			c, err := connectString(t, mc.HTTPConnString()+"/"+mockcluster.DefaultBucket+on,
				&Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour})
			require.NoError(t, err)
			col := c.DefaultCollection()
			ctx := context.Background()
			_, err = col.Upsert(ctx, "http-key", []byte("v"), nil)
			require.NoError(t, err)
			b := mc.Bucket(mockcluster.DefaultBucket)
			assert.Equal(t, b.Rev(), int64(c.ConfigVersion().Rev))
			assert.Equal(t, uint64(1), mc.RESTRequestCount("/pools/default/b/default"), "the first config")

			// The stream is open before the rebalance, so its configs
			// come on a stream that already sent the one current at its
			// opening.
			streams := func() uint64 { return mc.RESTRequestCount("/pools/default/bs/default") }
			for wait := time.After(10 * time.Second); streams() == 0; {
				select {
				case <-wait:
					t.Fatal("the client opened no config stream")
				case <-time.After(time.Millisecond):
				}
			}
			before := mc.RequestCount(memdx.OpGetClusterConfig)
			moveEveryVbucket(t, mc)
			took := awaitConfig(t, c, b.Rev(), 10*time.Second)
			t.Logf("rebalance's last config (rev %d) installed %v after it was published", b.Rev(), took)
			assert.Equal(t, before, mc.RequestCount(memdx.OpGetClusterConfig), "no KV node asked for a config")
			if on != "" {
				requireConfigOnlyAtBootstrap(t, mc)
			}
			// The stream delivered every config of the rebalance without
			// being reopened: a stream that ended and was retried (after a
			// delay of any clock, real or the client's) would show as a
			// second open before the config came.
			assert.Equal(t, uint64(1), streams(), "one stream, open from before the rebalance to its last config")

			got, err := col.Get(ctx, "http-key", nil)
			require.NoError(t, err)
			assert.Equal(t, "v", string(got.Value))
		})
	}
}

// requireConfigOnlyAtBootstrap checks that mc's KV service was asked for
// configs (with bootstrap_on=http) only in the connections' bootstraps,
// one each, behind SELECT_BUCKET, to vet the node (not polled, not
// fetched). The GET_CLUSTER_CONFIG count is read first: a bootstrap under
// way between the two reads adds to SELECT_BUCKET's only.
func requireConfigOnlyAtBootstrap(t *testing.T, mc *mockcluster.Cluster) {
	t.Helper()
	configs := mc.RequestCount(memdx.OpGetClusterConfig)
	selects := mc.RequestCount(memdx.OpSelectBucket)
	require.NotZero(t, configs, "bootstrap_on=http: the connections ask for their node's config at bootstrap, to vet it")
	require.LessOrEqual(t, configs, selects, "bootstrap_on=http: GET_CLUSTER_CONFIG sent besides the connections' bootstraps")
}

// An =http seed that refuses the credentials ends Connect at once with
// ErrAuthenticationFailure, as a KV seed's refusal does.
func TestHTTPSeedRefusesCredentials(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	o := testOptions(&Options{Username: mockcluster.DefaultUser, Password: "wrong"})
	start := time.Now()
	_, err := Connect(context.Background(), mc.HTTPConnString()+"/default", o)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrAuthenticationFailure), "%v", err)
	assert.Contains(t, err.Error(), "401")
	assert.Less(t, time.Since(start), o.ConnectTimeout+DefaultConnectTimeout, "not after the timeout")
}

// couchbases:// with =http seeds reads the config over HTTPS, with the KV
// connections' TLS settings: the mock's CA trusted, the HTTPS REST ports
// (the configs' mgmtSSL) streamed from, the KV connections over TLS. A
// client that does not trust the CA fails with ErrTLS, as over KV.
func TestHTTPSeedsOverHTTPS(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, TLS: true})
	cs := mc.HTTPConnString() + "/default"
	require.True(t, strings.HasPrefix(cs, "couchbases://"), cs)
	c, err := connectString(t, cs+"?bootstrap_on=http", &Options{TLSConfig: &tls.Config{RootCAs: mc.RootCAs()}})
	require.NoError(t, err)
	col := c.DefaultCollection()
	_, err = col.Upsert(context.Background(), "tls-key", []byte("v"), nil)
	require.NoError(t, err)
	moveEveryVbucket(t, mc)
	awaitConfig(t, c, mc.Bucket(mockcluster.DefaultBucket).Rev(), 10*time.Second)
	requireConfigOnlyAtBootstrap(t, mc)

	_, err = connectString(t, cs, &Options{TLSConfig: &tls.Config{RootCAs: x509.NewCertPool()}})
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrTLS), "%v", err)
}
