package cluster

import (
	"slices"
	"sync"
	"time"

	"github.com/kvwire/kvwire/conn"
)

// What the cluster knows of its connections' health, for diagnostics and
// readiness (SDK RFC 0034): each endpoint (a place in a node's pool) and
// its state, read without I/O, and a signal at each change of any of them.

// EndpointState is where an endpoint is.
type EndpointState uint8

// Endpoint states.
const (
	// EndpointConnecting: its node's first dial has not ended yet.
	EndpointConnecting EndpointState = iota
	// EndpointConnected: it has a live connection.
	EndpointConnected
	// EndpointReconnecting: it has no live connection, and its node has
	// dialed before (a connection that ended, or a dial that failed) and
	// dials again (or waits its back-off to).
	EndpointReconnecting
	// EndpointDisconnecting: its node left the config; its connection
	// drains (its requests in flight end) and closes. Such an endpoint
	// is no longer the cluster's: Endpoints lists it after those of the
	// current nodes, while its connection lives.
	EndpointDisconnecting
	// EndpointDisconnected: the cluster is closed.
	EndpointDisconnected
)

// Endpoint is one place of a node's pool.
type Endpoint struct {
	// Node is the node's address; Slot the place in its pool
	// (0..ConnectionsPerNode-1).
	Node string
	Slot int
	// State is where it is; Conn its connection while connected.
	State EndpointState
	Conn  *conn.Conn
	// Err is why it has no connection: its node's last dial error, or the
	// error its last connection ended with (nil: none known yet).
	Err error
	// LastActivity is its connection's last activity (conn's
	// LastActivity), or, while it has none, that of the connection it
	// had last, which ended: RFC 0034's last activity is the endpoint's,
	// kept across reconnects. Zero: it never had a connection.
	LastActivity time.Time
}

// healthSignal is closed and replaced at each change of an endpoint's
// state.
type healthSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (h *healthSignal) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ch == nil {
		h.ch = make(chan struct{})
	}
	return h.ch
}

func (h *healthSignal) notify() {
	h.mu.Lock()
	if h.ch != nil {
		close(h.ch)
		h.ch = nil
	}
	h.mu.Unlock()
}

// HealthChanged returns a channel closed at the next change of any
// endpoint's state: a connection made or ended, a dial failed, a node
// added or left, the cluster closed. Take it before reading Endpoints,
// then wait on it: no change between the two is missed.
func (c *Cluster) HealthChanged() <-chan struct{} { return c.health.wait() }

// Endpoints returns the endpoints of the current topology's nodes, in the
// topology's order, each node's pool by place (a place keeps its Slot
// while its connection lives and for the connection that replaces it),
// then the live connections of the nodes that left the config, which
// drain (EndpointDisconnecting), in the order they left; those not once
// the cluster is closed.
func (c *Cluster) Endpoints() []Endpoint {
	for {
		t := c.topo.Load()
		if t == nil {
			return nil
		}
		closed := c.ctx.Err() != nil
		out := c.endpoints(t, closed)
		if !closed && c.ctx.Err() != nil {
			// The cluster closed while they were read: a node read after
			// the close ended its context would show as one that left the
			// config (disconnecting), which the cluster's state leaves out,
			// beside nodes read before, still connected. They are those of
			// a closed cluster. (The close ends the cluster's context before
			// its nodes': when it was not ended after the nodes were read,
			// no node's was ended by the close.)
			continue
		}
		if c.topo.Load() != t {
			// A config installed meanwhile may have made a node read
			// leave (disconnecting, left out of the state) and named
			// others, missing here: they are read again from it. (The
			// topology is replaced before its nodes that left are told.)
			continue
		}
		return out
	}
}

// endpoints returns the endpoints of t's nodes, then of the nodes that
// left the config unless closed, the cluster read as closed.
func (c *Cluster) endpoints(t *Topology, closed bool) []Endpoint {
	out := make([]Endpoint, 0, len(t.all)*c.cfg.ConnectionsPerNode)
	for _, n := range t.all {
		out = n.endpoints(out, c.cfg.ConnectionsPerNode, closed)
	}
	if !closed {
		for _, n := range c.leaving.list() {
			out = n.draining(out)
		}
	}
	return out
}

// draining appends the endpoints of n, a node that left the config, that
// still have a live connection to out: disconnecting.
func (n *Node) draining(out []Endpoint) []Endpoint {
	from := len(out)
	n.mu.Lock()
	for i, cn := range n.slots {
		if cn != nil && !isDone(cn) {
			out = append(out, Endpoint{Node: n.addr, Slot: i, State: EndpointDisconnecting, Conn: cn})
		}
	}
	n.mu.Unlock()
	for i := range out[from:] {
		e := &out[from+i]
		e.LastActivity = e.Conn.LastActivity() // conn's lock, not under n's
	}
	return out
}

// leavingNodes are the nodes that left the config and still drain, in the
// order they left.
type leavingNodes struct {
	mu    sync.Mutex
	nodes []*Node
}

func (l *leavingNodes) add(n *Node) {
	l.mu.Lock()
	l.nodes = append(l.nodes, n)
	l.mu.Unlock()
}

// remove drops n, reporting whether it was there.
func (l *leavingNodes) remove(n *Node) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, m := range l.nodes {
		if m == n {
			l.nodes = slices.Delete(l.nodes, i, i+1)
			return true
		}
	}
	return false
}

func (l *leavingNodes) list() []*Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.nodes)
}

// endpoints appends n's endpoints, at least size of them, to out.
func (n *Node) endpoints(out []Endpoint, size int, closed bool) []Endpoint {
	n.mu.Lock()
	slots := append([]*conn.Conn(nil), n.slots...)
	err := n.lastErr
	if err == nil {
		err = n.endErr
	}
	n.mu.Unlock()
	down := EndpointReconnecting
	select {
	case <-n.tried:
	default:
		down = EndpointConnecting
	}
	switch {
	case closed:
		down = EndpointDisconnected
	case n.ctx.Err() != nil:
		down = EndpointDisconnecting
	}
	for i := range max(size, len(slots)) {
		e := Endpoint{Node: n.addr, Slot: i, State: down, Err: err}
		if i < len(slots) && slots[i] != nil {
			// The place keeps its connection once it ended, until
			// another takes it: its activity is the endpoint's last.
			e.LastActivity = slots[i].LastActivity()
			if !isDone(slots[i]) && !closed {
				e.State, e.Conn, e.Err = EndpointConnected, slots[i], nil
			}
		}
		out = append(out, e)
	}
	return out
}

// connEnded is told of each of n's connections that ended (OnClose), with
// why.
func (n *Node) connEnded(err error) {
	n.mu.Lock()
	n.endErr = err
	n.mu.Unlock()
	n.cl.health.notify()
	n.signal()
}
