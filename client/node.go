package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// Reconnect backoff of a node's pool: doubling from reconnectMin to
// reconnectMax.
const (
	reconnectMin = 10 * time.Millisecond
	reconnectMax = 2 * time.Second
	// nodeWakeInterval is the least time between two wakeForNode of one
	// node (its connections coming back after none was live).
	nodeWakeInterval = 100 * time.Millisecond
)

// node is one server's connection pool. A single maintainer goroutine per
// node dials, redials with backoff when a connection ends, and closes the
// pool when the node leaves the cluster (after its requests in flight have
// drained) or the client closes. Operations never block on it: pick returns
// a live connection or says why there is none, and the retry orchestrator
// decides what happens next.
type node struct {
	c    *Client
	addr string // host:port dialed
	host string // host part, for $HOST in the configs it serves

	conns atomic.Pointer[[]*conn.Conn] // live connections; replaced, never mutated
	rr    atomic.Uint32

	mu      sync.Mutex
	lastErr error // why the last dial failed; nil once one succeeded

	// ctx is a child of the client's: canceled when the node leaves the
	// config (leave) or the client closes. It bounds dials.
	ctx     context.Context
	cancel  context.CancelFunc
	wake    chan struct{} // a connection ended: re-check the pool
	stopped chan struct{} // closed by the maintainer when it has exited
	// tried is closed once the first dial attempt has ended (or a seed
	// connection was adopted): Connect waits for it.
	tried     chan struct{}
	triedOnce sync.Once
	// since is when the node was made, on the client's clock: a node
	// still in its first dial a probe timeout later counts as unreachable
	// (stranded).
	since time.Time

	text textConns // memcached: GetMany's text connections (textconns.go)
}

func newNode(c *Client, addr string) *node {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	n := &node{
		c:       c,
		addr:    addr,
		host:    host,
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
		tried:   make(chan struct{}),
		since:   c.clock.Now(),
	}
	n.ctx, n.cancel = context.WithCancel(c.ctx)
	return n
}

// start runs the maintainer. seed, if not nil, is an already bootstrapped
// connection to adopt.
func (n *node) start(seed *conn.Conn) {
	if seed != nil {
		n.adopt(seed)
		n.markTried()
	}
	n.c.wg.Add(1)
	go n.maintain()
}

// pick returns a live connection, round robin. With none it returns the
// retry reason to hand to the orchestrator and an error saying why.
func (n *node) pick() (*conn.Conn, retry.Reason, error) {
	select {
	case <-n.ctx.Done():
		// Leaving (or the client is closing): its connections only drain.
		// The operation is routed again by the newer topology.
		return nil, retry.ReasonNodeNotAvailable, &NodeError{Addr: n.addr, Err: errNodeLeft}
	default:
	}
	if cs := n.conns.Load(); cs != nil {
		l := len(*cs)
		start := int(n.rr.Add(1))
		for i := 0; i < l; i++ {
			cn := (*cs)[(start+i)%l]
			select {
			case <-cn.Done():
			default:
				return cn, 0, nil
			}
		}
	}
	n.mu.Lock()
	err := n.lastErr
	n.mu.Unlock()
	return nil, reasonForDialError(err), &NodeError{Addr: n.addr, Err: err}
}

// reasonForDialError gives the retry reason for a node without a live
// connection: the terminal reasons of RFC 0049 revision 16 for refused
// credentials, bucket and TLS, NODE_NOT_AVAILABLE otherwise.
func reasonForDialError(err error) retry.Reason {
	switch {
	case errors.Is(err, ErrAuthenticationFailure):
		return retry.ReasonAuthenticationError
	case errors.Is(err, ErrBucketNotFound):
		return retry.ReasonBucketAccessError
	case errors.Is(err, ErrTLS):
		return retry.ReasonTLSError
	}
	return retry.ReasonNodeNotAvailable
}

// errNodeLeft is a NodeError's Err when the node left the cluster's config.
var errNodeLeft = errors.New("the node is no longer in the cluster config")

// NodeError says that a node had no connection to carry a request, and why
// its last connection attempt failed (nil Err: it is still connecting).
type NodeError struct {
	Addr string
	Err  error
}

func (e *NodeError) Error() string {
	if e.Err == nil {
		return "node " + e.Addr + " has no connection yet"
	}
	return "node " + e.Addr + " is not available: " + e.Err.Error()
}

func (e *NodeError) Unwrap() error { return e.Err }

func (e *NodeError) Is(target error) bool { return target == ErrNoNodeAvailable }

// adopt adds cn to the pool. It reports whether the node had no live
// connection before it.
func (n *node) adopt(cn *conn.Conn) (wasDown bool) {
	n.mu.Lock()
	n.lastErr = nil
	var next []*conn.Conn
	wasDown = true
	if cs := n.conns.Load(); cs != nil {
		next = append(next, *cs...)
		for _, old := range *cs {
			select {
			case <-old.Done():
			default:
				wasDown = false
			}
		}
	}
	next = append(next, cn)
	n.conns.Store(&next)
	n.mu.Unlock()
	n.c.onConnUp(n, cn)
	return wasDown
}

// prune drops ended connections from the pool and returns how many are live.
func (n *node) prune() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.conns.Load()
	if cs == nil {
		return 0
	}
	live := make([]*conn.Conn, 0, len(*cs))
	for _, cn := range *cs {
		select {
		case <-cn.Done():
		default:
			live = append(live, cn)
		}
	}
	if len(live) != len(*cs) {
		n.conns.Store(&live)
	}
	return len(live)
}

