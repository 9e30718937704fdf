package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/lifecycle"
)

// recoveryState is the single recovery round in flight.
type recoveryState struct {
	running bool
	last    time.Time
}

// NodeUnavailable tells the cluster that a request found its node
// unavailable: the config loop checks whether any node of the config is
// reachable, and asks the seeds and known nodes for a config if none is.
func (c *Cluster) NodeUnavailable() {
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
func stranded(t *Topology, now time.Time, grace time.Duration) (ok bool, wait time.Duration) {
	if t == nil || t.cfg == nil || len(t.all) == 0 {
		return false, 0
	}
	young := false
	for _, n := range t.all {
		if _, _, err := n.Pick(); err == nil {
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

// maybeRecover starts a recovery round when the cluster is stranded and
// none ran in the last recoveryInterval, unless the configs come from a
// source (kvConfigs false), which finds its own way back (its rounds over
// the config's nodes; the seeds looked up again once it could read from
// none of them: SourceUnreachable). No node of a config has connected
// within about the probe timeout (Config.StrandGrace) of being made
// counts as stranding it: the round then starts without waiting for the
// dials to time out. When the seeds came from a DNS SRV record, it is
// looked up again too (maybeRefreshSeeds). It runs on the config loop, and returns how long
// until a node still within that time leaves it (0: none is), for the
// loop to look again then.
func (c *Cluster) maybeRecover() time.Duration {
	if !c.kvConfigs.Load() {
		return 0 // a source finds its own way back (the HTTP stream's rounds)
	}
	t := c.topo.Load()
	now := c.cfg.Clock.Now()
	ok, wait := stranded(t, now, c.cfg.StrandGrace)
	if !ok {
		return wait
	}
	c.maybeRefreshSeeds(t, now) // a DNS SRV record may name where the cluster went
	c.fetchMu.Lock()
	if c.fetchClosed || c.recovery.running || now.Sub(c.recovery.last) < recoveryInterval {
		c.fetchMu.Unlock()
		return 0
	}
	c.recovery.running = true
	c.recovery.last = now
	c.wg.Add(1)
	c.fetchMu.Unlock()

	c.mu.Lock()
	cands := make([]string, 0, len(c.known))
	var looked map[string]bool
	for _, addr := range c.known {
		if c.nodes[addr] == nil {
			cands = append(cands, addr)
			if c.looked[addr] {
				if looked == nil {
					looked = map[string]bool{}
				}
				looked[addr] = true
			}
		}
	}
	c.mu.Unlock()
	lifecycle.Go(func() { c.recoverConfig(t, cands, looked) })
	return 0
}

// recoverConfig asks every one of cands (the seeds and known nodes, at
// most 64) for its config at once, each dial bounded by ConnectTimeout,
// and offers each config served (that of a candidate in looked, which a
// lookup of the seeds again gave, only when of the bucket uuid held:
// foreign; none of another cluster); the first newer than the one held, or
// one installed meanwhile by any other path, ends the round and the dials
// still under way. Dialed in turn, a candidate whose SYNs are dropped
// would hold back the next by a whole ConnectTimeout.
func (c *Cluster) recoverConfig(t *Topology, cands []string, looked map[string]bool) {
	defer c.wg.Done()
	defer func() {
		c.fetchMu.Lock()
		c.recovery.running = false
		c.fetchMu.Unlock()
	}()
	held := t.cfg.Version().String()
	c.cfg.Logger.Warn("kvwire: no node of the cluster config can be reached; asking the seeds and known nodes",
		"rev", held, "nodes", len(t.all), "candidates", len(cands))
	newer, changed := c.askAll(t, cands, "recovery",
		func(s servedConfig) bool { return looked[s.addr] && c.foreign(t, s) },
		func(addr string) {
			c.cfg.Logger.Debug("kvwire: recovery: the node serves no newer config", "node", addr)
		})
	if newer != "" {
		c.cfg.Logger.Info("kvwire: recovery: a node outside the current config served a newer config",
			"node", newer, "held", held)
	}
	if newer != "" || changed || c.ctx.Err() != nil {
		return
	}
	c.cfg.Logger.Warn("kvwire: recovery: no seed or known node serves a config newer than the one held",
		"rev", held, "tried", len(cands))
}

// askAll asks every one of addrs for its config at once, each dial
// bounded by ConnectTimeout, and offers (from source) each config served
// that refuse does not refuse and that is not of another cluster
// (ofAnotherCluster); notNewer hears of each one offered that was not
// newer than the one held. The first newer ends the round and the
// dials still under way: its address is returned. changed: a config was
// installed another way meanwhile, which ends the round too.
func (c *Cluster) askAll(t *Topology, addrs []string, source string, refuse func(servedConfig) bool, notNewer func(addr string)) (newer string, changed bool) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.ConnectTimeout)
	served := make(chan servedConfig, len(addrs))
	var dials sync.WaitGroup
	defer func() {
		cancel() // the dials still under way end
		dials.Wait()
	}()
	for _, addr := range addrs {
		dials.Add(1)
		lifecycle.Go(func() {
			defer dials.Done()
			served <- c.askForConfig(ctx, addr)
		})
	}
	for range addrs {
		var s servedConfig
		select {
		case s = <-served:
		case <-t.Changed(): // a newer config came another way
			return "", true
		}
		if s.raw == nil || refuse(s) || c.ofAnotherCluster(t, s, source) {
			continue
		}
		if c.Offer(s.raw, hostOf(s.addr), source) == OfferNewer {
			return s.addr, false
		}
		notNewer(s.addr)
	}
	return "", false
}

// ofAnotherCluster reports whether s names another cluster uuid than t's
// config (both named: Server 7.6.4 and later), which is logged. Such a
// config (a seed's or a known node's address given to another cluster's
// node, with a bucket of the same name) is refused where it would be
// installed (applyConfig), but only once the config loop parses it:
// offered, it would count as a newer config served and end the round
// before the cluster's own candidates answer. A config that does not
// parse is left to the offer, which says why.
func (c *Cluster) ofAnotherCluster(t *Topology, s servedConfig, source string) bool {
	if got, held, ok := c.otherCluster(s.raw, hostOf(s.addr)); ok {
		c.cfg.Logger.Warn("kvwire: "+source+": a node serves a config of another cluster (its cluster uuid differs); not using it",
			"node", s.addr, "bucket", c.cfg.Bucket, "cluster_uuid", got, "held_cluster_uuid", held)
		return true
	}
	return false
}

// servedConfig is what a recovery dial of addr got: its config, or nil.
type servedConfig struct {
	addr string
	raw  []byte
}

// askForConfig connects to addr for the config it serves at bootstrap.
func (c *Cluster) askForConfig(ctx context.Context, addr string) servedConfig {
	cn, err := conn.Dial(ctx, addr, c.connOptions(nil))
	if err != nil {
		c.cfg.Logger.Debug("kvwire: recovery: connecting failed", "node", addr, "err", err)
		return servedConfig{addr: addr}
	}
	raw := cn.ClusterConfig()
	_ = cn.Close()
	return servedConfig{addr: addr, raw: raw}
}

// rememberLocked adds addr to the addresses recovery asks, dropping the
// oldest non-seed one beyond maxKnownAddrs. topoMu is held.
func (c *Cluster) rememberLocked(addr string) {
	for _, a := range c.known {
		if a == addr {
			return
		}
	}
	c.known = append(c.known, addr)
	if len(c.known) > maxKnownAddrs {
		seeds := len(c.seeds)
		if seeds < len(c.known) {
			delete(c.looked, c.known[seeds])
			c.known = append(c.known[:seeds], c.known[seeds+1:]...)
		}
	}
}
