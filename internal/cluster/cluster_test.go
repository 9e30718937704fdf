package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/leakcheck"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// The cluster on its own: bootstrap, config intake, NOT_MY_VBUCKET
// handling, seeds and nodes, against the mock cluster's nodes, with no
// client operation. The requests the tests send are the cluster's own
// (bootstrap, config fetches, polls), counted on the mock.

func TestMain(m *testing.M) { leakcheck.Main(m) }

// nodeError is the test's Config.NodeError.
type nodeError struct {
	addr string
	err  error
}

func (e *nodeError) Error() string        { return "node " + e.addr + ": " + errString(e.err) }
func (e *nodeError) Unwrap() error        { return e.err }
func (e *nodeError) Is(target error) bool { return target == kverr.ErrNoNodeAvailable }

func errString(err error) string {
	if err == nil {
		return "connecting"
	}
	return err.Error()
}

// noPushes are the HELLO features a mock refuses so that it never pushes a
// config: the cluster learns of a new one only when the test lets it.
var noPushes = []memdx.HelloFeature{
	memdx.FeatureClustermapChangeNotification,
	memdx.FeatureClustermapChangeNotificationBrief,
}

func newMock(t *testing.T, o mockcluster.Options) *mockcluster.Cluster {
	t.Helper()
	mc, err := mockcluster.New(o)
	require.NoError(t, err)
	t.Cleanup(mc.Close)
	return mc
}

// testConfig is a Config for mc's default bucket: every node a seed, no
// polls (an hour), the features a client asks for.
func testConfig(mc *mockcluster.Cluster) Config {
	return Config{
		Seeds:              mc.Addrs(),
		Bucket:             mockcluster.DefaultBucket,
		Network:            "auto",
		ConnectTimeout:     10 * time.Second,
		KVTimeout:          2500 * time.Millisecond,
		PollInterval:       time.Hour,
		ConnectionsPerNode: 1,
		Conn: conn.Options{
			Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword,
			Bucket:       mockcluster.DefaultBucket,
			ProbeTimeout: time.Minute, // servers in the test's process
			Features: []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket, memdx.FeatureJSON,
				memdx.FeatureDuplex, memdx.FeatureClustermapChangeNotificationBrief, memdx.FeatureUnorderedExecution,
				memdx.FeatureGetClusterConfigWithKnownVersion, memdx.FeatureDedupeNotMyVbucketClustermap},
		},
		Clock:     retry.RealClock(),
		Logger:    slog.New(slog.DiscardHandler),
		NodeError: func(addr string, err error) error { return &nodeError{addr, err} },
	}
}

func connectCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	c, err := Connect(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// awaitTopology waits (woken by each install, no polling) until ok holds
// for the cluster's topology; a minute is a bound no healthy run nears.
func awaitTopology(t *testing.T, c *Cluster, what string, ok func(*Topology) bool) *Topology {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		top := c.Topology()
		if ok(top) {
			return top
		}
		select {
		case <-top.Changed():
		case <-deadline.C:
			t.Fatalf("the topology did not reach %q within a minute", what)
		}
	}
}

// moveVbucket rebalances key's vbucket to node to (the old owner keeps a
// replica) and returns the old owner.
func moveVbucket(t *testing.T, mc *mockcluster.Cluster, key string, to int) int {
	t.Helper()
	b := mc.Bucket(mockcluster.DefaultBucket)
	vb := b.VbucketForKey([]byte(key))
	target := b.VbucketMap()
	from := target[vb][0]
	require.NotEqual(t, from, to)
	target[vb] = []int{to, from}
	r, err := mc.StartRebalance(mockcluster.RebalanceOptions{Targets: map[string][][]int{b.Name(): target}})
	require.NoError(t, err)
	require.NoError(t, r.Finish())
	return from
}

