// Package cluster owns what a client knows of the cluster it talks to: the
// seeds and the bootstrap, the topology (the config in use and the node
// behind each of its server indexes), each node's connection pool, the
// intake of configs from every source, the fetches and recovery rounds that
// keep the config current, and the collection-id cache. It answers the
// request engine's one question, "where does this go", and hears back what
// the nodes said about it (NOT_MY_VBUCKET, a node that could not be
// reached), through a narrow API:
//
//	cl, err := cluster.Connect(ctx, cfg)     // bootstrap from the seeds
//	r, reason, err := cl.Route(&rs, &target) // by key, vbucket or node
//	cn, reason, err := r.Node.Pick()         // a live connection
//	out := cl.NotMyVbucket(r, nmv, &rs, &target) // moved, await a config, or wait
//	cl.NodeUnavailable()
//	<-r.Topo.Wake(reason)                    // ends a retry wait
//
// Routing is a pure function of an immutable Topology snapshot, taken with
// no lock. Configs arrive from the bootstrap, each new connection, push
// notifications, NOT_MY_VBUCKET bodies, polls, fetches, recovery rounds and
// any other ConfigSource (the cluster manager's HTTP streaming, say); every
// one goes through the same intake (intake.go), judged by the same revision
// rules, and is parsed at most once per version, off the operations'
// goroutines.
package cluster

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/lifecycle"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// Config is what a Cluster needs from the client that owns it.
type Config struct {
	// Seeds are the connection string's hosts ("host:port").
	Seeds []string
	// Memcached: the seeds are plain memcached servers (memcached://),
	// routed by a ketama ring over them; there are no cluster configs.
	Memcached bool
	// TLS: the connections use TLS, and so the configs' TLS ports.
	TLS bool
	// Bucket is the bucket whose configs are taken (none for Memcached).
	Bucket string
	// Network chooses the configs' addresses: "auto" picks by the seed
	// that served the first config (vbmap.Config.DetectNetwork).
	Network string
	// ConnectTimeout bounds Connect, and each dial.
	ConnectTimeout time.Duration
	// KVTimeout bounds a config fetch; with the longest operation timeout
	// seen (NoteTimeout), it bounds how long a leaving node drains.
	KVTimeout time.Duration
	// PollInterval is how often a node is asked for its config.
	PollInterval time.Duration
	// StrandGrace: a node of the config still in its first dial this long
	// after it was made counts as unreachable when the cluster looks for
	// a reachable node (the connections' probe timeout).
	StrandGrace time.Duration
	// ConnectionsPerNode is the size of each node's pool.
	ConnectionsPerNode int
	// Conn are the options of every connection; the cluster adds the
	// per-node callbacks (OnClose, OnClustermapNotification).
	Conn conn.Options
	// RemoveFailedServers and ServerFailureLimit: memcached:// takes a
	// server out of the ketama ring after that many failed dials in a row
	// (MemcachedOptions).
	RemoveFailedServers bool
	ServerFailureLimit  int
	// Clock times the polls, fetch spacing, recovery rounds, redial
	// back-off, the text path's back-off, a caller's wait for a
	// collection-id lookup another caller runs and the bound on a leaving
	// node's drain.
	Clock  retry.Clock
	Logger *slog.Logger
	// NodeError builds the error that says node addr has no connection to
	// carry a request (err: why its last dial failed; when none has
	// since, why it waits before redialing or why its last connection
	// ended, said in the message only, as no connection carried the
	// request; nil: still making its first connection): the client's
	// public *NodeError. It must match kverr.ErrNoNodeAvailable and
	// unwrap to err.
	NodeError func(addr string, err error) error
	// Resolver, when set, turns the seeds into the addresses dialed (DNS
	// SRV, SDK RFC 0011) before Connect dials them, within ConnectTimeout.
	Resolver SeedResolver
	// Sources are config sources besides the KV connections' own (the
	// cluster manager over HTTP), started once Connect has a topology and
	// run until Close; a FirstConfigSource among them is run only when
	// the bootstrap config came from it, or with NoKVConfigs.
	Sources []ConfigSource
	// NoKVConfigs: configs come from Sources only (bootstrap_on=http): the
	// seeds' KV service is not asked for one, and neither are the nodes
	// afterwards (no poll, fetch or recovery round). Configs the nodes send
	// unasked (in NOT_MY_VBUCKET bodies and notifications) are still
	// taken. The config a node's connection fetches at bootstrap (unless
	// dialed with Conn.NoClusterConfig) is not offered: it only vets the
	// connection (Node.vet: a node of another cluster at the node's
	// address is not used).
	NoKVConfigs bool
	// BeforeParse, when set (tests), runs on the config loop before each
	// config it parses.
	BeforeParse func()
}

