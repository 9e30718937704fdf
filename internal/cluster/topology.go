package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// Topology is an immutable routing snapshot: a config (none for
// memcached://), its ketama ring when it routes by one (memcached:// and
// memcached buckets), and the node behind each server index. A newer
// config, or a node of it regaining a connection, installs a new one.
type Topology struct {
	cfg     *vbmap.Config
	ketama  *vbmap.Ketama
	servers []*Node // by server index; nil where the index has no address
	all     []*Node // distinct nodes
	// changed is closed when a newer topology replaces this one: retry
	// waits routed with this one end on it (Wake).
	changed chan struct{}
}

// Config is the config routed by (nil for memcached://).
func (t *Topology) Config() *vbmap.Config { return t.cfg }

// Ketama reports whether keys are routed by a ketama ring.
func (t *Topology) Ketama() bool { return t.ketama != nil }

// Nodes are the topology's distinct nodes.
func (t *Topology) Nodes() []*Node { return t.all }

// Server is the node of server index i (nil where it has no address).
func (t *Topology) Server(i int) *Node {
	if i < 0 || i >= len(t.servers) {
		return nil
	}
	return t.servers[i]
}

// NumServers is the number of server indexes.
func (t *Topology) NumServers() int { return len(t.servers) }

// KetamaServer is the one ketama routing step: the server index of key and
// its node (nil where the index has no address). A single server takes
// every key without hashing (the ring's MD5 measured 9% of the client's
// CPU per Get on one memcached).
func (t *Topology) KetamaServer(key []byte) (int, *Node) {
	i := 0
	if len(t.servers) > 1 {
		i = t.ketama.Server(key)
	}
	return i, t.Server(i)
}

