package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// Client is a connection to one Couchbase bucket, or to a set of plain
// memcached servers. It is safe for concurrent use; operations run on the
// caller's goroutine (no goroutine per operation). Close releases
// everything.
type Client struct {
	opts      Options
	cs        *ConnStr
	memcached bool
	tls       bool

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	orch  retry.Orchestrator
	clock retry.Clock // Options.Clock: deadlines, retry waits, redial waits, config polls, fetch spacing, recovery rounds, log rate limits
	// strategy runs opts.RetryStrategy for operations that set none.
	strategy retry.Strategy

	// topo is the routing snapshot: a config and the node behind each of
	// its server indexes. Replaced whole (under topoMu), read without locks.
	topo   atomic.Pointer[topology]
	topoMu sync.Mutex
	nodes  map[string]*node // by address; guarded by topoMu
	// ring is the memcached:// servers' ketama state (nil otherwise);
	// guarded by topoMu.
	ring *memcachedRing

	// known lists the seeds, then every node address a config has named
	// (at most maxKnownAddrs): where recovery asks for a config. Guarded
	// by topoMu.
	known []string

	network       string // resolved network for alternate addresses
	bootstrapHost string

	// Config intake (config.go): the mailbox of the newest config met, the
	// per-node fetchers and the recovery round.
	intake      configIntake
	unreachable chan struct{} // capacity 1: an operation found its node unavailable
	fetchMu     sync.Mutex
	fetches     map[*node]*fetchState // guarded by fetchMu
	recovery    recoveryState         // guarded by fetchMu
	fetchClosed bool                  // Close has begun; guarded by fetchMu

	colls collectionCache
	opIDs atomic.Uint64
	// configParses counts the configs parsed after bootstrap (tests check
	// that each version is parsed once).
	configParses atomic.Int64
	// longestTimeout is the longest operation timeout used so far (ns): a
	// node that leaves drains its connections for at least that long.
	longestTimeout atomic.Int64

	closeOnce sync.Once
}

// topology is an immutable routing snapshot.
type topology struct {
	cfg     *vbmap.Config // nil in memcached mode
	ketama  *vbmap.Ketama // memcached mode, or a memcached bucket
	servers []*node       // by server index; nil where the index has no address
	all     []*node       // distinct nodes
	// changed is closed when a newer topology replaces this one: retry
	// waits of operations routed with this one end on it (wakeFor).
	changed chan struct{}
}

