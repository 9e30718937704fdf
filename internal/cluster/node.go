package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/lifecycle"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// Reconnect back-off of a node's pool: doubling from ReconnectMin to
// ReconnectMax (redialer).
const (
	ReconnectMin = 10 * time.Millisecond
	ReconnectMax = 2 * time.Second
	// ConnMinLife is how long a connection must have lived for its end to
	// be redialed at once and to reset the back-off whatever it served.
	// One that ends sooner (a node answering a conn-state-invalidated
	// status to every request, or closing each connection after its
	// bootstrap) counts as a failed dial, unless it served requests and
	// the client did not drop it (redialer). It is ReconnectMax: a node whose connections each live at
	// least that long is dialed at most once per ReconnectMax, the rate
	// of the longest back-off.
	ConnMinLife = ReconnectMax
	// nodeWakeInterval is the least time between two wakeForNode of one
	// node (its connections coming back after none was live).
	nodeWakeInterval = 100 * time.Millisecond
)

// node is one server's connection pool. A single maintainer goroutine per
// node dials, redials when a connection ends (at once, or after a back-off
// when dials fail or connections end soon after they were made: redialer),
// and closes the pool when the node leaves the cluster (after its requests
// in flight have drained) or the cluster closes. Operations never block on
// it: Pick returns a live connection or says why there is none, and the
// retry orchestrator decides what happens next.
type Node struct {
	cl   *Cluster
	addr string // host:port dialed
	host string // host part, for $HOST in the configs it serves

	conns atomic.Pointer[[]*conn.Conn] // live connections; replaced, never mutated
	rr    atomic.Uint32

	mu sync.Mutex
	// slots are the places of the pool (ConnectionsPerNode of them): each
	// the last connection adopted into it (possibly ended; nil: none
	// yet). A new connection takes the first place whose connection
	// ended, so that a place, an endpoint of the diagnostics (health.go),
	// keeps its id across reconnects.
	slots []*conn.Conn
	// joined, when not nil, is closed when a connection is adopted: a
	// barrier held while every connection had a bounded request in
	// flight (PickBarrier) may go on it. Made only while one is held.
	joined  chan struct{}
	lastErr error // why the last dial failed; nil once one succeeded
	endErr  error // why the last connection that ended did (health.go)
	// waitErr says why the maintainer waits before redialing after a
	// connection that ended early (redialer); nil while it does not.
	waitErr error

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

	text textConns // memcached: GetMany's text connections (text.go)
}

func newNode(c *Cluster, addr string) *Node {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	n := &Node{
		cl:      c,
		addr:    addr,
		host:    host,
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
		tried:   make(chan struct{}),
		since:   c.cfg.Clock.Now(),
	}
	n.ctx, n.cancel = context.WithCancel(c.ctx)
	return n
}

// start runs the maintainer. seed, if not nil, is an already bootstrapped
// connection to adopt.
func (n *Node) start(seed *conn.Conn) {
	if seed != nil {
		n.adopt(seed)
		n.markTried()
	}
	n.cl.wg.Add(1)
	lifecycle.Go(n.maintain)
}

