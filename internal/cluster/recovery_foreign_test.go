package cluster

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/vbmap"
)

// logHook is a slog handler that calls fn with each record's message and
// attributes, as one line.
type logHook func(line string)

func (h logHook) Enabled(context.Context, slog.Level) bool { return true }
func (h logHook) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h(b.String())
	return nil
}
func (h logHook) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logHook) WithGroup(string) slog.Handler      { return h }

// foreignLines has cfg's Logger send each line that speaks of another
// cluster on the channel it returns (dropped once 16 wait).
func foreignLines(cfg *Config) <-chan string {
	lines := make(chan string, 16)
	cfg.Logger = slog.New(logHook(func(line string) {
		if strings.Contains(line, "another cluster") {
			select {
			case lines <- line:
			default:
			}
		}
	}))
	return lines
}

// parseGate counts the loop's parses (BeforeParse) and, while armed,
// holds each until release, having said so on parsing.
type parseGate struct {
	armed   atomic.Bool
	parses  atomic.Int32
	parsing chan struct{}
	release chan struct{}
}

// gateParses sets cfg's BeforeParse to a parseGate's.
func gateParses(cfg *Config) *parseGate {
	g := &parseGate{parsing: make(chan struct{}, 4), release: make(chan struct{})}
	cfg.BeforeParse = func() {
		g.parses.Add(1)
		if g.armed.Load() {
			g.parsing <- struct{}{}
			<-g.release
		}
	}
	return g
}

// anotherCluster is a cluster of one node whose default bucket (a bucket
// of the same name as the cluster's under test) has a revision past
// past.
func anotherCluster(t *testing.T, past int64) (*mockcluster.Cluster, *mockcluster.Bucket) {
	t.Helper()
	b := newMock(t, mockcluster.Options{Nodes: 1})
	bb := b.Bucket(mockcluster.DefaultBucket)
	for i := 0; bb.Rev() <= past; i++ {
		_, err := bb.AddScope(fmt.Sprint("b", i))
		require.NoError(t, err)
	}
	return b, bb
}

// nextConfig returns a func that moves b's config on (a scope added) and
// returns it as node 0 serves it.
func nextConfig(t *testing.T, b *mockcluster.Bucket) func() []byte {
	return func() []byte {
		_, err := b.AddScope(fmt.Sprint("a", b.Rev()))
		require.NoError(t, err)
		return b.ConfigJSON(0)
	}
}

// awaitLoopIdle awaits the config loop with no config parsed or waiting
// in the mailbox.
func awaitLoopIdle(t *testing.T, c *Cluster) {
	t.Helper()
	require.Eventually(t, func() bool {
		c.intake.mu.Lock()
		defer c.intake.mu.Unlock()
		return !c.intake.parsingSet && c.intake.raw == nil && c.intake.odd == nil
	}, time.Minute, time.Millisecond, "the loop never went idle")
}

// A recovery round asks a seed whose address a node of another cluster
// now has (a bucket of the same name, a newer revision) and a node of the
// cluster, which answers later. The other cluster's config, refused where
// it would be installed, must not end the round as "a newer config": the
// round goes on to the cluster's own candidate, whose newer config is
// installed. It ended the round at the other cluster's config (logged as
// a newer config served), and the cluster's own config was not asked for.
func TestRecoverySkipsAConfigOfAnotherCluster(t *testing.T) {
	a := newMock(t, mockcluster.Options{Nodes: 1})
	cfg := testConfig(a)
	cfg.Conn.Features = slices.DeleteFunc(slices.Clone(cfg.Conn.Features), func(f memdx.HelloFeature) bool {
		return f == memdx.FeatureClustermapChangeNotificationBrief // the new config comes by the round alone
	})
	skipped := foreignLines(&cfg)
	c := connectCluster(t, cfg)
	held := c.Topology()

	b, bb := anotherCluster(t, int64(held.Config().Version().Rev)+5)
	ab := a.Bucket(mockcluster.DefaultBucket)
	_, err := ab.AddScope("moved-on") // the cluster's config moves past the one held
	require.NoError(t, err)

	// The cluster's own candidate answers only once the other cluster's
	// config has been judged (or the round ended).
	px, err := faultnode.NewProxy(a.Node(0).Addr())
	require.NoError(t, err)
	defer px.Close()
	stall := px.StallNextResponse(1)
	defer stall.Release()

	c.wg.Add(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.recoverConfig(held, []string{b.Node(0).Addr(), px.Addr()}, nil)
	}()
	select {
	case <-done:
		t.Fatalf("the round ended before the cluster's own candidate answered, holding rev %v: the other cluster's config (rev %d) ended it as a newer config",
			c.Topology().Config().Version(), bb.Rev())
	case line := <-skipped:
		t.Logf("logged: %s", line)
	case <-time.After(time.Minute):
		t.Fatal("the other cluster's config was not judged within a minute")
	}
	stall.Release()
	awaitTopology(t, c, "the config the cluster's own node serves", func(top *Topology) bool {
		return top.Config().Version().Rev == uint64(ab.Rev()) && top.Config().ClusterUUID() == held.Config().ClusterUUID()
	})
	<-done
}

