package mockcluster

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// RebalanceOptions describe the target of a rebalance.
type RebalanceOptions struct {
	// Nodes are the ids of the nodes that hold data after the rebalance;
	// nil means every member of the cluster (nodes not failed over). A
	// failed-over node listed here is added back.
	Nodes []int
	// Targets gives explicit target maps for some buckets, by name: node ids
	// per vbucket, active first, -1 for a missing replica. Buckets without
	// one get a balanced map over Nodes.
	Targets map[string][][]int
	// Pace, when positive, moves one vbucket of every bucket per Pace on a
	// background goroutine and finishes the rebalance when none is left.
	// Zero leaves the pace to Step and Finish.
	Pace time.Duration
}

// Rebalance is a rebalance in progress. While it runs, every bucket's config
// carries vBucketMapForward (the target); Step moves vbuckets to their
// target owners, each step publishing a config with a higher revision in
// which the moved vbuckets have their new owners (the old owner answers
// NOT_MY_VBUCKET for them from then on); Finish moves the rest and
// publishes a config without the forward map.
type Rebalance struct {
	c       *Cluster
	targets map[*Bucket][][]int
	final   []int
	done    chan struct{}

	pacerStop chan struct{}
	pacerOnce sync.Once
}

// StartRebalance starts a rebalance towards o and publishes, for every
// couchbase bucket, a config whose serverList holds the old and the new
// nodes and whose vBucketMapForward is the target; a memcached bucket
// keeps its nodes until Finish gives it the rebalance's nodes. Only one
// rebalance runs at a time.
func (c *Cluster) StartRebalance(o RebalanceOptions) (*Rebalance, error) {
	c.mu.Lock()
	defer c.unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.rebalance != nil {
		return nil, ErrRebalancing
	}
	nodes, err := c.rebalanceNodesLocked(o.Nodes)
	if err != nil {
		return nil, err
	}
	r := &Rebalance{c: c, done: make(chan struct{}), pacerStop: make(chan struct{})}
	if r.targets, r.final, err = c.rebalanceTargetsLocked(o.Targets, nodes); err != nil {
		return nil, err
	}
	for _, id := range r.final {
		c.nodes[id].failedOver = false
	}
	c.rebalance = r
	c.publishGlobalLocked()
	for _, name := range c.order {
		b := c.buckets[name]
		t := r.targets[b]
		s := b.snap.Load()
		if b.memcached() {
			// The nodes being added serve a memcached bucket once the
			// rebalance is over: until then its nodes (and ring) stay as
			// they were, while nodesExt lists every cluster member (a
			// 7.x memcached config mid-rebalance has more nodesExt than
			// nodes entries).
			c.publishLocked(b, s.servers, nil, nil, s.manifest)
			continue
		}
		servers := append([]int(nil), s.servers...)
		for _, id := range r.final {
			if !contains(servers, id) {
				servers = append(servers, id)
			}
		}
		c.publishLocked(b, servers, s.chains, t, s.manifest)
	}
	if o.Pace > 0 {
		c.wg.Add(1)
		go r.pace(o.Pace)
	}
	return r, nil
}

// rebalanceTargetsLocked computes a rebalance's target map per couchbase
// bucket (explicit ones checked, balanced over nodes otherwise) and the
// nodes that hold data at its end, sorted. c.mu must be held.
func (c *Cluster) rebalanceTargetsLocked(explicit map[string][][]int, nodes []int) (map[*Bucket][][]int, []int, error) {
	for name := range explicit {
		if c.buckets[name] == nil {
			return nil, nil, fmt.Errorf("%w: bucket %q", ErrNotFound, name)
		}
		if c.buckets[name].memcached() {
			return nil, nil, invalidf("bucket %q is a memcached bucket: it has no vbucket map", name)
		}
	}
	targets := make(map[*Bucket][][]int)
	finalSet := make(map[int]bool)
	for _, name := range c.order {
		b := c.buckets[name]
		if b.memcached() {
			// A memcached bucket has no map to move: it ends on every
			// node of the rebalance (it has no entry in targets).
			for _, id := range nodes {
				finalSet[id] = true
			}
			continue
		}
		t := explicit[name]
		if t == nil {
			t = balancedMap(nodes, b.numVbs, b.numReplicas)
		} else {
			if err := c.checkMap(b, t); err != nil {
				return nil, nil, err
			}
			t = copyChains(t)
		}
		targets[b] = t
		for _, ch := range t {
			for _, id := range ch {
				if id >= 0 {
					finalSet[id] = true
				}
			}
		}
	}
	final := make([]int, 0, len(finalSet))
	for id := range finalSet {
		final = append(final, id)
	}
	sort.Ints(final)
	return targets, final, nil
}