// Pick returns a live connection, round robin. With none it returns the
// retry reason to hand to the orchestrator and an error saying why. A
// memcached server that refuses connections (Down) fails its requests at
// once, as other memcached clients do, rather than retrying until the
// timeout: the reason is then retry.ReasonUnknown (final); its node
// redials meanwhile. That check is made here, on the one look at the
// connections a request's attempt makes, not in a second one before it.
func (n *Node) Pick() (*conn.Conn, retry.Reason, error) {
	if n.ctx.Err() != nil { // an atomic load, where a select on Done calls the runtime
		if n.cl.cfg.Memcached {
			if err := n.Down(); err != nil {
				return nil, retry.ReasonUnknown, err
			}
		}
		// Leaving (or the client is closing): its connections only drain.
		// The operation is routed again by the newer topology.
		return nil, retry.ReasonNodeNotAvailable, n.cl.nodeError(n.addr, errNodeLeft)
	}
	if cs := n.conns.Load(); cs != nil {
		if l := len(*cs); l == 1 {
			// One connection, the default: no turn to take, so neither
			// the shared counter (an atomic add on a line every caller
			// writes) nor the division.
			if cn := (*cs)[0]; !isDone(cn) {
				return cn, 0, nil
			}
		} else {
			start := uint(n.rr.Add(1))
			for i := range uint(l) {
				if cn := (*cs)[(start+i)%uint(l)]; !isDone(cn) {
					return cn, 0, nil
				}
			}
		}
	}
	n.mu.Lock()
	err, why := n.lastErr, n.lastErr
	if why == nil {
		why = n.waitErr // why it waits before redialing (redialer)
	}
	if why == nil && n.endErr != nil {
		// No dial failed since its last connection ended: why that one
		// ended (none only for a node never connected yet). The message
		// only, as waitErr: the request was on no connection, and the
		// connection's error (kverr.ErrConnectionClosed, ErrUnresponsive)
		// would tell its caller that the connection carrying it ended.
		why = fmt.Errorf("its last connection ended: %v", n.endErr)
	}
	n.mu.Unlock()
	reason := reasonForDialError(err)
	if n.cl.cfg.Memcached && err != nil && reason == retry.ReasonNodeNotAvailable {
		reason = retry.ReasonUnknown // Down
	}
	return nil, reason, n.cl.nodeError(n.addr, why)
}

// barrierWait is how long a barrier sent to n now (GET_CLUSTER_CONFIG: not
// is_reorder_supported in kv_engine) would wait, on the least held of n's
// live connections, behind requests the server answers only by a bound of
// their own (conn.Conn.BarrierWait: a synchronous write waiting for
// replication), and hold every later request on that connection. 0: a
// connection has none, or n has no live connection (its fetch fails at
// once, as it did).
func (n *Node) barrierWait() time.Duration {
	cs := n.conns.Load()
	if cs == nil {
		return 0
	}
	var least time.Duration
	live := false
	for _, cn := range *cs {
		if isDone(cn) {
			continue
		}
		w := cn.BarrierWait()
		if w <= 0 {
			return 0
		}
		if !live || w < least {
			least, live = w, true
		}
	}
	return least
}

// pickForBarrier returns a connection for a barrier (a config fetch): a
// live one with nothing the barrier would wait behind (barrierWait), when
// n has several, else as Pick does.
func (n *Node) pickForBarrier() (*conn.Conn, retry.Reason, error) {
	if cs := n.conns.Load(); cs != nil && len(*cs) > 1 {
		if cn := n.freeConn(uint(n.rr.Add(1)), nil, nil); cn != nil {
			return cn, 0, nil
		}
	}
	return n.Pick()
}

// BarrierHold is why a barrier for a node is held, not sent (PickBarrier):
// every live connection of the node has a request in flight that the
// server answers only by a bound of its own. Wait is the shortest of
// their waits (conn.Conn.BarrierWait); Freed is closed once the
// connection with that wait is free of them (conn.Conn.BarrierFreed), and
// others once another of the held connections is: the first to be free,
// whichever it is, ends the hold (Sleep), not the one due first only.
// Gone is closed once the node leaves the config (or the client closes):
// its connections then only drain, and a barrier held for them is to be
// routed again, not held on.
// Joined is closed once the node adopts a connection (one dialed anew
// after another ended): it may be free of them.
type BarrierHold struct {
	Wait   time.Duration
	Freed  <-chan struct{}
	Gone   <-chan struct{}
	Joined <-chan struct{}
	others []<-chan struct{}
}

// HoldEnd is how a wait on a BarrierHold (Sleep) ended.
type HoldEnd int

const (
	// HoldChanged: the hold may be over (Freed, Joined or Gone closed):
	// pick again.
	HoldChanged HoldEnd = iota
	// HoldElapsed: the time asked for has passed.
	HoldElapsed
	// HoldStopped: one of the caller's stop channels closed.
	HoldStopped
)