// A config of another cluster is refused (applyConfig), and its revision
// says nothing of the cluster's own configs: when the cluster's config
// later reaches that same revision, it is installed. It was refused
// unread, as the version the loop had rejected (OfferRejected), by every
// path that offered it (polls, fetches, pushes), until the cluster's
// config moved on again: the client routed by the stale map meanwhile.
func TestConfigOfTheRevisionAnotherClustersConfigHadIsInstalled(t *testing.T) {
	a := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	cfg := testConfig(a)
	refused := foreignLines(&cfg)
	c := connectCluster(t, cfg)
	held := c.Topology().Config()

	_, bb := anotherCluster(t, int64(held.Version().Rev)+2)
	require.Equal(t, OfferNewer, c.Offer(bb.ConfigJSON(0), "127.0.0.1", "test"))
	select {
	case line := <-refused:
		t.Logf("logged: %s", line)
	case <-time.After(time.Minute):
		t.Fatal("the other cluster's config was not refused within a minute")
	}
	require.Same(t, held, c.Topology().Config(), "the other cluster's config is not installed")
	// The loop logs the refusal before it marks the parse done: the
	// cluster's config is offered once it has (an offer made while the
	// other cluster's config is parsed:
	// TestOwnConfigOfferedWhileAnotherClustersIsParsedIsInstalled).
	require.Eventually(t, func() bool {
		c.intake.mu.Lock()
		defer c.intake.mu.Unlock()
		return !c.intake.parsingSet
	}, time.Minute, time.Millisecond, "the loop never finished the other cluster's config")

	ab := a.Bucket(mockcluster.DefaultBucket)
	for i := 0; ab.Rev() < bb.Rev(); i++ {
		_, err := ab.AddScope(fmt.Sprint("a", i))
		require.NoError(t, err)
	}
	own := ab.ConfigJSON(0)
	v, ok := vbmap.PeekVersion(own)
	require.True(t, ok)
	bv, _ := vbmap.PeekVersion(bb.ConfigJSON(0))
	require.Equal(t, bv, v, "the cluster's config has the revision the other cluster's had")
	if got := c.Offer(own, "127.0.0.1", "test"); got != OfferNewer {
		t.Fatalf("the cluster's own config of rev %v, newer than the one held (%v), offered: %v; want OfferNewer (rev %v was another cluster's config refused)",
			v, held.Version(), got, bv)
	}
	awaitTopology(t, c, "the cluster's own config", func(top *Topology) bool { return top.Config().Version() == v })
}