// Wake is the channel that ends a retry wait for reason of an attempt
// routed with t: closed when t is replaced (a newer config, a node of t
// with a connection again, Close) for the reasons those can resolve (the
// vbucket moved, the node or its socket is unavailable); nil for the
// others, and for memcached://, whose waits are back-off only.
func (t *Topology) Wake(reason retry.Reason) <-chan struct{} {
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

// Target is where a request goes: a key's copy (Key, Replica: 0 the
// active copy, n > 0 replica n), a vbucket's active node (ByVbucket,
// Vbucket), or a node, whatever the topology (Node, with Vbucket the one
// the request names).
type Target struct {
	Key       []byte
	Replica   int
	ByVbucket bool
	Vbucket   uint16
	Node      *Node
}

// Route is where an attempt goes, and the topology it was routed with.
type Route struct {
	Topo    *Topology
	Node    *Node
	Vbucket uint16
}

// Route finds where the next attempt of a request to tg goes, by the
// current topology and the request's route state rs (RFC 0005: the forward
// map after a NOT_MY_VBUCKET). With no route it returns the retry reason
// (retry.ReasonUnknown: final) and why; r.Topo is set either way.
func (c *Cluster) Route(rs *vbmap.RouteState, tg *Target) (r Route, reason retry.Reason, err error) {
	r.Topo = c.topo.Load()
	r.Node, r.Vbucket, reason, err = c.route(r.Topo, rs, tg)
	return r, reason, err
}

func (c *Cluster) route(t *Topology, rs *vbmap.RouteState, tg *Target) (*Node, uint16, retry.Reason, error) {
	if tg.Node != nil {
		return tg.Node, tg.Vbucket, 0, nil
	}
	if t == nil {
		return nil, 0, retry.ReasonNodeNotAvailable, kverr.ErrNoNodeAvailable
	}
	if tg.ByVbucket {
		vb := tg.Vbucket
		if t.cfg == nil || t.ketama != nil {
			return nil, vb, retry.ReasonUnknown, fmt.Errorf("%w: this request needs a bucket with vbuckets", kverr.ErrFeatureNotAvailable)
		}
		server, err := rs.RouteVbucket(t.cfg, vb, 0)
		if err != nil {
			return nil, vb, retry.ReasonNodeNotAvailable, err
		}
		return c.serverNode(t, server, vb)
	}
	if t.ketama != nil {
		_, n := t.KetamaServer(tg.Key)
		if n == nil {
			return nil, 0, retry.ReasonNodeNotAvailable, kverr.ErrNoNodeAvailable
		}
		// A memcached server that refuses connections fails its keys at
		// once (Node.Pick, which looks at its connections anyway).
		return n, 0, 0, nil
	}
	server, vb, err := rs.Route(t.cfg, tg.Key, tg.Replica)
	if err != nil {
		if errors.Is(err, vbmap.ErrReplicaOutOfRange) {
			return nil, 0, retry.ReasonUnknown, err
		}
		if tg.Replica > 0 && errors.Is(err, vbmap.ErrNoServer) {
			// The replica does not exist now (its node failed over, a
			// cluster short of nodes): as Topology.Copies skips it at
			// the start of a replica read, a read that meets it later
			// ends rather than retrying until its timeout. A missing
			// active copy is a failover in progress: waited for.
			return nil, vb, retry.ReasonUnknown, fmt.Errorf("%w: replica %d of vbucket %d: %w", kverr.ErrNoNodeAvailable, tg.Replica, vb, err)
		}
		return nil, vb, retry.ReasonNodeNotAvailable, err
	}
	return c.serverNode(t, server, vb)
}

// serverNode is the node of server index i of t, for vbucket vb.
func (c *Cluster) serverNode(t *Topology, i int, vb uint16) (*Node, uint16, retry.Reason, error) {
	n := t.Server(i)
	if n == nil {
		return nil, vb, retry.ReasonNodeNotAvailable, c.nodeError("server index "+strconv.Itoa(i), errors.New("no address on network "+c.network))
	}
	return n, vb, 0, nil
}

// wakeForNode ends the retry waits of every operation routed with the
// current topology when n, one of its nodes, which had no live connection,
// has one again (at most once per nodeWakeInterval per node): an operation
// that found n unavailable retries at once instead of at the end of its
// back-off, which the default strategy lets grow to a second. Waits for
// other reasons the topology's channel ends (NOT_MY_VBUCKET, another node)
// retry early too; a failed retry goes on with the next back-off. The
// topology is replaced by a copy with a fresh changed channel, so that, as
// after a config install, only the current topology's channel is open.
// memcached topologies have no such channel. It takes mu: it is called
// from a node's maintain goroutine, never under mu.
func (c *Cluster) wakeForNode(n *Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.topo.Load()
	if cur == nil || cur.changed == nil || c.ctx.Err() != nil || !slices.Contains(cur.all, n) {
		return
	}
	c.renewLocked(cur)
}

// renewLocked replaces cur, the current topology, by a copy with a fresh
// changed channel, which it returns: the retry waits routed with cur end,
// and later ones wait on the copy. mu is held.
func (c *Cluster) renewLocked(cur *Topology) *Topology {
	t := *cur
	t.changed = make(chan struct{})
	c.swapLocked(&t)
	return &t
}

// swapLocked makes t the current topology and closes the changed channel
// of the one it replaces, which ends the retry waits routed with that one.
// It returns the replaced topology. mu is held.
func (c *Cluster) swapLocked(t *Topology) *Topology {
	old := c.topo.Swap(t)
	if old != nil && old.changed != nil && !closed(old.changed) {
		close(old.changed)
	}
	if old == nil || !slices.Equal(old.all, t.all) {
		c.health.notify() // nodes came or went (health.go)
	}
	return old
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// errOtherCluster: a config whose cluster uuid is not the held config's
// (applyConfig). Its version says nothing of the cluster's own configs,
// which may reach it: it is not remembered as a rejected version.
var errOtherCluster = errors.New("the config is of another cluster")

// applyConfig parses raw and installs it when it is newer than the held
// config. It runs on the config loop. The error says why a config that
// was not older than the held one was not installed; read says that its
// version v was read (peeked or parsed) and the config installed, or
// found not newer than the held one (stale).
func (c *Cluster) applyConfig(raw []byte, host string) (v vbmap.Version, read, stale bool, err error) {
	cur := c.topo.Load()
	if cur != nil && cur.cfg != nil {
		if v, ok := vbmap.PeekVersion(raw); ok && !v.Newer(cur.cfg.Version()) {
			return v, true, true, nil
		}
	}
	c.parses.Add(1)
	if c.cfg.BeforeParse != nil {
		c.cfg.BeforeParse()
	}
	cfg, err := vbmap.Parse(raw, host)
	if err != nil {
		return v, false, false, err
	}
	if cfg.BucketName() != "" && cfg.BucketName() != c.cfg.Bucket {
		return v, false, false, fmt.Errorf("the config is for bucket %q", cfg.BucketName())
	}
	var logs deferredLogs
	defer logs.log(c.cfg.Logger) // once mu is released
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return v, false, false, nil
	}
	cur = c.topo.Load()
	if held := c.clusterUUIDHeld(); held != "" && cfg.ClusterUUID() != "" && cfg.ClusterUUID() != held {
		// Another cluster's bucket of the same name (a seed's or a known
		// node's address given to another cluster's node): a cluster's
		// uuid does not change, and a bucket made again keeps it.
		return v, false, false, fmt.Errorf("%w (cluster uuid %s, not %s)", errOtherCluster, cfg.ClusterUUID(), held)
	}
	if cur != nil && cur.cfg != nil && !cfg.Newer(cur.cfg) {
		return cfg.Version(), true, true, nil
	}
	if cur != nil && cur.cfg != nil && routable(cur.cfg) && !routable(cfg) {
		// A bucket does not lose its partitions; a newer config without
		// a map is a cluster-level or half-made one. Keep routing by the
		// map held.
		return v, false, false, fmt.Errorf("config rev %s has no vbucket map; keeping rev %s", cfg.Version(), cur.cfg.Version())
	}
	c.installLocked(cfg, &logs)
	return cfg.Version(), true, false, nil
}

// clusterUUIDHeld is the cluster's uuid as the configs installed named it
// (clusterUUID, Server 7.6.4 and later): that of the last one naming one,
// though the config held may name none (served by an older node during an
// upgrade). Empty: none named one.
func (c *Cluster) clusterUUIDHeld() string {
	if p := c.clusterUUID.Load(); p != nil {
		return *p
	}
	return ""
}

// otherCluster reads the cluster uuid raw names (a config served from
// host) and, when it is not the one the configs installed named
// (clusterUUIDHeld), returns both: a config that a node of another
// cluster served (an address the cluster's node had given to another
// cluster's node, with a bucket of the same name). ok is false when both
// name the same cluster, or either names none (older servers), or raw
// cannot be read (left to where it is offered, which says why). The uuid
// is read by readUUIDs.
func (c *Cluster) otherCluster(raw []byte, host string) (got, held string, ok bool) {
	held = c.clusterUUIDHeld()
	if held == "" || len(raw) > vbmap.MaxConfigSize {
		return "", "", false
	}
	got, _, read := readUUIDs(raw, host)
	if !read || got == "" || got == held {
		return "", "", false
	}
	return got, held, true
}

// readUUIDs reads the cluster and bucket uuids raw (a config served from
// host, at most vbmap.MaxConfigSize) names, in a byte scan
// (vbmap.PeekUUIDs, a thousandth of a parse), parsing raw only when the
// scan cannot tell; ok is false when neither can read them. The scan may
// read them from a config that would not parse: a uuid written there
// still says whose config it is.
func readUUIDs(raw []byte, host string) (cluster, bucket string, ok bool) {
	if cluster, bucket, ok = vbmap.PeekUUIDs(raw); ok {
		return cluster, bucket, true
	}
	cfg, err := vbmap.Parse(raw, host)
	if err != nil {
		return "", "", false
	}
	return cfg.ClusterUUID(), cfg.BucketUUID(), true
}

// OtherCluster says, as an error matching none of the sentinels, that raw
// (a config served from host) is of another cluster than the configs
// installed named (its clusterUUID, Server 7.6.4 and later), and nil
// otherwise: a source reading configs from a node whose address another
// cluster's node now has moves to another node. It costs a byte scan of
// raw.
func (c *Cluster) OtherCluster(raw []byte, host string) error {
	if got, held, ok := c.otherCluster(raw, host); ok {
		return fmt.Errorf("%w (cluster uuid %s, not %s)", errOtherCluster, got, held)
	}
	return nil
}

// routable reports whether cfg can route a key: a vbucket map, or ketama
// for a memcached bucket.
func routable(cfg *vbmap.Config) bool { return cfg.HasVbucketMap() || cfg.Ketama() != nil }

// installLocked builds and stores the topology of cfg, starting pools for
// new nodes and retiring those the config no longer lists. mu is held: what
// it logs goes to logs, logged by the caller once mu is released.
func (c *Cluster) installLocked(cfg *vbmap.Config, logs *deferredLogs) *Topology {
	t := &Topology{cfg: cfg, ketama: cfg.Ketama(), servers: make([]*Node, cfg.NumServers()),
		changed: make(chan struct{})}
	seen := map[*Node]bool{}
	var fresh []*Node // new nodes, started once t is stored
	for i := range t.servers {
		addr, ok := cfg.ServerKVAddr(i, c.network, c.cfg.TLS)
		if !ok || addr == "" {
			continue
		}
		n := c.nodes[addr]
		if n == nil {
			n = newNode(c, addr)
			c.nodes[addr] = n
			fresh = append(fresh, n)
			c.rememberLocked(addr)
			delete(c.looked, addr) // a config of the bucket held names it
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
		logs.add(slog.LevelWarn, "kvwire: config names no reachable KV node; keeping the current nodes to poll",
			"rev", cfg.Version().String(), "network", c.network)
		for _, n := range c.nodes {
			seen[n] = true
			t.all = append(t.all, n)
		}
	}
	if u := cfg.ClusterUUID(); u != "" {
		c.clusterUUID.Store(&u)
	}
	old := c.swapLocked(t)
	if old != nil && old.cfg != nil && old.cfg.BucketUUID() != "" && cfg.BucketUUID() != "" &&
		old.cfg.BucketUUID() != cfg.BucketUUID() {
		// The bucket was deleted and made again under its name: the new
		// one numbers its collections afresh.
		c.colls.Forget()
		logs.add(slog.LevelWarn, "kvwire: the bucket was deleted and made again (its uuid changed); collection ids are looked up again",
			"bucket", cfg.BucketName(), "old_uuid", old.cfg.BucketUUID(), "uuid", cfg.BucketUUID())
	}
	// The new nodes dial only now: each connection is vetted (Node.vet)
	// against the config just stored and the cluster uuid it named. A dial
	// started before would, ended before the store (the first install's),
	// find nothing installed and vet nothing: another cluster's node at
	// the address was used.
	for _, n := range fresh {
		n.start(nil)
		if hook := testHookNodeStarted.Load(); hook != nil {
			(*hook)(n)
		}
	}
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
		logs.add(slog.LevelInfo, "kvwire: config updated", "from", old.cfg.Version().String(),
			"to", cfg.Version().String(), "nodes", len(t.all), "forward_map", cfg.HasForwardMap())
	}
	return t
}

// testHookNodeStarted, when set by this package's tests, sees each node
// an install has just started (its pool dialing), with mu held.
var testHookNodeStarted atomic.Pointer[func(*Node)]

// Changed is closed when a newer topology replaces t.
func (t *Topology) Changed() <-chan struct{} { return t.changed }
