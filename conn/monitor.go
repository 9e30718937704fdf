package conn

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"
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
// (nothing read; while the probe itself is not yet written, nothing
// accepted by the socket; on Linux, no more of the bytes before the probe
// acknowledged by the node: SIOCOUTQ, read once per check), the
// connection is closed with kverr.ErrUnresponsive. Its requests then fail
// by the written/not-written rule as on any dead connection. A slow node
// that streams a large answer makes progress and is not closed, and so is
// one that reads a large value slowly: while the probe waits to be written behind the value, by the
// bytes the socket accepts, and once it is in the socket behind the value,
// by the socket's queue draining up to it. The probe's own bytes
// acknowledged, and those after it, count for nothing: a paused node's
// kernel takes what fits its receive buffer (an idle connection's probe
// whole), a proxy in front of a dead node all of it; only an answer says
// the process got the probe. The drain needs the count, which only
// Linux gives: elsewhere, a value still draining from the socket's buffer
// for longer than ProbeTimeout after the probe was written closes the
// connection. Over TLS the writer learns what the socket took only when
// the TLS layer's Write returns, a chunk of up to 64 KiB (writeChunk):
// while it waits on a full socket, what the node drains is refilled from
// it. So under TLS the check counts the socket's own bytes (ciphertext),
// as the socket under the TLS layer takes them: a TCP socket's per system
// call on unix (watchedConn, a partial write each), the SIOCOUTQ count in the same
// terms, and the probe's place in them from where the Write carrying it
// began (noteProbeWire). On a DialContext's own connection type (not a
// *net.TCPConn) there is no system call to see: under TLS its Writes are
// counted as they return, one record (16 KiB of data) each, so a node
// reading a large value slower than 16 KiB per ProbeTimeout is closed as
// unresponsive; without TLS, the writer's Writes, 64 KiB each.
//
// Requests the server answers only by a bound of its own (answerBy): a
// synchronous write, at its durability timeout at the latest (the frame
// info's, counted from when the socket took the request, and until then
// from its queueing; kv_engine answers SYNC_WRITE_AMBIGUOUS then), a RANGE_SCAN_CONTINUE with a time limit, at
// that limit. A tombstone of one counts as waiting only from its bound
// (probeDue): its late answer is no sign of a dead node before then. And
// a NOOP is a barrier in kv_engine under UnorderedExecution, which Couchbase
// connections negotiate (it is not is_reorder_supported): it runs only
// once every earlier command has finished, and no later one starts before
// it is done. A probe sent behind a pending synchronous write would stall
// the connection's traffic until the write's durability timeout, and its
// silence would close a live node. So a probe due waits until the latest
// bound of the requests in flight when it became due (probeOrHold), or
// until they are answered if that is sooner (then only if a tombstone
// still calls for it: holdEased), and is sent then, whatever
// came meanwhile: a node that stopped answering is still found, after that
// bound. Sent behind requests whose bounds are still to come (they came
// while it waited), its silence counts from the latest of them still
// pending (probeBound, boundAhead). A synchronous write with the server's
// default timeout (0: its length is the server's) or a continue without a
// time limit has no bound here: a probe goes behind it as behind any
// request.
//
// During the bootstrap (until Dial returns the connection) the bootstrap's
// own requests play the probe: a node that sends nothing for ProbeTimeout
// while one of them waits fails the Dial with kverr.ErrUnresponsive, so a
// node that accepts connections but answers nothing (a paused process: its
// kernel still accepts) costs a redial ProbeTimeout, not the whole connect
// timeout. Except while a SASL_AUTH or SASL_STEP waits: kv_engine answers
// nothing on the connection while it checks an external user's PLAIN login
// through ns_server's saslauthd, which can take seconds, so the login is
// bounded by the Dial's context alone. A TLS handshake, before the monitor
// starts, is watched until the node's first handshake bytes (handshake,
// dial.go).

