package conn

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/errmap"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

const (
	// readBufSize is the reader's buffer: one Read takes up to this much.
	// A packet larger than it gets a buffer of its own size for as long as
	// it is being read.
	readBufSize = 64 << 10
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
	// maxEarly and maxEarlyBytes bound the server requests held while Dial
	// bootstraps (see serverRequest); past them more are dropped.
	maxEarly      = 16
	maxEarlyBytes = 4 << 20
)

// Conn is one connection to one node: a socket, its bootstrap results and
// the requests in flight on it. Its methods are safe for concurrent use.
//
// See the package doc for the threading model and the exact failure rules.
type Conn struct {
	nc      net.Conn
	records bool // nc is TLS: Writes are cut where a record may end (recordChunk)
	addr    string
	id      string
	opts    Options
	log     *slog.Logger

	// Bootstrap results: written by Dial before the Conn is returned,
	// read-only afterwards.
	memcached bool
	features  Features
	errMap    *errmap.Map
	errMapErr error // why a map was dropped (logged; read by tests)
	config    []byte
	version   string
	mech      string
	bucket    string

	mu            sync.Mutex
	pending       map[uint32]*call // in flight and tombstones, keyed by opaque; nil once torn down
	active        int              // calls in pending that are not tombstones (MaxPending)
	tombs         int              // abandoned calls in pending (MaxAbandoned)
	writesPending int              // calls in pending, tombstones too, that may change data (readOnly false)
	// evictedWrite is the stream offset of the end of the last write whose
	// tombstone was evicted (MaxAbandoned), until a response to a request
	// sent after it shows the server has processed it; 0: none.
	evictedWrite uint64
	opaque       uint32 // the last opaque handed out
	wrapped      bool   // opaque has wrapped: check for one still in use
	// reserveProbes counts the pending lookups made to find free opaques
	// after the wrap (reserveOpaques), so that tests can bound that work.
	reserveProbes int
	// groupProbes counts the groups groupOf compared past lastGroup, for
	// the same reason.
	groupProbes int
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
	spare   []byte // the writer's other buffer, between batches
	out     []byte // the writer's batch, written in chunks
	outBase uint64
	queued  uint64
	flushed uint64
	writing uint64
	written uint64
	batched int // requests in wbuf
	// corks counts the callers queueing a batch (Dial's bootstrap, Cork):
	// while it is not 0, queueing does not wake the writer.
	corks int
	// rwake and mwake are the reader's and the monitor's Notifiers to
	// wake (wakeList).
	rwake, mwake wakeList
	// qHead..qTail lists the quiet calls (Start with a quiet opcode) in
	// stream order, until answered or settled by a NOOP's answer.
	qHead, qTail *call
	// recLeft is what remains to write of a request too large for one
	// TLS record (recordChunk). Written by writeOut only.
	recLeft int
	// groups are the groups of quiet gets (StartGets) in pending, live or
	// abandoned: their gets' opaques are not in pending. lastGroup is the
	// one groupOf found last (a group's answers come one after another),
	// nil once it leaves groups.
	groups    []*call
	lastGroup *call
	// The wire list holds the calls whose bytes the socket has not all
	// accepted, in stream order; wQueued is its first call still queued.
	wHead, wTail, wQueued *call
	// inWrite: the writer goroutine or a caller is in flushOut (their
	// exclusion); inWriteDone (on mu) is signalled when it leaves. raw
	// makes a caller's non-blocking write (nil: the socket has none).
	inWrite     bool
	inWriteDone sync.Cond
	raw         rawWriter
	// holding: the writer waits for the reader's next burst of answers;
	// burst (capacity 1) tells it one was dispatched.
	holding atomic.Bool
	burst   chan struct{}
	err     error // why the connection ended; nil while it is open
	// dlHead..dlTail lists the live calls that have a deadline, earliest
	// first. Requests usually share one timeout, so a new one goes at the
	// tail and a finished one is unlinked: O(1) either way, under mu (a
	// shorter timeout walks back from the tail to its place). dlTimer wakes
	// the monitor at dlAt (zero: disarmed); a new deadline re-arms it only
	// when it is earlier than dlAt, so the usual request costs no timer
	// operation.
	dlHead, dlTail *call
	dlTimer        timer
	dlAt           time.Time
	// tombHead..tombTail lists the tombstones, oldest first.
	tombHead, tombTail *call
	clock              clock
	health             health
	stray              strayLog // the reader's
	// live: Dial is returning this connection, so its callbacks may run
	// (a connection Dial discards fires none). heldBack (atomic for the
	// reader's fast path, changed under mu) is true until Dial has
	// delivered the server requests that arrived during the bootstrap,
	// which are kept in early (copies; earlyBytes their size); held is
	// closed when that is done.
	live       bool
	heldBack   atomic.Bool
	early      []memdx.Packet
	earlyBytes int
	held       chan struct{}

	kick       chan struct{} // capacity 1: wbuf has bytes for the writer
	done       chan struct{} // closed when err is set
	writerDone chan struct{} // closed when the writer goroutine has exited
	sweepDone  chan struct{} // closed when the monitor goroutine has exited
	exited     chan struct{} // closed when both goroutines have exited

	writes, bytesOut, reads, bytesIn atomic.Uint64
	strays, late, evicted, probes    atomic.Uint64
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan error, 1)} }}

