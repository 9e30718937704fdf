package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kvwire/kvwire/internal/lifecycle"
	"github.com/kvwire/kvwire/vbmap"
)

// Looking the seeds up again (DNS SRV, SDK RFC 0011).
//
// A client whose seeds came from a DNS SRV record resolved it once, at
// Connect. A cluster that moves (its nodes replaced by others at new
// addresses: the record then names them) leaves the client with a config
// whose nodes are all gone, and recovery rounds that ask only the
// addresses it has known. So, while no node of the config can be reached
// (maybeRecover's "stranded"), the config loop also has the record looked
// up again, at most once per seedRefreshInterval of the client's clock,
// each lookup bounded by seedLookupTimeout on that clock and by Close, on a
// goroutine of its own (the requests' path never waits for it). Targets
// that are neither nodes of the config nor among the addresses recovery
// asks already (the record may name by host name the nodes the config
// names by IP address) are remembered among them, and asked for their
// config at once, as a recovery round asks its candidates. A config one serves is installed only if it is for
// the bucket held (the dial selects it; the config loop checks its name),
// newer than the one held (Offer, as for any recovery candidate: an address
// now someone else's serves nothing newer), and, when both name one, of
// the bucket uuid held: a target answering for another cluster's bucket of
// the same name is not taken for the one the client was using. A lookup
// that fails, gives no target, or times out is logged, and made again once
// the interval has passed if the cluster is still unreachable.
//
// The configs of a source (the HTTP stream, kvConfigs false) come with no
// recovery rounds: the source tells when it could read from none of its
// nodes (SourceUnreachable), which has the record looked up again on the
// same terms, and the targets are kept for the source to read from
// (SeedsLookedUp) rather than dialed: it judges what they serve as what
// any node serves, and reads from them only until a node of the config
// serves it again.
//
// gocbcore (attemptSRVRefresh, when every KV pipeline is disconnected) and
// Couchbase's C++ core (CXXCBC-172) look the record up again in the same
// circumstance.

const (
	// seedRefreshInterval is the least time between the starts of two
	// lookups of the seeds while no node of the config can be reached.
	seedRefreshInterval = 10 * time.Second
	// seedLookupTimeout bounds one lookup.
	seedLookupTimeout = 5 * time.Second
)

// SeedRefresher is a SeedResolver whose lookup can be made again while the
// cluster runs: a DNS SRV record, which a cluster that moved republishes.
type SeedRefresher interface {
	SeedResolver
	// RefreshName names what Refresh looks up (for the logs), "" when the
	// last Resolve did not take its seeds from it: there is then nothing
	// to look up again.
	RefreshName() string
	// Refresh looks the seeds up again, within ctx. It may return seeds
	// with an error (some of the answer was dropped); seeds are used
	// whenever there are some.
	Refresh(ctx context.Context) ([]string, error)
}

// errSeedLookupTimeout ends a lookup that ran for seedLookupTimeout.
var errSeedLookupTimeout = fmt.Errorf("no answer within %v", seedLookupTimeout)

// seedRefresh is the state of the lookups of the seeds; guarded by fetchMu
// but for src and name, set at bootstrap.
type seedRefresh struct {
	src  SeedRefresher // nil: the seeds did not come from a lookup
	name string
	// running: a lookup (and the dials of its new targets) is under way.
	running bool
	// last: when the last lookup started (zero: none since Connect).
	last time.Time
	// stats for SeedRefreshes.
	stats SeedRefreshStats
	// streamed are the targets of the last lookup that gave some while the
	// configs come from a source (kvConfigs false), made when the config
	// held was of version streamedFor: the source reads from them too
	// until a newer config is installed (SeedsLookedUp).
	streamed    []string
	streamedFor vbmap.Version
}

// SeedRefreshStats says what the lookups of the seeds made since Connect
// found.
type SeedRefreshStats struct {
	// Name is what is looked up (the SRV record), "" when the seeds did
	// not come from a lookup: none is ever made.
	Name string
	// Lookups counts the lookups started; Failures those that gave no
	// seed (failed, timed out, or named no target).
	Lookups, Failures int
	// Last is when the last lookup started, on the client's clock (zero:
	// none).
	Last time.Time
	// LastErr is why the last lookup that gave no seed failed.
	LastErr error
	// Targets are the seeds the last lookup that gave some named.
	Targets []string
	// Newer counts the configs targets the config did not name served
	// to the lookup's own dials that were newer than the one held, and
	// went to be installed (not those a source read from them).
	Newer int
	// Foreign counts the configs targets served of another bucket of the
	// same name (another bucket uuid), which are not used: to the
	// lookup's dials, recovery's, or a source (LookedUpForeign).
	Foreign int
}

// SeedRefreshes reports the lookups of the seeds made since Connect.
func (c *Cluster) SeedRefreshes() SeedRefreshStats {
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	s := c.refresh.stats
	s.Name = c.refresh.name
	s.Last = c.refresh.last
	s.Targets = slices.Clone(s.Targets)
	return s
}