// monitor is the monitor goroutine's state: the deadline timer it sweeps
// the table's deadline list by, and the health check's timer and probe.
// Fields are guarded by Conn.mu except the timers' channels and kick,
// which only the monitor goroutine receives from, wake, which only it
// uses, and the atomic.
type monitor struct {
	// dlTimer wakes the monitor at dlAt, the earliest deadline in the
	// table when it was armed (zero: disarmed); a new deadline re-arms it
	// only when it is earlier than dlAt, so the usual request costs no
	// timer operation.
	dlTimer timer
	dlAt    time.Time
	// timer is the health check's, on the health clock, firing at at
	// (zero: disarmed). It is made when first armed, by the monitor
	// goroutine (healthArm asks with armKick), so that a caller's clock
	// (Options.Clock) shows no timer for a connection with nothing to
	// watch; nil until then.
	timer   timer
	at      time.Time
	armKick chan struct{} // capacity 1
	// bootTimer is the bootstrap's watch for silence (bootstrapWatch), on
	// the connection's clock (the dial's time, not the health clock's):
	// bootIn is the count of bytes read when it last saw some.
	bootTimer timer
	bootIn    uint64
	kick      chan struct{} // capacity 1: a pile of tombstones asks for a probe
	// holdKick (capacity 1): a request with an answerBy left the table
	// while a probe was held (inflight.holdKick): the hold may end.
	holdKick chan struct{}
	// sweepKick (capacity 1): a submitted call asks for a sweep (submit).
	sweepKick chan struct{}
	// probe is the NOOP in flight (nil: none), queued at probeAt.
	probe     *call
	probeAt   time.Time
	lastProbe time.Time
	// holdTill: a probe due waits until then, the latest answerBy of the
	// requests in flight when it first became due, brought forward as
	// they are answered (zero: none waits; probeOrHold). probeBound: the
	// latest answerBy of the requests ahead of the probe in flight (zero:
	// none after then): its silence counts from then (probeWatch).
	holdTill   time.Time
	probeBound time.Time
	// vouched: tombstones abandoned before it were sent before a probe
	// that was answered.
	vouched time.Time
	// in and out are the bytes read and written (wireOut) when progress
	// was last seen.
	in, out uint64
	// unsent reads the socket's count of bytes the node has not
	// acknowledged (nil: the platform or the connection has none:
	// socketUnsent). acked is the stream offset the node's kernel has
	// taken the bytes up to (wireOut less that count) when progress was
	// last seen (ackedOK: the count was read).
	unsent  func() (int, bool)
	acked   int64
	ackedOK bool
	// wire is the socket under a TLS connection, which counts the
	// ciphertext it takes (nil: no TLS): under TLS the health check
	// counts the socket's bytes, not the writer's, and probeWire is then
	// where the probe's bytes begin in the socket's stream, or a little
	// before (-1: not yet handed to the TLS layer; noteProbeWire).
	wire      *watchedConn
	probeWire int64
	wake      wakeList      // the Notifiers of calls a sweep ended
	probes    atomic.Uint64 // Stats.Probes
	exited    chan struct{} // closed when the monitor goroutine has exited
}

func (c *Conn) initMonitor() {
	m := &c.monitor
	m.dlTimer = c.clock.NewTimer()
	m.bootTimer = c.clock.NewTimer()
	m.armKick = make(chan struct{}, 1)
	m.kick = make(chan struct{}, 1)
	m.holdKick = make(chan struct{}, 1)
	m.sweepKick = make(chan struct{}, 1)
	m.exited = make(chan struct{})
	m.unsent = c.opts.unsentOf(c.nc)
	if tc, ok := c.nc.(*tls.Conn); ok {
		m.wire, _ = tc.NetConn().(*watchedConn)
	}
	if c.opts.ProbeAfter >= 0 {
		m.bootTimer.Reset(c.opts.ProbeTimeout) // the bootstrap's watch
	}
}

// healthArm sets the health timer to fire at t, on the health clock.
// Called with mu held.
func (c *Conn) healthArm(t time.Time) {
	m := &c.monitor
	m.at = t
	if m.timer == nil {
		select {
		case m.armKick <- struct{}{}: // the monitor goroutine makes it
		default:
		}
		return
	}
	m.timer.Reset(t.Sub(c.health.Now()))
}

// makeHealthTimer is the monitor goroutine making the health timer that
// healthArm asked for, armed for at.
func (c *Conn) makeHealthTimer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &c.monitor
	if m.timer == nil && !m.at.IsZero() && c.err == nil {
		m.timer = newTimerIn(c.health, m.at.Sub(c.health.Now()))
	}
}

