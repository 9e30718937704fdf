package conn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// reader is the reader goroutine's own state: the socket it reads, the
// Notifiers it has told of ended requests and not yet woken, its rate
// limit on logging strays, and its counters. Only the reader goroutine
// touches wake and stray (the teardown runs on it); the counters are
// atomics. Its read buffer lives in readLoop.
type reader struct {
	nc    net.Conn
	wake  wakeList
	stray strayLog

	reads, bytesIn atomic.Uint64 // Stats.Reads, BytesRead
	strays, late   atomic.Uint64 // Stats.StrayResponses, LateResponses
}

// readLoop is the reader goroutine: it decodes packets and dispatches them
// until the connection ends, then tears it down.
func (c *Conn) readLoop() {
	defer c.teardown()
	maxBody := c.opts.MaxBodyLength
	small := make([]byte, readBufSize)
	buf := small
	r, w := 0, 0 // buf[r:w] holds bytes read but not yet dispatched
	var rerr error
	// One packet for the whole loop: it escapes to the handles, and a
	// fresh one per response would be an allocation per response.
	p := new(memdx.Packet)
	for {
		for w-r >= memdx.HeaderSize {
			size, err := memdx.PacketSize(buf[r:w], maxBody)
			if err != nil {
				c.failProtocol(&ProtocolError{Addr: c.addr, What: "bad packet header", Err: err})
				return
			}
			if w-r < size {
				if size > len(buf)-r { // make room for the whole packet
					if size > len(buf) {
						nb := make([]byte, size)
						copy(nb, buf[r:w])
						buf = nb
					} else {
						copy(buf, buf[r:w])
					}
					w -= r
					r = 0
				}
				break
			}
			if _, err2 := memdx.DecodePacketInto(p, buf[r:r+size], maxBody); err2 != nil {
				c.failProtocol(&ProtocolError{Addr: c.addr, What: "bad packet", Err: err2})
				return
			}
			r += size
			if perr := checkFollowing(buf[r:w], maxBody); perr != nil {
				perr.Addr = c.addr
				c.failProtocol(perr)
				return
			}
			if perr := c.dispatch(p); perr != nil {
				c.failProtocol(perr)
				return
			}
		}
		if r == w {
			r, w = 0, 0
			if len(buf) != len(small) {
				buf = small // the large packet is done with
			}
		} else if w == len(buf) {
			copy(buf, buf[r:w])
			w -= r
			r = 0
		}
		if rerr != nil {
			c.fail(fmt.Errorf("conn %s: read: %w", c.addr, rerr))
			return
		}
		c.writer.answersDispatched()
		c.reader.wake.flush() // before waiting for more bytes
		var n int
		n, rerr = c.reader.nc.Read(buf[w:])
		if n > 0 {
			c.writer.answersArriving()
		}
		w += n
		c.reader.reads.Add(1)
		c.reader.bytesIn.Add(uint64(n))
		// On an error, first dispatch what came with it (a last response
		// before the server closed), then end.
	}
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
			c.strayResponse(p, kind)
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
		if kind == strayLate && cl.final(p) {
			if c.opts.OnOrphan != nil {
				now := c.clock.Now()
				orphan, report = c.orphanOf(cl, p, now), true
				c.noteActivity(now)
			}
			c.settleBefore(cl, p) // a NOOP settles what precedes it, abandoned or not
			c.drop(cl)            // the tombstone has its answer
		}
		c.mu.Unlock()
		c.strayResponse(p, kind)
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

// strayResponse counts and logs a dropped response (on the reader).
func (c *Conn) strayResponse(p *memdx.Packet, kind strayKind) {
	r := &c.reader
	r.strays.Add(1)
	if kind == strayLate {
		r.late.Add(1)
	}
	if !c.log.Enabled(context.Background(), slog.LevelWarn) {
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

// failProtocol ends the connection for a protocol violation, and logs it.
func (c *Conn) failProtocol(pe *ProtocolError) {
	c.log.Warn("kvwire: closing a connection: protocol violation", "node", c.addr, "err", pe)
	c.fail(pe)
}
