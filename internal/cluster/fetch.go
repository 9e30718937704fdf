package cluster

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/lifecycle"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/vbmap"
)

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
	// installed or on its way, at most MaxAnnouncedFetches times for one
	// version (a node may announce what it then fails to serve: the poll
	// catches up). gaveUp: the newest announced version given up on so;
	// an announcement not newer than it is ignored, so that a node that
	// keeps announcing what it never serves costs at most
	// MaxAnnouncedFetches fetches per version, none closer together than
	// ConfigFetchInterval.
	announced      bool
	announcedVer   vbmap.Version
	announcedTries int
	gaveUp         bool
	gaveUpVer      vbmap.Version
	last           time.Time // start of the last fetch
	// heldPoll: a poll held already (configLoop, pollTarget) asked for
	// the next fetch, which the fetcher then sends without holding it
	// again (holdFetch).
	heldPoll bool
}

// MaxAnnouncedFetches bounds the fetches one announcement causes.
const MaxAnnouncedFetches = 3

// NMV is what a NOT_MY_VBUCKET answer carried: what became of its body
// when the connection's reader met it (Recognise), or, when the reader
// could not tell without a scan, a copy of the body, to be offered now.
type NMV struct {
	Offer Offer
	Body  []byte
}

// NMVOutcome is what a NOT_MY_VBUCKET means for the request's retry.
type NMVOutcome uint8

const (
	// NMVWait: nothing newer than the config routed with is held or on
	// its way: the retry waits as the strategy says (the node was asked
	// for its config), or until the topology is replaced.
	NMVWait NMVOutcome = iota
	// NMVMoved: the config held sends the request to another node: the
	// retry need not wait (retry.State.MarkRouteChanged).
	NMVMoved
	// NMVAwaitConfig: a config newer than the one routed with is on its
	// way to being installed (this body, or another's): the retry waits
	// for its install, which replaces the topology (Topology.Wake), rather
	// than retrying by the old map (retry.State.MarkAwaitWake). A batch
	// whose keys all met the same move is re-routed by the config the
	// first answer brought.
	NMVAwaitConfig
)

// NotMyVbucket is told that r.Node answered NOT_MY_VBUCKET to a request to
// tg routed as r (whose topology has a config). The body, if still to be
// offered, is offered. The NOT_MY_VBUCKET is recorded in rs, the request's
// route state, with the newest config held (RFC 0005: the forward map of a
// config that has one). When no config newer than the one routed with is
// held or on its way (no body, or one not newer), r.Node is asked for its
// config (one fetch per node in flight, spaced by ConfigFetchInterval). It
// says whether the retry goes at once (the config held moves the request),
// waits for a config on its way, or waits as the strategy says; every such
// wait ends when the topology is replaced (Topology.Wake).
func (c *Cluster) NotMyVbucket(r Route, nmv NMV, rs *vbmap.RouteState, tg *Target) NMVOutcome {
	t, n := r.Topo, r.Node
	if len(nmv.Body) > 0 {
		nmv.Offer = c.Offer(nmv.Body, n.host, "not-my-vbucket")
	}
	cur := c.topo.Load()
	if cur == nil || cur.cfg == nil || !cur.cfg.Newer(t.cfg) {
		cur = t
	}
	rs.OnNotMyVbucket(cur.cfg)
	peek := *rs // routing again must not change the request's state
	if next, _, _, err := c.route(cur, &peek, tg); err == nil && next != n {
		return NMVMoved
	}
	switch {
	case cur != t:
		// A newer config is installed and still sends the request to
		// n: n has not caught up yet.
	case nmv.Offer == OfferNewer || c.newerOnItsWay(t.cfg.Version()):
		return NMVAwaitConfig
	default:
		c.requestFetch(n, t.cfg.Version())
	}
	return NMVWait
}

// requestFetch asks for a GET_CLUSTER_CONFIG from n (unless the configs come
// from a source, kvConfigs false: ConfigWanted is signalled instead), on
// n's fetcher: now if
// none ran in the last ConfigFetchInterval, else when it has passed; a
// request made while a fetch runs is served by one more fetch after it,
// unless by then a config newer than routedWith (the version the requester
// routed with) is installed.
func (c *Cluster) requestFetch(n *Node, routedWith vbmap.Version) {
	if !c.kvConfigs.Load() {
		// The configs come from a source (Config.NoKVConfigs, or a
		// source served the bootstrap config): it is told instead.
		c.wantConfig()
		return
	}
	c.requestFetchHeld(n, routedWith, false)
}

