package conn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// readBufSize is the reader's buffer: one Read takes up to this much. A
// packet larger than it gets a buffer of its own size for as long as it is
// being read.
const readBufSize = 64 << 10

// reader is what reads the socket: the buffer of bytes read and not yet
// dispatched, the Notifiers told of ended requests and not yet woken, the
// rate limit on logging strays, the read role (readrole.go) and the
// counters. Whoever holds the read role (the reader goroutine, or a
// caller it was lent to) alone touches buf, p, wake and stray; the role's
// fields are guarded by Conn.mu; the counters are atomics.
type reader struct {
	nc  net.Conn
	raw *rawReader // a borrower's reads (nil: the socket has none, and the role is never lent)
	// buf[r:w] holds bytes read but not yet dispatched. buf is small, or
	// for as long as a packet larger than small is being read, a buffer
	// of that packet's size.
	small, buf []byte
	r, w       int
	// p is the one packet the dispatch decodes into: it escapes to the
	// handles, and a fresh one per response would be an allocation per
	// response.
	p     *memdx.Packet
	wake  wakeList
	stray strayLog
	// answered counts the callers in Do the burst being dispatched has
	// handed an outcome (lendRole).
	answered int
	readRole

	reads, bytesIn atomic.Uint64 // Stats.Reads, BytesRead
	strays, late   atomic.Uint64 // Stats.StrayResponses, LateResponses
}

func (rd *reader) init(nc net.Conn) {
	rd.nc = nc
	rd.raw = newRawReader(nc)
	rd.small = make([]byte, readBufSize)
	rd.buf = rd.small
	rd.p = new(memdx.Packet)
	rd.back = make(chan struct{}, 1)
}

// readLoop is the reader goroutine: it reads and dispatches until the
// connection ends, then tears it down. It lends the read role to a lone
// caller when it can (readrole.go), and waits meanwhile.
func (c *Conn) readLoop() {
	defer c.teardown()
	rd := &c.reader
	var rerr error
	for {
		if perr := c.consume(); perr != nil {
			perr.What += c.portHint()
			c.failProtocol(perr)
			return
		}
		if rerr != nil {
			c.fail(fmt.Errorf("conn %s: read: %w%s%s", c.addr, rerr, c.portHint(), c.liveHangupHint(rerr)))
			return
		}
		if c.burstDispatched() == 1 && c.lendRole() && !c.awaitRole() {
			return // the connection ended while the role was lent
		}
		var n int
		if rd.raw != nil { // direct where it can be (sysio_linux.go)
			n, rerr = rd.raw.readNet(rd.buf[rd.w:])
		} else {
			n, rerr = rd.nc.Read(rd.buf[rd.w:])
		}
		c.noteRead(n)
		// On an error, first dispatch what came with it (a last response
		// before the server closed), then end.
	}
}

// noteRead counts a read of n bytes into buf, and tells the writer that
// answers are about to be dispatched (awaitCallers).
func (c *Conn) noteRead(n int) {
	rd := &c.reader
	if n > 0 {
		c.writer.answersArriving()
	}
	rd.w += n
	rd.reads.Add(1)
	rd.bytesIn.Add(uint64(n))
}

// burstDispatched ends a burst of answers (what one read brought): a
// holding writer is told, and the Notifiers of the requests it ended are
// woken, before anything more is read. It returns how many callers in Do
// the burst handed their outcome.
func (c *Conn) burstDispatched() (answered int) {
	rd := &c.reader
	c.writer.answersDispatched()
	rd.wake.flush()
	answered, rd.answered = rd.answered, 0
	return answered
}