// newConn wraps a connected socket and starts its reader and writer.
func newConn(nc net.Conn, addr string, opts *Options, id string) *Conn {
	c := &Conn{
		nc:         nc,
		addr:       addr,
		id:         id,
		opts:       *opts,
		log:        opts.Logger.With("addr", addr, "conn", id),
		pending:    make(map[uint32]*call, 64),
		wbuf:       make([]byte, 0, writeBufSize),
		spare:      make([]byte, 0, writeBufSize),
		kick:       make(chan struct{}, 1),
		burst:      make(chan struct{}, 1),
		done:       make(chan struct{}),
		writerDone: make(chan struct{}),
		sweepDone:  make(chan struct{}),
		exited:     make(chan struct{}),
		held:       make(chan struct{}),
		clock:      opts.clock,
	}
	c.dlTimer = c.clock.NewTimer()
	c.health.init(c)
	c.heldBack.Store(true)
	c.inWriteDone.L = &c.mu
	c.raw = newRawWriter(nc)
	_, c.records = nc.(*tls.Conn)
	go c.writeLoop()
	go c.monitor()
	go c.readLoop()
	return c
}

// Do sends req with a fresh opaque and waits for its response or for ctx.
//
// On a response, handle is called exactly once with it, on the connection's
// reader goroutine, and Do returns what handle returned. The packet and its
// slices alias the read buffer and are valid only during the call: copy what
// you keep. handle must not block: no other response is read while it runs,
// so it must not call Do on the same connection, nor Close. Every status,
// success or not, goes to handle; a nil handle makes Do return
// memdx.NewStatusError(p) (nil on success). For STAT and
// RANGE_SCAN_CONTINUE, whose answers are a series of packets, handle is
// called once per packet, the last being the one with a non-success status
// (or, for STAT, an empty key), and Do returns the first error handle
// returned.
//
// Otherwise Do returns a *RequestError and handle is never called: the
// connection ended (errors.Is(err, kverr.ErrConnectionClosed)), ctx ended
// (errors.Is(err, context.Canceled) or DeadlineExceeded), the connection was
// overloaded (kverr.ErrOverloaded), or req could not be encoded
// (memdx.ErrInvalidRequest). Its Written field says whether the request may
// have reached the server. Quiet opcodes (GETQ, SETQ, ...) are refused: their
// success has no response to wait for.
//
// req is encoded before Do returns, or before it blocks: the caller may
// reuse it afterwards. No goroutine is started per call.
func (c *Conn) Do(ctx context.Context, req *memdx.Request, handle func(*memdx.Packet) error) error {
	_, err := c.DoDeadline(ctx, time.Time{}, req, handle)
	return err
}