// healthNoteTomb is told of every new tombstone (abandon). A connection
// that is ending (a caller abandoning a request between its failure and
// the teardown, which drops every tombstone) arms nothing: its monitor
// may have stopped already, and a timer armed then would stay on a
// caller's Clock for good. Called with mu held.
func (c *Conn) healthNoteTomb(cl *call) {
	m := &c.monitor
	if c.opts.ProbeAfter < 0 || m.probe != nil || c.err != nil {
		return
	}
	if c.inflight.tombs >= c.opts.MaxAbandoned/2 && cl.abandonedAt.Sub(m.lastProbe) >= c.opts.ProbeAfter {
		select {
		case m.kick <- struct{}{}:
		default:
		}
		return
	}
	// A tombstone waiting for its answerBy is due after the ones that
	// follow it: one of them may be due before the timer.
	if due := probeDue(cl, c.opts.ProbeAfter); m.at.IsZero() || (due.Before(m.at) && !c.callbacks.heldBack.Load()) {
		c.healthArm(due)
	}
}

// probeDue is when tombstone cl calls for a probe: ProbeAfter after it was
// abandoned, or after its answerBy when that is later. Until the server's
// own bound for it has passed, its answer not coming says nothing of the
// node (a synchronous write waiting for slow replication is answered only
// at its durability timeout).
func probeDue(cl *call, after time.Duration) time.Time {
	from := cl.abandonedAt
	if cl.answerBy.After(from) {
		from = cl.answerBy
	}
	return from.Add(after)
}

// answerWithin is how long after reading req the server is bound to have
// answered it: a synchronous write (a durability frame info, typed or
// among FramingExtras) by its durability timeout, a RANGE_SCAN_CONTINUE
// with a time limit by that limit (kv_engine ends the continue with
// RANGE_SCAN_MORE). Zero: no bound known (a synchronous write with the
// server's default timeout, 0, whose length the connection does not
// know; a continue without a time limit, which streams what it finds).
// Called with mu held, for those requests only: the others cost nothing.
func answerWithin(req *memdx.Request) time.Duration {
	var ms uint32
	switch {
	case req.Durability != memdx.DurabilityNone:
		ms = uint32(req.DurabilityTimeout)
	case req.OpCode == memdx.OpRangeScanContinue:
		if e := req.ExtrasBytes(); len(e) == 28 {
			ms = binary.BigEndian.Uint32(e[20:24])
		}
	}
	if ms == 0 && len(req.FramingExtras) != 0 {
		_ = memdx.FrameInfos(req.FramingExtras, func(id uint16, data []byte) error {
			if memdx.RequestFrameID(id) == memdx.FrameDurability {
				if _, t, err := memdx.DecodeDurabilityFrame(data); err == nil {
					ms = uint32(t)
				}
			}
			return nil
		})
	}
	return time.Duration(ms) * time.Millisecond
}

// answerWritten is told that the socket took the last byte of cl, whose
// answerIn is not zero: its answerBy counts from now. The server counts
// its bound from when it runs the request (kv_engine's SyncWrite takes
// its expiry when the write is added to the durability monitor), no
// earlier than it reads it, which may come long after
// the request was queued (behind a large value a node reads slowly); a
// bound counted from the queueing would let a probe go out, and be read
// as silence, while the request still holds the node's pipeline. A probe
// in flight behind cl waits for the new bound (probeBound). Called with
// mu held.
func (c *Conn) answerWritten(cl *call) {
	m := &c.monitor
	cl.answerBy = c.health.Now().Add(cl.answerIn)
	if m.probe != nil && cl.start < m.probe.start && cl.answerBy.After(m.probeBound) {
		m.probeBound = cl.answerBy
	}
}

// latestBound is the latest answerBy after now among the requests in
// flight, tombstones included, and those forgotten past MaxAbandoned,
// which the node may still hold (zero: none). Called with mu held, by the
// monitor when a probe is due, which is rare: it walks the table only
// while it holds such a request.
func (c *Conn) latestBound(now time.Time) time.Time {
	var latest time.Time
	if b := c.inflight.evictedBound; b.After(now) {
		latest = b
	}
	if c.inflight.promised == 0 {
		return latest
	}
	for cl := range c.inflight.all() {
		if cl.answerBy.After(now) && cl.answerBy.After(latest) {
			latest = cl.answerBy
		}
	}
	return latest
}