// maybeRefreshSeeds starts a lookup of the seeds for t, stranded at now,
// unless the seeds came from none, one is under way, the last started
// within seedRefreshInterval, or the cluster is closing. It runs on the
// config loop, or on the source's goroutine (SourceUnreachable).
func (c *Cluster) maybeRefreshSeeds(t *Topology, now time.Time) {
	if c.refresh.src == nil {
		return
	}
	c.fetchMu.Lock()
	r := &c.refresh
	// c.ctx ends before fetchClosed is set (Close, Cancel): a lookup
	// started between would call the Resolver, and log, for a client
	// that is closing.
	if c.fetchClosed || c.ctx.Err() != nil || r.running || !r.last.IsZero() && now.Sub(r.last) < seedRefreshInterval {
		c.fetchMu.Unlock()
		return
	}
	r.running = true
	r.last = now
	r.stats.Lookups++
	c.wg.Add(1)
	c.fetchMu.Unlock()
	lifecycle.Go(func() { c.refreshSeeds(t) })
}

// refreshSeeds looks the seeds up again and asks the targets that are
// neither nodes of the config nor addresses recovery asks for theirs; while
// the configs come from a source, it keeps them for the source to read
// from instead (SeedsLookedUp).
func (c *Cluster) refreshSeeds(t *Topology) {
	defer c.wg.Done()
	defer func() {
		c.fetchMu.Lock()
		c.refresh.running = false
		c.fetchMu.Unlock()
	}()
	log := c.cfg.Logger
	name := c.refresh.name
	fromSource := !c.kvConfigs.Load()
	if fromSource {
		log.Warn("kvwire: no node serves the config stream; looking the seeds up again", "record", name)
	} else {
		log.Warn("kvwire: no node of the cluster config can be reached; looking the seeds up again", "record", name)
	}
	targets, err := c.lookupSeeds()
	if c.ctx.Err() != nil {
		return
	}
	if len(targets) == 0 {
		if err == nil {
			err = errors.New("no target")
		}
		c.fetchMu.Lock()
		c.refresh.stats.Failures++
		c.refresh.stats.LastErr = err
		c.fetchMu.Unlock()
		log.Warn("kvwire: looking the seeds up again gave none; trying again later while the cluster stays unreachable",
			"record", name, "err", err, "retry_in", seedRefreshInterval)
		return
	}
	if err != nil {
		log.Warn("kvwire: looking the seeds up again: some of the answer was dropped; using the rest", "record", name, "targets", targets, "err", err)
	}
	c.fetchMu.Lock()
	c.refresh.stats.Targets = slices.Clone(targets)
	if fromSource {
		c.refresh.streamed, c.refresh.streamedFor = slices.Clone(targets), t.cfg.Version()
	}
	c.fetchMu.Unlock()
	if fromSource {
		// The source asks them (their REST ports), and judges what
		// they serve as from any node: another cluster's configs are
		// passed over (Sink.OtherCluster), the newer installed.
		log.Info("kvwire: the config stream reads from the seeds looked up again too, until a newer config is installed",
			"record", name, "targets", targets)
		return
	}

	// A target that is a node of the config, or among the addresses
	// recovery asks (the seeds of Connect: the record may name hosts the
	// config names by IP address, or the other way round), is asked
	// already: dialing it again here would only repeat that, every
	// seedRefreshInterval.
	var fresh []string
	c.mu.Lock()
	for _, addr := range targets {
		if c.nodes[addr] != nil || slices.Contains(c.known, addr) || slices.Contains(fresh, addr) {
			continue
		}
		fresh = append(fresh, addr)
		// Recovery asks it too from now on, and so checks the bucket
		// uuid of its config as askTargets does.
		if c.looked == nil {
			c.looked = map[string]bool{}
		}
		c.looked[addr] = true
		c.rememberLocked(addr)
	}
	c.mu.Unlock()
	if len(fresh) == 0 {
		log.Info("kvwire: the seeds looked up again are already asked (nodes of the config held, or seeds and known nodes recovery asks); waiting for them to come back",
			"record", name, "targets", targets)
		return
	}
	log.Info("kvwire: the seeds looked up again name addresses the config does not; asking them for their config",
		"record", name, "targets", targets, "new", fresh)
	c.askTargets(t, fresh)
}

// SourceUnreachable tells the cluster that the source of its configs
// (kvConfigs false: the HTTP stream) could read from none of its nodes.
// When the seeds came from a DNS SRV record, it is looked up again, as the
// config loop has it looked up while no node of the config can be reached
// over KV (maybeRefreshSeeds: at most once per seedRefreshInterval, on a
// goroutine of its own), and its targets are offered to the source
// (SeedsLookedUp): every node the config names may be gone, the cluster
// moved to addresses only the record names.
func (c *Cluster) SourceUnreachable() {
	if c.refresh.src == nil || c.kvConfigs.Load() {
		return
	}
	if t := c.topo.Load(); t != nil && t.cfg != nil {
		c.maybeRefreshSeeds(t, c.cfg.Clock.Now())
	}
}