// Sleep is the wait of every barrier held (the client's operations, the
// fetches that must ask a node, collection-id lookups): until the hold
// may be over (HoldChanged), d has passed on clk (HoldElapsed), or stop
// or stop2 closes (HoldStopped; a nil one never does). One wait for all
// of them, so that each wakes for everything that may end its hold.
func (h BarrierHold) Sleep(clk retry.Clock, d time.Duration, stop, stop2 <-chan struct{}) HoldEnd {
	t := clk.NewTimer(d)
	defer t.Stop()
	if len(h.others) > 0 {
		return h.sleepAny(t.C(), stop, stop2)
	}
	select {
	case <-h.Freed:
		return HoldChanged
	case <-h.Joined: // a connection dialed anew: it may be free
		return HoldChanged
	case <-h.Gone: // the node left: Pick says so, and the caller routes again
		return HoldChanged
	case <-t.C():
		return HoldElapsed
	case <-stop:
		return HoldStopped
	case <-stop2:
		return HoldStopped
	}
}

// sleepAny is Sleep's wait of a hold of several connections: any of
// them free ends it (a select over as many channels as the node has
// connections, on the held path only).
func (h BarrierHold) sleepAny(elapsed <-chan time.Time, stop, stop2 <-chan struct{}) HoldEnd {
	cases := make([]reflect.SelectCase, 0, 6+len(h.others))
	for _, ch := range [...]<-chan struct{}{h.Freed, h.Joined, h.Gone} {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	for _, ch := range h.others {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	const fixed = 3 // Freed, Joined, Gone
	elapsedAt := len(cases)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(elapsed)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(stop)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(stop2)})
	switch i, _, _ := reflect.Select(cases); {
	case i < fixed+len(h.others):
		return HoldChanged
	case i == elapsedAt:
		return HoldElapsed
	default:
		return HoldStopped
	}
}

// PickBarrier returns a connection of n for a barrier: a request kv_engine
// does not reorder under UnorderedExecution (not is_reorder_supported:
// GET_META, NOOP, STAT, VERSION, GET_CLUSTER_CONFIG, ...), which runs only
// once every earlier request on its connection has finished and holds
// every later one. It is a live connection with nothing such a barrier
// would wait behind (freeConn). When every live connection has something
// (a synchronous write waiting for replication, a range scan's continue),
// it returns no connection, no error and the hold: the barrier is to be
// held by its caller rather than sent behind it, stalling the
// connection's traffic for as long. Without a live connection it is Pick,
// and so it is on memcached, which has no barriers and no synchronous
// writes. Only barriers call it: Pick, every other request's, does none
// of this.
func (n *Node) PickBarrier() (*conn.Conn, BarrierHold, retry.Reason, error) {
	if !n.cl.cfg.Memcached && n.ctx.Err() == nil {
		if cs := n.conns.Load(); cs != nil && len(*cs) > 0 {
			var h BarrierHold
			start := uint(0)
			if len(*cs) > 1 {
				start = uint(n.rr.Add(1))
			}
			for i := range uint(len(*cs)) {
				cn := (*cs)[(start+i)%uint(len(*cs))]
				if isDone(cn) {
					continue
				}
				w, freed := cn.BarrierFreed()
				if w <= 0 {
					return cn, BarrierHold{}, 0, nil
				}
				switch {
				case h.Freed == nil:
					h = BarrierHold{Wait: w, Freed: freed, Gone: n.ctx.Done()}
				case w < h.Wait:
					h.others = append(h.others, h.Freed)
					h.Wait, h.Freed = w, freed
				default:
					h.others = append(h.others, freed)
				}
			}
			if h.Freed != nil {
				n.mu.Lock()
				if n.conns.Load() != cs {
					// A connection came or went meanwhile: look again.
					n.mu.Unlock()
					return n.PickBarrier()
				}
				if n.joined == nil {
					n.joined = make(chan struct{})
				}
				h.Joined = n.joined
				n.mu.Unlock()
				return nil, h, 0, nil
			}
		}
	}
	cn, reason, err := n.Pick()
	return cn, BarrierHold{}, reason, err
}

