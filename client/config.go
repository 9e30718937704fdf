package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// How the client keeps its cluster config current.
//
// Configs arrive from bootstrap, from each new connection, in push
// notifications, in NOT_MY_VBUCKET bodies, from polls and from fetches. All
// but the bootstrap one go through offerConfig, which runs on whatever
// goroutine met the config (a fetcher, an operation) and costs at most a
// size check and a byte scan (vbmap.PeekVersion; a memory compare for a
// config identical to the one waiting or the one the loop took last): a
// config over
// vbmap.MaxConfigSize is dropped and logged, one that is not newer than the
// held config is dropped, and a newer one is copied once into a one-slot
// mailbox (a newer one replaces it there) unless that version is already
// waiting, being parsed, or was rejected. The config loop parses the
// mailbox's config and installs it: each version is parsed at most once,
// however many operations meet it, and never on an operation's goroutine.
//
// Every install closes the replaced topology's changed channel, which
// operations waiting in a back-off after NOT_MY_VBUCKET or an unavailable
// node wait on (retry.Orchestrator.WaitOrWake): they re-route at once. So
// does a node of it regaining a connection (wakeForNode).
//
// A NOT_MY_VBUCKET that brings nothing newer (no body, or a body not newer
// than the held config) makes the client fetch the config from the node
// that answered (GET_CLUSTER_CONFIG, with the known version when granted):
// at most one fetch per node in flight, at least configFetchInterval between
// the starts of two fetches from one node, on a fetcher goroutine that
// exists only while fetches are due. A node's cluster-map notification that
// announces a newer version without its config is fetched on the same
// terms (announceFetch): a node announcing what it never serves costs no
// more than one answering NOT_MY_VBUCKET to everything.
//
// When no node of the current config can be reached (each failed its dial,
// or has been dialing for a probe timeout: one whose SYNs are lost would
// hold its dial for ConnectTimeout), the client dials the seeds and every
// node it has known (up to maxKnownAddrs) for their config, as the
// official SDKs do, so that a config naming unreachable nodes does not
// strand it once a reachable node serves a newer one.

const (
	// configFetchInterval is the least time between the starts of two
	// config fetches from one node. It bounds what a node answering
	// NOT_MY_VBUCKET to every request costs (at most 50 fetches a second
	// per node, each an empty answer when the node's config is not newer
	// and it granted GetClusterConfigWithKnownVersion) while keeping the
	// wait for a moved vbucket's new owner far below the 2.5 s poll.
	configFetchInterval = 20 * time.Millisecond
	// recoveryInterval is the least time between two rounds of asking the
	// seeds and known nodes for a config while no node of the current one
	// can be reached.
	recoveryInterval = 500 * time.Millisecond
	// maxKnownAddrs bounds the addresses remembered for recovery: the seeds
	// and the most recently seen nodes.
	maxKnownAddrs = 64
	// tooLargeLogInterval rate-limits the error logged for configs over
	// vbmap.MaxConfigSize.
	tooLargeLogInterval = 10 * time.Second
)

// offerResult says what became of an offered config.
type offerResult uint8

const (
	// offerStale: empty, or not newer than the held config.
	offerStale offerResult = iota
	// offerNewer: a config newer than the held one is on its way to
	// being installed (it waits in the mailbox or is being parsed).
	offerNewer
	// offerRejected: over vbmap.MaxConfigSize, or a version the loop
	// already rejected.
	offerRejected
)

// configIntake is the mailbox between offerConfig and the config loop.
type configIntake struct {
	mu sync.Mutex
	// The newest config offered and not yet taken by the loop (raw nil:
	// none). ver is valid when peeked.
	raw    []byte
	host   string
	from   string
	ver    vbmap.Version
	peeked bool
	// parsing: the version the loop is parsing, when parsingSet.
	parsing    vbmap.Version
	parsingSet bool
	// rejected: the newest version that failed to parse or install.
	rejected    vbmap.Version
	rejectedSet bool
	// seen: the last config the loop took, never modified, with its
	// version: a byte-identical config offered again (the same NMV body,
	// answer after answer) is recognised by a memory compare instead of a
	// PeekVersion scan, which costs about 40 times more.
	seen       []byte
	seenVer    vbmap.Version
	seenPeeked bool

	ready chan struct{} // capacity 1: the mailbox has a config

	lastTooLarge atomic.Int64 // unix ns of the last too-large log
}

