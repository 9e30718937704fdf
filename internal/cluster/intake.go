package cluster

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// How the cluster keeps its config current.
//
// Configs arrive from bootstrap, from each new connection, in push
// notifications, in NOT_MY_VBUCKET bodies, from polls, from fetches, from
// recovery rounds and from any ConfigSource. All but the bootstrap one go
// through Offer, which runs on whatever goroutine met the config (a
// fetcher, an operation, a source) and costs at most a size check and a
// byte scan (vbmap.PeekVersion, and vbmap.PeekUUIDs for a config going
// behind another; a memory compare for a config identical to
// the one waiting or the one the loop took last): a config over
// vbmap.MaxConfigSize is dropped and logged, one that is not newer than the
// held config is dropped, and a newer one is copied once into a one-slot
// mailbox (a newer one takes its place there, and it waits behind that
// one in a slot of its own, in case that one is refused: another
// cluster's) unless it was rejected, or it is the very config being
// parsed; one not newer than the config waiting, and newer than the one
// behind it, takes that slot. A config of another cluster (its uuid read
// by a byte scan, vbmap.PeekUUIDs) never waits behind: it would be
// refused, and would have taken the place of one that may not be (two
// waiting configs both refused, a broken one and another cluster's, leave
// nothing of an older one: the next poll or push brings it). While
// the loop parses the config that waited, one older than the one behind
// it takes that slot, and the one behind waits in the mailbox in its place: the slot behind never holds
// a config newer than the one waiting or being parsed, which would be
// left there when an older one is installed. One not newer than the config being parsed
// waits behind it: that one may yet be refused (another cluster's, or
// broken), and is dropped unread when it is installed. A config whose version cannot
// be peeked waits in a slot of its own (the last such one offered: its
// version unread, which is newer cannot be told), so that it
// never takes the place of a newer config waiting: the loop parses both,
// and installs whichever is newer; one found not newer (or rejected) ends
// the waits for a config on its way as a rejected config does, and the
// same bytes offered again are judged by what its parse found (offered
// while it is parsed, they are on their way). The bytes of another
// cluster's config the loop took last, refused, are refused again
// unread. The config loop parses the mailbox's config and installs it:
// each version is parsed at most once (one that cannot be peeked once per body, as long as no
// other such body came between), however many operations meet it, and
// never on an operation's goroutine.
//
// Every install closes the replaced topology's changed channel, which
// operations waiting in a back-off after NOT_MY_VBUCKET or an unavailable
// node wait on (Topology.Wake): they re-route at once. So does a node of
// it regaining a connection (wakeForNode).
//
// A NOT_MY_VBUCKET that brings nothing newer (no body, or a body not newer
// than the held config) makes the cluster fetch the config from the node
// that answered (GET_CLUSTER_CONFIG, with the known version when granted):
// at most one fetch per node in flight, at least ConfigFetchInterval between
// the starts of two fetches from one node, on a fetcher goroutine that
// exists only while fetches are due. A node's cluster-map notification that
// announces a newer version without its config is fetched on the same
// terms (announceFetch): a node announcing what it never serves costs no
// more than one answering NOT_MY_VBUCKET to everything.
//
// When no node of the current config can be reached (each failed its dial,
// or has been dialing for a probe timeout: one whose SYNs are lost would
// hold its dial for ConnectTimeout), the cluster dials the seeds and every
// node it has known (up to maxKnownAddrs) for their config, as the
// official SDKs do, so that a config naming unreachable nodes does not
// strand it once a reachable node serves a newer one.