// Connect parses the connection string, bootstraps against the first seed
// that answers, and returns a Client ready for operations. It returns at
// once (not after a timeout) when the server refuses the credentials
// (ErrAuthenticationFailure) or the bucket (ErrBucketNotFound). opts may be
// nil.
//
//	c, err := client.Connect(ctx, "couchbase://10.0.0.1,10.0.0.2/travel-sample",
//		&client.Options{Username: "app", Password: os.Getenv("CB_PASSWORD")})
//	if err != nil {
//		return err
//	}
//	defer c.Close()
func Connect(ctx context.Context, connStr string, opts *Options) (*Client, error) {
	cs, err := ParseConnStr(connStr)
	if err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o, err = o.resolved(cs)
	if err != nil {
		return nil, err
	}
	c := &Client{
		opts:        o,
		cs:          cs,
		memcached:   cs.Scheme.IsMemcached(),
		tls:         cs.Scheme.IsTLS(), // resolved refused TLS settings elsewhere
		nodes:       map[string]*node{},
		known:       append([]string(nil), cs.Hosts...),
		unreachable: make(chan struct{}, 1),
		fetches:     map[*node]*fetchState{},
		clock:       clockFor(o.Clock),
		strategy:    internalStrategy(o.RetryStrategy, nil),
	}
	c.intake.ready = make(chan struct{}, 1)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	// A nil Clock keeps the orchestrator on its real-clock path, which
	// reuses one timer per operation.
	var orchClock retry.Clock
	if o.Clock != nil {
		orchClock = c.clock
	}
	c.orch = retry.Orchestrator{Clock: orchClock, Logger: o.Logger, NMVInterval: o.NMVRetryInterval}
	c.colls.init()
	if c.memcached {
		err = c.bootstrapMemcached(ctx)
	} else {
		err = c.bootstrapCouchbase(ctx)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	if !c.memcached {
		c.wg.Add(1)
		go c.configLoop()
	}
	return c, nil
}

// Bounds of the wait between two rounds of seed dials (dialRounds):
// doubling from seedRetryMin to seedRetryMax.
const (
	seedRetryMin = 10 * time.Millisecond
	seedRetryMax = 500 * time.Millisecond
)

// dialRounds runs Connect's dials of the n hosts of the connection string,
// in rounds, until ctx (which ends at ConnectTimeout) ends. dial dials host
// i with a context bounded by that dial's share of the time left: an equal
// share of what ctx has left for the hosts the round has still to dial, so
// that a host whose dial hangs (its packets dropped) leaves time for the
// next. dial reports whether the bootstrap is over (stop) and, when it is
// not, whether host i is to be dialed again in the next round. After a
// round, enough (nil: never) says whether the bootstrap is over; if not,
// the hosts to dial again are, after a wait of seedRetryMin doubling to
// seedRetryMax. It returns when there is nothing left to dial.
func dialRounds(ctx context.Context, n int, dial func(ctx context.Context, i int) (stop, again bool), enough func() bool) {
	redial := make([]bool, n)
	for i := range redial {
		redial[i] = true
	}
	wait := seedRetryMin
	for round := 0; ; round++ {
		var left []int
		for i, again := range redial {
			if again {
				left = append(left, i)
			}
		}
		if len(left) == 0 {
			return
		}
		if round > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			wait = min(2*wait, seedRetryMax)
		}
		for j, i := range left {
			dctx, dcancel := ctx, context.CancelFunc(func() {})
			if dl, ok := ctx.Deadline(); ok {
				dctx, dcancel = context.WithTimeout(ctx, time.Until(dl)/time.Duration(len(left)-j))
			}
			stop, again := dial(dctx, i)
			dcancel()
			if stop {
				return
			}
			redial[i] = again
			if ctx.Err() != nil {
				return
			}
		}
		if enough != nil && enough() {
			return
		}
	}
}

// redialable reports whether a host whose dial failed with err is worth
// dialing again within ConnectTimeout: it did not answer in time (it
// accepted the connection and then sent nothing for
// HealthCheck.ProbeTimeout, or the dial's share of the time ran out), as a
// paused or overloaded node does. Anything else is an answer that another
// dial would likely meet again (a refused connection, an unknown host, a
// hang-up, refused TLS, credentials or bucket), and Connect fails as soon
// as no host is left to dial.
func redialable(err error) bool {
	if errors.Is(err, ErrUnresponsive) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bootstrapCouchbase dials seeds in order until one bootstraps and serves a
// config, then builds the first topology around it. A round that finds no
// seed is followed by another (dialRounds) until ConnectTimeout (from the
// start of Connect) or ctx ends: a seed that accepts connections and
// answers nothing for HealthCheck.ProbeTimeout (a paused or overloaded
// node) is dialed again (see redialable), so a node that starts answering
// within ConnectTimeout is found. A seed that refuses the credentials or
// the bucket ends the bootstrap at once; one that refuses the connection,
// hangs up, fails TLS or serves no usable config is not dialed again.
// It fails when no node of the config can be connected to within
// ConnectTimeout.
func (c *Client) bootstrapCouchbase(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ConnectTimeout)
	defer cancel()
	errs := make([]error, len(c.cs.Hosts)) // each seed's last error
	var done bool
	var err error // the bootstrap's outcome, once done
	dialRounds(ctx, len(c.cs.Hosts), func(dctx context.Context, i int) (bool, bool) {
		seed := c.cs.Hosts[i]
		seedNode := newNode(c, seed)
		cn, derr := conn.Dial(dctx, seed, c.connOptions(seedNode))
		if derr != nil {
			errs[i] = derr
			if errors.Is(derr, ErrAuthenticationFailure) || errors.Is(derr, ErrBucketNotFound) {
				return true, false // every seed would answer the same
			}
			c.opts.Logger.Warn("kvwire: bootstrap from a seed failed", "node", seed, "err", derr, "dial_again", redialable(derr))
			return false, redialable(derr)
		}
		raw := cn.ClusterConfig()
		if raw == nil {
			_ = cn.Close()
			errs[i] = fmt.Errorf("%s served no cluster config (is it a Couchbase node with the bucket %q?)", seed, c.opts.Bucket)
			return false, false
		}
		cfg, perr := vbmap.Parse(raw, seedNode.host)
		if perr != nil {
			_ = cn.Close()
			errs[i] = fmt.Errorf("config from %s: %w", seed, perr)
			return false, false
		}
		done, err = true, c.bootstrapFrom(ctx, seed, seedNode, cn, cfg, compact(errs))
		return true, false
	}, nil)
	if done {
		return err
	}
	return bootstrapError(c.cs, compact(errs))
}