// consume dispatches every whole packet in buf, checking each as the
// framing rules say, and keeps what is left of a packet for the next read.
// A non-nil error is a protocol violation that ends the connection.
func (c *Conn) consume() *ProtocolError {
	rd := &c.reader
	maxBody := c.opts.MaxBodyLength
	for rd.w-rd.r >= memdx.HeaderSize {
		size, err := memdx.PacketSize(rd.buf[rd.r:rd.w], maxBody)
		if err != nil {
			pe := &ProtocolError{Addr: c.addr, What: "bad packet header", Err: err}
			pe.answerTooLarge(rd.buf[rd.r:rd.w], err)
			c.ownTooLarge(pe)
			return pe
		}
		if rd.w-rd.r < size {
			if size > len(rd.buf)-rd.r { // make room for the whole packet
				if size > len(rd.buf) {
					nb := make([]byte, size)
					copy(nb, rd.buf[rd.r:rd.w])
					rd.buf = nb
				} else {
					copy(rd.buf, rd.buf[rd.r:rd.w])
				}
				rd.w -= rd.r
				rd.r = 0
			}
			break
		}
		if _, err := memdx.DecodePacketInto(rd.p, rd.buf[rd.r:rd.r+size], maxBody); err != nil {
			return &ProtocolError{Addr: c.addr, What: "bad packet", Err: err}
		}
		rd.r += size
		if perr := checkFollowing(rd.buf[rd.r:rd.w], maxBody); perr != nil && !c.boundaryProven(perr, rd.buf[rd.r:rd.w], rd.p) {
			perr.Addr = c.addr
			c.ownTooLarge(perr)
			return perr
		}
		if perr := c.dispatch(rd.p); perr != nil {
			return perr
		}
	}
	if rd.r == rd.w {
		rd.r, rd.w = 0, 0
		if len(rd.buf) != len(rd.small) {
			rd.buf = rd.small // the large packet is done with
		}
	} else if rd.w == len(rd.buf) {
		copy(rd.buf, rd.buf[rd.r:rd.w])
		rd.w -= rd.r
		rd.r = 0
	}
	return nil
}

