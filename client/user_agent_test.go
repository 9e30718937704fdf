package client

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// The agent the client names itself with is one identifier (RFC 0034's
// SDK identifier: "the same as identifier seen in HELO command and
// User-Agent in HTTP requests"): the cluster manager's REST requests send
// Options.ClientName as their User-Agent, as HELLO and the diagnostics
// report's sdk do, not "kvwire/" before it.
func TestHTTPUserAgentIsTheHelloAgent(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	target, err := url.Parse("http://" + mc.MgmtAddrs()[0])
	require.NoError(t, err)
	var mu sync.Mutex
	var agents []string
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.UserAgent())
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	const name = "orders-service/1.2"
	c, err := connectString(t, "couchbase://"+strings.TrimPrefix(srv.URL, "http://")+"=http/"+mockcluster.DefaultBucket+"?bootstrap_on=http",
		&Options{ClientName: name})
	require.NoError(t, err)
	mu.Lock()
	got := append([]string(nil), agents...)
	mu.Unlock()
	require.NotEmpty(t, got, "the config was read through the proxy")
	for _, a := range got {
		assert.Equal(t, name, a)
	}
	assert.Equal(t, name, c.Diagnostics(nil).SDK)
}