// A config arriving by any path is judged by its revision: a newer one is
// installed (the old topology's Changed closes), an older or equal one is
// dropped unparsed, one over the size limit is rejected unread, and a
// config offered many times is parsed once.
func TestConfigArrival(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	var parses atomic.Int32
	cfg := testConfig(mc)
	cfg.BeforeParse = func() { parses.Add(1) }
	c := connectCluster(t, cfg)
	t0 := c.Topology()
	require.NotNil(t, t0.Config())
	require.Len(t, t0.Nodes(), 3)
	b := mc.Bucket(mockcluster.DefaultBucket)
	held := b.ConfigJSON(0)

	assert.Equal(t, OfferStale, c.Offer(held, "127.0.0.1", "test"), "the config held")
	assert.Equal(t, OfferStale, c.Offer(nil, "127.0.0.1", "test"), "no config")
	assert.Equal(t, OfferRejected, c.Offer(bytes.Repeat([]byte(" "), vbmap.MaxConfigSize+1), "127.0.0.1", "test"),
		"over the size limit")

	moveVbucket(t, mc, "k", (b.VbucketMap()[b.VbucketForKey([]byte("k"))][0]+1)%3)
	newer := b.ConfigJSON(0)
	require.Equal(t, OfferNewer, c.Offer(newer, "127.0.0.1", "test"))
	for range 19 {
		// On its way (waiting or being parsed), or installed already.
		assert.NotEqual(t, OfferRejected, c.Offer(newer, "127.0.0.1", "test"))
	}
	select {
	case <-t0.Changed():
	case <-time.After(time.Minute):
		t.Fatal("the newer config was not installed")
	}
	awaitTopology(t, c, "the newer config", func(top *Topology) bool {
		v, _ := vbmap.PeekVersion(newer)
		return top.Config().Version() == v
	})
	assert.Equal(t, int32(1), parses.Load(), "parses of the newer config offered 20 times")
	assert.Equal(t, int64(1), c.ConfigParses())
	assert.Equal(t, OfferStale, c.Offer(held, "127.0.0.1", "test"), "the older config, after")
}

// fakeSource is a second ConfigSource (the shape of HTTP streaming): it
// offers the configs sent on configs, and serves a first config for
// Connect when asked.
type fakeSource struct {
	configs chan []byte
	first   []byte
	asked   atomic.Int32
	offers  chan Offer
}

func newFakeSource(first []byte) *fakeSource {
	return &fakeSource{configs: make(chan []byte), offers: make(chan Offer, 1), first: first}
}

func (s *fakeSource) Run(ctx context.Context, sink Sink) {
	for {
		select {
		case raw := <-s.configs:
			s.offers <- sink.Offer(raw, "127.0.0.1", "fake")
		case <-ctx.Done():
			return
		}
	}
}

func (s *fakeSource) FirstConfig(ctx context.Context, seeds []string) (SourcedConfig, error) {
	s.asked.Add(1)
	if s.first == nil {
		return SourcedConfig{}, errors.New("fake source: no config here")
	}
	return SourcedConfig{Raw: s.first, Host: "127.0.0.1", From: "fake"}, nil
}

func (s *fakeSource) CanServe([]string) bool { return true }

// streamOnly is a ConfigSource that serves no bootstrap config: it runs
// whatever the bootstrap.
type streamOnly struct{ src *fakeSource }

func (s streamOnly) Run(ctx context.Context, sink Sink) { s.src.Run(ctx, sink) }

// A second config source feeds the same intake: its newer config is
// installed, an older one dropped.
func TestSecondConfigSource(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	b := mc.Bucket(mockcluster.DefaultBucket)
	src := newFakeSource(nil)
	cfg := testConfig(mc)
	cfg.Sources = []ConfigSource{streamOnly{src}}
	c := connectCluster(t, cfg)
	held := b.ConfigJSON(0)
	moveVbucket(t, mc, "k", (b.VbucketMap()[b.VbucketForKey([]byte("k"))][0]+1)%3)
	src.configs <- b.ConfigJSON(1)
	require.Equal(t, OfferNewer, <-src.offers)
	awaitRev(t, c, b.Rev())
	src.configs <- held
	assert.Equal(t, OfferStale, <-src.offers)
}