// boundAhead is the latest answerBy after now among the requests in
// flight ahead of probe, and those forgotten past MaxAbandoned (zero:
// none): what probe still waits behind. Called with mu held, by the
// monitor when a probe sent behind such a bound is silent, which is rare.
func (c *Conn) boundAhead(probe *call, now time.Time) time.Time {
	var latest time.Time
	if b := c.inflight.evictedBound; b.After(now) {
		latest = b
	}
	if c.inflight.promised == 0 {
		return latest
	}
	for cl := range c.inflight.all() {
		if cl.start < probe.start && cl.answerBy.After(now) && cl.answerBy.After(latest) {
			latest = cl.answerBy
		}
	}
	return latest
}

// probeOrHold sends the probe now due (startProbe), unless a request in
// flight, which the probe would wait behind, has an answerBy still to
// come: under UnorderedExecution NOOP is a barrier in kv_engine (not
// is_reorder_supported): it runs after every earlier command has
// finished, and no later one starts before it. Sent behind a synchronous
// write waiting for replication, it would stall the connection's traffic
// until the write's durability timeout. The probe then waits until the
// latest such answerBy, and is sent then whatever came meanwhile (a node
// that stopped answering is still found), or sooner, once those requests
// are answered: each such request leaving the table asks for this again
// (holdKick, holdEased: if a probe is still called for), and the hold ends
// at the latest bound still to come, never later than it first was. It returns the probe's done channel (nil: not
// sent). Called with mu held.
func (c *Conn) probeOrHold(now time.Time) chan error {
	m := &c.monitor
	if b := c.latestBound(now); m.holdTill.IsZero() || b.Before(m.holdTill) {
		m.holdTill = b
	}
	if m.holdTill.After(now) {
		c.inflight.holdKick = m.holdKick
		if m.at.IsZero() || m.at.After(m.holdTill) {
			c.healthArm(m.holdTill)
		}
		return nil
	}
	c.endHold()
	return c.startProbe()
}

// holdEased runs when a request the held probe waited for has left the
// table (holdKick): the probe goes out now, or when the bounds still
// pending have passed (probeOrHold), if it is still called for: a
// tombstone not vouched for is due (probeDue), or tombstones pile up
// (healthNoteTomb's kick). The tombstones that made it due may have been
// answered meanwhile (the node is alive): the hold then ends without a
// probe, as it does when it runs out (healthCheck). Called with mu held.
func (c *Conn) holdEased(now time.Time) chan error {
	due, ok := c.nextProbeDue()
	if (ok && !due.After(now)) || c.inflight.tombs >= c.opts.MaxAbandoned/2 {
		return c.probeOrHold(now)
	}
	c.endHold()
	if ok && (c.monitor.at.IsZero() || due.Before(c.monitor.at)) {
		c.healthArm(due)
	}
	return nil
}

// endHold forgets the hold of a probe (probeOrHold). Called with mu held.
func (c *Conn) endHold() {
	c.monitor.holdTill = time.Time{}
	c.inflight.holdKick = nil
}

// armSweeper sets the deadline timer to fire at t. Called with mu held.
func (c *Conn) armSweeper(t time.Time) {
	c.monitor.dlAt = t
	c.sub.sweepAt.Store(t.UnixNano())
	c.monitor.dlTimer.Reset(t.Sub(c.clock.Now()))
}

// sweepSoon asks the monitor goroutine for a sweep.
func (m *monitor) sweepSoon() {
	select {
	case m.sweepKick <- struct{}{}:
	default: // one is already asked for
	}
}

// runMonitor is the monitor goroutine.
func (c *Conn) runMonitor() {
	m := &c.monitor
	defer close(m.exited)
	var probeDone chan error
	for {
		var healthC <-chan time.Time // m.timer is written by this goroutine only
		if m.timer != nil {
			healthC = m.timer.C()
		}
		select {
		case <-m.dlTimer.C():
			c.sweep()
		case <-m.sweepKick:
			c.sweep()
		case <-healthC:
			probeDone = c.healthCheck(probeDone)
		case <-m.armKick:
			c.makeHealthTimer()
		case <-m.bootTimer.C():
			c.bootCheck()
		case <-m.kick:
			c.mu.Lock()
			if m.probe == nil && c.err == nil {
				probeDone = c.probeOrHold(c.health.Now())
			}
			c.mu.Unlock()
		case <-m.holdKick:
			c.mu.Lock()
			if m.probe == nil && c.err == nil && !m.holdTill.IsZero() {
				probeDone = c.holdEased(c.health.Now())
			}
			c.mu.Unlock()
		case <-probeDone:
			probeDone = nil
			c.probeAnswered()
		case <-c.done:
			m.dlTimer.Stop()
			m.bootTimer.Stop()
			c.mu.Lock()
			if m.timer != nil {
				m.timer.Stop()
			}
			c.mu.Unlock()
			return
		}
	}
}