const (
	// ConfigFetchInterval is the least time between the starts of two
	// config fetches from one node. It bounds what a node answering
	// NOT_MY_VBUCKET to every request costs (at most 50 fetches a second
	// per node, each an empty answer when the node's config is not newer
	// and it granted GetClusterConfigWithKnownVersion) while keeping the
	// wait for a moved vbucket's new owner far below the 2.5 s poll.
	ConfigFetchInterval = 20 * time.Millisecond
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

// Offer says what became of an offered config.
type Offer uint8

const (
	// OfferStale: empty, or not newer than the held config.
	OfferStale Offer = iota
	// OfferNewer: a config newer than the held one is on its way to
	// being installed (it waits in the mailbox or is being parsed).
	OfferNewer
	// OfferRejected: over vbmap.MaxConfigSize, or a version the loop
	// already rejected.
	OfferRejected
)

// intake is the mailbox between Offer and the config loop.
type intake struct {
	mu sync.Mutex
	// The newest config offered and not yet taken by the loop whose
	// version was peeked (raw nil: none), and its version.
	raw  []byte
	host string
	from string
	ver  vbmap.Version
	// behind: the newest config offered and not taken that a newer one
	// took the place of in raw, or that was not newer than raw's (another
	// node's copy of its revision, say), with its version (nil: none).
	// The newer one may be refused (another cluster's): behind then takes
	// its place (doneParsing). It is dropped, unread, once a config of
	// its version or newer is installed.
	behind     []byte
	behindHost string
	behindFrom string
	behindVer  vbmap.Version
	// odd: the last config offered and not yet taken whose version
	// PeekVersion could not read (nil: none). It has a slot of its own:
	// it may be older than the one in raw, and must not replace it.
	odd     []byte
	oddHost string
	oddFrom string
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
	// seenOther: seen was refused as another cluster's config
	// (errOtherCluster). Its version is not rejected (the cluster's own
	// config may come to it), but those bytes are refused whenever
	// parsed: the cluster uuid held does not change.
	seenOther bool
	// oddParsing: the config whose version could not be peeked that the
	// loop took and has not yet read (nil: none). The same body offered
	// meanwhile is on its way.
	oddParsing []byte
	// oddSeen: the last config the loop took whose version could not be
	// peeked, once read: installed or found not newer than the held
	// config (its version oddSeenVer), or rejected (oddSeenRejected). The same body offered
	// again (NOT_MY_VBUCKET after NOT_MY_VBUCKET) is judged by a memory
	// compare instead of another parse.
	oddSeen         []byte
	oddSeenVer      vbmap.Version
	oddSeenRejected bool

	ready chan struct{} // capacity 1: the mailbox has a config

	lastTooLarge atomic.Int64 // unix ns of the last too-large log
}

// Offer hands a config met by any goroutine (host: what $HOST in it
// stands for; from: where it came from, for the logs) to the config loop;
// see the top of this file. raw is not retained (it is copied when kept).
func (c *Cluster) Offer(raw []byte, host, from string) Offer {
	if res, ok := c.Recognise(raw, host, from); ok {
		return res
	}
	v, peeked := vbmap.PeekVersion(raw)
	in := &c.intake
	in.mu.Lock()
	defer in.mu.Unlock()
	if res, ok := c.judgeLocked(v, peeked); ok {
		if res == OfferNewer && (in.behind == nil || v.Newer(in.behindVer)) && !c.ofOtherClusterLocked(raw) {
			// Not newer than the config waiting, which may be refused.
			in.setBehind(bytes.Clone(raw), v, host, from)
		}
		return res
	}
	if peeked {
		switch {
		case in.raw != nil && (in.behind == nil || in.ver.Newer(in.behindVer)) && !c.ofOtherClusterLocked(in.raw):
			// Newer than the config waiting: that one waits behind.
			in.setBehind(in.raw, in.ver, in.host, in.from)
		case in.raw == nil && in.behind != nil && in.behindVer.Newer(v):
			// The loop took the config waiting (it is being parsed),
			// and the one behind it is newer than this one: that one
			// is the next to parse, this one behind it. Left behind,
			// it would be dropped only by an install of its version.
			in.promoteBehind()
			if !c.ofOtherClusterLocked(raw) {
				in.setBehind(bytes.Clone(raw), v, host, from)
			}
			return OfferNewer
		}
		in.raw = bytes.Clone(raw)
		in.host, in.from, in.ver = host, from, v
	} else {
		in.odd = bytes.Clone(raw)
		in.oddHost, in.oddFrom = host, from
	}
	in.wake()
	return OfferNewer
}

// setBehind makes raw, of version v, the config waiting behind the one
// in the mailbox (intake.behind). in.mu is held.
func (in *intake) setBehind(raw []byte, v vbmap.Version, host, from string) {
	in.behind, in.behindVer, in.behindHost, in.behindFrom = raw, v, host, from
}

// promoteBehind moves the config waiting behind into the mailbox, empty
// (the loop took or dropped its config), and wakes the loop. in.mu is held.
func (in *intake) promoteBehind() {
	in.raw, in.ver, in.host, in.from = in.behind, in.behindVer, in.behindHost, in.behindFrom
	in.behind = nil
	in.wake()
}

// wake tells the config loop that the mailbox has a config.
func (in *intake) wake() {
	select {
	case in.ready <- struct{}{}:
	default:
	}
}

// Recognise answers for a config without scanning it, when it can: an
// empty one, one over vbmap.MaxConfigSize (logged, at most once per
// tooLargeLogInterval), and one byte-identical to a config in the mailbox
// (or waiting behind it, or being parsed) or to the one the loop took last
// (a memory compare). It is cheap enough
// for a connection's reader goroutine; ok false means the config must be
// scanned (Offer): the engine keeps a copy of it for NotMyVbucket.
func (c *Cluster) Recognise(raw []byte, host, from string) (res Offer, ok bool) {
	if len(raw) == 0 {
		return OfferStale, true
	}
	in := &c.intake
	if len(raw) > vbmap.MaxConfigSize {
		now := c.cfg.Clock.Now().UnixNano()
		last := in.lastTooLarge.Load()
		if now-last >= int64(tooLargeLogInterval) && in.lastTooLarge.CompareAndSwap(last, now) {
			c.cfg.Logger.Error("kvwire: ignoring a cluster config over the size limit", "from", host,
				"source", from, "bytes", len(raw), "limit", vbmap.MaxConfigSize)
		}
		return OfferRejected, true
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.raw) == len(raw) && bytes.Equal(in.raw, raw) {
		// Waiting behind the config being parsed, it is stale once that
		// one is installed (until the loop drops it: doneParsing).
		if c.heldCovers(in.ver) {
			return OfferStale, true
		}
		return OfferNewer, true
	}
	if len(in.behind) == len(raw) && bytes.Equal(in.behind, raw) {
		// Waiting behind the config ahead of it, in case that one is
		// refused: on its way, and not to be kept a second time.
		if c.heldCovers(in.behindVer) {
			return OfferStale, true
		}
		return OfferNewer, true
	}
	if len(in.odd) == len(raw) && bytes.Equal(in.odd, raw) ||
		in.oddParsing != nil && len(in.oddParsing) == len(raw) && bytes.Equal(in.oddParsing, raw) {
		return OfferNewer, true
	}
	if in.seenPeeked && len(in.seen) == len(raw) && bytes.Equal(in.seen, raw) {
		if in.parsingSet && in.parsing == in.seenVer {
			// The config being parsed; once installed, it is stale
			// before the loop marks its parse done (doneParsing).
			if c.heldCovers(in.seenVer) {
				return OfferStale, true
			}
			return OfferNewer, true
		}
		if in.seenOther {
			return OfferRejected, true
		}
		return c.judgeLocked(in.seenVer, true)
	}
	if in.oddSeen != nil && len(in.oddSeen) == len(raw) && bytes.Equal(in.oddSeen, raw) {
		if in.oddSeenRejected {
			return OfferRejected, true
		}
		return c.judgeLocked(in.oddSeenVer, true)
	}
	return 0, false
}

// judgeLocked decides for a config of version v (peeked: v was read) that
// is not yet kept: ok false means it is to be kept in the mailbox. in.mu is
// held.
func (c *Cluster) judgeLocked(v vbmap.Version, peeked bool) (Offer, bool) {
	if !peeked {
		return 0, false
	}
	in := &c.intake
	switch {
	case c.heldCovers(v):
		return OfferStale, true
	case in.rejectedSet && v == in.rejected:
		return OfferRejected, true
	case in.raw != nil && !v.Newer(in.ver):
		return OfferNewer, true
	}
	return 0, false
}

// ofOtherClusterLocked reports whether raw names another cluster uuid
// than the configs installed named (clusterUUIDHeld): such a config is
// refused once parsed, and so never waits behind another (in case that
// one is refused: it would take the place there of a config that may be
// installed). It costs a byte scan (vbmap.PeekUUIDs), never a parse:
// a config whose uuid the scan cannot read is taken for the cluster's.
// in.mu is held.
func (c *Cluster) ofOtherClusterLocked(raw []byte) bool {
	held := c.clusterUUIDHeld()
	if held == "" {
		return false
	}
	got, _, ok := vbmap.PeekUUIDs(raw)
	return ok && got != "" && got != held
}

// heldCovers reports whether the config held is of version v or newer: a
// config of version v is stale.
func (c *Cluster) heldCovers(v vbmap.Version) bool {
	t := c.topo.Load()
	return t != nil && t.cfg != nil && !v.Newer(t.cfg.Version())
}

// newerOnItsWay reports whether a config newer than v waits in the mailbox
// or is being parsed.
func (c *Cluster) newerOnItsWay(v vbmap.Version) bool {
	in := &c.intake
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.parsingSet && in.parsing.Newer(v) || in.raw != nil && in.ver.Newer(v)
}

// OnItsWay reports whether a config of version v or newer waits in the
// mailbox or is being parsed. A config offered as newer (OfferNewer) is on
// its way until the loop has installed it or refused it: the install is
// stored before the parse is marked done, so a Topology read after
// OnItsWay returned false holds it, unless it was refused (or dropped
// for a newer one, itself installed or refused).
func (c *Cluster) OnItsWay(v vbmap.Version) bool {
	in := &c.intake
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.parsingSet && !v.Newer(in.parsing) || in.raw != nil && !v.Newer(in.ver) ||
		in.behind != nil && !v.Newer(in.behindVer)
}

// offered is a config taken from the mailbox, with where it came from.
type offered struct {
	raw        []byte
	host, from string
}

// takeOffered moves the mailbox's configs to the loop, the one whose
// version was peeked (its version marked as being parsed) and the one whose
// version was not.
func (c *Cluster) takeOffered() (peeked, odd offered) {
	in := &c.intake
	in.mu.Lock()
	defer in.mu.Unlock()
	peeked = offered{in.raw, in.host, in.from}
	odd = offered{in.odd, in.oddHost, in.oddFrom}
	in.raw, in.odd = nil, nil
	in.oddParsing = odd.raw
	in.parsing, in.parsingSet = in.ver, peeked.raw != nil
	if peeked.raw != nil {
		in.seen, in.seenVer, in.seenPeeked, in.seenOther = peeked.raw, in.ver, true, false
	}
	return peeked, odd
}

// doneParsing records the outcome (err: applyConfig's) of the config
// takeOffered gave. A version that failed is rejected unread from then on,
// unless it was another cluster's config: the cluster's own may come to
// it. A config waiting in the mailbox that is not newer than the one
// parsed was kept in case that one failed: when it did not, it is dropped
// unread (it is not newer than the config held).
func (c *Cluster) doneParsing(err error) {
	in := &c.intake
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.parsingSet {
		return
	}
	switch {
	case err == nil:
		if in.raw != nil && !in.ver.Newer(in.parsing) {
			in.raw = nil
		}
		if in.behind != nil && !in.behindVer.Newer(in.parsing) {
			in.behind = nil
		}
	case errors.Is(err, errOtherCluster):
		in.seenOther = true
	default:
		in.rejected, in.rejectedSet = in.parsing, true
	}
	in.parsingSet = false
	switch {
	case in.behind == nil:
	case c.heldCovers(in.behindVer):
		// Stale (a config whose version could not be peeked, parsed
		// in the same round, was newer): dropped unread.
		in.behind = nil
	case err != nil && in.raw == nil:
		// The config that took its place was refused: the one behind
		// it is the newest that may be installed.
		in.promoteBehind()
	}
}

// oddRead records what the config whose version could not be peeked,
// just taken by the loop, turned out to be: of version v, installed or not
// newer than the held one (read), or rejected (neither).
func (c *Cluster) oddRead(raw []byte, v vbmap.Version, read, rejected bool) {
	in := &c.intake
	in.mu.Lock()
	defer in.mu.Unlock()
	in.oddParsing = nil
	if !read && !rejected {
		in.oddSeen = nil
		return
	}
	in.oddSeen, in.oddSeenVer, in.oddSeenRejected = raw, v, rejected
}

// installOffered parses and installs the mailbox's configs, if any: the
// one whose version could not be peeked first, then the other, each
// installed when newer than the one held then.
func (c *Cluster) installOffered() {
	peeked, odd := c.takeOffered()
	apply := func(o offered) (vbmap.Version, bool, bool, error) {
		if o.raw == nil {
			return vbmap.Version{}, false, false, nil
		}
		v, read, stale, err := c.applyConfig(o.raw, o.host)
		if err != nil {
			c.cfg.Logger.Warn("kvwire: ignoring a cluster config", "from", o.host, "source", o.from, "err", err)
		}
		return v, read, stale, err
	}
	oddVer, oddKnown, oddStale, oddErr := apply(odd)
	if odd.raw != nil {
		c.oddRead(odd.raw, oddVer, oddKnown, oddErr != nil)
	}
	_, _, _, err := apply(peeked)
	c.doneParsing(err)
	if err != nil || oddErr != nil || oddStale {
		// Retries waiting for this config (NMVAwaitConfig) route again
		// by the one held: Offer could not tell that a config whose
		// version it could not peek was not newer.
		c.mu.Lock()
		if cur := c.topo.Load(); cur != nil && cur.changed != nil && c.ctx.Err() == nil {
			c.renewLocked(cur)
		}
		c.mu.Unlock()
	}
}

// configLoop installs offered configs, polls for new ones and starts a
// recovery round when no node of the current config can be reached.
func (c *Cluster) configLoop() {
	defer c.wg.Done()
	poll := c.cfg.Clock.NewTimer(c.cfg.PollInterval)
	defer poll.Stop()
	// strand: when a node of the config still in its first dial would
	// leave maybeRecover's grace (armed while one is; strandAt zero: not).
	// Made when first needed, so that no timer is armed on the clock
	// before one is due (tests count the armed timers).
	var strand retry.Timer
	var strandC <-chan time.Time // strand's channel; nil until it is made
	defer func() {
		if strand != nil {
			strand.Stop()
		}
	}()
	var strandAt time.Time
	lookAgain := func() {
		wait := c.maybeRecover()
		if wait <= 0 {
			return
		}
		if at := c.cfg.Clock.Now().Add(wait); strandAt.IsZero() || at.Before(strandAt) {
			strandAt = at
			if strand == nil {
				strand = c.cfg.Clock.NewTimer(wait)
				strandC = strand.C()
			} else {
				strand.Reset(wait)
			}
		}
	}
	var rr int
	// pollHold: a poll due that every node's connections would hold
	// behind a synchronous write waits until then at the latest (zero:
	// none held; pollTarget).
	var pollHold time.Time
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.intake.ready:
			c.installOffered()
			lookAgain() // a config of new nodes: look again once their grace ends
		case <-c.unreachable:
			lookAgain()
		case <-strandC:
			strandAt = time.Time{}
			lookAgain()
		case <-poll.C():
			t := c.topo.Load()
			if t == nil || len(t.all) == 0 {
				poll.Reset(c.cfg.PollInterval)
				pollHold = time.Time{}
				continue
			}
			if pollHold.IsZero() {
				lookAgain()
			}
			i, wait := pollTarget(t, rr+1)
			forced := false // held long enough: not held again (holdFetch)
			if i < 0 {
				now := c.cfg.Clock.Now()
				if pollHold.IsZero() {
					pollHold = now.Add(wait)
				}
				if now.Before(pollHold) {
					poll.Reset(min(pollRecheckInterval, c.cfg.PollInterval, pollHold.Sub(now)))
					continue
				}
				i, forced = (rr+1)%len(t.all), true // held long enough: polled anyway
			}
			pollHold = time.Time{}
			poll.Reset(c.cfg.PollInterval)
			rr = i
			c.requestFetchHeld(t.all[i], vbmap.Version{}, forced)
		}
	}
}