// SeedResolver turns the connection string's hosts into the addresses to
// dial: a DNS SRV lookup of a single host, say. It runs once, in Connect;
// one that is also a SeedRefresher is asked again while no node of the
// config can be reached (seedrefresh.go).
type SeedResolver interface {
	Resolve(ctx context.Context, seeds []string) ([]string, error)
}

// ConfigSource is a source of cluster configs besides the KV connections'
// own (GET_CLUSTER_CONFIG, notifications, NOT_MY_VBUCKET bodies): the
// cluster manager's streaming REST config, say. Run offers every config it
// receives to sink, which judges it by the same revision rules as any
// other, until ctx ends (Close). A source that can also serve a seed's
// first config, when the seed's KV connection served none, implements
// FirstConfigSource.
type ConfigSource interface {
	Run(ctx context.Context, sink Sink)
}

// FirstConfigSource is a ConfigSource that serves a bootstrap config:
// Connect asks it for one when no seed's KV service served one (or with
// NoKVConfigs), within what is left of ConnectTimeout. seeds are the KV
// seeds (resolved), from which it may find its own. A config it serves
// makes it the cluster's config source for the session: it is run, and
// the nodes' KV service is no longer asked for configs.
//
// CanServe reports whether it has anywhere to ask for a config, given the
// KV seeds: a source that has not is not asked (nor does it take half of
// ConnectTimeout from the KV seeds), unless with NoKVConfigs, where its
// error says what is missing.
type FirstConfigSource interface {
	ConfigSource
	FirstConfig(ctx context.Context, seeds []string) (SourcedConfig, error)
	CanServe(seeds []string) bool
}

// SourcedConfig is a config a source served: Raw, what $HOST in it stands
// for (Host), and the address it came from (From).
type SourcedConfig struct {
	Raw        []byte
	Host, From string
}

// Sink is what a ConfigSource feeds: the cluster's config intake, and the
// topology in use and its network (where to stream from). OtherCluster
// tells a config of another cluster (Cluster.OtherCluster): a source
// reading from a node that serves such configs is to move to another.
//
// ConfigWanted (Cluster.ConfigWanted) receives when a node said the held
// config is out of date without sending a newer one, or a node's KV
// connection was lost (it may have left the cluster): a source that waits
// before reading again (the HTTP stream's back-off) is to read at once.
//
// OnItsWay (Cluster.OnItsWay) tells whether a config offered as newer
// (OfferNewer) may still be installed: once it is false, the config was
// installed (Topology holds it, read after OnItsWay) or refused.
//
// SourceUnreachable (Cluster.SourceUnreachable) is told when the source
// could read from none of its nodes: the seeds of a DNS SRV record are
// looked up again, and SeedsLookedUp (Cluster.SeedsLookedUp) gives their
// KV addresses, for the source to read from too until a newer config is
// installed (a source may stop sooner: the HTTP stream, once a node of the
// config serves it again); LookedUpForeign (Cluster.LookedUpForeign) tells
// a config such an address serves that is of another bucket of the same
// name, which the source is to pass over as another cluster's.
type Sink interface {
	Offer(raw []byte, host, source string) Offer
	OtherCluster(raw []byte, host string) error
	Topology() *Topology
	Network() string
	ConfigWanted() <-chan struct{}
	OnItsWay(v vbmap.Version) bool
	SourceUnreachable()
	SeedsLookedUp() []string
	LookedUpForeign(raw []byte, addr string) error
}

