package conn

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// The monitor goroutine expires requests at their deadlines and watches the
// connection's health.
//
// Health: a node that stops answering (a paused process, a black hole in
// the network) leaves requests abandoned after they were sent. When the
// oldest tombstone not yet vouched for has waited ProbeAfter, or the
// tombstones reach MaxAbandoned/2 (at most one such probe per ProbeAfter),
// the monitor sends a NOOP. The probe decides: answered, the node is alive
// (slow requests are the server's business, and the tombstones abandoned
// before the probe was sent are vouched for: they trigger no further probe);
// not answered while the connection makes no progress for ProbeTimeout
// (nothing read, and, while the probe itself is not yet written, nothing
// accepted by the socket), the connection is closed with kverr.ErrUnresponsive.
// Its requests then fail by the written/not-written rule as on any dead
// connection. A slow node that streams a large answer, or reads a large
// value slowly, makes progress and is not closed.
//
// During the bootstrap (until Dial returns the connection) the bootstrap's
// own requests play the probe: a node that sends nothing for ProbeTimeout
// while one of them waits fails the Dial with kverr.ErrUnresponsive, so a node
// that accepts connections but answers nothing costs a redial ProbeTimeout,
// not the whole connect timeout.

// health is the monitor's state; fields are guarded by Conn.mu except the
// timer and kick, which only the monitor receives from.
type health struct {
	timer timer
	at    time.Time     // when timer fires; zero: disarmed
	kick  chan struct{} // capacity 1: a pile of tombstones asks for a probe
	// probe is the NOOP in flight (nil: none), queued at probeAt.
	probe     *call
	probeAt   time.Time
	lastProbe time.Time
	// vouched: tombstones abandoned before it were sent before a probe
	// that was answered.
	vouched time.Time
	// in and out are bytesIn and bytesOut when progress was last seen.
	in, out uint64
}

func (h *health) init(c *Conn) {
	h.timer = c.clock.NewTimer()
	h.kick = make(chan struct{}, 1)
	if c.opts.ProbeAfter >= 0 {
		c.healthArm(c.clock.Now().Add(c.opts.ProbeTimeout)) // the bootstrap's watch
	}
}

// arm sets the health timer to fire at t. Called with mu held.
func (c *Conn) healthArm(t time.Time) {
	c.health.at = t
	c.health.timer.Reset(t.Sub(c.clock.Now()))
}

// healthNoteTomb is told of every new tombstone (abandon). Called with mu
// held.
func (c *Conn) healthNoteTomb(cl *call) {
	h := &c.health
	if c.opts.ProbeAfter < 0 || h.probe != nil {
		return
	}
	if c.tombs >= c.opts.MaxAbandoned/2 && cl.abandonedAt.Sub(h.lastProbe) >= c.opts.ProbeAfter {
		select {
		case h.kick <- struct{}{}:
		default:
		}
		return
	}
	if h.at.IsZero() {
		c.healthArm(cl.abandonedAt.Add(c.opts.ProbeAfter))
	}
}

// armSweeper sets the deadline timer to fire at t. Called with mu held.
func (c *Conn) armSweeper(t time.Time) {
	c.dlAt = t
	c.dlTimer.Reset(t.Sub(c.clock.Now()))
}

// monitor is the monitor goroutine.
func (c *Conn) monitor() {
	defer close(c.sweepDone)
	var probeDone chan error
	for {
		select {
		case <-c.dlTimer.C():
			c.sweep()
		case <-c.health.timer.C():
			probeDone = c.healthCheck(probeDone)
		case <-c.health.kick:
			c.mu.Lock()
			if c.health.probe == nil && c.err == nil {
				probeDone = c.startProbe()
			}
			c.mu.Unlock()
		case <-probeDone:
			probeDone = nil
			c.probeAnswered()
		case <-c.done:
			c.dlTimer.Stop()
			c.health.timer.Stop()
			return
		}
	}
}

// sweep ends every call whose deadline has passed and re-arms the timer for
// the next one (expire).
func (c *Conn) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dlAt = time.Time{}
	if c.err != nil {
		return // teardown fails everything pending
	}
	now := c.clock.Now()
	for c.dlHead != nil && !c.dlHead.deadline.After(now) {
		c.expire(c.dlHead, now, &c.mwake)
	}
	c.mwake.flush()
	if c.dlHead != nil {
		c.armSweeper(c.dlHead.deadline)
	}
}

