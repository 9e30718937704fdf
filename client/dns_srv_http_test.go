package client

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// restAddrsOf gives the REST address of a KV address of any node of mcs
// (Options.restAddr): a mock's nodes listen on ports of their own, not
// 11210 and 8091.
func restAddrsOf(mcs ...*mockcluster.Cluster) func(string) (string, bool) {
	return func(kv string) (string, bool) {
		for _, mc := range mcs {
			for _, n := range mc.Nodes() {
				if n.Addr() == kv {
					return n.MgmtAddr(), true
				}
			}
		}
		return "", false
	}
}

// connectSRVOverHTTP is connectSRV with bootstrap_on=http: the configs
// come from the cluster manager's stream, whose REST addresses restAddr
// derives from the record's targets.
func connectSRVOverHTTP(t *testing.T, r *scriptedSRV, restAddr func(string) (string, bool)) *srvClient {
	t.Helper()
	s := &srvClient{r: r, fc: retry.NewFakeClock(time.Now()), logs: &logCapture{}}
	o := fakeClockOptions(s.fc)
	o.Resolver = r
	o.Logger = slog.New(s.logs)
	o.restAddr = restAddr
	c, err := connectString(t, "couchbase://cluster.test/default?bootstrap_on=http", o)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	s.c, s.col, s.ctx = c, c.DefaultCollection(), ctx
	_, err = s.col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	return s
}

// advanceUntil moves fc on by step every 5 ms (real time) until done
// holds; what it waits between two steps only paces the test.
func advanceUntil(t *testing.T, ctx context.Context, fc *retry.FakeClock, step time.Duration, done func() bool, msg string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		select {
		case <-tick.C:
			fc.Advance(step)
		case <-ctx.Done():
			t.Fatal(msg)
		}
	}
}

// A client bootstrapped from a DNS SRV record that reads its configs from
// the cluster manager's stream (bootstrap_on=http) finds its cluster again
// when every node the config names is gone and the cluster (the same
// cluster uuid) is at addresses only the record, looked up again, names:
// while no node serves the stream, the record is looked up again (at most
// once per 10 s of the client's clock) and the stream reads from its
// targets' REST ports too. It used to look the record up only at Connect:
// the stream tried the gone nodes' REST addresses for ever, and every
// operation failed until the application connected again.
func TestDNSSRVLookedUpAgainWhenTheHTTPStreamsClusterMoved(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: noPushes})
	const rec = "_couchbase._tcp.cluster.test"
	s := connectSRVOverHTTP(t, newScriptedSRV(rec, srvAnswer{addrs: srvOf(t, mc.Addrs())}), restAddrsOf(mc))
	r, fc, c, col, ctx := s.r, s.fc, s.c, s.col, s.ctx
	r.awaitCall(t, ctx, 0) // Connect's
	streams := func() uint64 { return mc.RESTRequestCount("/pools/default/bs/default") }
	require.Eventually(t, func() bool { return streams() > 0 }, 10*time.Second, time.Millisecond, "no config stream opened")

	mc.Node(0).Stop()
	mc.Node(1).Stop()
	// The stream's nodes are gone: once a round of the stream (after its
	// reopen wait, on the client's clock) found none, the record is
	// looked up again, and names them still.
	advanceUntilCall(t, ctx, fc, r, 1)
	first := c.cl.SeedRefreshes().Last

	// The cluster moves to new addresses, which the record now names.
	moved := moveCluster(t, mc)
	r.mu.Lock()
	r.script = []srvAnswer{{addrs: srvOf(t, moved)}}
	r.mu.Unlock()
	rev := mc.Bucket(mockcluster.DefaultBucket).Rev()
	advanceUntil(t, ctx, fc, time.Second, func() bool { return int64(c.ConfigVersion().Rev) >= rev },
		"the client never found the cluster at its new addresses")

	st := c.cl.SeedRefreshes()
	assert.Equal(t, rec, st.Name)
	assert.GreaterOrEqual(t, st.Lookups, 2)
	assert.Equal(t, moved, st.Targets)
	assert.GreaterOrEqual(t, st.Last.Sub(first), 10*time.Second, "looked up again within 10 s of the client's clock")
	res, err := col.Get(ctx, "k", nil)
	require.NoError(t, err)
	assert.Equal(t, []byte("v"), res.Value)
	assert.ElementsMatch(t, moved, c.Nodes())
}