// A FirstConfigSource serves the bootstrap config when no seed's KV
// service serves one (here they answer NOT_SUPPORTED), and then the
// session's configs: it runs, and the nodes are no longer asked for
// theirs. When a seed's KV service serves the config the source is not
// asked, nor run. When neither serves one, Connect's error has every
// seed's reason and the source's.
func TestFirstConfigSource(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	b := mc.Bucket(mockcluster.DefaultBucket)
	cfg := testConfig(mc)

	unused := newFakeSource(b.ConfigJSON(0))
	cfg.Sources = []ConfigSource{unused}
	c := connectCluster(t, cfg)
	assert.Zero(t, unused.asked.Load(), "the seed served a config itself")
	assert.True(t, c.kvConfigs.Load())
	c.Close()

	f := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGetClusterConfig}},
		Action: mockcluster.Action{Status: memdx.StatusNotSupported}})
	defer f.Remove()
	src := newFakeSource(b.ConfigJSON(0))
	cfg.Sources = []ConfigSource{src}
	c2 := connectCluster(t, cfg)
	assert.Equal(t, int32(1), src.asked.Load())
	assert.Len(t, c2.Topology().Nodes(), 3)
	assert.False(t, c2.kvConfigs.Load(), "the source serves the configs now")
	moveVbucket(t, mc, "k", (b.VbucketMap()[b.VbucketForKey([]byte("k"))][0]+1)%3)
	src.configs <- b.ConfigJSON(1)
	require.Equal(t, OfferNewer, <-src.offers, "the source runs")
	awaitRev(t, c2, b.Rev())
	requireNoKVConfigRequests(t, c2)

	none := newFakeSource(nil)
	cfg.Sources = []ConfigSource{none}
	_, err := Connect(context.Background(), cfg)
	var be *BootstrapError
	require.ErrorAs(t, err, &be)
	assert.Len(t, be.All, 4, "every seed's error and the source's")
	assert.Contains(t, err.Error(), "GET_CLUSTER_CONFIG answered NOT_SUPPORTED")
	assert.Contains(t, err.Error(), "fake source: no config here")
}

// With NoKVConfigs the seeds' KV service is never asked for a config: the
// source serves the bootstrap one and runs.
func TestNoKVConfigs(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	b := mc.Bucket(mockcluster.DefaultBucket)
	cfg := testConfig(mc)
	cfg.NoKVConfigs = true
	cfg.Conn.NoClusterConfig = true
	cfg.PollInterval = 10 * time.Millisecond
	src := newFakeSource(b.ConfigJSON(0))
	cfg.Sources = []ConfigSource{src}
	c := connectCluster(t, cfg)
	assert.Equal(t, int32(1), src.asked.Load())
	moveVbucket(t, mc, "k", (b.VbucketMap()[b.VbucketForKey([]byte("k"))][0]+1)%3)
	src.configs <- b.ConfigJSON(1)
	require.Equal(t, OfferNewer, <-src.offers, "the source runs")
	awaitRev(t, c, b.Rev())
	requireNoKVConfigRequests(t, c)
	assert.Zero(t, mc.RequestCount(memdx.OpGetClusterConfig), "GET_CLUSTER_CONFIG sent with NoKVConfigs")
}

// With NoKVConfigs a node's connection that fetched its config at
// bootstrap (Conn.NoClusterConfig false, as client dials them, to vet the
// node) does not offer it: the configs come from the source only. The
// node serves a newer config than the source's first; the offer a new
// connection makes (onConnUp, run here on the node's connection, after
// the dials' own) would put it in the mailbox, or install it.
func TestNoKVConfigsConnectionConfigOnlyVets(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	b := mc.Bucket(mockcluster.DefaultBucket)
	first := b.ConfigJSON(0)
	held := b.Rev()
	moveVbucket(t, mc, "k", (b.VbucketMap()[b.VbucketForKey([]byte("k"))][0]+1)%3)
	require.Greater(t, b.Rev(), held)
	cfg := testConfig(mc)
	cfg.NoKVConfigs = true
	cfg.Sources = []ConfigSource{newFakeSource(first)}
	c := connectCluster(t, cfg)
	v := c.Topology().Config().Version()
	require.Equal(t, held, int64(v.Rev))
	n := c.Topology().Nodes()[0]
	awaitEndpoint(t, c, n.Addr(), func(e Endpoint) bool { return e.Conn != nil })
	cns := n.conns.Load()
	require.NotNil(t, cns)
	cn := (*cns)[0]
	require.NotNil(t, cn.ClusterConfig(), "the connection fetched its node's config at bootstrap")

	c.onConnUp(n, cn)
	assert.False(t, c.newerOnItsWay(v), "the connection's config was offered")
	assert.Equal(t, v, c.Topology().Config().Version(), "the connection's config was installed")
}

