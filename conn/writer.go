package conn

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

const (
	// writeBufSize is the initial capacity of each of the two write
	// buffers.
	writeBufSize = 16 << 10
	// maxRetainedWriteBuf: a write buffer grown past this (by large values)
	// is dropped after its write rather than kept for reuse.
	maxRetainedWriteBuf = 1 << 20
	// writeChunk bounds one Write call: the writer learns after each how
	// far the socket got (see writeOut).
	writeChunk = 64 << 10
	// tlsRecordChunk is the most data one TLS record carries (RFC 8446
	// 5.1, 2^14 bytes): on a TLS connection a Write of whole requests is
	// at most that, one record (dial turns crypto/tls's dynamic record
	// sizing off); see recordChunk. writeChunk is a whole number of them.
	tlsRecordChunk = 16 << 10
	// maxHolds and holdMax bound how long the writer holds a batch for
	// answers still to come.
	maxHolds = 2
	holdMax  = 50 * time.Microsecond
	// maxYields bounds the writer's yields to callers it expects to queue
	// (awaitCallers).
	maxYields = 8
)

// writer is a connection's outgoing byte stream: the buffers requests are
// encoded into, the stream offsets that say how far each request's bytes
// have gone, the wire list of the calls whose bytes the socket has not all
// accepted, and the writer goroutine's coalescing (kick, corks, the hold
// for answers). Its fields are guarded by Conn.mu except the channels, the
// atomics and what is set once by newWriter.
type writer struct {
	nc      net.Conn
	raw     rawWriter // a caller's non-blocking write (nil: the socket has none)
	records bool      // nc is TLS: Writes are cut where a record may end (recordChunk)
	// Stream offsets count every byte ever queued on the connection (a
	// withdrawn request's bytes are taken out of the count):
	//
	//	written <= writing <= flushed <= queued
	//
	// written: accepted by the socket; writing: the end of the Write call
	// in progress (written when none is); flushed: the end of the writer's
	// batch (out, whose first byte is at outBase); queued: the end of wbuf,
	// whose first byte is at flushed.
	wbuf    []byte
	spare   []byte // the other buffer, between batches
	out     []byte // the batch being written, in chunks
	outBase uint64
	queued  uint64
	flushed uint64
	writing uint64
	written uint64
	batched int // requests in wbuf
	// corks counts the callers queueing a batch (Dial's bootstrap, Cork):
	// while it is not 0, queueing does not wake the writer.
	corks int
	// recLeft is what remains to write of a request too large for one
	// TLS record (recordChunk). Written by writeOut only.
	recLeft int
	// wire lists the calls whose bytes the socket has not all accepted, in
	// stream order; sendNext is its first call still queued.
	wire     callList
	sendNext *call
	// inWrite: the writer goroutine or a caller is in flushOut (their
	// exclusion); inWriteDone (on Conn.mu) is signalled when it leaves.
	inWrite     bool
	inWriteDone sync.Cond
	// holding: the writer goroutine waits for the reader's next burst of
	// answers, or for the end of the one it is dispatching; burst
	// (capacity 1) tells it one was dispatched.
	holding atomic.Bool
	burst   chan struct{}
	// dispatching: the reader is dispatching what its last Read brought.
	dispatching atomic.Bool
	// expect counts the callers the reader has handed an outcome (Do) since
	// the writer last took a batch, less the requests queued since: each
	// such caller is likely to queue its next request at once
	// (awaitCallers).
	expect atomic.Int32
	kick   chan struct{} // capacity 1: wbuf has bytes for the writer goroutine
	exited chan struct{} // closed when the writer goroutine has exited

	writes, bytesOut atomic.Uint64 // Stats.Writes, BytesWritten
}

func (w *writer) init(nc net.Conn, mu *sync.Mutex) {
	w.nc = nc
	w.raw = newRawWriter(nc)
	_, w.records = nc.(*tls.Conn)
	w.wbuf = make([]byte, 0, writeBufSize)
	w.spare = make([]byte, 0, writeBufSize)
	w.wire.slot = onWire
	w.inWriteDone.L = mu
	w.burst = make(chan struct{}, 1)
	w.kick = make(chan struct{}, 1)
	w.exited = make(chan struct{})
}

// commit makes b, which is wbuf with cl's encoded bytes appended, the write
// buffer, and gives cl its stream offsets. It reports whether the writer
// goroutine needs a wake-up: the buffer was empty and no Cork holds it.
func (w *writer) commit(cl *call, b []byte) (wake bool) {
	n0 := len(w.wbuf)
	w.wbuf = b
	cl.start = w.queued
	w.queued += uint64(len(b) - n0)
	cl.end = w.queued
	return n0 == 0 && w.corks == 0
}