// A cluster mid-upgrade to 7.6.4: its older nodes serve configs without
// clusterUUID, the newer ones with it. Once a config without it was
// installed, the cluster's uuid was forgotten: a config of another cluster
// (a node's address given to another cluster's node) was then installed
// as the bucket made again, and a connection to such a node used as the
// node's. The cluster's uuid, once a config named it, is kept.
func TestConfigOfAnotherClusterRefusedAfterAConfigNamingNoCluster(t *testing.T) {
	a := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	cfg := testConfig(a)
	refused := foreignLines(&cfg)
	c := connectCluster(t, cfg)
	uuid := c.Topology().Config().ClusterUUID()
	require.NotEmpty(t, uuid)

	ab := a.Bucket(mockcluster.DefaultBucket)
	_, err := ab.AddScope("a0")
	require.NoError(t, err)
	older := bytes.Replace(ab.ConfigJSON(0), []byte(`"clusterUUID":"`+uuid+`"`), []byte(`"clusterUUID":""`), 1)
	require.NotContains(t, string(older), uuid)
	require.Equal(t, OfferNewer, c.Offer(older, "127.0.0.1", "an older node"))
	held := awaitTopology(t, c, "the config naming no cluster", func(top *Topology) bool {
		return top.Config().Version().Rev == uint64(ab.Rev())
	}).Config()

	_, bb := anotherCluster(t, int64(held.Version().Rev))
	top := c.Topology()
	require.Equal(t, OfferNewer, c.Offer(bb.ConfigJSON(0), "127.0.0.1", "test"))
	// A new topology of the held config (the node's pool changing) is no
	// install: only one of another config is.
	timeout := time.After(time.Minute)
	for judged := false; !judged; {
		select {
		case line := <-refused:
			t.Logf("logged: %s", line)
			judged = true
		case <-top.Changed():
			top = c.Topology()
			if got := top.Config(); got != held {
				t.Fatalf("the config of another cluster (uuid %s, rev %v) was installed in place of the cluster's (uuid %s), held then by a config naming none",
					got.ClusterUUID(), got.Version(), uuid)
			}
		case <-timeout:
			t.Fatal("the other cluster's config was not judged within a minute")
		}
	}
	require.Same(t, held, c.Topology().Config())
}

// While the loop parses another cluster's config (refused once read), the
// cluster's own config is offered: of the same revision, or older than
// that one and newer than the config held. It is installed once the other
// cluster's config is refused. It was taken for the config being parsed
// (its revision not newer) and dropped: the client routed by the stale
// map until a poll or push offered the config again (seconds during a
// recovery; with polls an hour apart, never).
func TestOwnConfigOfferedWhileAnotherClustersIsParsedIsInstalled(t *testing.T) {
	for name, ahead := range map[string]int64{"same revision": 0, "older revision": 3} {
		t.Run(name, func(t *testing.T) {
			a := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
			cfg := testConfig(a)
			g := gateParses(&cfg)
			c := connectCluster(t, cfg)
			held := c.Topology().Config()

			ab := a.Bucket(mockcluster.DefaultBucket)
			for i := 0; uint64(ab.Rev()) <= held.Version().Rev; i++ {
				_, err := ab.AddScope(fmt.Sprint("a", i))
				require.NoError(t, err)
			}
			own := ab.ConfigJSON(0)
			v, ok := vbmap.PeekVersion(own)
			require.True(t, ok)

			_, bb := anotherCluster(t, ab.Rev()+ahead-1)
			foreign := bb.ConfigJSON(0)
			bv, ok := vbmap.PeekVersion(foreign)
			require.True(t, ok)
			require.False(t, v.Newer(bv))

			g.armed.Store(true)
			require.Equal(t, OfferNewer, c.Offer(foreign, "127.0.0.1", "test"))
			<-g.parsing // the loop holds the other cluster's config
			g.armed.Store(false)
			before := g.parses.Load()
			// The same bytes again: on their way, not parsed again.
			require.Equal(t, OfferNewer, c.Offer(foreign, "127.0.0.1", "test"))
			require.Equal(t, OfferNewer, c.Offer(own, "127.0.0.1", "test"))
			close(g.release)
			awaitTopology(t, c, "the cluster's own config", func(top *Topology) bool { return top.Config().Version() == v })
			require.Equal(t, held.ClusterUUID(), c.Topology().Config().ClusterUUID())
			assert.Equal(t, before+1, g.parses.Load(), "parses after the other cluster's config: the cluster's own config alone")
		})
	}
}