// compact returns the errors that are not nil.
func compact(errs []error) []error {
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// bootstrapFrom builds the first topology around the config a seed served
// over cn, and waits for the first dials of its nodes (within ctx, which
// ends at Connect's ConnectTimeout). errs are the errors of the seeds
// tried before.
func (c *Client) bootstrapFrom(ctx context.Context, seed string, seedNode *node, cn *conn.Conn, cfg *vbmap.Config, errs []error) error {
	c.bootstrapHost = seedNode.host
	c.network = c.opts.Network
	if c.network == NetworkAuto {
		c.network = cfg.DetectNetwork(seedNode.host)
	}
	c.topoMu.Lock()
	c.nodes[seed] = seedNode
	seedNode.start(cn)
	c.installLocked(cfg)
	c.topoMu.Unlock()
	c.awaitFirstDials(ctx)
	t := c.topo.Load()
	if !usable(t) {
		all, cause := c.unusableError(seed, t)
		return &ConnectError{Hosts: c.cs.Hosts, Err: ErrNoNodeAvailable, Cause: cause, All: append(errs, all...)}
	}
	c.opts.Logger.Info("kvwire: connected", "seed", seed, "bucket", c.opts.Bucket,
		"rev", cfg.Version().String(), "network", c.network, "mechanism", cn.Mechanism())
	return nil
}

// awaitFirstDials waits until every node of the topology has made its first
// connection attempt (or ctx or ConnectTimeout ends), so that a client fresh
// from Connect does not send its first requests into pools still dialing.
// Nodes that failed keep redialing in the background; their requests go
// through the retry strategy. Connect fails when no node is usable
// afterwards.
func (c *Client) awaitFirstDials(ctx context.Context) {
	t := c.topo.Load()
	if t == nil {
		return
	}
	timer := time.NewTimer(c.opts.ConnectTimeout)
	defer timer.Stop()
	for _, n := range t.all {
		select {
		case <-n.tried:
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		}
	}
}

// bootstrapMemcached connects to every server of a memcached:// string. It
// fails only when credentials are refused (or PLAIN is not allowed) or no
// server answers: while none has, the servers that did not answer in time
// (see redialable) are dialed again in rounds (dialRounds) until
// ConnectTimeout. Servers that are down once one has answered are redialed
// in the background, and their keys fail at once until they answer (see
// MemcachedOptions).
func (c *Client) bootstrapMemcached(ctx context.Context) error {
	k, err := vbmap.NewKetama(c.cs.Hosts)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.ConnectTimeout)
	defer cancel()
	errs := make([]error, len(c.cs.Hosts)) // each server's last error
	nodes := make([]*node, len(c.cs.Hosts))
	for i, h := range c.cs.Hosts {
		nodes[i] = newNode(c, h)
	}
	conns := make([]*conn.Conn, len(c.cs.Hosts))
	up := 0
	var refused error // credentials refused, or PLAIN not allowed
	dialRounds(ctx, len(c.cs.Hosts), func(dctx context.Context, i int) (bool, bool) {
		cn, err := conn.Dial(dctx, c.cs.Hosts[i], c.connOptions(nodes[i]))
		if err != nil {
			if errors.Is(err, ErrAuthenticationFailure) {
				refused = err
				return true, false
			}
			nodes[i].lastErr = err
			errs[i] = err
			return false, redialable(err)
		}
		nodes[i].lastErr = nil
		conns[i] = cn
		up++
		return false, false
	}, func() bool { return up > 0 })
	if refused != nil {
		for _, cn := range conns {
			if cn != nil {
				_ = cn.Close()
			}
		}
		if errors.Is(refused, ErrPlainAuthRefused) {
			refused = fmt.Errorf("%w; to connect, use %s:// (TLS), or opt in to sending the password in clear with allow_plain_auth=true (Options.AllowPlainAuthWithoutTLS)",
				refused, SchemeMemcacheds)
		}
		return bootstrapError(c.cs, []error{refused})
	}
	if up == 0 {
		return bootstrapError(c.cs, compact(errs))
	}
	c.topoMu.Lock()
	defer c.topoMu.Unlock()
	t := &topology{ketama: k, servers: nodes}
	for i, n := range nodes {
		if _, dup := c.nodes[n.addr]; dup {
			t.servers[i] = c.nodes[n.addr]
			if conns[i] != nil {
				_ = conns[i].Close()
			}
			continue
		}
		c.nodes[n.addr] = n
		t.all = append(t.all, n)
	}
	c.ring = newMemcachedRing(c.cs.Hosts, t)
	c.topo.Store(t)
	for i, n := range nodes {
		if c.nodes[n.addr] == n {
			n.start(conns[i])
		}
	}
	return nil
}