// fetchState is one node's config fetcher.
type fetchState struct {
	running bool
	// again: a fetch was asked for while one ran; againFor is the newest
	// config version those requests were routed with.
	again    bool
	againFor vbmap.Version
	// announced: the node announced (a cluster-map notification without
	// a config) a config at least as new as announcedVer; fetches go on,
	// spaced as every fetch from the node is, until one that new is
	// installed or on its way, at most maxAnnouncedFetches times for one
	// version (a node may announce what it then fails to serve: the poll
	// catches up). gaveUp: the newest announced version given up on so;
	// an announcement not newer than it is ignored, so that a node that
	// keeps announcing what it never serves costs at most
	// maxAnnouncedFetches fetches per version, none closer together than
	// configFetchInterval.
	announced      bool
	announcedVer   vbmap.Version
	announcedTries int
	gaveUp         bool
	gaveUpVer      vbmap.Version
	last           time.Time // start of the last fetch
}

// maxAnnouncedFetches bounds the fetches one announcement causes.
const maxAnnouncedFetches = 3

// recoveryState is the single recovery round in flight.
type recoveryState struct {
	running bool
	last    time.Time
}

// offerConfig hands a config met by any goroutine to the config loop; see
// the top of this file. raw is not retained (it is copied when kept).
func (c *Client) offerConfig(raw []byte, host, from string) offerResult {
	if res, ok := c.recognise(raw, host, from); ok {
		return res
	}
	v, peeked := vbmap.PeekVersion(raw)
	in := &c.intake
	in.mu.Lock()
	defer in.mu.Unlock()
	if res, ok := c.judgeLocked(v, peeked); ok {
		return res
	}
	in.raw = bytes.Clone(raw)
	in.host, in.from, in.ver, in.peeked = host, from, v, peeked
	select {
	case in.ready <- struct{}{}:
	default:
	}
	return offerNewer
}

// recognise answers for a config without scanning it, when it can: an
// empty one, one over vbmap.MaxConfigSize (logged, at most once per
// tooLargeLogInterval), and one byte-identical to the config in the mailbox
// or to the one the loop took last (a memory compare). It is cheap enough
// for a connection's reader goroutine; ok false means the config must be
// scanned (offerConfig).
func (c *Client) recognise(raw []byte, host, from string) (res offerResult, ok bool) {
	if len(raw) == 0 {
		return offerStale, true
	}
	in := &c.intake
	if len(raw) > vbmap.MaxConfigSize {
		now := c.clock.Now().UnixNano()
		last := in.lastTooLarge.Load()
		if now-last >= int64(tooLargeLogInterval) && in.lastTooLarge.CompareAndSwap(last, now) {
			c.opts.Logger.Error("kvwire: ignoring a cluster config over the size limit", "from", host,
				"source", from, "bytes", len(raw), "limit", vbmap.MaxConfigSize)
		}
		return offerRejected, true
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.raw) == len(raw) && bytes.Equal(in.raw, raw) {
		return offerNewer, true
	}
	if in.seenPeeked && len(in.seen) == len(raw) && bytes.Equal(in.seen, raw) {
		return c.judgeLocked(in.seenVer, true)
	}
	return 0, false
}

// judgeLocked decides for a config of version v (peeked: v was read) that
// is not yet kept: ok false means it is to be kept in the mailbox. in.mu is
// held.
func (c *Client) judgeLocked(v vbmap.Version, peeked bool) (offerResult, bool) {
	if !peeked {
		return 0, false
	}
	in := &c.intake
	switch t := c.topo.Load(); {
	case t != nil && t.cfg != nil && !v.Newer(t.cfg.Version()):
		return offerStale, true
	case in.rejectedSet && v == in.rejected:
		return offerRejected, true
	case in.parsingSet && !v.Newer(in.parsing):
		return offerNewer, true
	case in.raw != nil && in.peeked && !v.Newer(in.ver):
		return offerNewer, true
	}
	return 0, false
}