// SeedsLookedUp are the seeds (KV addresses) the last lookup of the seeds
// again gave while the configs come from a source, for the source to read
// from besides the nodes of the config (SourceUnreachable); none once a
// config newer than the one held when the lookup was made is installed:
// its nodes are where to read from.
func (c *Cluster) SeedsLookedUp() []string {
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	r := &c.refresh
	if len(r.streamed) == 0 {
		return nil
	}
	if t := c.topo.Load(); t != nil && t.cfg != nil && t.cfg.Version().Newer(r.streamedFor) {
		r.streamed = nil
		return nil
	}
	return slices.Clone(r.streamed)
}

// lookupSeeds runs one lookup, bounded by seedLookupTimeout on the
// client's clock and by Close.
func (c *Cluster) lookupSeeds() ([]string, error) {
	ctx, cancel := context.WithCancelCause(c.ctx)
	defer cancel(nil)
	timer := c.cfg.Clock.NewTimer(seedLookupTimeout)
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		select {
		case <-timer.C():
			cancel(errSeedLookupTimeout)
		case <-stop:
		}
	}()
	targets, err := c.refresh.src.Refresh(ctx)
	close(stop)
	watch.Wait()
	timer.Stop()
	if len(targets) == 0 && context.Cause(ctx) == errSeedLookupTimeout {
		err = fmt.Errorf("%w: %w", errSeedLookupTimeout, err)
	}
	return targets, err
}

// askTargets asks each of addrs (targets of a lookup that no config named)
// for its config at once, each dial bounded by ConnectTimeout, and offers
// each config served that is of the bucket uuid held; the first newer than
// the one held, or one installed meanwhile by any other path, ends the
// round.
func (c *Cluster) askTargets(t *Topology, addrs []string) {
	held := t.cfg.Version().String()
	log := c.cfg.Logger
	newer, _ := c.askAll(t, addrs, "seed lookup", func(s servedConfig) bool { return c.foreign(t, s) },
		func(addr string) {
			log.Warn("kvwire: a seed looked up again serves no config newer than the one held; not using it", "node", addr, "held", held)
		})
	if newer != "" {
		c.fetchMu.Lock()
		c.refresh.stats.Newer++
		c.fetchMu.Unlock()
		log.Info("kvwire: a seed looked up again served a newer config", "node", newer, "held", held)
	}
}

// foreign reports whether s, a config served by an address a lookup of the
// seeds again gave, is not to be offered: it does not parse, or it is of
// another bucket of the same name than t's (another bucket uuid: another
// cluster's), which is logged and counted. Its uuid is read before it is
// offered, by askTargets and by the recovery rounds that ask the address
// later.
func (c *Cluster) foreign(t *Topology, s servedConfig) bool { return c.foreignErr(t, s) != nil }

// foreignErr is foreign's verdict as an error (nil: to be offered).
func (c *Cluster) foreignErr(t *Topology, s servedConfig) error {
	uuid := t.cfg.BucketUUID()
	if uuid == "" {
		return nil
	}
	log := c.cfg.Logger
	cfg, err := vbmap.Parse(s.raw, hostOf(s.addr))
	if err != nil {
		log.Warn("kvwire: a seed looked up again served a config that does not parse", "node", s.addr, "err", err)
		return fmt.Errorf("a seed looked up again served a config that does not parse: %w", err)
	}
	if got := cfg.BucketUUID(); got != "" && got != uuid {
		c.fetchMu.Lock()
		c.refresh.stats.Foreign++
		c.fetchMu.Unlock()
		log.Warn("kvwire: a seed looked up again serves another bucket of the same name (its uuid differs); not using it: Connect again to use that cluster",
			"node", s.addr, "bucket", c.cfg.Bucket, "uuid", got, "held_uuid", uuid)
		return fmt.Errorf("a seed looked up again serves another bucket of the same name (bucket uuid %s, not %s)", got, uuid)
	}
	return nil
}

// LookedUpForeign says, as an error matching none of the sentinels, that
// raw, served by addr, a seed looked up again (SeedsLookedUp) that no
// config names, is not to be offered: it does not parse, or it is of
// another bucket of the same name than the config held (foreign: another
// bucket uuid, another cluster's even where the configs name no cluster
// uuid, before Server 7.6.4, for Sink.OtherCluster to tell), as the
// lookup's own dials judge it on the KV path. nil otherwise.
func (c *Cluster) LookedUpForeign(raw []byte, addr string) error {
	t := c.topo.Load()
	if t == nil || t.cfg == nil {
		return nil
	}
	return c.foreignErr(t, servedConfig{addr: addr, raw: raw})
}