// DoDeadline is Do with a deadline of its own (the zero Time: none): when it
// passes before the response, the request ends as if ctx's deadline had
// passed (a *RequestError matching context.DeadlineExceeded, Written set).
// It lets a caller bound every attempt without deriving a context per
// request: deadlines are kept in a list per connection, ordered by deadline
// (a request with the latest deadline, the usual case, joins at the tail in
// O(1); an earlier one walks back to its place), and expired by one
// monitor goroutine, so a request with a deadline costs no timer and no
// clock reading beyond checking that the deadline has not already passed (a
// request whose deadline has passed is refused unsent: not written). It also
// returns the opaque the request was sent with (0 when it was never queued).
func (c *Conn) DoDeadline(ctx context.Context, deadline time.Time, req *memdx.Request, handle func(*memdx.Packet) error) (uint32, error) {
	if req.OpCode.IsQuiet() {
		return 0, &RequestError{Op: req.OpCode, Addr: c.addr,
			Err: fmt.Errorf("quiet opcode %s sends no response on success, which Do needs: %w", req.OpCode, memdx.ErrInvalidRequest)}
	}
	if err := ctx.Err(); err != nil {
		return 0, &RequestError{Op: req.OpCode, Addr: c.addr, Err: err}
	}
	if !deadline.IsZero() && !c.clock.Now().Before(deadline) {
		return 0, &RequestError{Op: req.OpCode, Addr: c.addr, Err: context.DeadlineExceeded}
	}
	cl, err := c.start(req, handle, deadline, true)
	if err != nil {
		return 0, err
	}
	opaque := cl.opaque // read before wait: afterwards cl may be recycled
	return opaque, c.wait(ctx, deadline, cl)
}

// start queues req and registers its call. bounded applies
// Options.MaxPending; the bootstrap's requests are not bounded (Dial must
// work whatever MaxPending is, and it sends at most one pipeline of them
// before anyone else can use the connection).
func (c *Conn) start(req *memdx.Request, handle func(*memdx.Packet) error, deadline time.Time, bounded bool) (*call, error) {
	cl := getCall()
	cl.handle = handle
	cl.op = req.OpCode
	cl.multi = isMulti(req.OpCode)
	if !cl.multi {
		cl.deadline = deadline
	}
	c.mu.Lock()
	wake, err := c.queue(cl, req, bounded)
	c.mu.Unlock()
	if err != nil {
		putCall(cl)
		return nil, err
	}
	if wake {
		c.wakeWriter()
	}
	return cl, nil
}

// queue encodes req into wbuf with a fresh opaque and enqueues cl for it.
// It reports whether the writer needs a wake-up. Called with mu held.
func (c *Conn) queue(cl *call, req *memdx.Request, bounded bool) (bool, error) {
	if c.err != nil {
		return false, &RequestError{Op: req.OpCode, Addr: c.addr, Err: c.err, connEnded: true}
	}
	if bounded && c.active >= c.opts.MaxPending {
		return false, &RequestError{Op: req.OpCode, Addr: c.addr, Err: kverr.ErrOverloaded}
	}
	opaque := c.nextOpaque()
	n0 := len(c.wbuf)
	b, err := req.AppendTo(c.wbuf, opaque)
	if err != nil {
		c.wbuf = c.wbuf[:n0]
		return false, &RequestError{Op: req.OpCode, Addr: c.addr, Err: err}
	}
	c.wbuf = b
	cl.opaque = opaque
	cl.start = c.queued
	c.queued += uint64(len(b) - n0)
	cl.end = c.queued
	c.enqueue(cl)
	return n0 == 0 && c.corks == 0, nil
}

