package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// Bounds of the wait between two rounds of seed dials (dialRounds):
// doubling from seedRetryMin to seedRetryMax.
const (
	seedRetryMin = 10 * time.Millisecond
	seedRetryMax = 500 * time.Millisecond
)

// BootstrapError is Connect's failure to bootstrap: every seed's error
// (All), and, when a seed served a config none of whose nodes could be
// used, Unusable with a Cause describing each node.
type BootstrapError struct {
	All      []error
	Unusable bool
	Cause    error
}

func (e *BootstrapError) Error() string {
	if e.Cause != nil {
		return e.Cause.Error()
	}
	return errors.Join(e.All...).Error()
}

func (e *BootstrapError) Unwrap() []error { return e.All }

// Failure is what Connect reports for e: every seed's error, its sentinel
// and the most telling seed error (memcached: a memcached:// bootstrap).
// A config none of whose nodes could be used is ErrNoNodeAvailable with
// e's Cause.
func (e *BootstrapError) Failure(memcached bool) (all []error, sentinel, cause error) {
	if e.Unusable {
		return e.All, kverr.ErrNoNodeAvailable, e.Cause
	}
	errs := e.All
	if memcached {
		errs = memcachedAdvice(errs)
	}
	sentinel, cause = bootstrapFailure(errs)
	return errs, sentinel, cause
}

// memcachedAdvice adds to a memcached:// bootstrap's errors what to do
// instead where PLAIN was refused in clear: TLS, or an opt-in. (A seed that
// is a Couchbase KV port says itself to use couchbase://:
// conn.NotMemcachedError.)
func memcachedAdvice(errs []error) []error {
	if len(errs) == 1 && errors.Is(errs[0], kverr.ErrPlainAuthRefused) {
		return []error{fmt.Errorf("%w; to connect, use memcacheds:// (TLS), or opt in to sending the password in clear with allow_plain_auth=true (Options.AllowPlainAuthWithoutTLS)",
			errs[0])}
	}
	return errs
}

// bootstrapFailure turns the seeds' errors into one, with the most
// specific sentinel first (kverr.SentinelOf's order): credentials, then
// bucket, then TLS, then no node.
func bootstrapFailure(errs []error) (sentinel, cause error) {
	switch want := kverr.SentinelOf(errors.Join(errs...), vbmap.ErrReplicaOutOfRange); want {
	case kverr.ErrAuthenticationFailure, kverr.ErrBucketNotFound, kverr.ErrTLS:
		i := slices.IndexFunc(errs, func(e error) bool { return errors.Is(e, want) })
		return want, errs[i]
	}
	var last error
	if len(errs) > 0 {
		last = errs[len(errs)-1]
	}
	return kverr.ErrNoNodeAvailable, last
}