// sweep ends every call whose deadline has passed and re-arms the timer for
// the next one (expire).
func (c *Conn) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &c.monitor
	m.dlAt = time.Time{}
	c.sub.sweepAt.Store(0)
	if c.err != nil {
		return // teardown fails everything in flight
	}
	if c.queueSubmitted() { // their deadlines join the list
		c.writer.wake()
	}
	now := c.clock.Now()
	dl := &c.inflight.deadlines
	var tomb time.Time // the health clock's now, for the tombstones (abandon)
	for dl.head != nil && !dl.head.deadline.After(now) {
		if tomb.IsZero() {
			tomb = now
			if c.opts.Clock != nil {
				tomb = c.health.Now()
			}
		}
		c.expire(dl.head, tomb, &m.wake)
	}
	m.wake.flush()
	if next := c.inflight.nextDeadline(); !next.IsZero() {
		c.armSweeper(next)
	}
}

// healthCheck runs when the health timer fires: with a probe in flight it
// checks for progress (probeWatch), and otherwise, once the bootstrap is
// over (bootCheck watches it), it probes if the oldest tombstone not
// vouched for is ProbeAfter old. It returns the probe's done channel.
func (c *Conn) healthCheck(probeDone chan error) chan error {
	c.mu.Lock()
	m := &c.monitor
	m.at = time.Time{}
	if c.err != nil {
		c.mu.Unlock()
		return probeDone
	}
	now := c.health.Now()
	if m.probe != nil {
		c.probeWatch(now) // releases mu
		return probeDone
	}
	if c.callbacks.heldBack.Load() {
		c.mu.Unlock() // bootCheck arms the health check once the bootstrap is over
		return probeDone
	}
	due, ok := c.nextProbeDue()
	switch {
	case !ok || due.After(now):
		c.endHold() // nothing calls for a probe now
		if ok {
			c.healthArm(due)
		}
	default:
		probeDone = c.probeOrHold(now)
	}
	c.mu.Unlock()
	return probeDone
}

// nextProbeDue returns the earliest probeDue of the tombstones not vouched
// for (false: none). The list is oldest first: past the first tombstone
// without an answerBy, none is due earlier. Called with mu held.
func (c *Conn) nextProbeDue() (time.Time, bool) {
	m := &c.monitor
	var first time.Time
	ok := false
	for cl := c.inflight.tombstones.head; cl != nil; cl = c.inflight.tombstones.next(cl) {
		if cl.abandonedAt.Before(m.vouched) {
			continue
		}
		if due := probeDue(cl, c.opts.ProbeAfter); !ok || due.Before(first) {
			first, ok = due, true
		}
		if cl.answerBy.IsZero() {
			break
		}
	}
	return first, ok
}

// bootCheck runs when the bootstrap's timer fires: while Dial bootstraps
// it watches for bytes read (bootstrapWatch); once the bootstrap is over
// it stops, arming the health check for the tombstones left meanwhile,
// if any.
func (c *Conn) bootCheck() {
	c.mu.Lock()
	m := &c.monitor
	switch {
	case c.err != nil:
	case !c.callbacks.heldBack.Load():
		if due, ok := c.nextProbeDue(); ok && m.probe == nil && m.at.IsZero() {
			c.healthArm(due)
		}
	case m.probe != nil: // its own watch (probeWatch) runs; watch on after it
		m.bootTimer.Reset(c.opts.ProbeTimeout)
	default:
		c.bootstrapWatch() // releases mu
		return
	}
	c.mu.Unlock()
}