// ownTooLarge keeps pe's note of the request an oversized answer is for
// (AnswerTooLarge) only when the answer is that request's by the rules
// dispatchResponse applies to any answer: a request (or a group's get) in
// flight with its opaque and its opcode. A header with another opcode
// would be a stray: the request with its opaque is not told its value is
// too large (not retried), it fails with the connection as the others.
func (c *Conn) ownTooLarge(pe *ProtocolError) {
	if !pe.tooLarge {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pe.tooLarge = c.tooLargeOwner(pe) != nil
}

// tooLargeOwner returns the request in flight (or the group whose get it
// is) that pe's oversized answer answers by its opaque and its opcode, nil
// if none. Called with mu held.
func (c *Conn) tooLargeOwner(pe *ProtocolError) *call {
	if g := c.inflight.groupOf(pe.opaque); g != nil {
		if g.gOp == pe.op {
			return g
		}
		return nil
	}
	if cl, ok := c.inflight.get(pe.opaque); ok && cl.op == pe.op {
		return cl
	}
	return nil
}

// boundaryProven reports whether the packet p, whose checkFollowing found
// pe in the header after it (hdr), may be delivered all the same: pe is
// that header's body being over Options.MaxBodyLength, the client's own
// limit, and nothing else (the header passes every other check), and the
// header is the answer, by its opaque and its opcode, of a request in flight
// that p's dispatch does not end. Such a header starts where p's body
// length says p ends: p's length is true and its value its own, as with a
// header that passes every check, and better attested than one (bytes
// from the middle of a value would have to match a request in flight).
// The next step of the read loop then fails the connection on that header,
// naming the request it answers (AnswerTooLarge). Held back, p's request
// ended with the connection's error: a write that succeeded was reported
// as ambiguous.
//
// A header with p's own request's opaque, or of a quiet request or a group
// that p, a NOOP's answer, settles, proves nothing: p's dispatch would end
// the very request the header claims to answer.
func (c *Conn) boundaryProven(pe *ProtocolError, hdr []byte, p *memdx.Packet) bool {
	if !pe.tooLarge {
		return false
	}
	if _, err := memdx.DecodeHeader(hdr, math.MaxUint32); err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	owner := c.tooLargeOwner(pe)
	if owner == nil || p.Magic.IsServerInitiated() {
		return owner != nil
	}
	if pe.opaque == p.Opaque || owner.opaque == p.Opaque {
		return false
	}
	if p.OpCode == memdx.OpNoop && (owner.kind == kindQuiet || owner.kind == kindGroup) {
		if noop, ok := c.inflight.get(p.Opaque); ok && noop.op == memdx.OpNoop && owner.end <= noop.start {
			return false
		}
	}
	return true
}

// dispatch hands one packet to its request or callback. A non-nil error is
// a protocol violation that ends the connection.
func (c *Conn) dispatch(p *memdx.Packet) *ProtocolError {
	switch p.Magic {
	case memdx.MagicRes, memdx.MagicResExt:
		return c.dispatchResponse(p)
	case memdx.MagicServerReq:
		c.serverRequest(p)
		return nil
	}
	return &ProtocolError{Addr: c.addr, What: fmt.Sprintf("server sent a %s packet (opcode 0x%02x, opaque %d), which only a client sends",
		p.Magic, uint8(p.OpCode), p.Opaque)}
}

// dispatchResponse hands a response to the request it answers. A response
// that answers nothing in flight is a stray: it is dropped, counted and
// logged, and the connection and its other requests carry on. Strays are an
// opaque that matches nothing in flight (a second answer to a request
// already answered included), an answer whose opcode is not its
// request's, an answer to a request whose bytes the socket has not all
// taken (the server cannot have read it whole), and a late answer to an
// abandoned request.
//
// A handle (or a group's sink) that returns an error wrapping
// kverr.ErrProtocol has found that the response is not its request's (a
// GETK answer naming another key): the server has mixed up its answers.
// That is a protocol violation, returned to the read loop, which closes
// the connection before dispatching anything read after it; the request
// ends with the connection's error, as every other request in flight. So
// is a quiet call's answer (GETKQ, ...) with the opaque of a NOOP in
// flight: dropped as a stray, it would leave the NOOP to settle the call
// it was meant for as unanswered (a quiet get as a miss).
func (c *Conn) dispatchResponse(p *memdx.Packet) *ProtocolError {
	c.mu.Lock()
	t := &c.inflight
	// A group's gets' opaques are not in the table (only its NOOP's is).
	if g := t.groupOf(p.Opaque); g != nil {
		kind, perr := c.groupAnswer(g, p)
		c.mu.Unlock()
		if kind != 0 {
			c.strayResponse(p, kind, false)
		}
		return perr
	}
	cl, ok := t.get(p.Opaque)
	var kind strayKind
	switch {
	case !ok:
		kind = strayUnknownOpaque
	case cl.op != p.OpCode:
		if cl.op == memdx.OpNoop && p.OpCode.IsQuiet() {
			// A quiet call's answer with a NOOP's opaque: the NOOP would
			// settle the call it was meant for (a quiet get as a miss).
			c.mu.Unlock()
			return &ProtocolError{Addr: c.addr, What: fmt.Sprintf(
				"a %s answer has the opaque %d of a NOOP in flight, which would settle the quiet request it answers unanswered", p.OpCode, p.Opaque)}
		}
		kind = strayWrongOpcode
	case cl.state == reqAbandoned:
		kind = strayLate
	case !c.answerable(cl):
		kind = strayUnsent
	}
	if t.evictedWrite != 0 && (kind == 0 || kind == strayLate) && cl.start >= t.evictedWrite {
		t.evictedWrite = 0 // answered in order: the evicted write was processed
	}
	if kind != 0 {
		var orphan Orphan
		report := false
		// An unneeded request's late answer is expected: counted, but
		// neither an orphan nor a stray worth a warning (ErrNotNeeded).
		expected := kind == strayLate && cl.unneeded
		if kind == strayLate && cl.final(p) {
			if c.opts.OnOrphan != nil {
				now := c.health.Now()
				if !expected {
					orphan, report = c.orphanOf(cl, p, now), true
				}
				c.noteActivity(now)
			}
			c.settleBefore(cl, p) // a NOOP settles what precedes it, abandoned or not
			c.drop(cl)            // the tombstone has its answer
		}
		c.mu.Unlock()
		c.strayResponse(p, kind, expected)
		if report {
			c.opts.OnOrphan(orphan)
		}
		return nil
	}
	if !cl.final(p) {
		c.dispatchPart(cl, p)
		return nil
	}
	c.settleBefore(cl, p)
	c.end(cl)
	cl.answered = true
	c.mu.Unlock()
	err := cl.call(p)
	if cl.err != nil {
		err = cl.err
	}
	if err != nil && errors.Is(err, kverr.ErrProtocol) {
		perr := c.foreignAnswer(p, err)
		cl.answered = false
		cl.finish(&RequestError{Op: cl.op, Opaque: cl.opaque, Addr: c.addr, Written: true,
			Err: perr, connEnded: true}, &c.reader.wake)
		return perr
	}
	if cl.notify == nil {
		c.writer.expect.Add(1) // a caller in Do, who will likely send again
		c.reader.answered++
	}
	cl.finish(err, &c.reader.wake)
	return nil
}

// settleBefore settles the quiet calls and groups sent before cl when p,
// cl's answer, is a NOOP's (settleQuiet). Called with mu held.
func (c *Conn) settleBefore(cl *call, p *memdx.Packet) {
	if p.OpCode == memdx.OpNoop && (c.inflight.quiet.head != nil || len(c.inflight.groups) > 0) {
		c.settleQuiet(cl, &c.reader.wake)
	}
}

// dispatchPart hands a non-final packet of a multi-packet answer to cl's
// handle. Its caller may cancel while handle runs, and must then wait for
// handle to return (handleBegins, handleReturns). Called with mu held,
// which it releases.
func (c *Conn) dispatchPart(cl *call, p *memdx.Packet) {
	c.handleBegins(cl)
	c.mu.Unlock()
	err := cl.call(p)
	c.mu.Lock()
	if err != nil && cl.err == nil {
		cl.err = err
	}
	wake := c.handleReturns(cl)
	c.mu.Unlock()
	if wake {
		cl.done <- nil
	}
}

func (cl *call) call(p *memdx.Packet) error {
	if cl.handle == nil {
		return memdx.NewStatusError(p)
	}
	return cl.handle(p)
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

// strayResponse counts and logs a dropped response (on the reader); an
// expected one (an unneeded request's late answer) is only counted.
func (c *Conn) strayResponse(p *memdx.Packet, kind strayKind, expected bool) {
	r := &c.reader
	r.strays.Add(1)
	if kind == strayLate {
		r.late.Add(1)
	}
	if expected || !c.log.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	now := c.clock.Now()
	if !r.stray.last.IsZero() && now.Sub(r.stray.last) < strayLogEvery {
		r.stray.suppressed++
		return
	}
	c.log.Warn("kvwire: dropped a stray response", "node", c.addr, "why", kind.String(),
		"opcode", p.OpCode, "opaque", p.Opaque, "status", p.Status, "suppressed_since_last", r.stray.suppressed)
	r.stray.last = now
	r.stray.suppressed = 0
}

// failProtocol ends the connection for a protocol violation, and logs it:
// in that order, since the Logger's handler is caller code and may send a
// request, which on this connection still open would wait for an answer
// that this goroutine, the one reading it, would read only once the
// handler returns.
func (c *Conn) failProtocol(pe *ProtocolError) {
	c.fail(pe)
	c.log.Warn("kvwire: closed a connection: protocol violation", "node", c.addr, "err", pe)
}