// pollRecheckInterval is how often a held poll looks again for a node it
// can be sent to (pollTarget).
const pollRecheckInterval = 50 * time.Millisecond

// pollTarget picks the node the config poll goes to: the first, from
// t.all[from] on (round robin), with a connection the poll would not wait
// on (Node.barrierWait). GET_CLUSTER_CONFIG is a barrier in kv_engine on a
// connection with UnorderedExecution (not is_reorder_supported): it runs
// only once every earlier command has finished, and no later command
// starts before it. Sent behind a synchronous write waiting for
// replication, it would hold every request after it on that connection
// (reads that the server would otherwise answer at once) until the
// write's durability timeout, and time out itself. When every node's
// connections hold such a request, it returns -1 and the least wait: the
// poll is held (configLoop) until a node is free or that wait, measured
// when the poll became due, has passed (then it is sent to the next node
// in turn anyway: a workload of durable writes never stops the polls,
// it delays them by at most one durability timeout).
func pollTarget(t *Topology, from int) (int, time.Duration) {
	least := time.Duration(-1)
	for k := range len(t.all) {
		i := (from + k) % len(t.all)
		w := t.all[i].barrierWait()
		if w <= 0 {
			return i, 0
		}
		if least < 0 || w < least {
			least = w
		}
	}
	return -1, least
}