// dialRounds runs Connect's dials of n hosts in rounds until ctx (which
// ends at ConnectTimeout) ends. dial dials host i with a context bounded by
// that dial's share of the time left: an equal share of what ctx has left
// for the hosts the round has still to dial, so that a host whose dial
// hangs (its packets dropped) leaves time for the next. dial reports
// whether the bootstrap is over (stop) and, when it is not, whether host i
// is to be dialed again in the next round. After a round, enough (nil:
// never) says whether the bootstrap is over; if not, the hosts to dial
// again are, after a wait of seedRetryMin doubling to seedRetryMax. It
// returns when there is nothing left to dial.
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
// accepted the connection and then sent nothing for the probe timeout, or
// the dial's share of the time ran out), as a paused or overloaded node
// does. Anything else is an answer that another dial would likely meet
// again (a refused connection, an unknown host, a hang-up, refused TLS,
// credentials or bucket), and Connect fails as soon as no host is left to
// dial.
func redialable(err error) bool {
	if errors.Is(err, kverr.ErrUnresponsive) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// resolveSeeds runs the SeedResolver, if any.
func (c *Cluster) resolveSeeds(ctx context.Context) error {
	if c.cfg.Resolver == nil {
		c.known = append([]string(nil), c.seeds...)
		return nil
	}
	seeds, err := c.cfg.Resolver.Resolve(ctx, c.cfg.Seeds)
	if err != nil {
		return &BootstrapError{All: []error{err}}
	}
	c.seeds = seeds
	c.known = append([]string(nil), seeds...)
	if r, ok := c.cfg.Resolver.(SeedRefresher); ok {
		if name := r.RefreshName(); name != "" {
			c.refresh.src, c.refresh.name = r, name
		}
	}
	return nil
}

// bootstrapCouchbase finds the first config and builds the first topology
// around it, within ConnectTimeout (from the start of Connect) or ctx:
// from the seeds' KV service (bootstrapKV), then, when none served one,
// from a FirstConfigSource (the cluster manager over HTTP), which then
// serves the configs for the session. With a source to fall back on, the
// KV seeds get half of the time; with NoKVConfigs, none. A seed that
// refuses the credentials or the bucket ends the bootstrap at once. It
// fails when no node of the config can be connected to within
// ConnectTimeout.
func (c *Cluster) bootstrapCouchbase(ctx context.Context) error {
	ctx, cancel := context.WithTimeoutCause(ctx, c.cfg.ConnectTimeout, errConnectTimeout)
	defer cancel()
	if err := c.resolveSeeds(ctx); err != nil {
		return err
	}
	var fs FirstConfigSource
	for _, src := range c.cfg.Sources {
		if f, ok := src.(FirstConfigSource); ok && (c.cfg.NoKVConfigs || f.CanServe(c.seeds)) {
			fs = f
			break
		}
	}
	var errs []error
	if !c.cfg.NoKVConfigs && len(c.seeds) > 0 {
		kctx := ctx
		if dl, ok := ctx.Deadline(); ok && fs != nil {
			var kcancel context.CancelFunc
			kctx, kcancel = context.WithDeadline(ctx, dl.Add(-time.Until(dl)/2))
			defer kcancel()
		}
		done, kvErrs, err := c.bootstrapKV(kctx, ctx)
		if done {
			return err
		}
		errs = kvErrs
		if fs == nil || refusedEverywhere(errs) {
			return &BootstrapError{All: errs}
		}
	}
	if fs == nil {
		return &BootstrapError{All: append(errs, errors.New("no seed to bootstrap from"))}
	}
	sc, err := fs.FirstConfig(ctx, c.seeds)
	if err != nil {
		return &BootstrapError{All: append(errs, err)}
	}
	cfg, err := vbmap.Parse(sc.Raw, sc.Host)
	if err != nil {
		return &BootstrapError{All: append(errs, fmt.Errorf("config from %s: %w", sc.From, err))}
	}
	c.source = fs
	return c.bootstrapFrom(ctx, sc.From, sc.Host, nil, nil, cfg, errs)
}

// bootstrapKV dials the seeds in order until one bootstraps and its KV
// service serves a config (done, with the bootstrap's outcome err), within
// kctx; the topology it then builds has until ctx ends. A round that
// finds no seed is followed by another (dialRounds) until kctx ends: a
// seed that accepts connections and answers nothing for the probe timeout
// (a paused or overloaded node) is dialed again (see redialable), so a
// node that starts answering in time is found. A seed that refuses the
// credentials or the bucket ends the rounds at once; one that refuses the
// connection, hangs up, fails TLS or serves no usable config is not dialed
// again. errs are the seeds' errors when none served a config.
func (c *Cluster) bootstrapKV(kctx, ctx context.Context) (done bool, errs []error, err error) {
	last := make([]error, len(c.seeds)) // each seed's last error
	dialRounds(kctx, len(c.seeds), func(dctx context.Context, i int) (bool, bool) {
		seed := c.seeds[i]
		seedNode := newNode(c, seed)
		cn, derr := conn.Dial(dctx, seed, c.connOptions(seedNode))
		if derr != nil {
			last[i] = derr
			if refusedEverywhere([]error{derr}) {
				return true, false // every seed would answer the same
			}
			c.cfg.Logger.Warn("kvwire: bootstrap from a seed failed", "node", seed, "err", derr, "dial_again", redialable(derr))
			return false, redialable(derr)
		}
		raw := cn.ClusterConfig()
		if raw == nil {
			_ = cn.Close()
			last[i] = c.noConfigError(seed, cn)
			return false, false
		}
		cfg, perr := vbmap.Parse(raw, seedNode.host)
		if perr != nil {
			_ = cn.Close()
			last[i] = fmt.Errorf("config from %s: %w", seed, perr)
			return false, false
		}
		c.kvConfigs.Store(true)
		done, err = true, c.bootstrapFrom(ctx, seed, seedNode.host, seedNode, cn, cfg, compact(last))
		return true, false
	}, nil)
	return done, compact(last), err
}

// refusedEverywhere reports whether errs hold an answer every seed would
// give alike: credentials or bucket refused.
func refusedEverywhere(errs []error) bool {
	for _, err := range errs {
		if errors.Is(err, kverr.ErrAuthenticationFailure) || errors.Is(err, kverr.ErrBucketNotFound) {
			return true
		}
	}
	return false
}

// noConfigError says why seed's KV connection cn served no config, by the
// status GET_CLUSTER_CONFIG answered.
func (c *Cluster) noConfigError(seed string, cn *conn.Conn) error {
	switch st := cn.ClusterConfigStatus(); st {
	case memdx.StatusKeyNotFound:
		return fmt.Errorf("%s: GET_CLUSTER_CONFIG answered %s: the KV service holds no config for bucket %q, as for a memcached bucket, whose config the cluster manager serves over HTTP only",
			seed, st, c.cfg.Bucket)
	case memdx.StatusUnknownCommand, memdx.StatusNotSupported:
		return fmt.Errorf("%s: GET_CLUSTER_CONFIG answered %s: a server without it (before Couchbase Server 5.0) serves its config over HTTP only", seed, st)
	case 0:
		return fmt.Errorf("%s served no cluster config", seed)
	default:
		return fmt.Errorf("%s: GET_CLUSTER_CONFIG answered %s: no config for bucket %q", seed, st, c.cfg.Bucket)
	}
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

// bootstrapFrom builds the first topology around the config seed served
// (host: the seed's host), over cn when it is seedNode's KV connection
// (nil when a source served it), and waits for the first dials of its
// nodes (within ctx, which ends at ConnectTimeout). errs are the errors of
// the seeds tried before.
func (c *Cluster) bootstrapFrom(ctx context.Context, seed, host string, seedNode *Node, cn *conn.Conn, cfg *vbmap.Config, errs []error) error {
	c.network = c.cfg.Network
	if c.network == "auto" {
		c.network = cfg.DetectNetwork(host)
	}
	var logs deferredLogs
	c.mu.Lock()
	if seedNode != nil {
		c.nodes[seed] = seedNode
		seedNode.start(cn)
	}
	t := c.installLocked(cfg, &logs)
	c.mu.Unlock()
	logs.log(c.cfg.Logger)
	if cause := c.noAddressError(seed, t); cause != nil {
		// installLocked kept the seed's node to poll; nothing would
		// carry an operation, which would wait for a node until its
		// timeout.
		return &BootstrapError{All: append(errs, cause), Unusable: true, Cause: cause}
	}
	c.awaitFirstDials(ctx)
	t = c.topo.Load()
	if !usable(t) {
		all, cause := c.unusableError(ctx, seed, t)
		return &BootstrapError{All: append(errs, all...), Unusable: true, Cause: cause}
	}
	via := "kv"
	if c.source != nil {
		via = "source"
	}
	c.cfg.Logger.Info("kvwire: connected", "seed", seed, "via", via, "bucket", c.cfg.Bucket,
		"rev", cfg.Version().String(), "network", c.network, "locator", cfg.Locator().String())
	return nil
}

// noAddressError is the cause of a Connect whose bootstrap config (from
// seed, installed as t) lists servers none of which has a KV address on
// the client's network (with TLS, a TLS port), nil when some has one or
// the config lists none (a bucket with no partitions yet, whose next
// config will); or whose memcached bucket's ketama ring is empty, its
// nodes having no non-TLS KV port on the default network.
func (c *Cluster) noAddressError(seed string, t *Topology) error {
	if t.cfg != nil && t.cfg.Locator() == vbmap.LocatorKetama && t.ketama == nil {
		if nodes := len(t.cfg.Nodes()); nodes > 0 {
			// A memcached bucket's ring places its keys by each node's
			// non-TLS KV address on the default network (with TLS too):
			// nodes without one have no place on it, and no key a node.
			return fmt.Errorf("the config (rev %s) from %s is a memcached bucket's whose %d nodes have no non-TLS KV port on the default network (TLS ports only?): the bucket's ketama ring, which places keys by that address, is empty",
				t.cfg.Version(), seed, nodes)
		}
	}
	if t.NumServers() == 0 || slices.ContainsFunc(t.servers, func(n *Node) bool { return n != nil }) {
		return nil
	}
	port := "non-TLS"
	if c.cfg.TLS {
		port = "TLS"
	}
	nets := []string{vbmap.NetworkDefault}
	for _, n := range t.cfg.Servers() {
		for _, a := range n.Alternates {
			if !slices.Contains(nets, a.Network) {
				nets = append(nets, a.Network)
			}
		}
	}
	return fmt.Errorf("the config (rev %s) from %s lists %d servers, none with a %s KV port on network %q (the config's networks: %s)",
		t.cfg.Version(), seed, t.NumServers(), port, c.network, strings.Join(nets, ", "))
}

// awaitFirstDials waits until every node of the topology has made its first
// connection attempt (or ctx or ConnectTimeout ends), so that a client fresh
// from Connect does not send its first requests into pools still dialing.
// Nodes that failed keep redialing in the background; their requests go
// through the retry strategy. Connect fails when no node is usable
// afterwards. Once a node is usable, a node still in its first dial
// StrandGrace after it was made is not waited for, as recovery counts it
// unreachable (stranded): one whose SYNs are lost, or that stopped
// answering in its login (where silence does not end a dial: kv_engine
// is silent while it checks an LDAP user), would hold Connect for
// ConnectTimeout while the others carry operations. Its dial goes on.
func (c *Cluster) awaitFirstDials(ctx context.Context) {
	t := c.topo.Load()
	if t == nil {
		return
	}
	timer := time.NewTimer(c.cfg.ConnectTimeout)
	defer timer.Stop()
	var grace retry.Timer // on the cluster's clock, as Node.since
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	var graceAt time.Time // when grace is due (zero: it is not armed)
	for {
		changed := c.health.wait() // before looking: no change is missed
		now := c.cfg.Clock.Now()
		wait, pending := c.firstDialsPending(t, now)
		if !pending {
			return
		}
		var graceC <-chan time.Time
		if wait > 0 {
			// Not armed again for the time it is due at: a timer armed
			// after the clock moved past now would be due that much late.
			if at := now.Add(wait); !at.Equal(graceAt) {
				graceAt = at
				if grace == nil {
					grace = c.cfg.Clock.NewTimer(wait)
				} else {
					grace.Reset(wait)
				}
			}
			graceC = grace.C()
		}
		select {
		case <-changed: // a dial ended, a connection was made
		case <-graceC:
			graceAt = time.Time{}
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		}
	}
}

// firstDialsPending reports whether awaitFirstDials still waits for a
// node of t, and, when a node is usable, how long after now the first of
// those it waits for leaves its StrandGrace (0: no such bound).
func (c *Cluster) firstDialsPending(t *Topology, now time.Time) (wait time.Duration, pending bool) {
	skip := c.cfg.StrandGrace > 0 && usable(t)
	for _, n := range t.all {
		select {
		case <-n.tried:
			continue
		default:
		}
		if skip {
			d := n.since.Add(c.cfg.StrandGrace).Sub(now)
			if d <= 0 {
				continue // stranded: not waited for
			}
			if wait == 0 || d < wait {
				wait = d
			}
		}
		pending = true
	}
	return wait, pending
}

// errConnectTimeout is the cause of a bootstrap's context ended by
// ConnectTimeout (rather than by Connect's own context).
var errConnectTimeout = errors.New("connect timeout")

// unusableError is the cause of a Connect whose bootstrap config (from
// seed) names no node the client could connect to within ConnectTimeout,
// or before ctx, the bootstrap's, ended, with each node's error. A node
// still in its first dial when Connect's own context ended says so, and
// matches that context's error.
func (c *Cluster) unusableError(ctx context.Context, seed string, t *Topology) (all []error, cause error) {
	var b strings.Builder
	fmt.Fprintf(&b, "the config (rev %s) from %s names no node this client can use on network %q:",
		t.cfg.Version(), seed, c.network)
	still := fmt.Errorf("still connecting after %v", c.cfg.ConnectTimeout)
	var ended error // Connect's context's error, when it ended the wait
	if why := context.Cause(ctx); ctx.Err() != nil && why != errConnectTimeout {
		ended = why
		still = fmt.Errorf("still connecting when Connect's context ended: %w", why)
	}
	for _, n := range t.all {
		_, _, err := n.Pick()
		if n.lastDialErr() == nil && n.ctx.Err() == nil {
			err = c.nodeError(n.addr, still)
		}
		fmt.Fprintf(&b, " %v;", err)
		all = append(all, err)
	}
	return all, &messageError{msg: strings.TrimSuffix(b.String(), ";"), err: ended}
}

// messageError is msg, which says what err is (nil: none) among other
// things, matching err.
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }

// usable reports whether some node of t has a live connection.
func usable(t *Topology) bool {
	if t == nil {
		return false
	}
	for _, n := range t.all {
		if _, _, err := n.Pick(); err == nil {
			return true
		}
	}
	return false
}

// bootstrapMemcached connects to every server of a memcached:// string. It
// fails only when credentials are refused (or PLAIN is not allowed) or no
// server answers: while none has, the servers that did not answer in time
// (see redialable) are dialed again in rounds (dialRounds) until
// ConnectTimeout. Servers that are down once one has answered are redialed
// in the background, and their keys fail at once until they answer.
func (c *Cluster) bootstrapMemcached(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	if err := c.resolveSeeds(ctx); err != nil {
		return err
	}
	k, err := vbmap.NewKetama(c.seeds)
	if err != nil {
		return fmt.Errorf("%w: %v", kverr.ErrInvalidArgument, err)
	}
	errs := make([]error, len(c.seeds)) // each server's last error
	nodes := make([]*Node, len(c.seeds))
	for i, h := range c.seeds {
		nodes[i] = newNode(c, h)
	}
	conns := make([]*conn.Conn, len(c.seeds))
	up := 0
	var refused error // credentials refused, PLAIN not allowed, or not memcached
	dialRounds(ctx, len(c.seeds), func(dctx context.Context, i int) (bool, bool) {
		cn, err := conn.Dial(dctx, c.seeds[i], c.connOptions(nodes[i]))
		if err != nil {
			var nm *conn.NotMemcachedError
			if errors.Is(err, kverr.ErrAuthenticationFailure) || errors.As(err, &nm) {
				// Credentials refused, or a Couchbase node's KV port,
				// which memcached:// cannot use: said at Connect.
				refused = err
				return true, false
			}
			nodes[i].lastErr = err
			nodes[i].markTried() // its first attempt is over: reconnecting (health.go)
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
		return &BootstrapError{All: []error{refused}}
	}
	if up == 0 {
		return &BootstrapError{All: compact(errs)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &Topology{ketama: k, servers: nodes}
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
	c.ring = newRing(c.seeds, t)
	c.topo.Store(t)
	for i, n := range nodes {
		if c.nodes[n.addr] == n {
			n.start(conns[i])
		}
	}
	return nil
}