// takeOffered moves the mailbox's config to the loop and marks its version
// as being parsed.
func (c *Client) takeOffered() (raw []byte, host, from string) {
	in := &c.intake
	in.mu.Lock()
	defer in.mu.Unlock()
	raw, host, from = in.raw, in.host, in.from
	in.raw = nil
	in.parsing, in.parsingSet = in.ver, in.peeked
	if raw != nil {
		in.seen, in.seenVer, in.seenPeeked = raw, in.ver, in.peeked
	}
	return raw, host, from
}

// doneParsing records the outcome of the config takeOffered gave.
func (c *Client) doneParsing(rejected bool) {
	in := &c.intake
	in.mu.Lock()
	defer in.mu.Unlock()
	if rejected && in.parsingSet {
		in.rejected, in.rejectedSet = in.parsing, true
	}
	in.parsingSet = false
}

// installOffered parses and installs the mailbox's config, if any.
func (c *Client) installOffered() {
	raw, host, from := c.takeOffered()
	if raw == nil {
		c.doneParsing(false)
		return
	}
	err := c.applyConfig(raw, host)
	if err != nil {
		c.opts.Logger.Warn("kvwire: ignoring a cluster config", "from", host, "source", from, "err", err)
	}
	c.doneParsing(err != nil)
}

// configLoop installs offered configs, polls for new ones and starts a
// recovery round when no node of the current config can be reached.
func (c *Client) configLoop() {
	defer c.wg.Done()
	poll := c.clock.NewTimer(c.opts.ConfigPollInterval)
	defer poll.Stop()
	// strand: when a node of the config still in its first dial would
	// leave maybeRecover's grace (armed while one is; strandAt zero: not).
	strand := c.clock.NewTimer(time.Hour)
	strand.Stop()
	defer strand.Stop()
	var strandAt time.Time
	lookAgain := func() {
		wait := c.maybeRecover()
		if wait <= 0 {
			return
		}
		if at := c.clock.Now().Add(wait); strandAt.IsZero() || at.Before(strandAt) {
			strandAt = at
			strand.Reset(wait)
		}
	}
	var rr int
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.intake.ready:
			c.installOffered()
			lookAgain() // a config of new nodes: look again once their grace ends
		case <-c.unreachable:
			lookAgain()
		case <-strand.C():
			strandAt = time.Time{}
			lookAgain()
		case <-poll.C():
			poll.Reset(c.opts.ConfigPollInterval)
			t := c.topo.Load()
			if t == nil || len(t.all) == 0 {
				continue
			}
			lookAgain()
			rr++
			c.requestFetch(t.all[rr%len(t.all)], vbmap.Version{})
		}
	}
}

// onNotMyVbucket handles an attempt of o that node n answered with
// NOT_MY_VBUCKET after o was routed with t (which has a config). It records
// the NMV in o's route state with the newest config held (RFC 0005: the
// forward map of a config that has one) and marks the route changed when
// that config sends o to another node, so that the retry goes at once. When
// no config newer than t's is held or on its way (o.nmvOffer: no body, or
// a body not newer; the body was recognised when the response was read, or
// is offered here), it asks n for its config. It returns the retry reason, KV_NOT_MY_VBUCKET; the wait that
// follows ends when the topology is replaced (wakeFor).
func (c *Client) onNotMyVbucket(o *op, t *topology, n *node) retry.Reason {
	if len(o.nmvBody) > 0 {
		o.nmvOffer = c.offerConfig(o.nmvBody, n.host, "not-my-vbucket")
		o.nmvBody = o.nmvBody[:0]
	}
	cur := c.topo.Load()
	if cur == nil || cur.cfg == nil || !cur.cfg.Newer(t.cfg) {
		cur = t
	}
	o.route.OnNotMyVbucket(cur.cfg)
	if next, _, _, err := c.routeOpPeek(cur, o); err == nil && next != n {
		o.st.MarkRouteChanged()
	}
	if cur == t && o.nmvOffer != offerNewer {
		c.requestFetch(n, t.cfg.Version())
	}
	return retry.ReasonKVNotMyVbucket
}