// A node's first dial, made by the install of the bootstrap config, is
// vetted against that config: with NoKVConfigs (bootstrap_on=http) the
// source's config names another cluster than the one the node at its
// address serves, and the node is not used (Connect fails: no other node).
// The install started the node's pool before it stored the topology and
// the config's cluster uuid; a dial that ended before the store found
// nothing installed, vetted nothing, and the other cluster's node was
// used. The hook holds the install (as a descheduled thread would) until
// the node's first dial has ended.
func TestFirstDialsAreVettedByTheBootstrapConfig(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	served := mc.Bucket(mockcluster.DefaultBucket).ConfigJSON(0)
	own, err := vbmap.Parse(served, "127.0.0.1")
	require.NoError(t, err)
	require.NotEmpty(t, own.ClusterUUID())
	held := bytes.Replace(served, []byte(`"clusterUUID":"`+own.ClusterUUID()+`"`), []byte(`"clusterUUID":"another-cluster"`), 1)
	require.NotEqual(t, served, held)
	hook := func(n *Node) {
		select {
		case <-n.tried:
		case <-time.After(time.Minute):
			t.Errorf("%s: no first dial within a minute", n.addr)
		}
	}
	testHookNodeStarted.Store(&hook)
	t.Cleanup(func() { testHookNodeStarted.Store(nil) })
	cfg := testConfig(mc)
	cfg.NoKVConfigs = true
	cfg.Sources = []ConfigSource{newFakeSource(held)}
	c, err := Connect(context.Background(), cfg)
	if err == nil {
		c.Close()
	}
	require.Error(t, err, "the other cluster's node was used")
	assert.Contains(t, err.Error(), "answers for another cluster")
}

// awaitRev waits until c has installed config revision rev.
func awaitRev(t *testing.T, c *Cluster, rev int64) {
	t.Helper()
	awaitTopology(t, c, fmt.Sprintf("config rev %d", rev), func(top *Topology) bool {
		return top.Config() != nil && int64(top.Config().Version().Rev) >= rev
	})
}

// requireNoKVConfigRequests checks that c, whose configs come from a
// source, asks no node for one: the poll's, a NOT_MY_VBUCKET's and a
// notification's fetch start no fetcher, and no recovery round starts.
func requireNoKVConfigRequests(t *testing.T, c *Cluster) {
	t.Helper()
	n := c.Topology().Nodes()[0]
	c.requestFetch(n, vbmap.Version{}) // the poll's
	tg := &Target{Key: []byte("k")}
	r, _, err := c.Route(&vbmap.RouteState{}, tg)
	require.NoError(t, err)
	assert.Equal(t, NMVWait, c.NotMyVbucket(r, NMV{}, &vbmap.RouteState{}, tg))
	c.announceFetch(n, vbmap.Version{Epoch: 1 << 40})
	assert.Zero(t, c.maybeRecover())
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	assert.Empty(t, c.fetches, "config fetchers started")
	assert.False(t, c.recovery.running, "a recovery round started")
}