// Cluster is the state of one client's cluster. Its methods are safe for
// concurrent use.
type Cluster struct {
	cfg   Config
	seeds []string // the addresses dialed (cfg.Seeds, resolved)

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// topo is the routing snapshot, replaced whole under mu.
	topo atomic.Pointer[Topology]
	// clusterUUID is the cluster uuid the last config installed that
	// named one named (nil: none did; clusterUUIDHeld), stored under mu.
	// A config naming none (a node older than 7.6.4, mid-upgrade) does not
	// make it forgotten.
	clusterUUID atomic.Pointer[string]
	mu          sync.Mutex
	// nodes by address, ring (memcached:// only) and known (the seeds,
	// then every node a config named, at most maxKnownAddrs: where
	// recovery asks) are guarded by mu.
	nodes map[string]*Node
	ring  *ring
	known []string
	// looked: the addresses of known that a lookup of the seeds again
	// gave and no config installed has named since (seedrefresh.go): a
	// config one serves is used only when of the bucket uuid held.
	looked  map[string]bool
	network string // resolved at bootstrap
	// kvConfigs: the nodes' KV service is asked for configs (polls,
	// fetches, recovery rounds): not with NoKVConfigs, nor once a
	// FirstConfigSource served the bootstrap config. Set at bootstrap,
	// once a seed's KV service served the config.
	kvConfigs atomic.Bool
	// wanted: while kvConfigs is false, a node said the held config is
	// out of date without sending a newer one (ConfigWanted).
	wanted chan struct{}
	// source is the FirstConfigSource that served the bootstrap config
	// (nil: a seed's KV service did).
	source FirstConfigSource

	intake      intake
	unreachable chan struct{} // capacity 1: an operation found its node unavailable
	fetchMu     sync.Mutex
	fetches     map[*Node]*fetchState // guarded by fetchMu
	recovery    recoveryState         // guarded by fetchMu
	refresh     seedRefresh           // guarded by fetchMu (but src and name, set at bootstrap)
	fetchClosed bool                  // Close has begun; guarded by fetchMu

	colls CollectionIDs
	// health signals each change of an endpoint's state (health.go).
	health healthSignal
	// leaving are the nodes that left the config and whose maintainers
	// have not exited yet: their connections drain (health.go).
	leaving leavingNodes
	// parses counts the configs parsed after bootstrap.
	parses atomic.Int64
	// longestTimeout is the longest operation timeout seen (ns).
	longestTimeout atomic.Int64

	closeOnce sync.Once
}

// Connect bootstraps: it resolves and dials the seeds until one serves a
// config (Couchbase), or connects to the servers (memcached://), and
// returns once the first topology's nodes have been dialed once. A failure
// is a *BootstrapError with every seed's error, or an error matching
// kverr.ErrInvalidArgument for seeds that cannot form a ring.
func Connect(ctx context.Context, cfg Config) (*Cluster, error) {
	c := &Cluster{
		cfg:         cfg,
		seeds:       cfg.Seeds,
		nodes:       map[string]*Node{},
		unreachable: make(chan struct{}, 1),
		fetches:     map[*Node]*fetchState{},
		wanted:      make(chan struct{}, 1),
	}
	c.intake.ready = make(chan struct{}, 1)
	c.colls.ids, c.colls.clock, c.colls.pick = map[string]cachedID{}, cfg.Clock, c.lookupConn
	c.ctx, c.cancel = context.WithCancel(context.Background())
	var err error
	returned := false
	defer func() {
		if !returned {
			// The caller's code the bootstrap runs (a Resolver, a TLS
			// callback, a Logger) panicked, maybe holding mu: the
			// nodes' maintainers are told to close their connections
			// and exit, without waiting for them (Close might wait for
			// mu forever).
			c.cancel()
		}
	}()
	if cfg.Memcached {
		err = c.bootstrapMemcached(ctx)
	} else {
		err = c.bootstrapCouchbase(ctx)
	}
	returned = true
	if err != nil {
		c.Close()
		return nil, err
	}
	if !cfg.Memcached {
		c.wg.Add(1)
		lifecycle.Go(c.configLoop)
		for _, src := range cfg.Sources {
			if fs, ok := src.(FirstConfigSource); ok && fs != c.source && !cfg.NoKVConfigs {
				continue // the KV service serves the configs
			}
			c.wg.Add(1)
			lifecycle.Go(func() {
				defer c.wg.Done()
				src.Run(c.ctx, c)
			})
		}
	}
	return c, nil
}

