package cluster

import (
	"log/slog"

	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// ring is a memcached:// client's view of its servers: the hosts
// of the connection string, the node behind each, how many connection
// attempts to each have failed in a row, and which are out of the ketama
// ring (MemcachedOptions.RemoveFailedServers). Guarded by Cluster.mu.
type ring struct {
	hosts    []string
	servers  []*Node // by host index; duplicate hosts share a node
	all      []*Node // distinct nodes, kept in every topology (Ping, Nodes)
	failures map[*Node]int
	out      map[*Node]bool
}

// newRing starts from the bootstrap topology t: every server in
// the ring, and one failed attempt for each server whose bootstrap dial
// failed.
func newRing(hosts []string, t *Topology) *ring {
	r := &ring{hosts: hosts, servers: t.servers, all: t.all,
		failures: map[*Node]int{}, out: map[*Node]bool{}}
	for _, n := range t.all {
		if n.lastErr != nil {
			r.failures[n] = 1
		}
	}
	return r
}

// onDialResult is told the outcome of every connection attempt a node's
// maintainer makes. For memcached:// it counts failed attempts in a row,
// takes a server out of the ring once they reach ServerFailureLimit (when
// RemoveFailedServers is on) and puts it back on the first attempt that
// succeeds. Other schemes ignore it.
func (c *Cluster) onDialResult(n *Node, err error) {
	if !c.cfg.Memcached {
		return
	}
	var logs deferredLogs
	defer logs.log(c.cfg.Logger) // once mu is released
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.ring
	if r == nil || c.ctx.Err() != nil {
		return
	}
	if err == nil {
		failed := r.failures[n]
		delete(r.failures, n)
		if r.out[n] {
			delete(r.out, n)
			c.storeRingLocked(&logs)
			logs.add(slog.LevelInfo, "kvwire: memcached server back in the ketama ring", "node", n.addr, "failed_attempts", failed)
		} else if failed > 0 {
			logs.add(slog.LevelInfo, "kvwire: memcached server reachable again", "node", n.addr, "failed_attempts", failed)
		}
		return
	}
	r.failures[n]++
	if c.cfg.RemoveFailedServers && !r.out[n] && r.failures[n] >= c.cfg.ServerFailureLimit {
		r.out[n] = true
		c.storeRingLocked(&logs)
		logs.add(slog.LevelWarn, "kvwire: memcached server removed from the ketama ring", "node", n.addr,
			"failed_attempts", r.failures[n], "err", err)
	}
}

// storeRingLocked installs a topology whose ring holds the servers not out.
// With every server out it holds them all: their keys then fail at once
// (see Node.Down) rather than having nowhere to go. mu is held: what it
// logs goes to logs, logged once mu is released.
func (c *Cluster) storeRingLocked(logs *deferredLogs) {
	r := c.ring
	var hosts []string
	var servers []*Node
	for i, h := range r.hosts {
		if !r.out[r.servers[i]] {
			hosts = append(hosts, h)
			servers = append(servers, r.servers[i])
		}
	}
	if len(hosts) == 0 {
		hosts, servers = r.hosts, r.servers
	}
	k, err := vbmap.NewKetama(hosts)
	if err != nil { // hosts is never empty
		logs.add(slog.LevelError, "kvwire: cannot build the ketama ring", "err", err)
		return
	}
	c.topo.Store(&Topology{ketama: k, servers: servers, all: r.all})
}

// Down says why n cannot take a memcached request now, when that is
// known to last: it has no live connection and its last connection attempt
// failed for a network reason (refused, unreachable, timed out). It is nil
// while a connection is live, before the first attempt has ended, while
// the redial after a connection ended is under way (or waits its back-off:
// redialer), and for refused
// credentials or TLS, which fail through their own retry reasons.
func (n *Node) Down() error {
	if cs := n.conns.Load(); cs != nil {
		for _, cn := range *cs {
			select {
			case <-cn.Done():
			default:
				return nil
			}
		}
	}
	n.mu.Lock()
	err := n.lastErr
	n.mu.Unlock()
	if err == nil || reasonForDialError(err) != retry.ReasonNodeNotAvailable {
		return nil
	}
	return n.cl.nodeError(n.addr, err)
}