// healthCheck runs when the health timer fires: with a probe in flight it
// checks for progress, and without one it probes if the oldest tombstone
// not vouched for is ProbeAfter old. It returns the probe's done channel.
func (c *Conn) healthCheck(probeDone chan error) chan error {
	c.mu.Lock()
	h := &c.health
	h.at = time.Time{}
	if c.err != nil {
		c.mu.Unlock()
		return probeDone
	}
	now := c.clock.Now()
	if c.heldBack.Load() && h.probe == nil {
		// Bootstrapping: Dial's requests are the probe. A node that sends
		// nothing for ProbeTimeout while one of them waits is not answering.
		if in := c.bytesIn.Load(); in != h.in || c.active == 0 {
			h.in = in
			c.healthArm(now.Add(c.opts.ProbeTimeout))
			c.mu.Unlock()
			return probeDone
		}
		err := fmt.Errorf("conn %s: %w: nothing arrived for %v while the bootstrap waited for an answer",
			c.addr, kverr.ErrUnresponsive, c.opts.ProbeTimeout)
		c.mu.Unlock()
		c.fail(err)
		return probeDone
	}
	if h.probe != nil {
		in, out := c.bytesIn.Load(), c.bytesOut.Load()
		unsent := h.probe.state == reqQueued || h.probe.state == reqSending
		if in != h.in || (unsent && out != h.out) {
			h.in, h.out = in, out
			c.healthArm(now.Add(c.opts.ProbeTimeout))
			c.mu.Unlock()
			return probeDone
		}
		oldest := time.Duration(0)
		if c.tombHead != nil {
			oldest = now.Sub(c.tombHead.abandonedAt)
		}
		err := fmt.Errorf("conn %s: %w: a NOOP probe sent %v ago is unanswered and nothing arrived for %v (%d requests abandoned, the oldest %v ago)",
			c.addr, kverr.ErrUnresponsive, now.Sub(h.probeAt), c.opts.ProbeTimeout, c.tombs, oldest)
		tombs := c.tombs
		c.mu.Unlock()
		c.log.Warn("kvwire: closing a connection whose node stopped answering", "node", c.addr,
			"probe_sent", now.Sub(h.probeAt), "abandoned", tombs, "oldest_abandoned", oldest)
		c.fail(err)
		return probeDone
	}
	for cl := c.tombHead; cl != nil; cl = cl.lNext {
		if cl.abandonedAt.Before(h.vouched) {
			continue
		}
		if due := cl.abandonedAt.Add(c.opts.ProbeAfter); due.After(now) {
			c.healthArm(due)
		} else {
			probeDone = c.startProbe()
		}
		break
	}
	c.mu.Unlock()
	return probeDone
}

// startProbe queues a NOOP and arms the health timer for ProbeTimeout. It
// returns the probe's done channel (nil if it could not be queued). Called
// with mu held.
func (c *Conn) startProbe() chan error {
	h := &c.health
	cl := getCall()
	cl.op = memdx.OpNoop
	req := memdx.Request{OpCode: memdx.OpNoop}
	wake, err := c.queue(cl, &req, false)
	if err != nil {
		putCall(cl)
		return nil
	}
	if wake {
		c.wakeWriter()
	}
	c.probes.Add(1)
	now := c.clock.Now()
	h.probe, h.probeAt, h.lastProbe = cl, now, now
	h.in, h.out = c.bytesIn.Load(), c.bytesOut.Load()
	c.healthArm(now.Add(c.opts.ProbeTimeout))
	return cl.done
}

// probeAnswered runs when the probe's outcome arrived (on the monitor,
// which received it from done): an answer, whatever its status, vouches for
// the tombstones abandoned before the probe was sent. A failure means the
// connection is ending.
func (c *Conn) probeAnswered() {
	c.mu.Lock()
	h := &c.health
	cl := h.probe
	h.probe = nil
	h.vouched = h.probeAt
	h.at = time.Time{}
	h.timer.Stop()
	c.mu.Unlock()
	c.leave(cl)
	c.mu.Lock()
	// Tombstones abandoned since the probe was sent are due in their turn.
	for t := c.tombHead; t != nil && c.err == nil; t = t.lNext {
		if !t.abandonedAt.Before(h.vouched) {
			c.healthArm(t.abandonedAt.Add(c.opts.ProbeAfter))
			break
		}
	}
	c.mu.Unlock()
}

// strayKind says why a response answered nothing.
type strayKind uint8

const (
	strayUnknownOpaque strayKind = iota + 1 // nothing in flight has its opaque
	strayWrongOpcode                        // its request has another opcode
	strayUnsent                             // its request is not all written
	strayLate                               // its request was abandoned
)

var strayKindNames = [...]string{"", "opaque matches nothing in flight", "opcode differs from its request's",
	"its request is not yet written", "late answer to an abandoned request"}

func (k strayKind) String() string { return strayKindNames[k] }

// strayLogEvery is the least time between two log lines about stray
// responses on one connection; the strays between are counted in the next.
const strayLogEvery = time.Second

// strayLog is the reader's rate limit on logging strays.
type strayLog struct {
	last       time.Time
	suppressed int
}

// strayResponse counts and logs a dropped response (on the reader).
func (c *Conn) strayResponse(p *memdx.Packet, kind strayKind) {
	c.strays.Add(1)
	if kind == strayLate {
		c.late.Add(1)
	}
	if !c.log.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	now := c.clock.Now()
	if !c.stray.last.IsZero() && now.Sub(c.stray.last) < strayLogEvery {
		c.stray.suppressed++
		return
	}
	c.log.Warn("kvwire: dropped a stray response", "node", c.addr, "why", kind.String(),
		"opcode", p.OpCode, "opaque", p.Opaque, "status", p.Status, "suppressed_since_last", c.stray.suppressed)
	c.stray.last = now
	c.stray.suppressed = 0
}

// failProtocol ends the connection for a protocol violation, and logs it.
func (c *Conn) failProtocol(pe *ProtocolError) {
	c.log.Warn("kvwire: closing a connection: protocol violation", "node", c.addr, "err", pe)
	c.fail(pe)
}