// freeConn returns a live connection of n, other than except and one ok
// accepts (nil: any), on which a barrier would wait for nothing
// (conn.Conn.BarrierWait), trying them from start on; nil when none is.
func (n *Node) freeConn(start uint, except *conn.Conn, ok func(*conn.Conn) bool) *conn.Conn {
	cs := n.conns.Load()
	if cs == nil || n.ctx.Err() != nil {
		return nil
	}
	for i := range uint(len(*cs)) {
		cn := (*cs)[(start+i)%uint(len(*cs))]
		if cn != except && !isDone(cn) && (ok == nil || ok(cn)) && cn.BarrierWait() <= 0 {
			return cn
		}
	}
	return nil
}

// isDone reports whether cn has ended (its Done channel is closed).
func isDone(cn *conn.Conn) bool {
	select {
	case <-cn.Done():
		return true
	default:
		return false
	}
}

// reasonForDialError gives the retry reason for a node without a live
// connection: the terminal reasons of RFC 0049 revision 16 for refused
// credentials, bucket and TLS, NODE_NOT_AVAILABLE otherwise.
func reasonForDialError(err error) retry.Reason {
	switch {
	case errors.Is(err, kverr.ErrAuthenticationFailure):
		return retry.ReasonAuthenticationError
	case errors.Is(err, kverr.ErrBucketNotFound):
		return retry.ReasonBucketAccessError
	case errors.Is(err, kverr.ErrTLS):
		return retry.ReasonTLSError
	}
	return retry.ReasonNodeNotAvailable
}

// errNodeLeft is a node error's cause when the node left the cluster's
// config.
var errNodeLeft = errors.New("the node is no longer in the cluster config")

// adopt adds cn to the pool. It reports whether the node had no live
// connection before it.
func (n *Node) adopt(cn *conn.Conn) (wasDown bool) {
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
	if n.joined != nil {
		close(n.joined) // a held barrier may go on cn (PickBarrier)
		n.joined = nil
	}
	n.takeSlotLocked(cn)
	n.mu.Unlock()
	n.cl.health.notify()
	n.cl.onConnUp(n, cn)
	return wasDown
}

// takeSlotLocked puts cn in the first place of the pool that has no live
// connection (a new place past them all when every one has: never with
// the maintainer's bound). n.mu is held.
func (n *Node) takeSlotLocked(cn *conn.Conn) {
	for i, old := range n.slots {
		if old == nil || isDone(old) {
			n.slots[i] = cn
			return
		}
	}
	n.slots = append(n.slots, cn)
}

// prune drops ended connections from the pool. It returns how many are
// live and the ones it dropped.
func (n *Node) prune() (live int, gone []*conn.Conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.conns.Load()
	if cs == nil {
		return 0, nil
	}
	kept := make([]*conn.Conn, 0, len(*cs))
	for _, cn := range *cs {
		select {
		case <-cn.Done():
			gone = append(gone, cn)
		default:
			kept = append(kept, cn)
		}
	}
	if len(gone) > 0 {
		n.conns.Store(&kept)
	}
	return len(kept), gone
}

// markTried closes tried, once, and tells HealthChanged's waiters (the
// node's endpoints are no longer connecting; Connect's awaitFirstDials).
func (n *Node) markTried() {
	n.triedOnce.Do(func() {
		close(n.tried)
		n.cl.health.notify()
	})
}

func (n *Node) signal() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// leave retires the node: no new requests are routed to it (the topology no
// longer lists it, and pick refuses) and its connections close once their
// requests in flight have drained, which takes at most the longest
// operation timeout the client has used (every request has a deadline).
func (n *Node) leave() {
	n.cl.leaving.add(n)
	n.cancel()
	n.cl.health.notify()
}

