package cluster

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// sinkSource is a FirstConfigSource that serves first and hands the sink
// it runs with to the test.
type sinkSource struct {
	first []byte
	sinks chan Sink
}

func (s *sinkSource) Run(ctx context.Context, sink Sink) {
	s.sinks <- sink
	<-ctx.Done()
}

func (s *sinkSource) FirstConfig(context.Context, []string) (SourcedConfig, error) {
	return SourcedConfig{Raw: s.first, Host: "127.0.0.1", From: "sink source"}, nil
}

func (s *sinkSource) CanServe([]string) bool { return true }

// With the configs from a source (bootstrap_on=http), a NOT_MY_VBUCKET
// without a newer config, or a brief notification of a newer version,
// tells the source that a config is wanted (Sink.ConfigWanted), where the
// KV service would have been asked for it. kv_engine leaves the config out
// of a connection's NOT_MY_VBUCKET answers once it pushed or announced
// that version on it (DedupeNotMyVbucketClustermap): a soak with
// bootstrap_on=http saw writes meeting NOT_MY_VBUCKET wait for the HTTP
// stream's back-off (1.6 s, 3.2 s, ... 10 s) with the config at hand on
// the node. The KV service is still not asked.
func TestNoKVConfigsNMVWantsAConfigFromTheSource(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	b := mc.Bucket(mockcluster.DefaultBucket)
	cfg := testConfig(mc)
	cfg.NoKVConfigs = true
	cfg.Conn.NoClusterConfig = true
	src := &sinkSource{first: b.ConfigJSON(0), sinks: make(chan Sink, 1)}
	cfg.Sources = []ConfigSource{src}
	c := connectCluster(t, cfg)
	var sink Sink
	select {
	case sink = <-src.sinks:
	case <-time.After(10 * time.Second):
		t.Fatal("the source was not run")
	}
	wanted := func() bool {
		select {
		case <-sink.ConfigWanted():
			return true
		default:
			return false
		}
	}
	require.False(t, wanted(), "a config wanted before anything said so")

	const key = "nmv-key"
	tg := &Target{Key: []byte(key)}
	var rs vbmap.RouteState
	r, _, err := c.Route(&rs, tg)
	require.NoError(t, err)
	from := b.VbucketMap()[b.VbucketForKey([]byte(key))][0]
	moveVbucket(t, mc, key, (from+1)%3)
	assert.Equal(t, NMVWait, c.NotMyVbucket(r, NMV{}, &rs, tg))
	assert.True(t, wanted(), "a NOT_MY_VBUCKET without a config")
	assert.False(t, wanted(), "signalled once")

	held := c.Topology().Config().Version()
	c.onNotification(r.Node, memdx.ClustermapNotification{Bucket: []byte(mockcluster.DefaultBucket),
		Version: memdx.ClusterConfigVersion{Epoch: held.Epoch, Revision: int64(held.Rev) + 1}, HasEpoch: true})
	assert.True(t, wanted(), "a brief notification of a newer version")
	c.onNotification(r.Node, memdx.ClustermapNotification{Bucket: []byte(mockcluster.DefaultBucket),
		Version: memdx.ClusterConfigVersion{Epoch: held.Epoch, Revision: int64(held.Rev)}, HasEpoch: true})
	assert.False(t, wanted(), "a notification of the version held")

	requireNoKVConfigRequests(t, c)
	assert.Zero(t, mc.RequestCount(memdx.OpGetClusterConfig), "GET_CLUSTER_CONFIG sent with NoKVConfigs")
}

// The config poll is no sign that a config is wanted: with the configs
// from a source it asks nothing of the nodes, and it does not signal
// ConfigWanted either. It did (the poll goes through requestFetchHeld,
// which signalled for a source in place of any fetch): every poll
// interval (2.5 s) the HTTP stream's wait was cut short, so a proxy
// ending every stream, or REST ports refusing every dial, had the stream
// reopened every 2.5 s at most rather than backing off to 10 s, and a
// NOT_MY_VBUCKET was not what woke it.
func TestNoKVConfigsPollDoesNotWantAConfig(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	b := mc.Bucket(mockcluster.DefaultBucket)
	fc := retry.NewFakeClock(time.Now())
	cfg := testConfig(mc)
	cfg.Clock = fc
	cfg.NoKVConfigs = true
	cfg.Conn.NoClusterConfig = true
	src := &sinkSource{first: b.ConfigJSON(0), sinks: make(chan Sink, 1)}
	cfg.Sources = []ConfigSource{src}
	c := connectCluster(t, cfg)
	var sink Sink
	select {
	case sink = <-src.sinks:
	case <-time.After(10 * time.Second):
		t.Fatal("the source was not run")
	}
	start := fc.Now()
	// Three polls: the loop re-arms the poll before it polls, so the
	// poll armed for start+4h means the first two have been handled.
	for i := 1; i <= 3; i++ {
		due := start.Add(time.Duration(i) * cfg.PollInterval)
		waitFor(t, "the poll armed", func() bool { return slices.Contains(fc.Timers(), due) })
		fc.Set(due)
	}
	waitFor(t, "the poll re-armed", func() bool {
		return slices.Contains(fc.Timers(), start.Add(4*cfg.PollInterval))
	})
	select {
	case <-sink.ConfigWanted():
		t.Fatal("a poll signalled ConfigWanted: nothing said the config held is out of date")
	default:
	}
	requireNoKVConfigRequests(t, c)
	assert.Zero(t, mc.RequestCount(memdx.OpGetClusterConfig), "GET_CLUSTER_CONFIG sent with NoKVConfigs")
}