// usable reports whether some node of t has a live connection.
func usable(t *topology) bool {
	if t == nil {
		return false
	}
	for _, n := range t.all {
		if _, _, err := n.pick(); err == nil {
			return true
		}
	}
	return false
}

// bootstrapError turns the seeds' errors into one, with the most specific
// sentinel first (sentinelOf's order): credentials, then bucket, then TLS,
// then no node.
func bootstrapError(cs *ConnStr, errs []error) error {
	switch want := sentinelOf(errors.Join(errs...)); want {
	case ErrAuthenticationFailure, ErrBucketNotFound, ErrTLS:
		i := slices.IndexFunc(errs, func(e error) bool { return errors.Is(e, want) })
		return &ConnectError{Hosts: cs.Hosts, Err: want, Cause: errs[i], All: errs}
	}
	var last error
	if len(errs) > 0 {
		last = errs[len(errs)-1]
	}
	return &ConnectError{Hosts: cs.Hosts, Err: ErrNoNodeAvailable, Cause: last, All: errs}
}

// ConnectError is the error of a Connect that could not bootstrap.
type ConnectError struct {
	Hosts []string
	// Err is the sentinel: ErrAuthenticationFailure, ErrBucketNotFound,
	// ErrTLS or ErrNoNodeAvailable.
	Err error
	// Cause is the most telling seed error; All has every seed's.
	Cause error
	All   []error
}

func (e *ConnectError) Error() string {
	msg := fmt.Sprintf("kvwire: connect to %v: %v", e.Hosts, e.Err)
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *ConnectError) Unwrap() []error { return []error{e.Err, e.Cause} }

// connOptions are the conn.Options for a connection to n. With n nil they
// are for a short connection that only fetches the config (recovery): no
// close or notification callbacks.
func (c *Client) connOptions(n *node) conn.Options {
	o := conn.Options{
		Username:                 c.opts.Username,
		Password:                 c.opts.Password,
		AllowPlainAuthWithoutTLS: c.opts.AllowPlainAuthWithoutTLS,
		TLSConfig:                c.opts.TLSConfig,
		ClientName:               c.opts.ClientName,
		MaxPending:               c.opts.MaxPendingPerConnection,
		ProbeAfter:               c.opts.HealthCheck.ProbeAfter,
		ProbeTimeout:             c.opts.HealthCheck.ProbeTimeout,
		Logger:                   c.opts.Logger,
	}
	if c.opts.HealthCheck.Disabled {
		o.ProbeAfter = -1 // conn: no probes, nor the bootstrap's silence watch
	}
	if n != nil {
		o.OnClose = func(error) { n.signal() }
	}
	if c.memcached {
		// memcached offers only SASL PLAIN: conn sends it over TLS
		// (memcacheds://), or in clear only when the caller opted in.
		o.Memcached = true
		return o
	}
	o.Bucket = c.opts.Bucket
	o.Features = c.requestedFeatures()
	if n != nil {
		o.OnClustermapNotification = func(nt memdx.ClustermapNotification) { c.onNotification(n, nt) }
	}
	return o
}