func (n *Node) maintain() {
	defer n.cl.wg.Done()
	defer close(n.stopped)
	defer n.markTried()
	r := redialer{backoff: ReconnectMin, lives: map[*conn.Conn]*connLife{}}
	for _, cn := range n.Conns() { // the seed connection
		r.lives[cn] = &connLife{born: n.cl.cfg.Clock.Now(), readAtBirth: cn.Stats().BytesRead}
	}
	var lastWake time.Time // the last wakeForNode of this node
	var lost lostSignal    // ConfigWanted for this node's losses (nodeLost)
	for {
		if n.ctx.Err() != nil {
			if n.cl.ctx.Err() != nil {
				n.closeText(true)
				n.closeAll()
			} else {
				n.closeText(false)
				n.drainAndClose()
			}
			if n.cl.leaving.remove(n) {
				n.cl.health.notify()
			}
			return
		}
		live, gone := n.prune()
		if wait, lived := r.ended(gone, n.cl.cfg.Clock.Now()); wait > 0 {
			n.mu.Lock()
			// The message only: the retry reason stays NODE_NOT_AVAILABLE,
			// and what the connection ended with is not this error's.
			why := ""
			if n.endErr != nil {
				why = ": " + n.endErr.Error()
			}
			n.waitErr = fmt.Errorf("its connections end soon after they are made (the last after %v%s); it waits %v before redialing",
				lived, why, wait)
			n.mu.Unlock()
			n.cl.cfg.Logger.Warn("kvwire: a connection to the node ended soon after it was made; redialing after a back-off",
				"node", n.addr, "lived", lived, "retry_in", wait)
			n.pause(wait)
			n.mu.Lock()
			n.waitErr = nil
			n.mu.Unlock()
			continue
		}
		if len(gone) > 0 && live == 0 {
			n.cl.nodeLost(&lost) // its last connection ended: it may have left
		}
		if live >= n.cl.cfg.ConnectionsPerNode {
			select {
			case <-n.wake:
			case <-n.ctx.Done():
			}
			continue
		}
		cn, life, err := n.dial()
		if err == nil {
			life.born, life.readAtBirth = n.cl.cfg.Clock.Now(), cn.Stats().BytesRead
			r.lives[cn] = life
			wasDown := n.adopt(cn)
			lost.signalled = false
			n.markTried()
			n.cl.onDialResult(n, nil)
			if now := n.cl.cfg.Clock.Now(); wasDown && (lastWake.IsZero() || now.Sub(lastWake) >= nodeWakeInterval) {
				// A node that keeps connecting and losing the
				// connection wakes the waits at most this often.
				lastWake = now
				n.cl.wakeForNode(n)
			}
			continue
		}
		if n.ctx.Err() != nil {
			// The node left or the client is closing: that ended the
			// dial, not the node. Nothing to record, log or wait for.
			continue
		}
		n.mu.Lock()
		n.lastErr = err
		n.mu.Unlock()
		n.markTried()
		n.cl.health.notify()
		n.cl.onDialResult(n, err)
		if live == 0 {
			n.cl.nodeLost(&lost) // it may have left (once while it stays down)
		}
		wait := r.dialFailed(redialable(err))
		n.cl.cfg.Logger.Warn("kvwire: connecting to node failed", "node", n.addr, "err", err, "retry_in", wait)
		n.pause(wait)
	}
}

// lostSignal is a node maintainer's record of the ConfigWanted its node's
// losses signalled (Cluster.nodeLost).
type lostSignal struct {
	signalled bool      // since the node last connected
	last      time.Time // the last signal, on the client's clock
}