// bootstrapWatch: while Dial bootstraps, its requests are the probe. A
// node that sends nothing for ProbeTimeout while one of them waits is not
// answering (a paused process: its kernel accepted the connection), unless
// the one waited for is a login (loginWaits). The silence is timed on the
// connection's clock, as the dial is, not on the health clock. Called with
// mu held, which it releases.
func (c *Conn) bootstrapWatch() {
	m := &c.monitor
	if in := c.reader.bytesIn.Load(); in != m.bootIn || c.inflight.active == 0 || c.loginWaits() {
		m.bootIn = in
		m.bootTimer.Reset(c.opts.ProbeTimeout)
		c.mu.Unlock()
		return
	}
	err := fmt.Errorf("conn %s: %w: nothing arrived for %v while the bootstrap waited for an answer",
		c.addr, kverr.ErrUnresponsive, c.opts.ProbeTimeout)
	c.mu.Unlock()
	c.fail(err)
}

// loginWaits reports whether a SASL_AUTH or SASL_STEP of the bootstrap
// waits for its answer. kv_engine answers nothing on the connection while
// it checks a PLAIN login of an external (LDAP) user through ns_server's
// saslauthd, which can take seconds: the silence then says nothing of the
// node, and the Dial's context bounds the login. Called with mu held,
// during the bootstrap only (a handful of requests in the table).
func (c *Conn) loginWaits() bool {
	for cl := range c.inflight.byOpaque.all() {
		if (cl.op == memdx.OpSASLAuth || cl.op == memdx.OpSASLStep) && cl.abandonedAt.IsZero() {
			return true
		}
	}
	return false
}

// probeWatch checks a probe in flight for progress: bytes read, or, while
// the probe is not all written, bytes accepted by the socket (wireOut), or
// (Linux) bytes before the probe that the node acknowledged. The last is what a
// live node reading a large value slowly shows once the probe sits in the
// socket behind it: nothing to read before the value is read, nothing left
// to write, but the socket's queue drains. Without any for ProbeTimeout,
// the connection is closed with kverr.ErrUnresponsive. Called with mu held,
// which it releases.
func (c *Conn) probeWatch(now time.Time) {
	m := &c.monitor
	in, out := c.reader.bytesIn.Load(), c.wireOut()
	acked, ackedOK := c.ackedOffset()
	unsent := m.probe.state == reqQueued || m.probe.state == reqSending
	// The node's kernel taking bytes counts only while it takes those
	// before the probe: the probe's own, and those after it, say nothing
	// of the process (a paused node's kernel acknowledges what fits its
	// receive buffer, the probe of an idle connection included; a proxy
	// in front of a dead node, all of it): only an answer (or other
	// bytes read) does.
	drained := ackedOK && m.ackedOK && acked > m.acked && m.acked < c.probeOffset()
	if in != m.in || (unsent && out != m.out) || drained {
		m.in, m.out = in, out
		m.acked, m.ackedOK = acked, ackedOK
		c.healthArm(now.Add(c.opts.ProbeTimeout))
		c.mu.Unlock()
		return
	}
	// The probe waits behind a request the server answers only by its
	// answerBy: silence before then says nothing of the node. Once those
	// ahead of it are answered, it waits behind nothing of the kind.
	if m.probeBound.After(now) {
		m.probeBound = c.boundAhead(m.probe, now)
	}
	if until := m.probeBound.Add(c.opts.ProbeTimeout); !m.probeBound.IsZero() && until.After(now) {
		c.healthArm(until)
		c.mu.Unlock()
		return
	}
	oldest := time.Duration(0)
	if t := c.inflight.tombstones.head; t != nil {
		oldest = now.Sub(t.abandonedAt)
	}
	tombs := c.inflight.tombs
	err := fmt.Errorf("conn %s: %w: a NOOP probe sent %v ago is unanswered and nothing arrived for %v (%d requests abandoned, the oldest %v ago)",
		c.addr, kverr.ErrUnresponsive, now.Sub(m.probeAt), c.opts.ProbeTimeout, tombs, oldest)
	c.mu.Unlock()
	// Ended before it is logged: the Logger's handler is caller code and
	// may send a request; one sent here, on the connection still open,
	// would wait for this goroutine, which expires the connection's
	// requests and is running the handler.
	c.fail(err)
	c.log.Warn("kvwire: closed a connection whose node stopped answering", "node", c.addr,
		"probe_sent", now.Sub(m.probeAt), "abandoned", tombs, "oldest_abandoned", oldest)
}