// Configs of the version being parsed, from other nodes (bytes that
// differ: thisNode), offered while it is parsed, wait behind it in case it
// is refused; once it is installed they are stale, offered again or not,
// and cost no parse.
func TestConfigOfTheVersionBeingParsedIsNotParsedAgain(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	cfg := testConfig(mc)
	var armed atomic.Bool
	var parses atomic.Int32
	parsing, release := make(chan struct{}, 4), make(chan struct{})
	cfg.BeforeParse = func() {
		parses.Add(1)
		if armed.Load() {
			parsing <- struct{}{}
			<-release
		}
	}
	c := connectCluster(t, cfg)
	b := mc.Bucket(mockcluster.DefaultBucket)
	_, err := b.AddScope("s")
	require.NoError(t, err)
	first, second := b.ConfigJSON(0), b.ConfigJSON(1)
	require.NotEqual(t, first, second)
	v, _ := vbmap.PeekVersion(first)

	armed.Store(true)
	require.Equal(t, OfferNewer, c.Offer(first, "127.0.0.1", "test"))
	<-parsing
	armed.Store(false)
	before := parses.Load()
	require.Equal(t, OfferNewer, c.Offer(second, "127.0.0.1", "test"))
	require.Equal(t, OfferNewer, c.Offer(b.ConfigJSON(2), "127.0.0.1", "test"))
	close(release)
	awaitTopology(t, c, "the newer config", func(top *Topology) bool { return top.Config().Version() == v })
	require.Equal(t, OfferStale, c.Offer(second, "127.0.0.1", "test"))
	assert.Equal(t, before, parses.Load(), "parses of the version's other configs")
}

// Vetting a new connection (is its config another cluster's? another
// bucket uuid's?) reads two uuids: it does not parse the config, which
// with 1024 vbuckets costs thousands of allocations, on every dial, a
// redial of a node that now answers for another cluster among them. It
// parsed it.
func TestVettingAConnectionDoesNotParseItsConfig(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	c := connectCluster(t, testConfig(mc))
	n := c.Topology().Nodes()[0]
	awaitTopology(t, c, "a node with a connection", func(*Topology) bool { return len(n.Conns()) > 0 })
	cn := n.Conns()[0]
	require.NotEmpty(t, cn.ClusterConfig(), "the connection's bootstrap config")
	var err error
	allocs := testing.AllocsPerRun(20, func() { err = n.vet(cn) })
	require.NoError(t, err)
	assert.LessOrEqual(t, allocs, 4.0, "allocations to vet a connection")
}

// A config the loop has just installed, offered again (the same bytes: a
// NOT_MY_VBUCKET body of the node that served it) before the loop has
// marked its parse done, is stale: an operation routed by it that met it
// asks the node for its config (NMVWait) rather than waiting up to
// retry.MaxAwaitWake for a newer config that nothing is bringing
// (NMVAwaitConfig). It was taken for the config being parsed
// (OfferNewer). The window (held open here by the install's log line) is
// the rest of the install and the loop's bookkeeping after it.
func TestConfigJustInstalledIsStaleBeforeItsParseIsMarkedDone(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	cfg := testConfig(mc)
	var armed atomic.Bool
	installing, held := make(chan struct{}, 1), make(chan struct{})
	release := sync.OnceFunc(func() { close(held) })
	cfg.Logger = slog.New(logHook(func(line string) {
		if armed.Load() && strings.HasPrefix(line, "kvwire: config updated") {
			armed.Store(false)
			installing <- struct{}{}
			<-held
		}
	}))
	c := connectCluster(t, cfg)
	t.Cleanup(release) // before the cluster's Close (cleanups run last first)
	b := mc.Bucket(mockcluster.DefaultBucket)
	_, err := b.AddScope("s")
	require.NoError(t, err)
	raw := b.ConfigJSON(0)
	v, ok := vbmap.PeekVersion(raw)
	require.True(t, ok)

	armed.Store(true)
	require.Equal(t, OfferNewer, c.Offer(raw, "127.0.0.1", "test"))
	select {
	case <-installing: // installed, the loop not yet past it
	case <-time.After(time.Minute):
		t.Fatal("the config was not installed within a minute")
	}
	installed := c.Topology().Config().Version()
	res, recognised := c.Recognise(raw, "127.0.0.1", "test")
	release()
	require.Equal(t, v, installed)
	require.True(t, recognised, "the config the loop took last is recognised")
	assert.Equal(t, OfferStale, res, "the config installed, offered again")
}