// nodeLost is told by a node's maintainer (s its record) that the node's
// last connection ended, not early in a row (redialer: those wait), or
// that a dial of it failed while it had none. With the configs from a source (kvConfigs
// false) it signals ConfigWanted: the node may have left the cluster, and
// a node removed closes its HTTP config stream, maybe before it sent the
// config without itself; still listed, its stream is reopened after the
// stream's back-off (up to 10 s), and the requests routed to the node
// meet connection errors, not NOT_MY_VBUCKET, which would have asked for
// the config. (With the KV service asked, the other nodes push the config
// where notifications were negotiated, the poll fetches it within
// PollInterval, and a recovery round asks the seeds and known nodes once
// no node can be reached.) It signals once until the node connects again,
// not at each failed redial of a node that is simply down, and at most
// once per ReconnectMax for one node whose connections keep ending: the
// source would otherwise be woken as often (the HTTP stream reopened ten
// times a second, its floor).
func (c *Cluster) nodeLost(s *lostSignal) {
	if c.kvConfigs.Load() || s.signalled {
		return
	}
	now := c.cfg.Clock.Now()
	if !s.last.IsZero() && now.Sub(s.last) < ReconnectMax {
		return
	}
	s.signalled, s.last = true, now
	c.wantConfig()
}

// pause waits d on the client's clock, or until the node leaves or the
// client closes.
func (n *Node) pause(d time.Duration) {
	t := n.cl.cfg.Clock.NewTimer(d)
	select {
	case <-t.C():
	case <-n.ctx.Done():
		t.Stop()
	}
}

// connLife is when a connection of a node's pool was made (adopted) and
// when it ended, on the client's clock, and whether it served anything.
type connLife struct {
	born  time.Time                 // set by the maintainer once Dial returned
	ended atomic.Pointer[time.Time] // set by the connection's OnClose
	// readAtBirth is what the connection had read by then (its
	// bootstrap's answers): more read by its end means the node answered
	// requests on it.
	readAtBirth uint64
}

// ConnInvalidatedError is the reason a client gives conn.Conn.Abort when it
// drops a connection because a status's error-map entry says the
// connection's state is no longer valid (RFC 0013 conn-state-invalidated):
// the node's redial then backs off (redialer) even though the connection
// served requests.
type ConnInvalidatedError struct{ Err error }

func (e *ConnInvalidatedError) Error() string { return e.Err.Error() }
func (e *ConnInvalidatedError) Unwrap() error { return e.Err }

// redialer is a node's back-off between dials, the maintainer's own.
//
// A dial that fails doubles the wait before the next, from ReconnectMin to
// ReconnectMax, except one that itself waited out a timeout (redialable):
// the next follows ReconnectMin later. A connection that ends after living
// ConnMinLife or longer is redialed at once and resets the wait, and so is
// one the node answered requests on before the node or the network ended it
// (a node restarting, a connection cut: the old rule, at once). One that
// ends sooner having served nothing past its bootstrap (a node closing each
// connection once made), or that the client dropped for a
// conn-state-invalidated status (ConnInvalidatedError: a node answering
// EINTERNAL to every request), counts as a failed dial: the first such end since the last
// long-lived connection or failed dial (a node restarted, or stopped
// again, just after the client connected) is redialed at once, each later
// one waits the back-off and doubles it. A dial that succeeds leaves the
// back-off as it is: a node that ends every connection soon after its
// bootstrap (one answering a conn-state-invalidated status to every
// request, or closing connections once made) would otherwise be redialed,
// and bootstrapped, without pause, and each drop fails the other requests
// in flight on the connection. Failed dials and early ends in turn each
// wait too: the failures double the back-off.
type redialer struct {
	backoff time.Duration // the wait before the next dial that needs one
	// early: a connection ended early since the last long-lived one or
	// failed dial.
	early bool
	lives map[*conn.Conn]*connLife
	// state reads an ended connection's bytes read and error (nil:
	// conn's Stats and Err); a test's stand-in.
	state func(*conn.Conn) (read uint64, err error)
}