// addToWire puts cl, just committed, at the end of the wire list.
func (w *writer) addToWire(cl *call) {
	w.batched++
	for v := w.expect.Load(); v > 0; v = w.expect.Load() {
		if w.expect.CompareAndSwap(v, v-1) {
			break
		}
	}
	w.wire.pushBack(cl)
	if w.sendNext == nil {
		w.sendNext = cl
	}
}

// unlinkWire takes cl off the wire list.
func (w *writer) unlinkWire(cl *call) {
	if w.sendNext == cl {
		w.sendNext = w.wire.next(cl)
	}
	w.wire.remove(cl)
}

// leaveWire takes cl off the wire list if it is on it.
func (w *writer) leaveWire(cl *call) {
	if w.wire.contains(cl) {
		w.unlinkWire(cl)
	}
}

// cut takes a queued call's bytes out of the buffer that holds them, and
// moves the offsets after them back.
func (w *writer) cut(cl *call) {
	size := cl.end - cl.start
	if cl.start >= w.flushed { // in wbuf
		from, to := int(cl.start-w.flushed), int(cl.end-w.flushed)
		n := copy(w.wbuf[from:], w.wbuf[to:])
		w.wbuf = w.wbuf[:from+n]
		w.batched--
	} else { // in the batch, after the Write in progress
		from, to := int(cl.start-w.outBase), int(cl.end-w.outBase)
		n := copy(w.out[from:], w.out[to:])
		w.out = w.out[:from+n]
		w.flushed -= size
	}
	w.queued -= size
	for o := w.wire.next(cl); o != nil; o = w.wire.next(o) {
		o.start -= size
		o.end -= size
	}
}

// takeBatch makes wbuf the batch to write (out).
func (w *writer) takeBatch() {
	w.out, w.outBase = w.wbuf, w.flushed
	w.flushed = w.queued
	w.batched = 0
	w.wbuf, w.spare = w.spare[:0], nil
}