// requestFetch asks for a GET_CLUSTER_CONFIG from n, on n's fetcher: now if
// none ran in the last configFetchInterval, else when it has passed; a
// request made while a fetch runs is served by one more fetch after it,
// unless by then a config newer than routedWith (the version the requester
// routed with) is installed.
func (c *Client) requestFetch(n *node, routedWith vbmap.Version) {
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	if c.fetchClosed {
		return
	}
	fs := c.fetchStateLocked(n)
	if fs.running {
		if !fs.again || routedWith.Newer(fs.againFor) {
			fs.againFor = routedWith
		}
		fs.again = true
		return
	}
	c.startFetcherLocked(n, fs)
}

// announceFetch asks n's fetcher for the config of version v, which n
// announced in a cluster-map notification: fetched as an NMV's fetch is
// (one in flight per node, at least configFetchInterval after the last
// one's start), and again after a fetch that did not bring a config that
// new (the announcement can overtake the install of the fetch before it),
// up to maxAnnouncedFetches times. A version not newer than one given up
// on so is not fetched again.
func (c *Client) announceFetch(n *node, v vbmap.Version) {
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	if c.fetchClosed {
		return
	}
	fs := c.fetchStateLocked(n)
	switch {
	case fs.gaveUp && !v.Newer(fs.gaveUpVer):
		return // announced before, and never served
	case !fs.announced || v.Newer(fs.announcedVer):
		fs.announcedVer, fs.announcedTries = v, 0
	}
	fs.announced = true
	if !fs.running {
		c.startFetcherLocked(n, fs)
	}
}

// fetchStateLocked returns n's fetch state. fetchMu is held.
func (c *Client) fetchStateLocked(n *node) *fetchState {
	fs := c.fetches[n]
	if fs == nil {
		fs = &fetchState{}
		c.fetches[n] = fs
	}
	return fs
}

// startFetcherLocked starts n's fetcher. fetchMu is held.
func (c *Client) startFetcherLocked(n *node, fs *fetchState) {
	fs.running = true
	c.wg.Add(1)
	go c.fetcher(n, fs)
}

// fetcher runs n's fetches until none is due, then exits.
func (c *Client) fetcher(n *node, fs *fetchState) {
	defer c.wg.Done()
	for {
		c.fetchMu.Lock()
		wait := fs.last.Add(configFetchInterval).Sub(c.clock.Now())
		c.fetchMu.Unlock()
		if wait > 0 {
			tm := c.clock.NewTimer(wait)
			select {
			case <-tm.C():
			case <-n.ctx.Done():
				tm.Stop()
				c.fetchMu.Lock()
				fs.running = false
				c.fetchMu.Unlock()
				return
			}
		}
		c.fetchMu.Lock()
		fs.last = c.clock.Now()
		fs.again = false
		if fs.announced {
			fs.announcedTries++
		}
		c.fetchMu.Unlock()

		got, gotVer, gotPeeked := c.fetchConfig(n)

		c.fetchMu.Lock()
		t := c.topo.Load()
		if fs.again {
			// Requests made before a newer config was installed, or
			// before this fetch found one on its way (its install wakes
			// their operations), are answered.
			if got == offerNewer || t != nil && t.cfg != nil && t.cfg.Version().Newer(fs.againFor) {
				fs.again = false
			}
		}
		if fs.announced {
			// Served once a config as new as announced is installed or
			// on its way; given up after maxAnnouncedFetches.
			switch {
			case t != nil && t.cfg != nil && !fs.announcedVer.Newer(t.cfg.Version()),
				got == offerNewer && gotPeeked && !fs.announcedVer.Newer(gotVer):
				fs.announced = false
			case fs.announcedTries >= maxAnnouncedFetches:
				fs.announced = false
				if !fs.gaveUp || fs.announcedVer.Newer(fs.gaveUpVer) {
					fs.gaveUp, fs.gaveUpVer = true, fs.announcedVer
				}
				c.opts.Logger.Warn("kvwire: a node announced a config it does not serve; not fetching that version again",
					"node", n.addr, "announced", fs.announcedVer.String(), "fetches", fs.announcedTries)
			}
		}
		if !fs.again && !fs.announced || n.ctx.Err() != nil {
			fs.running = false
			c.fetchMu.Unlock()
			return
		}
		c.fetchMu.Unlock()
	}
}