// NOT_MY_VBUCKET: a body with a newer config is offered (nothing fetched);
// without a body the node is asked for its config, once however many
// requests met it; once the newer config is installed, the request's
// route state takes it and the route moves.
func TestNotMyVbucket(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	b := mc.Bucket(mockcluster.DefaultBucket)
	c := connectCluster(t, testConfig(mc))
	const key = "nmv-key"
	tg := &Target{Key: []byte(key)}
	var rs vbmap.RouteState
	r, _, err := c.Route(&rs, tg)
	require.NoError(t, err)
	from := b.VbucketMap()[b.VbucketForKey([]byte(key))][0]
	require.Equal(t, mc.Node(from).Addr(), r.Node.Addr())
	to := (from + 1) % 3
	moveVbucket(t, mc, key, to)

	// No body: the node that answered is asked for its config.
	fetches := mc.Node(from).RequestCount(memdx.OpGetClusterConfig)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs := rs
			c.NotMyVbucket(r, NMV{}, &rs, tg)
		}()
	}
	wg.Wait()
	top := awaitTopology(t, c, "the fetched config", func(top *Topology) bool { return top.Config().Newer(r.Topo.Config()) })
	got := mc.Node(from).RequestCount(memdx.OpGetClusterConfig) - fetches
	assert.GreaterOrEqual(t, got, uint64(1))
	assert.LessOrEqual(t, got, uint64(2), "fetches for 10 NOT_MY_VBUCKETs (one in flight, one after)")
	assert.Equal(t, NMVMoved, c.NotMyVbucket(r, NMV{}, &rs, tg), "a config held moves the route")
	r2, _, err := c.Route(&rs, tg)
	require.NoError(t, err)
	assert.Same(t, top, r2.Topo)
	assert.Equal(t, mc.Node(to).Addr(), r2.Node.Addr())
	assert.Equal(t, got, mc.Node(from).RequestCount(memdx.OpGetClusterConfig)-fetches, "no fetch with a newer config held")

	// A body with a newer config: offered, not fetched.
	back := moveVbucket(t, mc, key, from)
	require.Equal(t, to, back)
	fetches = mc.Node(to).RequestCount(memdx.OpGetClusterConfig)
	var rs2 vbmap.RouteState
	r3, _, err := c.Route(&rs2, tg)
	require.NoError(t, err)
	// The retry waits for that config (unless the loop installed it
	// already, and the route moved).
	got3 := c.NotMyVbucket(r3, NMV{Body: b.ConfigJSON(to)}, &rs2, tg)
	assert.Contains(t, []NMVOutcome{NMVAwaitConfig, NMVMoved}, got3)
	awaitTopology(t, c, "the config in the body", func(top *Topology) bool { return top.Config().Newer(r3.Topo.Config()) })
	assert.Equal(t, fetches, mc.Node(to).RequestCount(memdx.OpGetClusterConfig), "nothing fetched")
	r4, _, err := c.Route(&rs2, tg)
	require.NoError(t, err)
	assert.Equal(t, mc.Node(from).Addr(), r4.Node.Addr())
}

// closedPort is a loopback address that refuses connections, held until
// the test ends so that no listener opened later is given its port.
func closedPort(t *testing.T) string {
	t.Helper()
	p, err := faultnode.NewClosedPort()
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p.Addr()
}

// resolver maps names to addresses, as a DNS SRV lookup would.
type resolver map[string][]string

func (r resolver) Resolve(_ context.Context, seeds []string) ([]string, error) {
	var out []string
	for _, s := range seeds {
		addrs, ok := r[s]
		if !ok {
			return nil, errors.New("no SRV record for " + s)
		}
		out = append(out, addrs...)
	}
	return out, nil
}

// Seeds are tried in order: one that refuses the connection is passed
// over; a resolver turns a name into the addresses dialed; refused
// credentials end the bootstrap at once; no seed answering is every
// seed's error.
func TestSeedFallback(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	cfg := testConfig(mc)
	cfg.Seeds = []string{closedPort(t), mc.Node(1).Addr()}
	c := connectCluster(t, cfg)
	assert.Len(t, c.Topology().Nodes(), 3)

	cfg.Seeds = []string{"cluster.test:11210"}
	cfg.Resolver = resolver{"cluster.test:11210": {closedPort(t), mc.Node(2).Addr()}}
	c = connectCluster(t, cfg)
	assert.Len(t, c.Topology().Nodes(), 3)
	cfg.Seeds = []string{"other.test:11210"}
	_, err := Connect(context.Background(), cfg)
	assert.ErrorContains(t, err, "no SRV record for other.test:11210")
	cfg.Resolver = nil

	cfg.Seeds = mc.Addrs()
	cfg.Conn.Password = "wrong"
	start := time.Now()
	_, err = Connect(context.Background(), cfg)
	assert.ErrorIs(t, err, kverr.ErrAuthenticationFailure)
	assert.Less(t, time.Since(start), cfg.ConnectTimeout, "a refusal ends the bootstrap at once")

	cfg.Seeds = []string{closedPort(t), closedPort(t)}
	_, err = Connect(context.Background(), cfg)
	var be *BootstrapError
	require.ErrorAs(t, err, &be)
	assert.Len(t, be.All, 2)
}