// A target of the record looked up again whose cluster manager streams
// another cluster's configs (another cluster uuid, a bucket of the same
// name, newer than the one held) is passed over by the stream: its config
// is not installed and the client keeps its nodes.
func TestDNSSRVLookedUpAgainOverHTTPRefusesAnotherCluster(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: noPushes})
	const rec = "_couchbase._tcp.cluster.test"
	var otherMock atomic.Pointer[mockcluster.Cluster] // read on the stream's goroutine
	s := connectSRVOverHTTP(t, newScriptedSRV(rec, srvAnswer{addrs: srvOf(t, mc.Addrs())}),
		func(kv string) (string, bool) {
			if o := otherMock.Load(); o != nil {
				if a, ok := restAddrsOf(o)(kv); ok {
					return a, true
				}
			}
			return restAddrsOf(mc)(kv)
		})
	r, fc, c, logs, ctx := s.r, s.fc, s.c, s.logs, s.ctx
	held, nodes := c.ConfigVersion(), c.Nodes()
	r.awaitCall(t, ctx, 0) // Connect's

	other := newerOtherCluster(t, held)
	otherMock.Store(other)
	r.mu.Lock()
	r.script = []srvAnswer{{addrs: srvOf(t, other.Addrs())}}
	r.mu.Unlock()
	mc.Node(0).Stop()
	mc.Node(1).Stop()

	otherStreams := func() uint64 { return other.RESTRequestCount("/pools/default/bs/default") }
	advanceUntil(t, ctx, fc, time.Second, func() bool { return otherStreams() >= 2 || c.ConfigVersion() != held },
		"the stream never read from the other cluster's node")
	assert.Equal(t, held, c.ConfigVersion(), "the other cluster's config was installed")
	assert.Equal(t, nodes, c.Nodes())
	assert.NotEmpty(t, logs.find("another cluster"), "the other cluster's node was not said to be passed over")
}

// oldServerStream serves the bucket's config stream as a node of another
// cluster older than Server 7.6.4 would: mc's config, newer than held,
// with another bucket uuid and no cluster uuid. Its streams are counted.
type oldServerStream struct {
	srv     *httptest.Server
	streams atomic.Int64
}

func newOldServerStream(t *testing.T, mc *mockcluster.Cluster, held ConfigVersion) *oldServerStream {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+mc.MgmtAddrs()[0]+"/pools/default/b/default", nil)
	require.NoError(t, err)
	req.SetBasicAuth(mockcluster.DefaultUser, mockcluster.DefaultPassword)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var cfg map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&cfg))
	require.NotEmpty(t, cfg["clusterUUID"], "the mock's config names its cluster uuid")
	delete(cfg, "clusterUUID")
	cfg["uuid"] = "0123456789abcdef0123456789abcdef"
	cfg["rev"] = held.Rev + 100
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	s := &oldServerStream{}
	stop := make(chan struct{}) // ends the streams: the client may outlive the server
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pools/default/bs/default" {
			http.NotFound(w, r)
			return
		}
		s.streams.Add(1)
		_, _ = w.Write(append(raw, "\n\n\n\n"...))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() {
		close(stop)
		s.srv.Close()
	})
	return s
}

// srvMovedToAnOldServer connects over HTTP with a DNS SRV record naming
// mc's nodes (held: the config version the client holds then; before,
// when set, is given the client first). Then the record names one target
// alone, whose KV address is never dialed and whose cluster manager is an
// oldServerStream, and mc's nodes stop.
func srvMovedToAnOldServer(t *testing.T, mc *mockcluster.Cluster, before func(*Client)) (*srvClient, *oldServerStream, ConfigVersion) {
	t.Helper()
	const rec = "_couchbase._tcp.cluster.test"
	const target = "127.0.0.1:1"
	var old atomic.Pointer[oldServerStream]
	s := connectSRVOverHTTP(t, newScriptedSRV(rec, srvAnswer{addrs: srvOf(t, mc.Addrs())}),
		func(kv string) (string, bool) {
			if o := old.Load(); o != nil && kv == target {
				return strings.TrimPrefix(o.srv.URL, "http://"), true
			}
			return restAddrsOf(mc)(kv)
		})
	held := s.c.ConfigVersion()
	if before != nil {
		before(s.c)
	}
	s.r.awaitCall(t, s.ctx, 0) // Connect's

	o := newOldServerStream(t, mc, held)
	old.Store(o)
	s.r.mu.Lock()
	s.r.script = []srvAnswer{{addrs: srvOf(t, []string{target})}}
	s.r.mu.Unlock()
	mc.Node(0).Stop()
	mc.Node(1).Stop()
	return s, o, held
}

