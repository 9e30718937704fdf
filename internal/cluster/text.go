package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/lifecycle"
	"github.com/kvwire/kvwire/memdx"
)

// A memcached server's text connections, which GetMany's groups read with
// multi-gets (client's batchget.go; MemcachedOptions.BinaryMultiGet says why). One
// is dialed in the background when a batch finds none idle (that batch
// uses binary gets), kept for the batches that follow, and closed with
// the node. Their health is the node's: the text path is taken only while
// the node has a live binary connection. An idle connection is checked
// when a batch takes it (conn.TextConn.CheckIdle: one non-blocking peek at
// the socket): one the server closed meanwhile is dropped, and one on
// which bytes arrived (a late answer) is closed as a refusal, below; bytes
// that arrive after that check are refused by the sentinel each multi-get
// follows (conn.TextConn.SendGets), as a malformed answer. A text
// connection that fails is closed, its keys judged as a failed group's
// (and retried, as binary gets), or, when it failed before any answer,
// sent as binary gets at once. A server that does not take text (no answer to the version request
// dialText sends, an error line, an answer that is not one, bytes on an
// idle connection), or that closes a text connection at a multi-get, turns
// the node's text path off for a while (1 s, doubling with each failure in
// a row, up to a minute, until a multi-get is answered); a dial that
// fails, for 100 ms.

// maxTextConns bounds a node's text connections, idle and in use: a batch
// that finds none free reads that server with binary gets. (A batch larger
// than its in-flight bound has two windows in flight, each taking one.)
const maxTextConns = 16

// After a text connection's check failed (no version answer: a server
// that takes no text, or one that stopped answering), or the server
// refused a multi-get, a node's keys go as binary gets for textRetryMin,
// doubling with each failure in a row up to textRetryMax: a server that
// takes no text costs a background connection attempt that often. A dial
// that fails (the server is unreachable, as the node's own connections
// find too) only spaces the next by textRedialAfter, so that the text path
// comes back with the server.
const (
	textRetryMin    = time.Second
	textRetryMax    = time.Minute
	textRedialAfter = 100 * time.Millisecond
)

type textConns struct {
	mu       sync.Mutex
	idle     []*conn.TextConn
	busy     map[*conn.TextConn]struct{}
	dialing  int
	closed   bool
	offUntil time.Time // on the client's clock
	failures int       // in a row, for the back-off
}

// offLocked turns the text path off after a failure, for the back-off's
// next step, and returns for how long.
func (p *textConns) offLocked(now time.Time) time.Duration {
	d := textRetryMax
	if p.failures < 16 {
		d = min(textRetryMin<<p.failures, textRetryMax)
	}
	p.failures++
	p.offUntil = now.Add(d)
	return d
}

// WritesInFlight is the number of requests that may change data and are
// unanswered (tombstones too) on n's connections. A text multi-get is
// taken only when there are none: a read on the text connection could
// overtake them, so that reading back an ambiguous write (one that timed
// out or was cancelled in flight) could find it not applied and see it
// applied later. A read on the connection they are on cannot overtake
// them.
func (n *Node) WritesInFlight() int {
	w := 0
	if cs := n.conns.Load(); cs != nil {
		for _, cn := range *cs {
			w += cn.WritesInFlight()
		}
	}
	return w
}

// TakeText returns an idle text connection to n for one multi-get, or nil
// when there is none (the caller then uses binary gets). Each idle one is
// checked first (CheckIdle): one the server closed is dropped, and one
// bytes arrived on is closed and turns the text path off (TextRefused).
// Finding none, it starts dialing one in the background, for the batches
// that follow: no batch waits for a dial, nor for the text handshake a
// server that takes no text would never answer (dialText).
func (n *Node) TakeText() *conn.TextConn {
	tc, off, stray := n.takeText()
	if stray != nil {
		// Logged with the pool unlocked: the handler runs on the
		// batch's goroutine, the caller's, and may close the client
		// (and wait for it), whose shutdown closes the pool (closeText).
		n.cl.cfg.Logger.Warn("kvwire: the server sent bytes on an idle text connection, answering no request: "+
			"closed; binary gets for a while", "node", n.addr, "err", stray, "for", off)
	}
	return tc
}

// takeText is TakeText with n's text pool locked; stray is CheckIdle's
// error for the idle connection bytes arrived on (the text path is then
// off for off), nil when none.
func (n *Node) takeText() (_ *conn.TextConn, off time.Duration, stray error) {
	p := &n.text
	now := n.cl.cfg.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || now.Before(p.offUntil) {
		return nil, 0, nil
	}
	for k := len(p.idle); k > 0; k = len(p.idle) {
		tc := p.idle[k-1]
		p.idle[k-1] = nil
		p.idle = p.idle[:k-1]
		if err := tc.CheckIdle(); err != nil {
			_ = tc.Close()
			if errors.Is(err, memdx.ErrMalformed) {
				return nil, p.offLocked(now), err
			}
			continue // closed by the server while idle
		}
		if p.busy == nil {
			p.busy = map[*conn.TextConn]struct{}{}
		}
		p.busy[tc] = struct{}{}
		return tc, 0, nil
	}
	if p.dialing == 0 && len(p.busy) < maxTextConns {
		// The node's maintainer holds a count of c.wg until it has
		// closed p (closeText), so this Add cannot race Close's Wait.
		p.dialing++
		n.cl.wg.Add(1)
		lifecycle.Go(n.dialText)
	}
	return nil, 0, nil
}