// The cluster's own config waits in the mailbox (newer than the one held,
// while the loop parses another) when another cluster's config of a newer
// revision is offered, or is offered while that one waits: it took the own
// config's place (or the own config was taken for on its way, not being
// newer), was refused once parsed, and the own config was gone: the
// client routed by the stale map until a poll or push offered it again.
// The own config waits behind the newer one and is installed once that
// one is refused.
func TestOwnConfigWaitingBesideAnotherClustersNewerIsInstalled(t *testing.T) {
	for name, ownFirst := range map[string]bool{"own offered first": true, "own offered second": false} {
		t.Run(name, func(t *testing.T) {
			a := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
			cfg := testConfig(a)
			g := gateParses(&cfg)
			c := connectCluster(t, cfg)
			held := c.Topology().Config()

			ab := a.Bucket(mockcluster.DefaultBucket)
			next := nextConfig(t, ab)
			first, own := next(), next()
			v, ok := vbmap.PeekVersion(own)
			require.True(t, ok)
			require.True(t, v.Newer(held.Version()))

			_, bb := anotherCluster(t, ab.Rev())
			foreign := bb.ConfigJSON(0)

			g.armed.Store(true)
			require.Equal(t, OfferNewer, c.Offer(first, "127.0.0.1", "test"))
			<-g.parsing // the loop holds the cluster's first config
			g.armed.Store(false)
			offers := [][]byte{own, foreign}
			if !ownFirst {
				offers = [][]byte{foreign, own}
			}
			for _, raw := range offers {
				require.Equal(t, OfferNewer, c.Offer(raw, "127.0.0.1", "test"))
			}
			close(g.release)
			// The loop installs the first config, then parses and
			// refuses the other cluster's; it is idle once nothing
			// waits or is parsed.
			awaitLoopIdle(t, c)
			if got := c.Topology().Config(); got.Version() != v {
				t.Fatalf("holding rev %v once the other cluster's config was refused, want the cluster's own rev %v, offered beside it",
					got.Version(), v)
			}
			require.Equal(t, held.ClusterUUID(), c.Topology().Config().ClusterUUID())
		})
	}
}

// While the loop parses another cluster's config, the cluster's own newer
// config waits behind it (it took that one's place in the mailbox) and an
// older own config, still newer than the one held, is offered. Once the
// other cluster's config is refused, the newer own config is installed.
// The older one took the empty mailbox slot, was installed in its place,
// and the newer one was left behind it for good: the client routed by the
// older map (until a poll or push offered the newer again), and the slot
// held its bytes.
func TestOwnConfigWaitingBehindIsNotOvertakenByAnOlderOne(t *testing.T) {
	a := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	cfg := testConfig(a)
	g := gateParses(&cfg)
	c := connectCluster(t, cfg)
	held := c.Topology().Config()

	ab := a.Bucket(mockcluster.DefaultBucket)
	next := nextConfig(t, ab)
	first, older, newer := next(), next(), next()
	v, ok := vbmap.PeekVersion(newer)
	require.True(t, ok)

	_, bb := anotherCluster(t, ab.Rev())
	foreign := bb.ConfigJSON(0)

	g.armed.Store(true)
	require.Equal(t, OfferNewer, c.Offer(first, "127.0.0.1", "test"))
	<-g.parsing // the loop holds the cluster's first config
	require.Equal(t, OfferNewer, c.Offer(newer, "127.0.0.1", "test"))
	require.Equal(t, OfferNewer, c.Offer(foreign, "127.0.0.1", "test")) // newer waits behind it
	g.release <- struct{}{}
	<-g.parsing // the first installed, the loop holds the other cluster's config
	g.armed.Store(false)
	require.Equal(t, OfferNewer, c.Offer(older, "127.0.0.1", "test"))
	close(g.release)
	awaitLoopIdle(t, c)
	if got := c.Topology().Config(); got.Version() != v {
		t.Fatalf("holding rev %v once the other cluster's config was refused, want the cluster's newer rev %v",
			got.Version(), v)
	}
	require.Equal(t, held.ClusterUUID(), c.Topology().Config().ClusterUUID())
	c.intake.mu.Lock()
	defer c.intake.mu.Unlock()
	assert.Zero(t, len(c.intake.behind), "bytes of a config kept behind once the loop is idle")
}