// startProbe queues a NOOP and arms the health timer for ProbeTimeout. It
// returns the probe's done channel (nil if it could not be queued). Called
// with mu held.
func (c *Conn) startProbe() chan error {
	m := &c.monitor
	cl := getCall()
	cl.op = memdx.OpNoop
	req := memdx.Request{OpCode: memdx.OpNoop}
	wake, err := c.queue(cl, &req, false)
	if err != nil {
		putCall(cl)
		return nil
	}
	if wake {
		c.writer.wake()
	}
	m.probes.Add(1)
	now := c.health.Now()
	m.probeBound = c.latestBound(now)
	m.probe, m.probeAt, m.lastProbe = cl, now, now
	m.probeWire = -1
	m.in, m.out = c.reader.bytesIn.Load(), c.wireOut()
	m.acked, m.ackedOK = c.ackedOffset()
	c.healthArm(now.Add(c.opts.ProbeTimeout))
	return cl.done
}

// wireOut is the count of bytes the socket took: the writer's, or under
// TLS the socket's own (watchedConn), which sees each system call while
// the TLS layer's Write waits on a full socket. Called by the monitor
// only.
func (c *Conn) wireOut() uint64 {
	if w := c.monitor.wire; w != nil {
		return w.out.Load()
	}
	return c.writer.bytesOut.Load()
}

// ackedOffset returns the stream offset, in the socket's bytes (wireOut),
// up to which the node has acknowledged what was written: wireOut less
// the socket's unacknowledged count, read once (false: there is no
// count). The count is read under mu, the plain writer counts a write
// under mu only after the socket took it, and the TLS socket counts each
// system call as it returns: a write in between comes out low now and as
// a rise at the next check (a socket that takes bytes has room, so such
// writes are few). Called by the monitor only, with mu held.
func (c *Conn) ackedOffset() (int64, bool) {
	if c.monitor.unsent == nil {
		return 0, false
	}
	q, ok := c.monitor.unsent()
	return int64(c.wireOut()) - int64(q), ok
}

// probeOffset is where the probe's bytes begin in the stream ackedOffset
// counts: its offset, or under TLS probeWire (math.MaxInt64 while the
// probe is not yet handed to the TLS layer: everything the socket holds is
// before it). Called by the monitor only, with mu held.
func (c *Conn) probeOffset() int64 {
	m := &c.monitor
	switch {
	case m.wire == nil:
		return int64(m.probe.start)
	case m.probeWire < 0:
		return math.MaxInt64
	}
	return m.probeWire
}

// noteProbeWire, under TLS, is told by the writer of each Write it is
// about to hand the TLS layer: when it carries the probe's first byte,
// the socket's count is where the Write's first byte will be (the TLS
// layer's earlier Writes have returned, all of their bytes taken), and
// the probe's own is its offset in the Write further on, or more (a
// record's header, and in TLS 1.2 an explicit nonce, come before its
// data). A lower bound is safe: the socket's queue draining counts as
// progress only while it drains bytes before it. Called with mu held.
func (c *Conn) noteProbeWire() {
	m := &c.monitor
	w := &c.writer
	if m.wire == nil || m.probe == nil || m.probeWire >= 0 || m.probe.start >= w.writing {
		return
	}
	m.probeWire = int64(m.wire.out.Load())
	if m.probe.start > w.written {
		m.probeWire += int64(m.probe.start - w.written)
	}
}

// probeAnswered runs when the probe's outcome arrived (on the monitor,
// which received it from done): an answer, whatever its status, vouches for
// the tombstones abandoned before the probe was sent. A failure means the
// connection is ending.
func (c *Conn) probeAnswered() {
	c.mu.Lock()
	m := &c.monitor
	cl := m.probe
	m.probe = nil
	m.vouched = m.probeAt
	m.probeBound = time.Time{}
	m.at = time.Time{}
	if m.timer != nil {
		m.timer.Stop()
	}
	c.mu.Unlock()
	c.leave(cl)
	c.mu.Lock()
	// Tombstones abandoned since the probe was sent are due in their turn.
	if due, ok := c.nextProbeDue(); ok && c.err == nil {
		c.healthArm(due)
	}
	c.mu.Unlock()
}