// ended is told of the connections the pool dropped (gone), at now. It
// returns how long to wait before the next dial (0: at once) and, for a
// wait, how long the connection that caused it lived.
func (r *redialer) ended(gone []*conn.Conn, now time.Time) (wait, lived time.Duration) {
	if len(gone) == 0 {
		return 0, 0
	}
	long := false
	for _, cn := range gone {
		l := r.lives[cn]
		delete(r.lives, cn)
		if l == nil {
			continue
		}
		end := now
		if e := l.ended.Load(); e != nil {
			end = *e
		}
		if d := end.Sub(l.born); d >= ConnMinLife || r.served(cn, l) {
			long = true
		} else {
			lived = max(lived, d)
		}
	}
	switch {
	case long:
		r.backoff, r.early = ReconnectMin, false
		return 0, 0
	case !r.early:
		r.early = true
		return 0, 0
	}
	wait = r.backoff
	r.backoff = min(2*r.backoff, ReconnectMax)
	return wait, lived
}

// served reports whether the node answered requests on cn, which has
// ended, past its bootstrap, and the client did not drop it for a
// conn-state-invalidated status. Its error is set before it is Done (its
// OnClose may run later).
func (r *redialer) served(cn *conn.Conn, l *connLife) bool {
	var read uint64
	var err error
	if r.state != nil {
		read, err = r.state(cn)
	} else {
		read, err = cn.Stats().BytesRead, cn.Err()
	}
	var inv *ConnInvalidatedError
	return read > l.readAtBirth && !errors.As(err, &inv)
}

// dialFailed returns the wait before the next dial after one that failed;
// redialable says that the attempt itself waited: the connection's probe
// timeout for a node that accepts connections and answers nothing
// (paused, or behind a black hole), or ConnectTimeout for one whose SYNs
// are lost (a partition; conn began a fresh connection attempt every
// ConnectAttempt meanwhile). The next one then starts without more delay,
// so that the node is found within that much once it answers again.
func (r *redialer) dialFailed(redialable bool) time.Duration {
	r.early = false
	if redialable {
		return ReconnectMin
	}
	wait := r.backoff
	r.backoff = min(2*r.backoff, ReconnectMax)
	return wait
}

// dial makes a connection to the node; its life records when it ends.
func (n *Node) dial() (*conn.Conn, *connLife, error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cl.cfg.ConnectTimeout)
	defer cancel()
	life := &connLife{}
	o := n.cl.connOptions(n)
	o.OnClose = func(err error) {
		now := n.cl.cfg.Clock.Now()
		life.ended.Store(&now)
		n.connEnded(err)
	}
	cn, err := conn.Dial(ctx, n.addr, o)
	if err != nil {
		return nil, life, err
	}
	if err := n.vet(cn); err != nil {
		cn.Abort(err)
		cn.Close() // waits for its goroutines
		return nil, life, err
	}
	return cn, life, nil
}

// vet says why cn, just dialed to n's address, is not to be used as n's
// connection, from the config its bootstrap served, and prepares for it:
//
//   - The config is of another cluster (its clusterUUID, which Server
//     7.6.4 and later publish, is not the one the configs installed named:
//     clusterUUIDHeld): an address that
//     a node of the cluster had can come to another cluster's node (a
//     container or pod given the address), with a bucket of the same name
//     and the same credentials. Its bootstrap succeeds, and the requests
//     for n's vbuckets would be answered from the other cluster's bucket
//     (its documents as hits, the writes acknowledged there): an error.
//   - The config is of another bucket uuid than the held config's: the
//     bucket was deleted and made again under its name (the node closed
//     the old bucket's connections), and the new one numbers its
//     collections afresh. The collection ids cached are forgotten before
//     cn is used: sent on cn before the new config is installed (which
//     forgets them too), a cached id names another collection of the new
//     bucket, and a write lands there.
//
// Nothing is checked when no config installed or cn's names the uuid
// (older servers), cn fetched none (Conn.NoClusterConfig; a memcached
// bucket, whose GET_CLUSTER_CONFIG answers KEY_ENOENT; a server that does
// not know it), or cn's uuids cannot be read (judged where it is offered).
// With NoKVConfigs (bootstrap_on=http) the config is fetched for this
// check alone: it is not offered (onConnUp). The uuids are
// read in a byte scan (readUUIDs): a dial, a foreign node's redial among
// them, parses no config; a config whose uuids the scan reads is judged by
// them even if it would not parse.
func (n *Node) vet(cn *conn.Conn) error {
	t := n.cl.topo.Load()
	heldCluster := n.cl.clusterUUIDHeld()
	if t == nil || t.cfg == nil || heldCluster == "" && t.cfg.BucketUUID() == "" {
		return nil
	}
	raw := cn.ClusterConfig()
	if raw == nil || len(raw) > vbmap.MaxConfigSize {
		return nil
	}
	gotCluster, gotBucket, ok := readUUIDs(raw, n.host)
	if !ok {
		return nil
	}
	if got, held := gotCluster, heldCluster; got != "" && held != "" && got != held {
		return fmt.Errorf("the node at %s now answers for another cluster (cluster uuid %s, not %s: its address was given to another cluster's node); not used as this cluster's node",
			n.addr, got, held)
	}
	if got, held := gotBucket, t.cfg.BucketUUID(); got != "" && held != "" && got != held {
		n.cl.colls.Forget()
	}
	return nil
}