func (c *Conn) wakeWriter() {
	select {
	case c.kick <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// nextOpaque returns an opaque no request in flight uses (a group's gets
// included). Opaque 0 is never used. Called with mu held.
func (c *Conn) nextOpaque() uint32 { return c.reserveOpaques(1) }

// cork holds back the writer while a batch is queued; uncork releases it,
// so that the batch goes out in one write.
func (c *Conn) cork() {
	c.mu.Lock()
	c.corks++
	c.mu.Unlock()
}

func (c *Conn) uncork() {
	c.mu.Lock()
	c.corks--
	wake := c.corks == 0 && len(c.wbuf) > 0
	c.mu.Unlock()
	if wake {
		c.wakeWriter()
	}
}

// wait blocks until cl ends or ctx is done. A call with a deadline is
// ended by the monitor, through cl.done like a response: without a
// cancellable ctx, waiting is one channel receive.
func (c *Conn) wait(ctx context.Context, deadline time.Time, cl *call) error {
	if !deadline.IsZero() && cl.multi {
		return c.waitTimer(ctx, deadline, cl)
	}
	ctxDone := ctx.Done()
	if ctxDone == nil {
		err := <-cl.done
		c.leave(cl)
		return err
	}
	select {
	case err := <-cl.done:
		c.leave(cl)
		return err
	case <-ctxDone:
		return c.cancel(ctx.Err(), cl)
	}
}

// waitTimer waits for a multi-packet call with a deadline on a timer of
// its own.
func (c *Conn) waitTimer(ctx context.Context, deadline time.Time, cl *call) error {
	if cl.timer == nil {
		cl.timer = c.clock.NewTimer()
	}
	cl.timer.Reset(deadline.Sub(c.clock.Now()))
	select {
	case err := <-cl.done:
		cl.timer.Stop()
		c.leave(cl)
		return err
	case <-ctx.Done():
		cl.timer.Stop()
		return c.cancel(ctx.Err(), cl)
	case <-cl.timer.C():
		return c.cancel(context.DeadlineExceeded, cl)
	}
}

// cancel is the caller giving up on cl (ctx, or a multi-packet call's
// deadline): a queued call is withdrawn (not written), a sent one
// abandoned (written: the outcome is unknown). If the call has already
// ended, its outcome is on done and is returned instead.
func (c *Conn) cancel(cause error, cl *call) (err error) {
	c.mu.Lock()
	switch cl.state {
	case reqEnded, reqAbandoned:
		// Answered, expired or failed by the connection first: the
		// outcome is on done (or about to be, after handle).
		c.mu.Unlock()
		err := <-cl.done
		c.leave(cl)
		return err
	case reqQueued:
		if c.err != nil {
			c.end(cl) // the connection is ending: its buffers are gone
		} else {
			c.withdraw(cl)
		}
		err := &RequestError{Op: cl.op, Opaque: cl.opaque, Addr: c.addr, Err: cause}
		c.mu.Unlock()
		putCall(cl)
		return err
	}
	// Sent: the server may answer. Keep the opaque as a tombstone until it
	// does, and drop that answer.
	c.abandon(cl, c.clock.Now())
	err = &RequestError{Op: cl.op, Opaque: cl.opaque, Addr: c.addr, Written: true, Err: cause}
	if cl.busy {
		// The reader is inside handle for this call: let it return first.
		cl.waiter = true
		c.mu.Unlock()
		<-cl.done
		c.mu.Lock()
	}
	cl.callerGone = true
	c.release(cl)
	c.mu.Unlock()
	return err
}

// fail ends the connection with err (the first error wins). It does not
// wait: the reader notices the closed socket, waits for the writer and fails
// every pending request (teardown).
func (c *Conn) fail(err error) {
	c.mu.Lock()
	first := c.failLocked(err)
	c.mu.Unlock()
	if first {
		c.closeFailed()
	}
}

// failLocked records why the connection ends (the first error wins) and
// drops the write buffer; it reports whether err was the first. Called
// with mu held: from then on no transition withdraws a call from a buffer
// (they see c.err). The caller then calls closeFailed, after releasing mu.
func (c *Conn) failLocked(err error) bool {
	if c.err != nil {
		return false
	}
	c.err = err
	c.wbuf = nil
	return true
}

// closeFailed is fail's second half, run once, without mu.
func (c *Conn) closeFailed() {
	close(c.done)
	c.nc.Close()
}

// writeLoop is the writer goroutine: it takes everything queued since its
// last batch and writes it (writeOut).
func (c *Conn) writeLoop() {
	defer close(c.writerDone)
	var hold *time.Timer
	for {
		select {
		case <-c.kick:
		case <-c.done:
			return
		}
		c.mu.Lock()
		if c.out != nil && !c.inWrite {
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
		// More requests in flight than in this batch: callers whose answers
		// just came back are likely about to send again. Let them run
		// first, so that they share this write instead of each causing
		// one. (A lone caller does not wait for this.)
		if c.active > c.batched {
			c.mu.Unlock()
			runtime.Gosched()
			c.mu.Lock()
		}
		// More requests written and unanswered than queued: their callers
		// will likely send again when the answers come. Hold the batch
		// until the reader dispatches more answers (at most holdMax), so
		// that the batches merge instead of circulating as fragments.
		for holds := 0; holds < maxHolds && c.err == nil && c.active-c.batched > c.batched; holds++ {
			select { // drop a signal left from an earlier hold
			case <-c.burst:
			default:
			}
			c.holding.Store(true)
			c.mu.Unlock()
			if hold == nil {
				hold = time.NewTimer(holdMax)
			} else {
				hold.Reset(holdMax)
			}
			select {
			case <-c.burst:
			case <-hold.C:
			case <-c.done:
			}
			hold.Stop()
			c.holding.Store(false)
			runtime.Gosched() // the callers just answered enqueue first
			c.mu.Lock()
		}
		if c.err != nil {
			c.mu.Unlock()
			return
		}
		if len(c.wbuf) == 0 { // a cancelled request was its only content
			c.mu.Unlock()
			continue
		}
		if c.inWrite || c.out != nil {
			// A caller is writing its own batch, or left its rest to
			// the writer (writeInline), which is woken again for it.
			c.mu.Unlock()
			continue
		}
		if c.corks > 0 {
			// A batch is being queued (this turn may have been for the
			// rest of a caller's write): its Uncork wakes the writer.
			c.mu.Unlock()
			continue
		}
		c.takeBatch()
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

// takeBatch makes wbuf the batch to write (out). Called with mu held.
func (c *Conn) takeBatch() {
	c.out, c.outBase = c.wbuf, c.flushed
	c.flushed = c.queued
	c.batched = 0
	c.wbuf, c.spare = c.spare[:0], nil
}

// flushOut writes out (writeOut). Its writer is the writer goroutine, or a
// caller (writeInline): inWrite says one of them is in flushOut, which the
// other then leaves to it. A caller's write that the socket did not take
// whole leaves out to the writer goroutine (blocked). A failed write ends
// the connection before mu is released (first: this error ended it): the
// calls still queued in the batch just dropped must not be withdrawn from
// it by a cancel or an expiry in between. Called with mu held.
func (c *Conn) flushOut(inline bool) (blocked bool, err error, first bool) {
	c.inWrite = true
	blocked, err = c.writeOut(inline)
	c.inWrite = false
	c.inWriteDone.Broadcast()
	if blocked {
		return true, nil, false
	}
	if cap(c.out) <= maxRetainedWriteBuf {
		c.spare = c.out[:0]
	}
	c.out = nil
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
	if c.raw == nil || c.inWrite || c.out != nil || c.err != nil {
		return true, false
	}
	c.takeBatch()
	blocked, err, first := c.flushOut(true)
	if blocked {
		return true, false
	}
	if err != nil {
		return false, first
	}
	return len(c.wbuf) > 0 && c.corks == 0, false
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
	for c.err == nil {
		pos := int(c.written - c.outBase)
		n := min(len(c.out)-pos, writeChunk)
		if c.records {
			n, c.recLeft = recordChunk(c.out[pos:], c.recLeft)
		}
		if n == 0 {
			return false, nil
		}
		chunk := c.out[pos : pos+n]
		c.writing = c.written + uint64(n)
		c.handOff()
		c.mu.Unlock()

		c.writes.Add(1) // before the call: its answer can arrive before Write returns
		var m int
		if inline {
			m, err = c.raw.tryWrite(chunk)
		} else {
			m, err = c.nc.Write(chunk)
		}
		c.bytesOut.Add(uint64(m))

		c.mu.Lock()
		c.written += uint64(m)
		c.writing = c.written
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
		if c.holding.Load() {
			select {
			case c.burst <- struct{}{}:
			default:
			}
		}
		c.rwake.flush() // before waiting for more bytes
		var n int
		n, rerr = c.nc.Read(buf[w:])
		w += n
		c.reads.Add(1)
		c.bytesIn.Add(uint64(n))
		// On an error, first dispatch what came with it (a last response
		// before the server closed), then end.
	}
}

// dispatch hands one packet to its request or callback. A non-nil error is
// a protocol violation that ends the connection.
func (c *Conn) dispatch(p *memdx.Packet) *ProtocolError {
	switch p.Magic {
	case memdx.MagicRes, memdx.MagicResExt:
		c.dispatchResponse(p)
		return nil
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
func (c *Conn) dispatchResponse(p *memdx.Packet) {
	c.mu.Lock()
	// A group's gets' opaques are not in pending (only its NOOP's is).
	if g := c.groupOf(p.Opaque); g != nil {
		kind := c.groupAnswer(g, p)
		c.mu.Unlock()
		if kind != 0 {
			c.strayResponse(p, kind)
		}
		return
	}
	cl, ok := c.pending[p.Opaque]
	var kind strayKind
	switch {
	case !ok:
		kind = strayUnknownOpaque
	case cl.op != p.OpCode:
		kind = strayWrongOpcode
	case cl.state == reqAbandoned:
		kind = strayLate
	case !c.answerable(cl):
		kind = strayUnsent
	}
	if c.evictedWrite != 0 && (kind == 0 || kind == strayLate) && cl.start >= c.evictedWrite {
		c.evictedWrite = 0 // answered in order: the evicted write was processed
	}
	if kind != 0 {
		if kind == strayLate && cl.final(p) {
			if p.OpCode == memdx.OpNoop && (c.qHead != nil || len(c.groups) > 0) {
				c.settleQuiet(cl, &c.rwake) // a NOOP settles what precedes it, abandoned or not
			}
			c.drop(cl) // the tombstone has its answer
		}
		c.mu.Unlock()
		c.strayResponse(p, kind)
		return
	}
	if cl.final(p) {
		if p.OpCode == memdx.OpNoop && (c.qHead != nil || len(c.groups) > 0) {
			c.settleQuiet(cl, &c.rwake)
		}
		c.end(cl)
		cl.answered = true
		c.mu.Unlock()
		err := cl.call(p)
		if cl.err != nil {
			err = cl.err
		}
		cl.finish(err, &c.rwake)
		return
	}
	// A non-final packet of a multi answer: its caller may cancel while
	// handle runs, and must then wait for handle to return.
	cl.busy = true
	c.mu.Unlock()
	err := cl.call(p)
	c.mu.Lock()
	cl.busy = false
	if err != nil && cl.err == nil {
		cl.err = err
	}
	wake := cl.waiter
	if wake {
		cl.waiter = false
		cl.kept = true
	}
	c.release(cl)
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

// serverRequest hands a server-initiated packet to its callback. Until Dial
// decides to return the connection it only keeps a copy: a connection Dial
// discards fires no callback, and goLive delivers what was kept.
func (c *Conn) serverRequest(p *memdx.Packet) {
	if c.heldBack.Load() {
		c.mu.Lock()
		if c.heldBack.Load() {
			size := len(p.FramingExtras) + len(p.Extras) + len(p.Key) + len(p.Value)
			keep := len(c.early) < maxEarly && c.earlyBytes+size <= maxEarlyBytes
			if keep {
				c.early = append(c.early, copyPacket(p))
				c.earlyBytes += size
			}
			c.mu.Unlock()
			if !keep {
				c.log.Warn("dropping a server request sent during the bootstrap: too many held", "opcode", p.ServerOpCode)
			}
			return
		}
		c.mu.Unlock()
	}
	c.deliver(p)
}

// copyPacket returns p with slices of its own.
func copyPacket(p *memdx.Packet) memdx.Packet {
	q := *p
	q.FramingExtras = append([]byte(nil), p.FramingExtras...)
	q.Extras = append([]byte(nil), p.Extras...)
	q.Key = append([]byte(nil), p.Key...)
	q.Value = append([]byte(nil), p.Value...)
	return q
}

// goLive is Dial's last step for the connection it returns: from now on
// OnClose fires, and the server requests held during the bootstrap are
// delivered, in order, on the calling goroutine; the reader holds back any
// that arrive meanwhile, so callbacks never run concurrently. A connection
// that has already ended is reported as a bootstrap failure at step
// instead (it fires no callback).
func (c *Conn) goLive(step memdx.OpCode) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return &BootstrapError{Addr: c.addr, Step: step, Reason: "the connection ended as the bootstrap completed", Err: err}
	}
	c.live = true
	for {
		early := c.early
		c.early, c.earlyBytes = nil, 0
		if len(early) == 0 {
			c.heldBack.Store(false)
			c.mu.Unlock()
			close(c.held)
			return nil
		}
		c.mu.Unlock()
		for i := range early {
			c.deliver(&early[i])
		}
		c.mu.Lock()
	}
}

func (c *Conn) deliver(p *memdx.Packet) {
	if p.ServerOpCode == memdx.ServerOpClustermapChangeNotification && c.opts.OnClustermapNotification != nil {
		n, err := memdx.DecodeClustermapNotification(p)
		if err != nil {
			c.log.Warn("dropping malformed cluster-map notification", "err", err)
			return
		}
		c.opts.OnClustermapNotification(n)
		return
	}
	if c.opts.OnServerRequest != nil {
		c.opts.OnServerRequest(p)
		return
	}
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		c.log.Debug("dropping server request", "opcode", p.ServerOpCode, "opaque", p.Opaque)
	}
}

// teardown runs on the reader goroutine once the connection has ended: it
// waits for the writer to stop, so that the count of written bytes is
// final, then fails every pending request exactly once.
func (c *Conn) teardown() {
	<-c.writerDone
	<-c.sweepDone
	c.mu.Lock()
	for c.inWrite { // a caller's writeInline: its count of written bytes
		c.inWriteDone.Wait()
	}
	cause := c.err
	live := c.live
	for _, cl := range c.pending {
		if cl.state == reqAbandoned {
			c.drop(cl)
			continue
		}
		written := cl.state == reqWritten
		c.end(cl)
		cl.finish(&RequestError{Op: cl.op, Opaque: cl.opaque, Addr: c.addr,
			Written: written, Err: cause, connEnded: true}, &c.rwake)
	}
	c.rwake.flush()
	c.pending = nil
	c.evictedWrite = 0
	c.mu.Unlock()
	if live && c.opts.OnClose != nil {
		<-c.held // Dial is done delivering held server requests: no callback overlaps
		c.opts.OnClose(cause)
	}
	close(c.exited)
}

// Close closes the connection: every request in flight fails with an error
// matching kverr.ErrConnectionClosed. It waits until the connection's
// goroutines have exited, so it must not be called from handle or a callback.
// Closing twice is harmless. It returns nil.
func (c *Conn) Close() error {
	c.fail(kverr.ErrConnectionClosed)
	<-c.exited
	return nil
}

// Done is closed when the connection has ended (failed or closed).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended: kverr.ErrConnectionClosed after Close, a
// *ProtocolError, or a network error (wrapped; errors.Is(err, io.EOF) and
// the like work). It is nil while the connection is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Pending returns the number of requests in flight, abandoned ones whose
// answer has not arrived (tombstones) included.
func (c *Conn) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// WritesInFlight is the number of requests on the connection that may
// change data and have no answer yet: queued, written, or abandoned (a
// tombstone: its request may still be applied; one evicted past
// MaxAbandoned counts as one more until a request sent after it is
// answered). A read sent to the same
// server on another connection can overtake them; one sent on this
// connection cannot, since a server answers a connection's requests in
// order.
func (c *Conn) WritesInFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.evictedWrite != 0 {
		return c.writesPending + 1
	}
	return c.writesPending
}

// readOnly reports whether a request of op only reads: it cannot change
// what a later read sees. Any other opcode counts as a write
// (WritesInFlight).
func readOnly(op memdx.OpCode) bool {
	switch op {
	case memdx.OpGet, memdx.OpGetQ, memdx.OpGetK, memdx.OpGetKQ, memdx.OpGetEx, memdx.OpGetReplica, memdx.OpGetExReplica,
		memdx.OpNoop, memdx.OpVersion, memdx.OpStat, memdx.OpGetClusterConfig, memdx.OpGetErrorMap,
		memdx.OpCollectionsGetID, memdx.OpCollectionsGetManifest, memdx.OpObserve, memdx.OpObserveSeqno,
		memdx.OpSubdocGet, memdx.OpSubdocExists, memdx.OpSubdocGetCount, memdx.OpSubdocMultiLookup:
		return true
	}
	return false
}

// Stats are counters of a connection's socket calls and of its requests'
// fates.
type Stats struct {
	// Writes is the number of Write calls: each carries what was queued
	// since the one before, up to 64 KiB. A caller's non-blocking write
	// of a group of gets (StartGets) counts too, even when the socket
	// took nothing.
	Writes uint64
	// BytesWritten is what those calls accepted.
	BytesWritten uint64
	// Reads and BytesRead count the reader's Read calls and their bytes.
	Reads     uint64
	BytesRead uint64
	// StrayResponses counts the responses dropped because they answered
	// nothing in flight (see the package doc), LateResponses included.
	StrayResponses uint64
	// LateResponses counts the late answers to abandoned requests.
	LateResponses uint64
	// Abandoned is the number of tombstones now; Forgotten counts those
	// dropped unanswered past Options.MaxAbandoned.
	Abandoned int
	Forgotten uint64
	// Probes counts the health probes sent.
	Probes uint64
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	tombs := c.tombs
	c.mu.Unlock()
	return Stats{Writes: c.writes.Load(), BytesWritten: c.bytesOut.Load(),
		Reads: c.reads.Load(), BytesRead: c.bytesIn.Load(),
		StrayResponses: c.strays.Load(), LateResponses: c.late.Load(),
		Abandoned: tombs, Forgotten: c.evicted.Load(), Probes: c.probes.Load()}
}

// Addr returns the address the connection was dialled with.
func (c *Conn) Addr() string { return c.addr }

// ID returns the connection id sent in HELLO (it shows in the server's
// logs).
func (c *Conn) ID() string { return c.id }

// Memcached reports whether the connection speaks plain memcached: it was
// asked for, or a Couchbase-mode Dial found a server that refused HELLO.
func (c *Conn) Memcached() bool { return c.memcached }

// Features returns the HELLO features the server granted (none in memcached
// mode).
func (c *Conn) Features() Features { return c.features }

// ErrorMap returns the node's error map, nil when none was negotiated. It is
// immutable and shared.
func (c *Conn) ErrorMap() *errmap.Map { return c.errMap }

// ClusterConfig returns a copy of the config GET_CLUSTER_CONFIG returned
// during bootstrap, nil when there was none.
func (c *Conn) ClusterConfig() []byte {
	if c.config == nil {
		return nil
	}
	return append([]byte(nil), c.config...)
}

// ServerVersion returns what VERSION answered during bootstrap ("" when it
// failed).
func (c *Conn) ServerVersion() string { return c.version }

// Mechanism returns the SASL mechanism used, "" when none was.
func (c *Conn) Mechanism() string { return c.mech }

// Bucket returns the selected bucket, "" when none was.
func (c *Conn) Bucket() string { return c.bucket }