// fetchConfig asks n for a config newer than the one held and offers what
// it answers; it returns what became of the offer and, when it could be
// read, the answered config's version.
func (c *Client) fetchConfig(n *node) (got offerResult, v vbmap.Version, peeked bool) {
	cn, _, err := n.pick()
	if err != nil {
		return offerStale, v, false
	}
	var req memdx.Request
	t := c.topo.Load()
	if t != nil && t.cfg != nil && cn.Features().Has(memdx.FeatureGetClusterConfigWithKnownVersion) {
		held := t.cfg.Version()
		req = memdx.NewGetClusterConfigKnown(held.Epoch, int64(held.Rev))
	} else {
		req = memdx.NewGetClusterConfig()
	}
	ctx, cancel := context.WithTimeout(n.ctx, c.opts.KVTimeout)
	defer cancel()
	got = offerStale
	err = cn.Do(ctx, &req, func(p *memdx.Packet) error {
		if p.Status != memdx.StatusSuccess {
			return memdx.NewStatusError(p)
		}
		got = c.offerConfig(p.Value, n.host, "fetch")
		if got == offerNewer {
			// Read here, while the packet is valid; offerConfig kept
			// only a copy.
			v, peeked = vbmap.PeekVersion(p.Value)
		}
		return nil
	})
	if err != nil {
		c.opts.Logger.Debug("kvwire: config fetch failed", "node", n.addr, "err", err)
	}
	return got, v, peeked
}

// noteUnreachable tells the config loop that an operation found its node
// unavailable; the loop checks whether any node of the config is reachable.
func (c *Client) noteUnreachable() {
	select {
	case c.unreachable <- struct{}{}:
	default:
	}
}

// stranded reports whether no node of t can carry a request: each has no
// live connection, and has either made its first connection attempt or
// been making it for longer than grace (a node whose SYNs are lost neither
// connects nor fails until its dial times out, ConnectTimeout later). When
// t is not stranded only because of nodes still within grace of their
// first attempt, wait is how long until the first of them leaves it.
func stranded(t *topology, now time.Time, grace time.Duration) (ok bool, wait time.Duration) {
	if t == nil || t.cfg == nil || len(t.all) == 0 {
		return false, 0
	}
	young := false
	for _, n := range t.all {
		if _, _, err := n.pick(); err == nil {
			return false, 0
		}
		select {
		case <-n.tried:
		default:
			if d := n.since.Add(grace).Sub(now); d > 0 {
				if !young || d < wait {
					wait = d
				}
				young = true
			}
		}
	}
	if young {
		return false, wait
	}
	return true, 0
}

// maybeRecover starts a recovery round when the client is stranded and
// none ran in the last recoveryInterval. No node of a config has connected
// within about the probe timeout (HealthCheck.ProbeTimeout) of being made
// counts as stranding it: the round then starts without waiting for the
// dials to time out. It runs on the config loop, and returns how long
// until a node still within that time leaves it (0: none is), for the
// loop to look again then.
func (c *Client) maybeRecover() time.Duration {
	t := c.topo.Load()
	now := c.clock.Now()
	ok, wait := stranded(t, now, c.opts.HealthCheck.ProbeTimeout)
	if !ok {
		return wait
	}
	c.fetchMu.Lock()
	if c.fetchClosed || c.recovery.running || now.Sub(c.recovery.last) < recoveryInterval {
		c.fetchMu.Unlock()
		return 0
	}
	c.recovery.running = true
	c.recovery.last = now
	c.wg.Add(1)
	c.fetchMu.Unlock()

	c.topoMu.Lock()
	cands := make([]string, 0, len(c.known))
	for _, addr := range c.known {
		if c.nodes[addr] == nil {
			cands = append(cands, addr)
		}
	}
	c.topoMu.Unlock()
	go c.recoverConfig(t, cands)
	return 0
}