// drainAndClose waits until the connections have no request in flight
// that a caller waits for (or the longest operation timeout and a second
// passed on the Clock, or the client closes), then closes them. Every such
// request carries a deadline, so the wait ends by itself; the bound is a
// backstop. A tombstone (a request its caller gave up on) is not waited
// for: it has no deadline, and its late answer would only be reported as
// an orphan. An attempt that picked a connection just before the
// node left and queues its request between the last check and the close
// (a window of microseconds) fails like any request on a closed
// connection: not written, and retried elsewhere; or, had its bytes gone
// out, in flight (a mutation is then ambiguous, never sent twice). A
// per-node count of attempts between pick and send would close the window
// at two contended atomic operations per request; it is not worth it.
func (n *Node) drainAndClose() {
	// The bound is counted on the Clock, as the operations' timeouts are;
	// the checks for requests in flight are on real time (a fake Clock is
	// moved by a test only when it waits for a timer).
	bound := n.cl.cfg.Clock.NewTimer(max(n.cl.cfg.KVTimeout, time.Duration(n.cl.longestTimeout.Load())) + time.Second)
	defer bound.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		busy := false
		if cs := n.conns.Load(); cs != nil {
			for _, cn := range *cs {
				if cn.Awaited() > 0 {
					busy = true
				}
			}
		}
		if !busy {
			break
		}
		select {
		case <-tick.C:
			continue
		case <-bound.C():
		case <-n.cl.ctx.Done():
		}
		break
	}
	n.closeAll()
}

func (n *Node) closeAll() {
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

func (n *Node) String() string { return fmt.Sprintf("node(%s)", n.addr) }

// Stopped is closed once the node's maintainer has exited: it left the
// topology (or the cluster closed) and its connections are closed.
func (n *Node) Stopped() <-chan struct{} { return n.stopped }

// Addr is the node's address ("host:port").
func (n *Node) Addr() string { return n.addr }

// Host is the host part of Addr: what $HOST stands for in its configs.
func (n *Node) Host() string { return n.host }

// Conns are the node's connections (tests).
func (n *Node) Conns() []*conn.Conn {
	if cs := n.conns.Load(); cs != nil {
		return *cs
	}
	return nil
}

// lastDialErr is why the last dial failed (nil: none has, or the last one
// succeeded).
func (n *Node) lastDialErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lastErr
}

// onConnUp is told about every new connection of a node: the config it
// served at bootstrap is offered, unless the configs come from Sources
// only (NoKVConfigs), where it only vetted cn.
func (c *Cluster) onConnUp(n *Node, cn *conn.Conn) {
	if raw := cn.ClusterConfig(); raw != nil && c.topo.Load() != nil && !c.cfg.NoKVConfigs {
		c.Offer(raw, n.host, "connection")
	}
}