// Close closes every connection and stops every goroutine the cluster
// started. Retry waits routed with the current topology end at once (its
// Wake channels close), and so do those begun after. Safe to call more
// than once.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.cancel()
		if cur := c.topo.Load(); cur != nil && cur.changed != nil {
			close(c.renewLocked(cur).changed)
		}
		c.mu.Unlock()
		c.health.notify()
		c.fetchMu.Lock()
		c.fetchClosed = true // no fetcher or recovery starts after wg.Wait begins
		c.fetchMu.Unlock()
		c.wg.Wait()
		c.mu.Lock()
		for _, n := range c.nodes {
			n.closeAll()
		}
		c.mu.Unlock()
	})
}

// Cancel ends the cluster's context, as Close does first, and returns at
// once: for a Close that cannot wait (one called on a goroutine of the
// cluster's own), before the rest of Close runs on another goroutine. It
// takes no lock: the caller may hold any.
func (c *Cluster) Cancel() { c.cancel() }

// Context is ended by Close.
func (c *Cluster) Context() context.Context { return c.ctx }

// Topology is the routing snapshot in use (nil only before Connect
// returned).
func (c *Cluster) Topology() *Topology { return c.topo.Load() }

// Network is the configs' network in use ("default", "external", ...).
func (c *Cluster) Network() string { return c.network }

// ConfigWanted receives (one value for any number of causes until it is
// received) when the configs come from a source (the nodes' KV service is
// not asked) and a node said the held config is out of date without
// sending a newer one: a NOT_MY_VBUCKET with no newer config, or a brief
// cluster-map notification of a newer version, where the KV service would
// have been asked for the config. kv_engine leaves the config out of a
// connection's NOT_MY_VBUCKET answers once it pushed (or announced) that
// version on it (DedupeNotMyVbucketClustermap), so the source is then the
// only way to it: one that waits before reading again (the HTTP stream
// after streams that ended at once) is to read now. It receives too when
// a node's last KV connection ended or a dial of it failed (the node may
// have left, and the requests routed to it meet connection errors, not
// NOT_MY_VBUCKET): once until the node connects again, at most once per
// ReconnectMax for one node (nodeLost).
func (c *Cluster) ConfigWanted() <-chan struct{} { return c.wanted }

// wantConfig signals ConfigWanted.
func (c *Cluster) wantConfig() {
	select {
	case c.wanted <- struct{}{}:
	default:
	}
}

// Collections is the collection-id cache.
func (c *Cluster) Collections() *CollectionIDs { return &c.colls }

// ConfigParses is how many configs were parsed after the bootstrap one.
func (c *Cluster) ConfigParses() int64 { return c.parses.Load() }

// NoteTimeout tells the cluster an operation timeout in use: a node that
// leaves drains its connections for at least the longest one.
func (c *Cluster) NoteTimeout(d time.Duration) {
	for {
		cur := c.longestTimeout.Load()
		if int64(d) <= cur || c.longestTimeout.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// LongestTimeout is the longest operation timeout NoteTimeout was told.
func (c *Cluster) LongestTimeout() time.Duration { return time.Duration(c.longestTimeout.Load()) }

// nodeError is Config.NodeError's error for n.
func (c *Cluster) nodeError(addr string, err error) error { return c.cfg.NodeError(addr, err) }

// connOptions are the options of a connection to n; with n nil, of a short
// connection that only reads the config (recovery): no callbacks.
func (c *Cluster) connOptions(n *Node) conn.Options {
	o := c.cfg.Conn
	if n == nil {
		return o
	}
	o.OnClose = n.connEnded
	if !c.cfg.Memcached {
		o.OnClustermapNotification = func(nt memdx.ClustermapNotification) { c.onNotification(n, nt) }
	}
	return o
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

// Node is the node of addr the cluster keeps (in its topology, or still
// draining), nil if none.
func (c *Cluster) Node(addr string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[addr]
}