// wake tells the writer goroutine that wbuf has bytes for it.
func (w *writer) wake() {
	select {
	case w.kick <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// answersArriving is the reader telling the writer that it is about to
// dispatch a burst of answers.
func (w *writer) answersArriving() { w.dispatching.Store(true) }

// answersDispatched is the reader telling a holding writer that it has
// dispatched a burst of answers.
func (w *writer) answersDispatched() {
	w.dispatching.Store(false)
	if w.holding.Load() {
		select {
		case w.burst <- struct{}{}:
		default:
		}
	}
}

// cork holds back the writer goroutine while a batch is queued; uncork
// releases it, so that the batch goes out in one write.
func (c *Conn) cork() {
	c.mu.Lock()
	c.writer.corks++
	c.mu.Unlock()
}

func (c *Conn) uncork() {
	c.mu.Lock()
	w := &c.writer
	w.corks--
	wake := w.corks == 0 && len(w.wbuf) > 0
	c.mu.Unlock()
	if wake {
		w.wake()
	}
}

// writeLoop is the writer goroutine: it takes everything queued since its
// last batch and writes it (writeOut).
func (c *Conn) writeLoop() {
	w := &c.writer
	defer close(w.exited)
	var hold *time.Timer
	for {
		// One channel, not a select with done: the connection's end
		// kicks it too (closeFailed), and a receive costs less.
		<-w.kick
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return
		}
		c.queueSubmitted()
		if w.out != nil && !w.inWrite {
			// The rest of a caller's batch, which the socket did not
			// take at once (writeInline).
			_, err, first := c.flushOut(false)
			if err != nil {
				c.mu.Unlock()
				if first {
					c.closeFailed()
				}
				return
			}
		}
		hold = c.awaitCallers(hold)
		// More requests in flight than in this batch: callers other than
		// those the reader just answered (the other processor's, say)
		// may be about to send too. One more yield lets them join. (A
		// lone caller does not wait for this.)
		if c.inflight.active > w.batched {
			c.mu.Unlock()
			runtime.Gosched()
			c.mu.Lock()
			c.queueSubmitted()
		}
		hold = c.holdForAnswers(hold)
		switch {
		case c.err != nil:
			c.mu.Unlock()
			return
		case len(w.wbuf) == 0: // a cancelled request was its only content
			c.mu.Unlock()
			continue
		case w.inWrite || w.out != nil:
			// A caller is writing its own batch, or left its rest to
			// the writer (writeInline), which is woken again for it.
			c.mu.Unlock()
			continue
		case w.corks > 0:
			// A batch is being queued (this turn may have been for the
			// rest of a caller's write): its Uncork wakes the writer.
			c.mu.Unlock()
			continue
		}
		c.noteCrowding()
		w.takeBatch()
		_, err, first := c.flushOut(false)
		c.mu.Unlock()
		if err != nil {
			if first {
				c.closeFailed()
			}
			return
		}
	}
}

// awaitCallers lets the callers that are about to queue join the batch
// before it is written. Callers blocked in Do send their next request as
// soon as they have their answer: in a burst of answers the first of them
// queues (and wakes the writer) while the reader still hands out the rest,
// and a write then would carry that one request alone, the others
// following in writes of their own, and the fragments would circulate.
// So the writer first waits for the reader to finish dispatching (at most
// holdMax), then yields while callers handed an outcome since its last
// batch have not queued yet (writer.expect), as long as each yield brings
// more requests (at most maxYields): a caller that does not come back, or
// one that runs on the other processor and is slower, costs a yield, not
// a timer. Called with mu held, which it releases while it waits; it
// returns the hold timer for the next turn.
func (c *Conn) awaitCallers(hold *time.Timer) *time.Timer {
	w := &c.writer
	if w.dispatching.Load() {
		hold = c.holdForBurst(hold)
	}
	for yields := 0; yields < maxYields && w.expect.Load() > 0 && c.err == nil; yields++ {
		n := w.batched
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
		c.queueSubmitted()
		if w.batched <= n {
			break // no one came: those still expected are busy elsewhere
		}
	}
	w.expect.Store(0)
	return hold
}

// holdForBurst waits, at most holdMax, for the reader to finish
// dispatching the burst of answers in hand. Called with mu held, which it
// releases while it waits.
func (c *Conn) holdForBurst(hold *time.Timer) *time.Timer {
	w := &c.writer
	w.startHold()
	if !w.dispatching.Load() { // it finished before it could see holding
		w.holding.Store(false)
		return hold
	}
	c.mu.Unlock()
	hold = w.awaitBurst(hold, c.done)
	c.mu.Lock()
	return hold
}

// startHold drops a signal left from an earlier hold and says the writer
// holds, so that the reader signals the end of its next burst.
func (w *writer) startHold() {
	select {
	case <-w.burst:
	default:
	}
	w.holding.Store(true)
}

// awaitBurst waits, at most holdMax, for the reader to signal the end of a
// burst (or for done), on hold (made on first use), and ends the hold. It
// returns the timer, for the next hold. Called without mu.
func (w *writer) awaitBurst(hold *time.Timer, done <-chan struct{}) *time.Timer {
	if hold == nil {
		hold = time.NewTimer(holdMax)
	} else {
		hold.Reset(holdMax)
	}
	select {
	case <-w.burst:
	case <-hold.C:
	case <-done:
	}
	hold.Stop()
	w.holding.Store(false)
	return hold
}

// holdForAnswers holds the batch while more requests are written and
// unanswered than queued: their callers will likely send again when the
// answers come, so the writer waits until the reader dispatches more
// answers (at most maxHolds times holdMax), and the batches merge instead
// of circulating as fragments. It returns the timer it used, for the next
// turn. Called with mu held, which it releases while it waits.
func (c *Conn) holdForAnswers(hold *time.Timer) *time.Timer {
	w := &c.writer
	for holds := 0; holds < maxHolds && c.err == nil && c.inflight.active-w.batched > w.batched; holds++ {
		w.startHold()
		c.mu.Unlock()
		hold = w.awaitBurst(hold, c.done)
		runtime.Gosched() // the callers just answered enqueue first
		c.mu.Lock()
		c.queueSubmitted()
	}
	return hold
}

// flushOut writes out (writeOut). Its writer is the writer goroutine, or a
// caller (writeInline): inWrite says one of them is in flushOut, which the
// other then leaves to it. A caller's write that the socket did not take
// whole leaves out to the writer goroutine (blocked). A failed write ends
// the connection before mu is released (first: this error ended it): the
// calls still queued in the batch just dropped must not be withdrawn from
// it by a cancel or an expiry in between. Called with mu held.
func (c *Conn) flushOut(inline bool) (blocked bool, err error, first bool) {
	w := &c.writer
	w.inWrite = true
	blocked, err = c.writeOut(inline)
	w.inWrite = false
	w.inWriteDone.Broadcast()
	if blocked {
		return true, nil, false
	}
	if cap(w.out) <= maxRetainedWriteBuf {
		w.spare = w.out[:0]
	}
	w.out = nil
	first = err != nil && c.failLocked(fmt.Errorf("conn %s: write: %w", c.addr, err))
	return false, err, first
}

// writeInline writes what is queued from the caller's goroutine, when the
// writer goroutine is not writing and the socket allows a non-blocking
// attempt (a TCP connection without TLS): a caller that queued a whole
// batch into an empty buffer (StartGets) saves the hand-off to the
// writer. The caller never waits for the socket: what it does not take at
// once is left to the writer. It reports whether the writer must be woken
// (it was busy, the socket took part of the batch, or more was queued
// behind the batch meanwhile and no Cork is held: Uncork wakes it then)
// and whether this write's error ended the connection (the caller then
// calls closeFailed, without mu). Called with mu held, which it releases
// around the write.
func (c *Conn) writeInline() (wake, failed bool) {
	w := &c.writer
	if w.raw == nil || w.inWrite || w.out != nil || c.err != nil {
		return true, false
	}
	w.takeBatch()
	blocked, err, first := c.flushOut(true)
	if blocked {
		return true, false
	}
	if err != nil {
		return false, first
	}
	return len(w.wbuf) > 0 && w.corks == 0, false
}

// writeOut writes the batch in out in chunks of at most writeChunk bytes
// (on TLS, cut where records may end: recordChunk), so that the socket's
// progress through a large batch (a large value behind a slow reader) is
// known: after each Write the requests it carried
// in full are written, and the requests after the Write in progress can
// still be withdrawn. A caller's write (inline) makes one non-blocking
// attempt per chunk and stops at the first the socket does not take
// whole (blocked): the rest of out is then the writer goroutine's. Called
// with mu held; it releases mu around each Write.
func (c *Conn) writeOut(inline bool) (blocked bool, err error) {
	w := &c.writer
	for c.err == nil {
		pos := int(w.written - w.outBase)
		n := min(len(w.out)-pos, writeChunk)
		if w.records {
			n, w.recLeft = recordChunk(w.out[pos:], w.recLeft)
		}
		if n == 0 {
			return false, nil
		}
		chunk := w.out[pos : pos+n]
		w.writing = w.written + uint64(n)
		if w.records {
			c.noteProbeWire()
		}
		c.handOff()
		c.mu.Unlock()

		w.writes.Add(1) // before the call: its answer can arrive before Write returns
		var m int
		if inline {
			m, err = w.raw.tryWrite(chunk)
		} else if w.raw != nil { // direct where it can be (sysio_linux.go)
			m, err = w.raw.writeNet(chunk)
		} else {
			m, err = w.nc.Write(chunk)
		}
		w.bytesOut.Add(uint64(m))

		c.mu.Lock()
		w.written += uint64(m)
		w.writing = w.written
		c.accept()
		if err == errWouldBlock || (err == nil && inline && m < n) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// recordChunk returns how much of b the next Write on a TLS connection
// carries, and how much of a request too large for one record remains
// after it. b starts with a request, or, when left > 0, with the left
// bytes that end one. The Write carries the whole requests at b's start
// that fit in one record (tlsRecordChunk); or the start of a request that
// does not fit, at most writeChunk bytes (a whole number of records); or
// the next part of one, the last part ending with it. crypto/tls makes one
// record of each Write that fits in one, and full records of a larger one
// but for its last, so no record ends inside a request but one too large
// for a record, and no record goes on past the end of a large one; and a
// large value still goes out writeChunk at a time, so that the health
// check sees the socket's progress through it.
//
// A server may read TLS the way memcached (1.6) does: one SSL_read into
// the room left in its buffer, or into the rest of a value, then a wait
// for the socket to be readable. What that read leaves of a record stays
// decrypted inside the TLS library, where the wait cannot see it, and the
// server sits on requests it already has until more bytes arrive, which
// for the last requests of a batch is never. With records of whole
// requests, a read into an emptied buffer (16 KiB in memcached) takes the
// whole record, and a read of a value's rest takes whole records up to
// the value's end.
func recordChunk(b []byte, left int) (n, rest int) {
	if left > 0 {
		n = min(left, writeChunk, len(b))
		return n, left - n
	}
	for n+memdx.HeaderSize <= len(b) {
		size := memdx.HeaderSize + int(binary.BigEndian.Uint32(b[n+8:n+12]))
		if n+size > len(b) {
			break // not a request this connection queued; send the rest as is
		}
		if n+size > tlsRecordChunk {
			if n == 0 {
				n = min(size, writeChunk)
				return n, size - n
			}
			return n, 0
		}
		n += size
	}
	if n == 0 {
		return min(len(b), tlsRecordChunk), 0
	}
	return n, 0
}