// onConnUp is told about every new connection of a node.
func (c *Client) onConnUp(n *node, cn *conn.Conn) {
	if raw := cn.ClusterConfig(); raw != nil && c.topo.Load() != nil {
		c.offerConfig(raw, n.host, "connection")
	}
}

// wakeForNode ends the retry waits of every operation routed with the
// current topology when n, one of its nodes, which had no live connection,
// has one again (at most once per nodeWakeInterval per node): an operation
// that found n unavailable retries at once instead of at the end of its
// back-off, which the default strategy lets grow to a second. Waits for
// other reasons the topology's channel ends (NOT_MY_VBUCKET, another node)
// retry early too; a failed retry goes on with the next back-off. The
// topology is replaced by a copy with a fresh changed channel, the one
// wakeFor hands out, so that, as after a config install, only the current
// topology's channel is open. memcached topologies have no such channel
// (their waits are back-off only). It takes topoMu: it is called from a
// node's maintain goroutine, never under topoMu.
func (c *Client) wakeForNode(n *node) {
	c.topoMu.Lock()
	defer c.topoMu.Unlock()
	cur := c.topo.Load()
	if cur == nil || cur.changed == nil || c.ctx.Err() != nil || !slices.Contains(cur.all, n) {
		return
	}
	c.renewTopoLocked(cur)
}

// renewTopoLocked replaces cur, the current topology, by a copy with a
// fresh changed channel, which it returns: the retry waits routed with cur
// end, and later ones wait on the copy. topoMu is held.
func (c *Client) renewTopoLocked(cur *topology) *topology {
	t := *cur
	t.changed = make(chan struct{})
	c.swapTopoLocked(&t)
	return &t
}

// swapTopoLocked makes t the current topology and closes the changed
// channel of the one it replaces, which ends the retry waits routed with
// that one (wakeFor). It returns the replaced topology. topoMu is held.
func (c *Client) swapTopoLocked(t *topology) *topology {
	old := c.topo.Swap(t)
	if old != nil && old.changed != nil && !closed(old.changed) {
		close(old.changed)
	}
	return old
}

// onNotification runs on a connection's reader goroutine: it must not
// block. A config is offered to the config loop; a brief notification of a
// newer version makes the node's fetcher fetch it.
func (c *Client) onNotification(n *node, nt memdx.ClustermapNotification) {
	if len(nt.Config) > 0 {
		c.offerConfig(nt.Config, n.host, "notification")
		return
	}
	t := c.topo.Load()
	if t == nil || t.cfg == nil {
		return
	}
	v := vbmap.Version{Epoch: nt.Version.Epoch, Rev: uint64(nt.Version.Revision)}
	if !nt.HasEpoch {
		v.Epoch = t.cfg.Version().Epoch
	}
	if v.Newer(t.cfg.Version()) {
		c.announceFetch(n, v)
	}
}

// testHookParse, when set by this package's tests (before any client
// starts, and reset after the last one closed), runs on the config loop
// before each config it parses.
var testHookParse func()

// applyConfig parses raw and installs it when it is newer than the held
// config. It runs on the config loop. The error says why a config that
// was not older than the held one was not installed.
func (c *Client) applyConfig(raw []byte, host string) error {
	cur := c.topo.Load()
	if cur != nil && cur.cfg != nil {
		if v, ok := vbmap.PeekVersion(raw); ok && !v.Newer(cur.cfg.Version()) {
			return nil
		}
	}
	c.configParses.Add(1)
	if testHookParse != nil {
		testHookParse()
	}
	cfg, err := vbmap.Parse(raw, host)
	if err != nil {
		return err
	}
	if cfg.BucketName() != "" && cfg.BucketName() != c.opts.Bucket {
		return fmt.Errorf("the config is for bucket %q", cfg.BucketName())
	}
	c.topoMu.Lock()
	defer c.topoMu.Unlock()
	if c.ctx.Err() != nil {
		return nil
	}
	cur = c.topo.Load()
	if cur != nil && cur.cfg != nil && !cfg.Newer(cur.cfg) {
		return nil
	}
	if cur != nil && cur.cfg != nil && routable(cur.cfg) && !routable(cfg) {
		// A bucket does not lose its partitions; a newer config without
		// a map is a cluster-level or half-made one. Keep routing by the
		// map held.
		return fmt.Errorf("config rev %s has no vbucket map; keeping rev %s", cfg.Version(), cur.cfg.Version())
	}
	c.installLocked(cfg)
	return nil
}