// Nodes join and leave with the configs: a node added to the cluster gets
// a pool; a node rebalanced out leaves the topology, refuses requests
// (no route to it), and drains and closes its connections.
func TestNodeAddAndRemove(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	cfg := testConfig(mc)
	cfg.PollInterval = 50 * time.Millisecond // the mock pushes configs too; polls are a backstop
	c := connectCluster(t, cfg)
	n4, err := mc.AddNode()
	require.NoError(t, err)
	r, err := mc.StartRebalance(mockcluster.RebalanceOptions{})
	require.NoError(t, err)
	require.NoError(t, r.Finish())
	awaitTopology(t, c, "four nodes", func(top *Topology) bool { return len(top.Nodes()) == 4 })
	n := c.Node(n4.Addr())
	require.NotNil(t, n)
	require.Eventually(t, func() bool { _, _, err := n.Pick(); return err == nil }, time.Minute, time.Millisecond,
		"the new node's pool connects")

	gone := c.Node(mc.Node(0).Addr())
	r, err = mc.StartRebalance(mockcluster.RebalanceOptions{Nodes: []int{1, 2, n4.ID()}})
	require.NoError(t, err)
	require.NoError(t, r.Finish())
	top := awaitTopology(t, c, "node 0 out", func(top *Topology) bool { return len(top.Nodes()) == 3 })
	for _, nd := range top.Nodes() {
		assert.NotEqual(t, mc.Node(0).Addr(), nd.Addr())
	}
	select {
	case <-gone.Stopped():
	case <-time.After(time.Minute):
		t.Fatal("the node rebalanced out did not drain and close within a minute")
	}
	_, _, err = gone.Pick()
	assert.ErrorIs(t, err, kverr.ErrNoNodeAvailable)
	assert.ErrorContains(t, err, "no longer in the cluster config")
	assert.Nil(t, c.Node(mc.Node(0).Addr()))
}

// A memcached:// cluster routes by a ketama ring over its seeds, and a
// server whose dial failed is known down: its keys fail at once.
func TestMemcachedRing(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	cfg := testConfig(mc)
	cfg.Memcached = true
	down := closedPort(t)
	cfg.Seeds = []string{memcachedtest.Start(t), down}
	cfg.Conn = conn.Options{Memcached: true, ProbeTimeout: time.Minute}
	c := connectCluster(t, cfg)
	top := c.Topology()
	require.True(t, top.Ketama())
	require.Equal(t, 2, top.NumServers())
	var rs vbmap.RouteState
	for i := range 64 {
		key := []byte{byte('a' + i%26), byte(i)}
		_, want := top.KetamaServer(key)
		r, _, err := c.Route(&rs, &Target{Key: key})
		require.NoError(t, err)
		assert.Same(t, want, r.Node)
		_, reason, err := r.Node.Pick()
		if want.Addr() == down {
			assert.Equal(t, retry.ReasonUnknown, reason, "a known-down server's key fails at once")
			assert.ErrorIs(t, err, kverr.ErrNoNodeAvailable)
		} else {
			assert.NoError(t, err)
		}
	}
}

// A node's connections take the client's options as they are, with the
// node's callbacks added; a recovery dial's take them without.
func TestConnOptionsKeepTheClientsOptions(t *testing.T) {
	c := &Cluster{cfg: Config{Conn: conn.Options{ProbeAfter: 200 * time.Millisecond, ProbeTimeout: 5 * time.Second,
		Username: "u", MaxPending: 7}}}
	n := &Node{cl: c, addr: "h:11210", wake: make(chan struct{}, 1)}
	for _, o := range []conn.Options{c.connOptions(nil), c.connOptions(n)} {
		assert.Equal(t, 200*time.Millisecond, o.ProbeAfter)
		assert.Equal(t, 5*time.Second, o.ProbeTimeout)
		assert.Equal(t, "u", o.Username)
		assert.Equal(t, 7, o.MaxPending)
	}
	assert.Nil(t, c.connOptions(nil).OnClose)
	assert.NotNil(t, c.connOptions(n).OnClose)
	assert.NotNil(t, c.connOptions(n).OnClustermapNotification)
}