// The cluster's own config waits behind another cluster's newer one, and
// a config of the cluster whose revision PeekVersion cannot read, newer
// than the own one waiting, is installed in the same round in which the
// other cluster's is refused. The one waiting behind is then stale: it is
// dropped, not kept (its bytes held, and said to be on its way) until
// some later install.
func TestStaleConfigBehindARefusedOneIsDropped(t *testing.T) {
	a := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	cfg := testConfig(a)
	g := gateParses(&cfg)
	c := connectCluster(t, cfg)

	ab := a.Bucket(mockcluster.DefaultBucket)
	next := nextConfig(t, ab)
	first, own, newest := next(), next(), next()
	v, ok := vbmap.PeekVersion(newest)
	require.True(t, ok)
	rev := fmt.Appendf(nil, `"rev":%d`, v.Rev)
	require.Contains(t, string(newest), string(rev))
	unreadable := bytes.Replace(newest, rev, fmt.Appendf(nil, `"\u0072ev":%d`, v.Rev), 1)
	_, peeked := vbmap.PeekVersion(unreadable)
	require.False(t, peeked)

	_, bb := anotherCluster(t, ab.Rev())
	foreign := bb.ConfigJSON(0)

	g.armed.Store(true)
	require.Equal(t, OfferNewer, c.Offer(first, "127.0.0.1", "test"))
	<-g.parsing // the loop holds the cluster's first config
	g.armed.Store(false)
	require.Equal(t, OfferNewer, c.Offer(own, "127.0.0.1", "test"))
	require.Equal(t, OfferNewer, c.Offer(foreign, "127.0.0.1", "test")) // own waits behind it
	require.Equal(t, OfferNewer, c.Offer(unreadable, "127.0.0.1", "test"))
	close(g.release)
	awaitLoopIdle(t, c)
	require.Equal(t, v, c.Topology().Config().Version(), "the config whose revision could not be peeked")
	c.intake.mu.Lock()
	defer c.intake.mu.Unlock()
	assert.Zero(t, len(c.intake.behind), "bytes of a stale config kept behind once the loop is idle")
}

// A config waiting behind the one being parsed (here another cluster's,
// refused), offered again (the same NOT_MY_VBUCKET body, answer after
// answer), is on its way: it is not copied into the mailbox a second
// time, and so parsed once, not once from each slot.
func TestConfigWaitingBehindOfferedAgainIsParsedOnce(t *testing.T) {
	a := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	cfg := testConfig(a)
	g := gateParses(&cfg)
	c := connectCluster(t, cfg)
	ab := a.Bucket(mockcluster.DefaultBucket)
	_, err := ab.AddScope("a")
	require.NoError(t, err)
	first := ab.ConfigJSON(0)

	_, bb := anotherCluster(t, ab.Rev())
	waiting := bb.ConfigJSON(0)
	_, err = bb.AddScope("newer")
	require.NoError(t, err)
	newer := bb.ConfigJSON(0)

	g.armed.Store(true)
	require.Equal(t, OfferNewer, c.Offer(first, "127.0.0.1", "test"))
	<-g.parsing // the loop holds the cluster's first config
	require.Equal(t, OfferNewer, c.Offer(waiting, "127.0.0.1", "test"))
	require.Equal(t, OfferNewer, c.Offer(newer, "127.0.0.1", "test")) // waiting goes behind it
	g.release <- struct{}{}
	<-g.parsing // the first installed, the loop holds newer
	g.armed.Store(false)
	before := g.parses.Load()
	require.Equal(t, OfferNewer, c.Offer(waiting, "127.0.0.1", "test"))
	close(g.release)
	require.Eventually(t, func() bool {
		c.intake.mu.Lock()
		defer c.intake.mu.Unlock()
		return !c.intake.parsingSet && c.intake.raw == nil && c.intake.odd == nil && c.intake.behind == nil
	}, time.Minute, time.Millisecond, "the loop never went idle")
	assert.Equal(t, before+1, g.parses.Load(), "parses once newer was refused: the config behind it, once")
}