// A target of the record looked up again whose cluster manager streams a
// config of another bucket of the same name (another bucket uuid) that
// names no cluster uuid (a server before 7.6.4), newer than the one held,
// is passed over by the stream, as the KV path's dials of such a target
// pass it over: the cluster uuid check cannot tell it from the cluster's
// own, and the config was installed, the client taken to another
// cluster's bucket.
func TestDNSSRVLookedUpAgainOverHTTPRefusesAnotherBucket(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: noPushes})
	var nodes []string
	s, o, held := srvMovedToAnOldServer(t, mc, func(c *Client) { nodes = c.Nodes() })
	fc, c, ctx := s.fc, s.c, s.ctx

	advanceUntil(t, ctx, fc, time.Second, func() bool { return o.streams.Load() >= 2 || c.ConfigVersion() != held },
		"the stream never read from the looked-up target")
	assert.Equal(t, held, c.ConfigVersion(), "the other bucket's config was installed")
	assert.Equal(t, nodes, c.Nodes())
	assert.Positive(t, c.cl.SeedRefreshes().Foreign)
}

// A target of the record looked up again is streamed from only while no
// node of the config serves the stream: once one does again (the outage
// was brief, and no newer config is installed), the stream's rotation
// over its nodes no longer passes through the target. It did, for as long
// as no newer config was installed (on a quiet cluster, days): at every
// other reopen (one per 10 s redial period), another cluster's target
// (the record already moved to it) was streamed from and refused, with its
// warnings, and a dead one held the stream closed for its connect timeout.
func TestDNSSRVLookedUpAgainOverHTTPNotStreamedOnceTheNodesServe(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: noPushes})
	s, o, held := srvMovedToAnOldServer(t, mc, nil)
	fc, c, ctx := s.fc, s.c, s.ctx
	advanceUntil(t, ctx, fc, time.Second, func() bool { return o.streams.Load() >= 1 },
		"the stream never read from the looked-up target")

	// The nodes are back, with the config held.
	require.NoError(t, mc.Node(0).Restart())
	require.NoError(t, mc.Node(1).Restart())
	streams := func() uint64 { return mc.RESTRequestCount("/pools/default/bs/default") }
	base := streams()
	advanceUntil(t, ctx, fc, time.Second, func() bool { return streams() >= base+2 },
		"the stream never read from the cluster's nodes again")
	tried := o.streams.Load()
	base = streams()
	advanceUntil(t, ctx, fc, time.Second, func() bool { return streams() >= base+4 },
		"the stream was not reopened every redial period")
	assert.Equal(t, tried, o.streams.Load(), "the looked-up target was streamed from while the cluster's nodes serve")
	assert.Equal(t, held, c.ConfigVersion())
}

// Once Close has begun (Cancel: the cluster's context ended), a round of
// the stream that no node served (its last node's stream ended just before
// the context did, or it had no node to ask) has the record looked up
// again no more:
// the Resolver is not called, nor a lookup logged, for a client that is
// closing. One was started (and logged) in the window between the
// context's end and Close marking the lookups closed under fetchMu.
func TestDNSSRVNotLookedUpAgainOverHTTPOnceClosing(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: noPushes})
	const rec = "_couchbase._tcp.cluster.test"
	s := connectSRVOverHTTP(t, newScriptedSRV(rec, srvAnswer{addrs: srvOf(t, mc.Addrs())}), restAddrsOf(mc))
	r, c, ctx := s.r, s.c, s.ctx
	r.awaitCall(t, ctx, 0) // Connect's
	before := c.cl.SeedRefreshes().Lookups
	c.cl.Cancel()
	c.cl.SourceUnreachable()
	assert.Equal(t, before, c.cl.SeedRefreshes().Lookups, "a lookup started after the cluster's context ended")
}