// With the configs from a source (bootstrap_on=http), a node whose KV
// connection is lost, or whose dial fails, tells the source that a config
// is wanted: the node may have left the cluster. A node removed closes
// its HTTP config stream, maybe before it sent the config without itself;
// still listed, it then had the stream wait out its reopen back-off (up
// to 10 s), and the operations routed to it met connection errors, not
// NOT_MY_VBUCKET, so nothing asked the stream for the config sooner: they
// stalled until the back-off ended. A node that is simply down signals
// once, not at each failed redial (the HTTP stream would be reopened at
// each); once it connected again, losing it signals again.
func TestNoKVConfigsLostNodeWantsAConfigFromTheSource(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	b := mc.Bucket(mockcluster.DefaultBucket)
	fc := retry.NewFakeClock(time.Now())
	cfg := testConfig(mc)
	cfg.Clock = fc
	cfg.NoKVConfigs = true
	cfg.Conn.NoClusterConfig = true
	gone := mc.Node(2)
	// failed carries the wait after each failed dial of gone.
	failed := make(chan time.Duration, 64)
	cfg.Logger = slog.New(logHook(func(line string) {
		if !strings.Contains(line, "connecting to node failed") || !strings.Contains(line, gone.Addr()) {
			return
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "retry_in="); ok {
				d, err := time.ParseDuration(v)
				if err == nil {
					failed <- d
				}
			}
		}
	}))
	src := &sinkSource{first: b.ConfigJSON(0), sinks: make(chan Sink, 1)}
	cfg.Sources = []ConfigSource{src}
	c := connectCluster(t, cfg)
	var sink Sink
	select {
	case sink = <-src.sinks:
	case <-time.After(10 * time.Second):
		t.Fatal("the source was not run")
	}
	n := c.Node(gone.Addr())
	require.NotNil(t, n)
	waitFor(t, "a connection to the node", func() bool { _, _, err := n.Pick(); return err == nil })
	wanted := func(what string) {
		t.Helper()
		select {
		case <-sink.ConfigWanted():
		case <-time.After(time.Minute):
			t.Fatalf("no config wanted after %s", what)
		}
	}
	notWanted := func(what string) {
		t.Helper()
		select {
		case <-sink.ConfigWanted():
			t.Fatalf("a config wanted after %s", what)
		default:
		}
	}
	notWanted("connecting")

	gone.Stop() // its connection closes, and its port refuses
	wanted("the node's connection was lost")
	// Simply down: its redials fail, each after its back-off on fc.
	var due time.Time
	for i := range 10 { // past ReconnectMax: the back-off reaches it
		if i > 0 {
			fc.Set(due)
		}
		var d time.Duration
		select {
		case d = <-failed:
		case <-time.After(time.Minute):
			t.Fatalf("no failed dial %d", i+1)
		}
		due = fc.Now().Add(d)
		waitFor(t, "the redial's wait armed", func() bool { return slices.Contains(fc.Timers(), due) })
		notWanted("a failed redial of a node already said to be lost")
	}

	// Back: connected again, then lost again (the signal is spaced by
	// ReconnectMax).
	require.NoError(t, gone.Restart())
	fc.Set(due)
	waitFor(t, "a connection to the node again", func() bool { _, _, err := n.Pick(); return err == nil })
	fc.Advance(ReconnectMax)
	notWanted("a node connected again")
	gone.DropConnections()
	wanted("the node's connection was lost again")

	requireNoKVConfigRequests(t, c)
	assert.Zero(t, mc.RequestCount(memdx.OpGetClusterConfig), "GET_CLUSTER_CONFIG sent with NoKVConfigs")
}