// recoverConfig asks each of cands (seeds first) for its config until one
// serves a config newer than the one held.
func (c *Client) recoverConfig(t *topology, cands []string) {
	defer c.wg.Done()
	defer func() {
		c.fetchMu.Lock()
		c.recovery.running = false
		c.fetchMu.Unlock()
	}()
	held := t.cfg.Version().String()
	c.opts.Logger.Warn("kvwire: no node of the cluster config can be reached; asking the seeds and known nodes",
		"rev", held, "nodes", len(t.all), "candidates", len(cands))
	for _, addr := range cands {
		if c.ctx.Err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.opts.ConnectTimeout)
		cn, err := conn.Dial(ctx, addr, c.connOptions(nil))
		cancel()
		if err != nil {
			c.opts.Logger.Debug("kvwire: recovery: connecting failed", "node", addr, "err", err)
			continue
		}
		raw := cn.ClusterConfig()
		_ = cn.Close()
		switch c.offerConfig(raw, hostOf(addr), "recovery") {
		case offerNewer:
			c.opts.Logger.Info("kvwire: recovery: a node outside the current config served a newer config",
				"node", addr, "held", held)
			return
		default:
			c.opts.Logger.Debug("kvwire: recovery: the node serves no newer config", "node", addr)
		}
	}
	c.opts.Logger.Warn("kvwire: recovery: no seed or known node serves a config newer than the one held",
		"rev", held, "tried", len(cands))
}

// rememberLocked adds addr to the addresses recovery asks, dropping the
// oldest non-seed one beyond maxKnownAddrs. topoMu is held.
func (c *Client) rememberLocked(addr string) {
	for _, a := range c.known {
		if a == addr {
			return
		}
	}
	c.known = append(c.known, addr)
	if len(c.known) > maxKnownAddrs {
		seeds := len(c.cs.Hosts)
		if seeds < len(c.known) {
			c.known = append(c.known[:seeds], c.known[seeds+1:]...)
		}
	}
}

// wakeFor is the channel that ends an operation's retry wait for reason,
// routed with t: t's changed channel (closed when t is replaced: a newer
// config, a node of t with a connection again, Close) for the reasons
// those can resolve (the vbucket moved, the node or its socket is
// unavailable), nil for the others.
func wakeFor(t *topology, reason retry.Reason) <-chan struct{} {
	if t == nil {
		return nil
	}
	switch reason {
	case retry.ReasonKVNotMyVbucket, retry.ReasonNodeNotAvailable,
		retry.ReasonSocketNotAvailable, retry.ReasonServiceNotAvailable:
		return t.changed
	}
	return nil
}

// unusableError is the cause of a Connect whose bootstrap config (from
// seed) names no node the client could connect to within ConnectTimeout,
// with each node's error.
func (c *Client) unusableError(seed string, t *topology) (all []error, cause error) {
	var b strings.Builder
	fmt.Fprintf(&b, "the config (rev %s) from %s names no node this client can use on network %q:",
		t.cfg.Version(), seed, c.network)
	for _, n := range t.all {
		_, _, err := n.pick()
		var ne *NodeError
		if errors.As(err, &ne) && ne.Err == nil {
			err = &NodeError{Addr: n.addr, Err: fmt.Errorf("still connecting after %v", c.opts.ConnectTimeout)}
		}
		fmt.Fprintf(&b, " %v;", err)
		all = append(all, err)
	}
	return all, errors.New(strings.TrimSuffix(b.String(), ";"))
}