func (n *node) markTried() { n.triedOnce.Do(func() { close(n.tried) }) }

func (n *node) signal() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// leave retires the node: no new requests are routed to it (the topology no
// longer lists it, and pick refuses) and its connections close once their
// requests in flight have drained, which takes at most the longest
// operation timeout the client has used (every request has a deadline).
func (n *node) leave() { n.cancel() }

func (n *node) maintain() {
	defer n.c.wg.Done()
	defer close(n.stopped)
	defer n.markTried()
	backoff := reconnectMin
	var lastWake time.Time // the last wakeForNode of this node
	for {
		if n.ctx.Err() != nil {
			if n.c.ctx.Err() != nil {
				n.closeText(true)
				n.closeAll()
			} else {
				n.closeText(false)
				n.drainAndClose()
			}
			return
		}
		if n.prune() >= n.c.opts.ConnectionsPerNode {
			select {
			case <-n.wake:
			case <-n.ctx.Done():
			}
			continue
		}
		cn, err := n.dial()
		if err == nil {
			backoff = reconnectMin
			wasDown := n.adopt(cn)
			n.markTried()
			n.c.onDialResult(n, nil)
			if now := n.c.clock.Now(); wasDown && (lastWake.IsZero() || now.Sub(lastWake) >= nodeWakeInterval) {
				// A node that keeps connecting and losing the
				// connection wakes the waits at most this often.
				lastWake = now
				n.c.wakeForNode(n)
			}
			continue
		}
		n.mu.Lock()
		n.lastErr = err
		n.mu.Unlock()
		n.markTried()
		n.c.onDialResult(n, err)
		wait := backoff
		if redialable(err) {
			// The attempt itself waited: the connection's probe timeout
			// for a node that accepts connections and answers nothing
			// (paused, or behind a black hole), or ConnectTimeout for one
			// whose SYNs are lost (a partition; conn began a fresh
			// connection attempt every ConnectAttempt meanwhile). The
			// next one starts without more delay, so that the node is
			// found within that much once it answers again.
			wait = reconnectMin
		} else {
			backoff = min(2*backoff, reconnectMax)
		}
		n.c.opts.Logger.Warn("kvwire: connecting to node failed", "node", n.addr, "err", err, "retry_in", wait)
		t := n.c.clock.NewTimer(wait)
		select {
		case <-t.C():
		case <-n.ctx.Done():
			t.Stop()
		}
	}
}

func (n *node) dial() (*conn.Conn, error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.c.opts.ConnectTimeout)
	defer cancel()
	return conn.Dial(ctx, n.addr, n.c.connOptions(n))
}

// drainAndClose waits until the connections have no request in flight (or
// the longest operation timeout passed, or the client closes), then closes
// them. Every request carries a deadline, so the wait ends by itself; the
// bound is a backstop. An attempt that picked a connection just before the
// node left and queues its request between the last check and the close
// (a window of microseconds) fails like any request on a closed
// connection: not written, and retried elsewhere; or, had its bytes gone
// out, in flight (a mutation is then ambiguous, never sent twice). A
// per-node count of attempts between pick and send would close the window
// at two contended atomic operations per request; it is not worth it.
func (n *node) drainAndClose() {
	deadline := time.Now().Add(max(n.c.opts.KVTimeout, time.Duration(n.c.longestTimeout.Load())) + time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		busy := false
		if cs := n.conns.Load(); cs != nil {
			for _, cn := range *cs {
				if cn.Pending() > 0 {
					busy = true
				}
			}
		}
		if !busy {
			break
		}
		select {
		case <-tick.C:
		case <-n.c.ctx.Done():
			n.closeAll()
			return
		}
	}
	n.closeAll()
}

func (n *node) closeAll() {
	n.mu.Lock()
	cs := n.conns.Load()
	empty := []*conn.Conn{}
	n.conns.Store(&empty)
	n.mu.Unlock()
	if cs != nil {
		for _, cn := range *cs {
			_ = cn.Close()
		}
	}
}

func (n *node) String() string { return fmt.Sprintf("node(%s)", n.addr) }

// requestedFeatures are the HELLO features kvwire asks a Couchbase node for.
func (c *Client) requestedFeatures() []memdx.HelloFeature {
	f := []memdx.HelloFeature{
		memdx.FeatureTCPNoDelay,
		memdx.FeatureXattr,
		memdx.FeatureXerror,
		memdx.FeatureSelectBucket,
		memdx.FeatureSnappy,
		memdx.FeatureJSON,
		memdx.FeatureDuplex,
		memdx.FeatureClustermapChangeNotificationBrief,
		memdx.FeatureUnorderedExecution,
		// Every response then carries the server's time on it
		// (memdx.Packet.ServerDuration), for tracing and reports.
		memdx.FeatureTracing,
		memdx.FeatureAltRequests,
		memdx.FeatureSyncReplication,
		memdx.FeatureCollections,
		memdx.FeaturePreserveTTL,
		memdx.FeatureGetClusterConfigWithKnownVersion,
		memdx.FeatureDedupeNotMyVbucketClustermap,
		// Informational (SDK RFC 0076): replica lookups are gated by the
		// bucket's subdoc.ReplicaRead capability, not by this feature.
		memdx.FeatureSubdocReplicaRead,
	}
	if !c.opts.DisableMutationTokens {
		f = append(f, memdx.FeatureMutationSeqno)
	}
	return f
}