// rebalanceNodesLocked checks the nodes a rebalance names (nil: every
// cluster member) and returns them. c.mu must be held.
func (c *Cluster) rebalanceNodesLocked(nodes []int) ([]int, error) {
	if nodes == nil {
		for _, n := range c.clusterNodesLocked() {
			nodes = append(nodes, n.id)
		}
	}
	if len(nodes) == 0 {
		return nil, invalidf("a rebalance needs at least one node")
	}
	seen := make(map[int]bool)
	for _, id := range nodes {
		if id < 0 || id >= len(c.nodes) || c.nodes[id] == nil {
			return nil, fmt.Errorf("%w: node %d", ErrNotFound, id)
		}
		if seen[id] {
			return nil, invalidf("node %d is listed twice", id)
		}
		seen[id] = true
	}
	return nodes, nil
}

// checkMap checks an explicit target map. c.mu must be held.
func (c *Cluster) checkMap(b *Bucket, t [][]int) error {
	if len(t) != b.numVbs {
		return invalidf("bucket %q: target map has %d vbuckets, want %d", b.name, len(t), b.numVbs)
	}
	for vb, ch := range t {
		if len(ch) != b.numReplicas+1 {
			return invalidf("bucket %q: vbucket %d: chain of %d, want %d", b.name, vb, len(ch), b.numReplicas+1)
		}
		for _, id := range ch {
			if id < -1 || id >= len(c.nodes) || (id >= 0 && c.nodes[id] == nil) {
				return invalidf("bucket %q: vbucket %d: no node %d", b.name, vb, id)
			}
		}
		if ch[0] < 0 {
			return invalidf("bucket %q: vbucket %d has no active node", b.name, vb)
		}
	}
	return nil
}

func (r *Rebalance) pace(d time.Duration) {
	defer r.c.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-r.pacerStop:
			return
		case <-t.C:
			if _, err := r.Step(1); err != nil {
				return
			}
			if r.Remaining() == 0 {
				_ = r.Finish()
				return
			}
		}
	}
}

func (r *Rebalance) stopPacer() { r.pacerOnce.Do(func() { close(r.pacerStop) }) }

// Done is closed when the rebalance finished.
func (r *Rebalance) Done() <-chan struct{} { return r.done }

// Remaining returns how many vbuckets (summed over buckets) still have to
// move.
func (r *Rebalance) Remaining() int {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	n := 0
	for b, t := range r.targets {
		s := b.snap.Load()
		for vb := range t {
			if !equalChain(s.chains[vb], t[vb]) {
				n++
			}
		}
	}
	return n
}