// A retry waiting for a config on its way (NMVAwaitConfig) is not left
// waiting when the config loop refuses it: a newer config for another
// bucket is offered, and the topology's Wake channel closes all the same.
func TestRejectedConfigWakesTheWaits(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes, Buckets: []mockcluster.BucketOptions{
		{Name: mockcluster.DefaultBucket, NumVbuckets: 16}, {Name: "other", NumVbuckets: 16}}})
	c := connectCluster(t, testConfig(mc))
	t0 := c.Topology()
	// "other" was created after the default bucket: its config's
	// revision is the newer.
	require.Equal(t, OfferNewer, c.Offer(mc.Bucket("other").ConfigJSON(0), "127.0.0.1", "test"))
	select {
	case <-t0.Wake(retry.ReasonKVNotMyVbucket):
	case <-time.After(time.Minute):
		t.Fatal("the wait for a refused config was not ended")
	}
	assert.Same(t, t0.Config(), c.Topology().Config(), "the refused config is not installed")
}

// A bootstrap config none of whose servers has a KV address on the chosen
// network (network=external on a cluster without alternate addresses, a
// misspelled network, TLS ports where the client does not use TLS) fails
// Connect, naming the network. Connect succeeded, keeping the seed's
// connection for polls only, and every operation then waited for a node
// until its timeout.
func TestConnectFailsWhenNoServerHasAnAddressOnTheNetwork(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	cfg := testConfig(mc)
	cfg.Network = "external"
	c, err := Connect(context.Background(), cfg)
	if err == nil {
		c.Close()
		t.Fatal("Connect succeeded with no server reachable on network external")
	}
	var be *BootstrapError
	require.ErrorAs(t, err, &be)
	_, sentinel, cause := be.Failure(false)
	assert.Equal(t, kverr.ErrNoNodeAvailable, sentinel)
	assert.ErrorContains(t, cause, `network "external"`)
}

// A config whose revision PeekVersion cannot read (no "rev", or one spelled
// with escapes) offered while a newer config waits in the mailbox does not
// take that config's place: both are parsed, and the newer one is
// installed. The unreadable one replaced it, and the newer config was
// lost until something offered it again (with polls an hour apart, never).
func TestUnreadableRevisionDoesNotDropAWaitingConfig(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	cfg := testConfig(mc)
	var armed atomic.Bool
	parsing, release := make(chan struct{}, 4), make(chan struct{})
	cfg.BeforeParse = func() {
		if armed.Load() {
			parsing <- struct{}{}
			<-release
		}
	}
	c := connectCluster(t, cfg)
	held := mc.Bucket(mockcluster.DefaultBucket).ConfigJSON(0)
	v, ok := vbmap.PeekVersion(held)
	require.True(t, ok)
	withRev := func(key string, rev uint64) []byte {
		old := fmt.Appendf(nil, `"rev":%d`, v.Rev)
		require.Contains(t, string(held), string(old))
		return bytes.Replace(held, old, fmt.Appendf(nil, `"%s":%d`, key, rev), 1)
	}
	armed.Store(true)
	// The loop is held parsing rev+1 while rev+2 waits and the unreadable
	// config is offered.
	require.Equal(t, OfferNewer, c.Offer(withRev("rev", v.Rev+1), "127.0.0.1", "test"))
	<-parsing
	require.Equal(t, OfferNewer, c.Offer(withRev("rev", v.Rev+2), "127.0.0.1", "test"))
	c.Offer(withRev(`\u0072ev`, v.Rev), "127.0.0.1", "test")
	c.Offer(withRev("revision", v.Rev), "127.0.0.1", "test")
	armed.Store(false)
	close(release)
	awaitTopology(t, c, "rev+2", func(top *Topology) bool { return top.Config().Version().Rev == v.Rev+2 })
}