// routable reports whether cfg can route a key: a vbucket map, or ketama
// for a memcached bucket.
func routable(cfg *vbmap.Config) bool { return cfg.HasVbucketMap() || cfg.Ketama() != nil }

// installLocked builds and stores the topology of cfg, starting pools for
// new nodes and retiring those the config no longer lists. topoMu is held.
func (c *Client) installLocked(cfg *vbmap.Config) *topology {
	t := &topology{cfg: cfg, ketama: cfg.Ketama(), servers: make([]*node, cfg.NumServers()),
		changed: make(chan struct{})}
	seen := map[*node]bool{}
	for i := range t.servers {
		addr, ok := cfg.ServerKVAddr(i, c.network, c.tls)
		if !ok || addr == "" {
			continue
		}
		n := c.nodes[addr]
		if n == nil {
			n = newNode(c, addr)
			c.nodes[addr] = n
			n.start(nil)
			c.rememberLocked(addr)
		}
		t.servers[i] = n
		if !seen[n] {
			seen[n] = true
			t.all = append(t.all, n)
		}
	}
	if len(t.all) == 0 {
		// The config names no server this client can reach (a bucket
		// with no partitions yet, or no address on the chosen network).
		// Retiring every node would leave nothing to poll for the next
		// config: keep the nodes held, for polling only.
		c.opts.Logger.Warn("kvwire: config names no reachable KV node; keeping the current nodes to poll",
			"rev", cfg.Version().String(), "network", c.network)
		for _, n := range c.nodes {
			seen[n] = true
			t.all = append(t.all, n)
		}
	}
	old := c.swapTopoLocked(t)
	c.fetchMu.Lock()
	for addr, n := range c.nodes {
		if !seen[n] {
			delete(c.nodes, addr)
			delete(c.fetches, n)
			n.leave()
		}
	}
	c.fetchMu.Unlock()
	if old != nil && old.cfg != nil {
		c.opts.Logger.Info("kvwire: config updated", "from", old.cfg.Version().String(),
			"to", cfg.Version().String(), "nodes", len(t.all), "forward_map", cfg.HasForwardMap())
	}
	return t
}

// Close closes every connection and stops every goroutine the client
// started. Operations in flight fail with errors that say whether they were
// written; operations waiting to retry end at once with ErrClosed. It is
// safe to call more than once.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.topoMu.Lock()
		c.cancel()
		if cur := c.topo.Load(); cur != nil && cur.changed != nil {
			// End the retry waits routed with it, and those begun
			// after this at once. Each then ends with ErrClosed (place).
			close(c.renewTopoLocked(cur).changed)
		}
		c.topoMu.Unlock()
		c.fetchMu.Lock()
		c.fetchClosed = true // no fetcher or recovery starts after wg.Wait begins
		c.fetchMu.Unlock()
		c.wg.Wait()
		c.topoMu.Lock()
		for _, n := range c.nodes {
			n.closeAll()
		}
		c.topoMu.Unlock()
	})
	return nil
}

// Bucket returns the bucket the client opened ("" for memcached).
func (c *Client) Bucket() string { return c.opts.Bucket }

// ConfigVersion returns the version of the cluster config in use (zero in
// memcached mode).
func (c *Client) ConfigVersion() ConfigVersion {
	if t := c.topo.Load(); t != nil && t.cfg != nil {
		return configVersionOf(t.cfg.Version())
	}
	return ConfigVersion{}
}

// Nodes returns the KV addresses of the nodes in the current topology.
func (c *Client) Nodes() []string {
	t := c.topo.Load()
	if t == nil {
		return nil
	}
	out := make([]string, 0, len(t.all))
	for _, n := range t.all {
		out = append(out, n.addr)
	}
	return out
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