func equalChain(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Step moves up to n vbuckets of every bucket (in vbucket order) to their
// target owners and publishes one new config per bucket that moved any. It
// returns how many vbuckets moved in all.
func (r *Rebalance) Step(n int) (int, error) {
	c := r.c
	c.mu.Lock()
	defer c.unlock()
	if c.rebalance != r {
		return 0, fmt.Errorf("mockcluster: %w: the rebalance is over", ErrInvalid)
	}
	total := 0
	for _, name := range c.order {
		b := c.buckets[name]
		t := r.targets[b]
		if t == nil {
			continue
		}
		s := b.snap.Load()
		var chains [][]int
		moved := 0
		for vb := 0; vb < len(t) && moved < n; vb++ {
			if equalChain(s.chains[vb], t[vb]) {
				continue
			}
			if chains == nil {
				chains = copyChains(s.chains)
			}
			chains[vb] = append([]int(nil), t[vb]...)
			moved++
		}
		if moved > 0 {
			c.publishLocked(b, s.servers, chains, s.fwd, s.manifest)
		}
		total += moved
	}
	return total, nil
}

// Finish moves every remaining vbucket and publishes, for every bucket, a
// config with the target map, the final serverList and no forward map.
func (r *Rebalance) Finish() error {
	c := r.c
	c.mu.Lock()
	defer c.unlock()
	if c.rebalance != r {
		return fmt.Errorf("mockcluster: %w: the rebalance is over", ErrInvalid)
	}
	r.stopPacer()
	c.rebalance = nil
	for _, name := range c.order {
		b := c.buckets[name]
		t := r.targets[b]
		if t == nil && !b.memcached() {
			continue
		}
		c.publishLocked(b, append([]int(nil), r.final...), copyChains(t), nil, b.snap.Load().manifest)
	}
	c.publishGlobalLocked()
	close(r.done)
	return nil
}

// AddNode starts a new node and makes it a member of the cluster: it
// appears in nodesExt but holds no vbuckets until a rebalance gives it some.
func (c *Cluster) AddNode() (*Node, error) {
	c.mu.Lock()
	defer c.unlock()
	if c.closed {
		return nil, ErrClosed
	}
	n := c.newNodeLocked()
	if err := n.listen(); err != nil {
		return nil, err
	}
	c.nodes = append(c.nodes, n)
	n.serve()
	c.republishAllLocked()
	return n, nil
}

// RemoveNode takes a node out of the cluster: if it holds vbuckets they
// first move to the remaining nodes of each bucket (balanced, published as
// one config), then the node stops and disappears from the configs.
func (c *Cluster) RemoveNode(id int) error {
	c.mu.Lock()
	if c.closed {
		c.unlock()
		return ErrClosed
	}
	if c.rebalance != nil {
		c.unlock()
		return ErrRebalancing
	}
	if id < 0 || id >= len(c.nodes) || c.nodes[id] == nil {
		c.unlock()
		return fmt.Errorf("%w: node %d", ErrNotFound, id)
	}
	n := c.nodes[id]
	for _, name := range c.order {
		b := c.buckets[name]
		s := b.snap.Load()
		if !contains(s.servers, id) {
			continue
		}
		var rest []int
		for _, sid := range s.servers {
			if sid != id {
				rest = append(rest, sid)
			}
		}
		if len(rest) == 0 {
			c.unlock()
			return invalidf("node %d is the last node of bucket %q", id, name)
		}
		c.publishLocked(b, rest, balancedMap(rest, b.numVbs, b.numReplicas), nil, s.manifest)
	}
	c.nodes[id] = nil
	c.republishAllLocked()
	c.unlock()
	n.stop(true)
	return nil
}

// Failover fails a node over, as the cluster manager does after a hard
// failover: for every vbucket the node was active for, its first replica
// becomes active (with a new vbucket UUID); the node leaves every chain and
// serverList (replicas it held become -1) and the cluster's nodesExt. The
// node keeps running (Stop it to simulate a crash) and answers
// NOT_MY_VBUCKET for everything. A rebalance that lists it adds it back.
func (c *Cluster) Failover(id int) error {
	c.mu.Lock()
	defer c.unlock()
	if c.closed {
		return ErrClosed
	}
	if c.rebalance != nil {
		return ErrRebalancing
	}
	if id < 0 || id >= len(c.nodes) || c.nodes[id] == nil {
		return fmt.Errorf("%w: node %d", ErrNotFound, id)
	}
	c.nodes[id].failedOver = true
	for _, name := range c.order {
		b := c.buckets[name]
		s := b.snap.Load()
		chains := copyChains(s.chains)
		for vb, ch := range chains {
			if !contains(ch, id) {
				continue
			}
			out := ch[:0]
			for _, x := range ch {
				if x != id {
					out = append(out, x)
				}
			}
			for len(out) < len(ch) {
				out = append(out, -1)
			}
			if s.chains[vb][0] == id {
				v := b.vbs[vb]
				v.mu.Lock()
				v.history = append([]failoverEntry{{v.uuid, v.seqno}}, v.history...)
				v.uuid = randUint64()
				v.mu.Unlock()
			}
			chains[vb] = out[:len(ch):len(ch)]
		}
		var servers []int
		for _, sid := range s.servers {
			if sid != id {
				servers = append(servers, sid)
			}
		}
		c.publishLocked(b, servers, chains, nil, s.manifest)
	}
	c.publishGlobalLocked()
	return nil
}