// requestFetchHeld is requestFetch; held says that the caller held the
// fetch already (a poll: pollTarget), and the fetcher sends it at once,
// as pollTarget promises, whatever is pending on n (holdFetch).
func (c *Cluster) requestFetchHeld(n *Node, routedWith vbmap.Version, held bool) {
	if !c.kvConfigs.Load() {
		// The configs come from a source: a poll asks nothing of the
		// nodes, nor of the source (no node said the config held is
		// out of date: ConfigWanted would cut its waits short at every
		// poll); a NOT_MY_VBUCKET tells the source (requestFetch).
		return
	}
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	if c.fetchClosed {
		return
	}
	fs := c.fetchStateLocked(n)
	if fs == nil {
		return
	}
	fs.heldPoll = fs.heldPoll || held
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
// (one in flight per node, at least ConfigFetchInterval after the last
// one's start), and again after a fetch that did not bring a config that
// new (the announcement can overtake the install of the fetch before it),
// up to MaxAnnouncedFetches times. A version not newer than one given up
// on so is not fetched again.
func (c *Cluster) announceFetch(n *Node, v vbmap.Version) {
	if !c.kvConfigs.Load() {
		c.wantConfig() // as requestFetchHeld
		return
	}
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	if c.fetchClosed {
		return
	}
	fs := c.fetchStateLocked(n)
	if fs == nil {
		return
	}
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

// fetchStateLocked returns n's fetch state, nil once n has left the config
// (or the cluster is closing): a NOT_MY_VBUCKET routed by an older
// topology, or a notification on a connection still draining, may name a
// node after installLocked dropped its state, and made anew the state
// would stay until Close. installLocked retires a node (leave, which ends
// n.ctx) under fetchMu, so no state is made for it after. fetchMu is held.
func (c *Cluster) fetchStateLocked(n *Node) *fetchState {
	if n.ctx.Err() != nil {
		return nil
	}
	fs := c.fetches[n]
	if fs == nil {
		fs = &fetchState{}
		c.fetches[n] = fs
	}
	return fs
}

// startFetcherLocked starts n's fetcher. fetchMu is held.
func (c *Cluster) startFetcherLocked(n *Node, fs *fetchState) {
	fs.running = true
	c.wg.Add(1)
	lifecycle.Go(func() { c.fetcher(n, fs) })
}

// fetcher runs n's fetches until none is due, then exits.
func (c *Cluster) fetcher(n *Node, fs *fetchState) {
	defer c.wg.Done()
	for {
		c.fetchMu.Lock()
		wait := fs.last.Add(ConfigFetchInterval).Sub(c.cfg.Clock.Now())
		c.fetchMu.Unlock()
		if wait > 0 {
			tm := c.cfg.Clock.NewTimer(wait)
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
		held := fs.heldPoll
		fs.heldPoll = false
		c.fetchMu.Unlock()
		// until: the bound of the fetch's hold, as it stood when the
		// hold began (holdFetch); due: it has passed, or the poll was
		// held already, and the fetch is sent whatever is pending.
		var until time.Time
		due := held
		if !due {
			var ok bool
			if ok, due = c.holdFetch(n, &until); !ok {
				c.fetchMu.Lock()
				fs.running = false
				c.fetchMu.Unlock()
				return
			}
		}
		c.fetchMu.Lock()
		fs.last = c.cfg.Clock.Now()
		fs.again = false
		if fs.announced {
			fs.announcedTries++
		}
		c.fetchMu.Unlock()

		got, gotVer, gotPeeked := c.fetchConfig(n, due, &until)

		var logs deferredLogs // logged once fetchMu is released
		c.fetchMu.Lock()
		t := c.topo.Load()
		if fs.again {
			// Requests made before a newer config was installed, or
			// before this fetch found one on its way (its install wakes
			// their operations), are answered.
			if got == OfferNewer || t != nil && t.cfg != nil && t.cfg.Version().Newer(fs.againFor) {
				fs.again = false
			}
		}
		if fs.announced {
			// Served once a config as new as announced is installed or
			// on its way; given up after MaxAnnouncedFetches.
			switch {
			case t != nil && t.cfg != nil && !fs.announcedVer.Newer(t.cfg.Version()),
				got == OfferNewer && gotPeeked && !fs.announcedVer.Newer(gotVer):
				fs.announced = false
			case fs.announcedTries >= MaxAnnouncedFetches:
				fs.announced = false
				if !fs.gaveUp || fs.announcedVer.Newer(fs.gaveUpVer) {
					fs.gaveUp, fs.gaveUpVer = true, fs.announcedVer
				}
				logs.add(slog.LevelWarn, "kvwire: a node announced a config it does not serve; not fetching that version again",
					"node", n.addr, "announced", fs.announcedVer.String(), "fetches", fs.announcedTries)
			}
		}
		if !fs.again && !fs.announced || n.ctx.Err() != nil {
			fs.running = false
			c.fetchMu.Unlock()
			logs.log(c.cfg.Logger)
			return
		}
		c.fetchMu.Unlock()
		logs.log(c.cfg.Logger)
	}
}

// holdFetch holds a fetch from n while every live connection of n has a
// request in flight that the server answers only by a bound of its own (a
// synchronous write waiting for replication: Node.PickBarrier), until one
// is free or the shortest of their bounds, as it stood when the hold
// began, has passed: GET_CLUSTER_CONFIG is a barrier in kv_engine under
// UnorderedExecution (not is_reorder_supported), and sent behind such a
// write it would wait for it and hold every later request on the
// connection for as long. The fetches that must ask n itself (after a
// NOT_MY_VBUCKET without a config, or a config n announced) are delayed,
// never dropped: at most one such bound, kept in *until (zero until the
// fetch is first held) across the holds of one fetch (a fetch its
// connection refused is held again: fetchConfig). ok is false when n left
// meanwhile (or the client closes); due says that the bound has passed:
// the fetch is then sent whatever is pending, not as a barrier its
// connection may refuse.
func (c *Cluster) holdFetch(n *Node, until *time.Time) (ok, due bool) {
	for {
		cn, h, _, err := n.PickBarrier()
		if cn != nil || err != nil {
			return n.ctx.Err() == nil, false
		}
		now := c.cfg.Clock.Now()
		if until.IsZero() {
			*until = now.Add(h.Wait)
		}
		d := until.Sub(now)
		if d <= 0 {
			return true, true
		}
		if h.Sleep(c.cfg.Clock, min(d, h.Wait), n.ctx.Done(), nil) == HoldStopped {
			return false, false
		}
	}
}

// unsetEpoch is kv_engine's epoch of a config that carries no revEpoch
// (ClustermapVersion's default, daemon/cluster_config.h; MB-51612).
const unsetEpoch = -1

// fetchConfig asks n for a config newer than the one held and offers what
// it answers; it returns what became of the offer and, when it could be
// read, the answered config's version.
//
// The known version sent is the held config's, in the node's terms: the
// node answers with its config only when that is newer, epoch first
// (cluster_config_executor.cc), and holds a config without revEpoch at
// epoch -1, where Parse reads 0. Sent as 0, the epoch would be newer than
// any revision the node has until the cluster gets an epoch: every fetch
// and poll would be answered with nothing, and the node would take the
// version sent as the one the connection knows, leaving newer configs out
// of its notifications and NOT_MY_VBUCKET bodies. knownVersion says the
// rest.
//
// On a node with several connections it takes one with no synchronous
// write pending (Node.pickForBarrier): GET_CLUSTER_CONFIG is a barrier
// under unordered execution. The fetcher held the fetch before while every
// connection had one (holdFetch), unless due: the poll was held already,
// or the hold's bound (*until) has passed. A fetch not due is sent as a
// barrier (fetchOrigin): should such a write be queued on the connection
// between the pick and the send (by another caller), the connection
// refuses the fetch, unwritten, and it is held again (holdFetch, within
// the same bound) and picks again.
func (c *Cluster) fetchConfig(n *Node, due bool, until *time.Time) (got Offer, v vbmap.Version, peeked bool) {
	for {
		got, v, peeked, refused := c.fetchConfigOnce(n, due)
		if !refused {
			return got, v, peeked
		}
		var ok bool
		if ok, due = c.holdFetch(n, until); !ok {
			return OfferStale, v, false
		}
	}
}

// fetchOrigin marks a config fetch as a barrier (conn.Origin.Barrier):
// its connection refuses it, unwritten, when a request the server answers
// only by a bound of its own was queued there after the fetch's pick.
// Read only.
var fetchOrigin = conn.Origin{Barrier: true}

// fetchConfigOnce is one try of fetchConfig: refused says that the
// connection refused the fetch, unwritten, as a barrier behind such a
// request (never when due).
func (c *Cluster) fetchConfigOnce(n *Node, due bool) (got Offer, v vbmap.Version, peeked, refused bool) {
	cn, _, err := n.pickForBarrier()
	if err != nil {
		return OfferStale, v, false, false
	}
	var req memdx.Request
	t := c.topo.Load()
	if epoch, rev, ok := knownVersion(t); ok && cn.Features().Has(memdx.FeatureGetClusterConfigWithKnownVersion) {
		req = memdx.NewGetClusterConfigKnown(epoch, rev)
	} else {
		req = memdx.NewGetClusterConfig()
	}
	ctx, cancel := context.WithTimeout(n.ctx, c.cfg.KVTimeout)
	defer cancel()
	got = OfferStale
	if hook := testHookFetchPicked.Load(); hook != nil {
		(*hook)(cn)
	}
	from := &fetchOrigin
	if due {
		from = nil
	}
	_, err = cn.DoDeadline(ctx, time.Time{}, &req, func(p *memdx.Packet) error {
		if p.Status != memdx.StatusSuccess {
			return memdx.NewStatusError(p)
		}
		got = c.Offer(p.Value, n.host, "fetch")
		if got == OfferNewer {
			// Read here, while the packet is valid; Offer kept
			// only a copy.
			v, peeked = vbmap.PeekVersion(p.Value)
		}
		return nil
	}, from)
	if from != nil && errors.Is(err, conn.ErrBoundedAhead) {
		return OfferStale, v, false, true
	}
	if err != nil {
		c.cfg.Logger.Debug("kvwire: config fetch failed", "node", n.addr, "err", err)
	}
	return got, v, peeked, false
}

// testHookFetchPicked, when set by this package's tests, sees the
// connection a fetch picked, before the fetch is handed to it.
var testHookFetchPicked atomic.Pointer[func(*conn.Conn)]

// knownVersion is the version of t's config in the node's terms, for a
// GET_CLUSTER_CONFIG with a known version; ok is false when there is none
// the node accepts that says it. kv_engine refuses (EINVAL) a revision
// below 1 and an epoch that is neither -1 nor at least 1
// (mcbp_validators.cc, GetClusterConfigPayload::validate), and holds
// revisions as int64:
//
//   - epoch 0, revEpoch missing or 0 (Parse reads both as 0), is the
//     node's unset epoch -1: the node's configs without revEpoch are the
//     ones of epoch 0 here;
//   - a negative epoch (no server sends one) and rev 0 (a config without
//     rev) have no such version: any config the node has is at least as
//     new, so it is asked for without one;
//   - a rev above 2^63-1, which as an int64 would be negative, is said as
//     2^63-1: the node holds no revision above it.
func knownVersion(t *Topology) (epoch, rev int64, ok bool) {
	if t == nil || t.cfg == nil {
		return 0, 0, false
	}
	v := t.cfg.Version()
	switch {
	case v.Rev == 0 || v.Epoch < 0:
		return 0, 0, false
	case v.Epoch == 0:
		epoch = unsetEpoch
	default:
		epoch = v.Epoch
	}
	return epoch, int64(min(v.Rev, math.MaxInt64)), true
}

// onNotification runs on a connection's reader goroutine: it must not
// block. A config is offered to the config loop; a brief notification of a
// newer version makes the node's fetcher fetch it.
//
// Only the bucket's own are: kv_engine also pushes the global config's,
// with an empty key, to the connections of every bucket
// (push_cluster_config), and their version is not the bucket's.
func (c *Cluster) onNotification(n *Node, nt memdx.ClustermapNotification) {
	if string(nt.Bucket) != c.cfg.Bucket {
		return
	}
	if len(nt.Config) > 0 {
		c.Offer(nt.Config, n.host, "notification")
		return
	}
	t := c.topo.Load()
	if t == nil || t.cfg == nil {
		return
	}
	if nt.Version.Revision < 0 {
		// Not a revision (they count up from 1): read as a uint64 it would
		// announce the newest config there can be, and once given up on
		// (MaxAnnouncedFetches) silence every later announcement of its
		// epoch.
		return
	}
	v := vbmap.Version{Epoch: nt.Version.Epoch, Rev: uint64(nt.Version.Revision)}
	if !nt.HasEpoch || nt.Version.Epoch < 0 {
		// No epoch, or one not yet set (-1, memdx.ClusterConfigVersion):
		// the server's configs then carry no revEpoch either, which
		// vbmap reads as 0, so {-1, rev} would never be newer than a
		// config held. Compare the revisions within the held epoch; the
		// fetched config is judged by its own version, as every config is.
		v.Epoch = t.cfg.Version().Epoch
	}
	if v.Newer(t.cfg.Version()) {
		c.announceFetch(n, v)
	}
}

// Fetching reports how many nodes' fetchers run (tests: a poll or fetch
// asked for while one runs is merged into it).
func (c *Cluster) Fetching() int {
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	n := 0
	for _, f := range c.fetches {
		if f.running {
			n++
		}
	}
	return n
}

// Announced reports whether a node's fetcher is fetching an announced
// config, and the newest version announced (tests; the first node with a
// fetcher).
func (c *Cluster) Announced() (bool, uint64) {
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	for _, f := range c.fetches {
		return f.announced, f.announcedVer.Rev
	}
	return false, 0
}