// A memcached bucket's config whose nodes have no non-TLS KV port on the
// default network (TLS ports only) gives the bucket no ketama ring: no
// key can be routed. Connect fails, saying so, as for a config with no
// address on the network. From a KV seed it succeeded (the seed's node
// kept for polls), and every operation then waited for a node until its
// timeout; from a source it failed naming no node and no reason.
func TestConnectFailsWhenAMemcachedBucketHasNoRing(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, Buckets: []mockcluster.BucketOptions{
		{Name: "cache", Type: mockcluster.MemcachedBucket}}})
	raw := mc.Bucket("cache").ConfigJSON(0)
	require.Contains(t, string(raw), `"kv":`)
	tlsOnly := bytes.ReplaceAll(raw, []byte(`"kv":`), []byte(`"kvSSL":`))
	cfg := testConfig(mc)
	cfg.Bucket, cfg.Conn.Bucket = "cache", "cache"
	connect := func(t *testing.T, cfg Config) {
		c, err := Connect(context.Background(), cfg)
		if err == nil {
			c.Close()
			t.Fatal("Connect succeeded to a memcached bucket with no ketama ring")
		}
		var be *BootstrapError
		require.ErrorAs(t, err, &be)
		_, sentinel, cause := be.Failure(false)
		assert.Equal(t, kverr.ErrNoNodeAvailable, sentinel)
		assert.ErrorContains(t, cause, "ketama ring")
	}
	t.Run("source", func(t *testing.T) {
		cfg := cfg
		cfg.Sources = []ConfigSource{newFakeSource(tlsOnly)}
		connect(t, cfg)
	})
	t.Run("kv", func(t *testing.T) {
		// The seed's KV service serves the config.
		p, err := faultnode.NewProxy(mc.Node(0).Addr())
		require.NoError(t, err)
		t.Cleanup(p.Close)
		p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
			if resp.OpCode != memdx.OpGetClusterConfig {
				return faultnode.Action{}
			}
			served := *resp
			served.Status, served.Value, served.Datatype = memdx.StatusSuccess, tlsOnly, memdx.DatatypeJSON
			return faultnode.Action{Send: []memdx.Packet{served}}
		})
		cfg := cfg
		cfg.Seeds = []string{p.Addr()}
		connect(t, cfg)
	})
}

// A config whose revision PeekVersion cannot read (a NOT_MY_VBUCKET body,
// its "rev" spelled with an escape) and that, parsed, is not newer than
// the one held, ends the waits for a config on its way (Offer said
// OfferNewer: it could not tell), which route again by the config held,
// at once; and the same bytes offered again are known stale without
// another parse. The waits ran until retry.MaxAwaitWake (a second) and
// each offer of the body (every retry's NOT_MY_VBUCKET) parsed it again.
// So is a broken one: rejected without another parse.
func TestUnreadableRevisionNotNewerWakesTheWaitsAndIsParsedOnce(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	cfg := testConfig(mc)
	var parses atomic.Int32
	cfg.BeforeParse = func() { parses.Add(1) }
	c := connectCluster(t, cfg)
	held := mc.Bucket(mockcluster.DefaultBucket).ConfigJSON(0)
	v, ok := vbmap.PeekVersion(held)
	require.True(t, ok)
	old := fmt.Appendf(nil, `"rev":%d`, v.Rev)
	require.Contains(t, string(held), string(old))
	for name, raw := range map[string][]byte{
		"not newer": bytes.Replace(held, old, fmt.Appendf(nil, `"\u0072ev":%d`, v.Rev), 1),
		"broken":    append(bytes.Replace(held, old, fmt.Appendf(nil, `"\u0072ev":%d`, v.Rev+1), 1), '}'),
	} {
		t.Run(name, func(t *testing.T) {
			_, peeked := vbmap.PeekVersion(raw)
			require.False(t, peeked)
			t0 := c.Topology()
			require.Equal(t, OfferNewer, c.Offer(raw, "127.0.0.1", "not-my-vbucket"), "its version cannot be told unparsed")
			// read: the loop has taken and judged raw (it then renews
			// the topology).
			read := func() bool {
				in := &c.intake
				in.mu.Lock()
				defer in.mu.Unlock()
				return in.odd == nil && bytes.Equal(in.oddSeen, raw)
			}
			for w := t0; ; {
				select {
				case <-w.Wake(retry.ReasonKVNotMyVbucket):
				case <-time.After(time.Minute):
					t.Fatal("the wait for a config on its way was not ended when the config turned out not newer")
				}
				// A node's first connection, made just after
				// Connect returned, renews the topology too
				// (wakeForNode): wait on until raw was read. next
				// is loaded first: raw not read yet, the renew
				// that follows its reading replaces next.
				next := c.Topology()
				if read() {
					break
				}
				w = next
			}
			assert.Same(t, t0.Config(), c.Topology().Config(), "not installed")
			n := parses.Load()
			for range 5 {
				assert.NotEqual(t, OfferNewer, c.Offer(raw, "127.0.0.1", "not-my-vbucket"), "the same body again")
			}
			assert.Equal(t, n, parses.Load(), "parses of the same body offered again")
		})
	}
}