// dialText dials a text connection to n and checks that the server takes
// text (a version request answered within the connect timeout; memcached
// started with -B binary, or requiring SASL, never answers it), then
// leaves it idle for TakeText. A failed check turns n's text path off for
// a while (offLocked), a failed dial for textRedialAfter; a success ends
// the back-off.
func (n *Node) dialText() {
	defer n.cl.wg.Done()
	ctx, cancel := context.WithTimeout(n.ctx, n.cl.cfg.ConnectTimeout)
	tc, err := conn.DialText(ctx, n.addr, n.cl.connOptions(n))
	dialed := err == nil
	if dialed {
		if _, err = tc.Version(ctx); err == nil {
			// The answer read as ctx ended still breaks the connection.
			err = tc.Err()
		}
		if err != nil {
			_ = tc.Close()
		}
	}
	cancel()
	// Logged with the pool unlocked, as TakeText's: the handler may take
	// a text connection (a GetMany on the client).
	var logs deferredLogs
	defer logs.log(n.cl.cfg.Logger)
	p := &n.text
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dialing--
	switch {
	case err != nil && !dialed:
		// The server is unreachable: the node's own connections
		// say so too, and the text path follows them back.
		if n.ctx.Err() == nil {
			p.offUntil = n.cl.cfg.Clock.Now().Add(textRedialAfter)
		}
	case err != nil:
		if n.ctx.Err() == nil {
			d := p.offLocked(n.cl.cfg.Clock.Now())
			logs.add(slog.LevelWarn, "kvwire: the server did not answer text: binary multi-gets for a while",
				"node", n.addr, "err", err, "for", d)
		}
	case p.closed:
		_ = tc.Close()
	default:
		p.idle = append(p.idle, tc)
	}
}

// PutText gives back a text connection TakeText returned; a broken one is
// closed. answered: a multi-get was answered on it, which ends the
// back-off (a server that answers the version request and then closes
// every connection at its multi-get keeps it growing).
func (n *Node) PutText(tc *conn.TextConn, answered bool) {
	p := &n.text
	p.mu.Lock()
	delete(p.busy, tc)
	keep := !p.closed && tc.Err() == nil
	if keep {
		p.idle = append(p.idle, tc)
	}
	if answered {
		p.failures = 0
	}
	p.mu.Unlock()
	if !keep {
		_ = tc.Close()
	}
}

// DropText closes a text connection TakeText returned and gives it back:
// its multi-get was abandoned (a panic unwound the batch reading it), so
// an answer may still come on it.
func (n *Node) DropText(tc *conn.TextConn) {
	p := &n.text
	p.mu.Lock()
	delete(p.busy, tc)
	p.mu.Unlock()
	_ = tc.Close()
}

// TextRefused turns n's text path off for a while: its server answered a
// multi-get with an error line, or with what is not an answer, or closed
// the connection at it.
func (n *Node) TextRefused(err error) {
	p := &n.text
	p.mu.Lock()
	d := p.offLocked(n.cl.cfg.Clock.Now())
	p.mu.Unlock()
	n.cl.cfg.Logger.Warn("kvwire: server refused a text multi-get: binary gets for a while",
		"node", n.addr, "err", err, "for", d)
}

// closeText closes n's idle text connections and keeps any more from
// being made; those in use are closed when given back, or at once with
// now set (the client is closing: their reads end).
func (n *Node) closeText(now bool) {
	p := &n.text
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	var busy []*conn.TextConn
	if now {
		for tc := range p.busy {
			busy = append(busy, tc)
		}
	}
	p.mu.Unlock()
	for _, tc := range idle {
		_ = tc.Close()
	}
	for _, tc := range busy {
		_ = tc.Close()
	}
}

// TextState is n's text connections: how many are idle, how many are
// being dialed, and until when (on the cluster's clock) the text path is
// off (tests).
func (n *Node) TextState() (idle, dialing int, offUntil time.Time) {
	n.text.mu.Lock()
	defer n.text.mu.Unlock()
	return len(n.text.idle), n.text.dialing, n.text.offUntil
}

// TextInUse is how many of n's text connections a multi-get holds
// (tests).
func (n *Node) TextInUse() int {
	n.text.mu.Lock()
	defer n.text.mu.Unlock()
	return len(n.text.busy)
}
