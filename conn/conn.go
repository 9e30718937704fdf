package conn

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/errmap"
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
	nc   net.Conn
	addr string
	id   string
	opts Options
	log  *slog.Logger

	// Bootstrap results: written by Dial before the Conn is returned,
	// read-only afterwards.
	memcached bool
	features  Features
	errMap    *errmap.Map
	errMapErr error
	config    []byte
	version   string
	mech      string
	bucket    string

	mu      sync.Mutex
	pending map[uint32]*call // in flight, keyed by opaque; nil once torn down
	opaque  uint32           // the last opaque handed out
	wrapped bool             // opaque has wrapped: check for one still in use
	// wbuf holds encoded requests not yet handed to the writer. Stream
	// offsets count every byte ever queued on the connection: wbuf[0] is
	// at offset flushed, and queued is just past its last byte.
	wbuf    []byte
	spare   []byte // the writer's other buffer, between writes
	queued  uint64
	flushed uint64 // bytes before this offset were handed to the writer
	written uint64 // bytes before this offset were accepted by Write
	batched int    // requests in wbuf
	corked  bool   // bootstrap is queueing a batch: do not wake the writer
	// holding: the writer waits for the reader's next burst of answers;
	// burst (capacity 1) tells it one was dispatched.
	holding atomic.Bool
	burst   chan struct{}
	err     error // why the connection ended; nil while it is open
	// dlHead..dlTail lists the pending calls that have a deadline, earliest
	// first. Requests usually share one timeout, so a new one goes at the
	// tail and a finished one is unlinked: O(1) either way, under mu (a
	// shorter timeout walks back from the tail to its place). dlTimer wakes
	// the sweeper at dlAt (zero: disarmed); a new deadline re-arms it only
	// when it is earlier than dlAt, so the usual request costs no timer
	// operation.
	dlHead, dlTail *call
	dlTimer        *time.Timer
	dlAt           time.Time
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
	sweepDone  chan struct{} // closed when the sweeper goroutine has exited
	exited     chan struct{} // closed when both goroutines have exited

	writes, bytesOut, reads, bytesIn atomic.Uint64
}

// call is one request in flight. Calls are pooled: a call goes back to the
// pool only when no one can touch it any more (see release).
type call struct {
	handle func(*memdx.Packet) error
	done   chan error // capacity 1: the request's single outcome
	op     memdx.OpCode
	opaque uint32
	start  uint64 // stream offsets of its encoded bytes
	end    uint64
	// multi: the server answers with several packets, the last of which
	// ends the request (STAT).
	multi bool
	// abandoned: the caller gave up after the request was handed to the
	// writer; its response will be dropped. It stays in pending until
	// then, so that the late response is recognized.
	abandoned bool
	// busy: the reader is inside handle for a non-final packet of a multi
	// request; waiter: a cancelling caller waits for that call to return.
	busy, waiter bool
	err          error // first error handle returned (multi)
	// deadline is when the call expires (DoDeadline; zero: never).
	// dlPrev/dlNext link it into the connection's deadline list while it
	// waits (inDL). expired: the sweeper ended the call and sent its
	// outcome on done.
	deadline       time.Time
	dlPrev, dlNext *call
	inDL           bool
	expired        bool
	// timer bounds the wait of a multi-packet call (STAT) with a deadline:
	// such a call is not swept (its handle may be running when it expires);
	// the timer stays with the pooled call so that it is reused.
	timer *time.Timer
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan error, 1)} }}

func getCall() *call { return callPool.Get().(*call) }

func putCall(cl *call) {
	done, timer := cl.done, cl.timer
	*cl = call{done: done, timer: timer}
	callPool.Put(cl)
}

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
		dlTimer:    time.NewTimer(time.Hour),
	}
	c.heldBack.Store(true)
	c.dlTimer.Stop()
	go c.writeLoop()
	go c.sweepLoop()
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
// memdx.NewStatusError(p) (nil on success). For STAT, whose answer is a
// series of packets, handle is called once per packet, the last being the
// one with an empty key (or a non-success status), and Do returns the first
// error handle returned.
//
// Otherwise Do returns a *RequestError and handle is never called: the
// connection ended (errors.Is(err, ErrClosed)), ctx ended (errors.Is(err,
// context.Canceled) or DeadlineExceeded), the connection was overloaded
// (ErrOverloaded), or req could not be encoded (memdx.ErrInvalidRequest).
// Its Written field says whether the request may have reached the server.
// Quiet opcodes (GETQ, SETQ, ...) are refused: their success has no
// response to wait for.
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
// sweeper goroutine, so a request with a deadline costs no timer and no
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
	if !deadline.IsZero() && !time.Now().Before(deadline) {
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
	cl.multi = req.OpCode == memdx.OpStat

	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		putCall(cl)
		return nil, &RequestError{Op: req.OpCode, Addr: c.addr, Err: err, connEnded: true}
	}
	if bounded && len(c.pending) >= c.opts.MaxPending {
		c.mu.Unlock()
		putCall(cl)
		return nil, &RequestError{Op: req.OpCode, Addr: c.addr, Err: ErrOverloaded}
	}
	opaque := c.nextOpaque()
	n0 := len(c.wbuf)
	b, err := req.AppendTo(c.wbuf, opaque)
	if err != nil {
		c.wbuf = c.wbuf[:n0]
		c.mu.Unlock()
		putCall(cl)
		return nil, &RequestError{Op: req.OpCode, Addr: c.addr, Err: err}
	}
	c.wbuf = b
	cl.opaque = opaque
	cl.start = c.queued
	c.queued += uint64(len(b) - n0)
	cl.end = c.queued
	c.pending[opaque] = cl
	c.batched++
	if !deadline.IsZero() && !cl.multi {
		cl.deadline = deadline
		c.dlInsert(cl)
		if c.dlAt.IsZero() || deadline.Before(c.dlAt) {
			c.armSweeper(deadline)
		}
	}
	wake := n0 == 0 && !c.corked
	c.mu.Unlock()
	if wake {
		c.wakeWriter()
	}
	return cl, nil
}

func (c *Conn) wakeWriter() {
	select {
	case c.kick <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// nextOpaque returns an opaque no request in flight uses. Opaque 0 is never
// used. Called with mu held.
func (c *Conn) nextOpaque() uint32 {
	for {
		c.opaque++
		if c.opaque == 0 {
			c.wrapped = true
			continue
		}
		if !c.wrapped {
			return c.opaque
		}
		if _, used := c.pending[c.opaque]; !used {
			return c.opaque
		}
	}
}

// cork holds back the writer while a batch is queued; uncork releases it,
// so that the batch goes out in one write.
func (c *Conn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

func (c *Conn) uncork() {
	c.mu.Lock()
	c.corked = false
	wake := len(c.wbuf) > 0
	c.mu.Unlock()
	if wake {
		c.wakeWriter()
	}
}

// wait blocks until cl ends or ctx is done. A call with a deadline is
// ended by the sweeper, through cl.done like a response: without a
// cancellable ctx, waiting is one channel receive.
func (c *Conn) wait(ctx context.Context, deadline time.Time, cl *call) error {
	if !deadline.IsZero() && cl.multi {
		return c.waitTimer(ctx, deadline, cl)
	}
	ctxDone := ctx.Done()
	if ctxDone == nil {
		return c.finish(cl, <-cl.done)
	}
	select {
	case err := <-cl.done:
		return c.finish(cl, err)
	case <-ctxDone:
		return c.cancel(ctx.Err(), cl)
	}
}

// finish returns the outcome received on cl.done, and pools cl unless the
// sweeper left it behind as a tombstone for a late response (the reader
// or the garbage collector owns it then).
func (c *Conn) finish(cl *call, err error) error {
	if !cl.abandoned {
		putCall(cl)
	}
	return err
}

// waitTimer waits for a multi-packet call with a deadline on a timer of
// its own.
func (c *Conn) waitTimer(ctx context.Context, deadline time.Time, cl *call) error {
	d := time.Until(deadline)
	if cl.timer == nil {
		cl.timer = time.NewTimer(d)
	} else {
		cl.timer.Reset(d)
	}
	select {
	case err := <-cl.done:
		cl.timer.Stop()
		putCall(cl)
		return err
	case <-ctx.Done():
		cl.timer.Stop()
		return c.cancel(ctx.Err(), cl)
	case <-cl.timer.C:
		return c.cancel(context.DeadlineExceeded, cl)
	}
}

func (c *Conn) cancel(cause error, cl *call) error {
	c.mu.Lock()
	if cl.expired {
		// The sweeper got there first: its outcome is on done.
		c.mu.Unlock()
		return c.finish(cl, <-cl.done)
	}
	if c.pending[cl.opaque] != cl {
		c.mu.Unlock()
		err := <-cl.done
		putCall(cl)
		return err
	}
	if cl.inDL {
		c.dlUnlink(cl)
	}
	written := cl.start < c.flushed
	switch {
	case written:
		// Handed to the writer: it may be on the wire (or going there), so
		// the server may answer. Keep the opaque as a tombstone until it
		// does, and drop that answer.
		cl.abandoned = true
	case c.err != nil:
		// The connection is ending and its write buffer is gone.
		delete(c.pending, cl.opaque)
	default:
		// Still in the write buffer: take it out; the server never sees it.
		c.cut(cl)
		delete(c.pending, cl.opaque)
	}
	wait := cl.busy
	if wait {
		cl.waiter = true
	}
	// Once mu is released an abandoned call belongs to the reader, which
	// may recycle it as soon as the late response arrives: read it now.
	err := &RequestError{Op: cl.op, Opaque: cl.opaque, Addr: c.addr, Written: written, Err: cause}
	c.mu.Unlock()
	if wait {
		<-cl.done // the reader is inside handle for this call: let it return
	}
	if !written {
		putCall(cl)
	}
	return err
}

// cut removes cl's bytes from wbuf and moves the offsets of the requests
// queued after it. Called with mu held; cl.start >= c.flushed.
func (c *Conn) cut(cl *call) {
	from, to := int(cl.start-c.flushed), int(cl.end-c.flushed)
	n := copy(c.wbuf[from:], c.wbuf[to:])
	c.wbuf = c.wbuf[:from+n]
	size := cl.end - cl.start
	c.queued -= size
	c.batched--
	for _, o := range c.pending {
		if o.start >= cl.end {
			o.start -= size
			o.end -= size
		}
	}
}

// fail ends the connection with err (the first error wins). It does not
// wait: the reader notices the closed socket, waits for the writer and fails
// every pending request (teardown).
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.wbuf = nil
	c.mu.Unlock()
	close(c.done)
	c.nc.Close()
}

// writeLoop is the writer goroutine: it hands everything queued since its
// last write to one Write call.
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
		// More requests in flight than in this batch: callers whose answers
		// just came back are likely about to send again. Let them run
		// first, so that they share this write instead of each causing
		// one. (A lone caller does not wait for this.)
		if len(c.pending) > c.batched {
			c.mu.Unlock()
			runtime.Gosched()
			c.mu.Lock()
		}
		// More requests written and unanswered than queued: their callers
		// will likely send again when the answers come. Hold the batch
		// until the reader dispatches more answers (at most holdMax), so
		// that the batches merge instead of circulating as fragments.
		for holds := 0; holds < maxHolds && c.err == nil && len(c.pending)-c.batched > c.batched; holds++ {
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
		buf := c.wbuf
		if len(buf) == 0 { // a cancelled request was its only content
			c.mu.Unlock()
			continue
		}
		start := c.flushed
		c.flushed = c.queued
		c.batched = 0
		c.wbuf, c.spare = c.spare[:0], nil
		c.mu.Unlock()

		c.writes.Add(1) // before the call: its answer can arrive before Write returns
		n, err := c.nc.Write(buf)
		c.bytesOut.Add(uint64(n))

		c.mu.Lock()
		c.written = start + uint64(n)
		if cap(buf) <= maxRetainedWriteBuf {
			c.spare = buf[:0]
		}
		c.mu.Unlock()
		if err != nil {
			c.fail(fmt.Errorf("conn %s: write: %w", c.addr, err))
			return
		}
	}
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
				c.fail(&ProtocolError{Addr: c.addr, What: "bad packet header", Err: err})
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
			var err2 error
			*p, _, err2 = memdx.DecodePacket(buf[r:r+size], maxBody)
			if err2 != nil {
				c.fail(&ProtocolError{Addr: c.addr, What: "bad packet", Err: err2})
				return
			}
			r += size
			if perr := c.dispatch(p); perr != nil {
				c.fail(perr)
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
func (c *Conn) dispatch(p *memdx.Packet) error {
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

func (c *Conn) dispatchResponse(p *memdx.Packet) error {
	c.mu.Lock()
	cl, ok := c.pending[p.Opaque]
	if !ok {
		c.mu.Unlock()
		return &ProtocolError{Addr: c.addr, What: fmt.Sprintf("%s response (status %s) with opaque %d matches no request in flight",
			p.OpCode, p.Status, p.Opaque)}
	}
	if cl.op != p.OpCode {
		c.mu.Unlock()
		return &ProtocolError{Addr: c.addr, What: fmt.Sprintf("%s response with opaque %d answers a %s request",
			p.OpCode, p.Opaque, cl.op)}
	}
	if cl.start >= c.flushed {
		// Its bytes are still in the write buffer: the server cannot have
		// seen the request, and taking this as its answer would tell the
		// caller it completed before it was even sent.
		c.mu.Unlock()
		return &ProtocolError{Addr: c.addr, What: fmt.Sprintf("%s response with opaque %d answers a request not yet sent",
			p.OpCode, p.Opaque)}
	}
	final := !cl.multi || p.Status != memdx.StatusSuccess || len(p.Key) == 0
	if cl.abandoned {
		if final {
			delete(c.pending, p.Opaque)
		}
		c.mu.Unlock()
		if final && !cl.waiter {
			// Its caller left and no one else holds it. (A caller that
			// waited for handle took a wake-up from done; such a call is
			// left to the garbage collector rather than pooled, so that no
			// stale wake-up can reach its next user.)
			putCall(cl)
		}
		return nil
	}
	if final {
		delete(c.pending, p.Opaque)
		if cl.inDL {
			c.dlUnlink(cl)
		}
		c.mu.Unlock()
		err := cl.call(p)
		if cl.err != nil {
			err = cl.err
		}
		cl.done <- err
		return nil
	}
	// A non-final packet of a multi request: its caller may cancel while
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
	c.mu.Unlock()
	if wake {
		cl.done <- nil
	}
	return nil
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
	pending := c.pending
	c.pending = nil
	c.dlHead, c.dlTail = nil, nil
	written := c.written
	cause := c.err
	live := c.live
	c.mu.Unlock()
	for _, cl := range pending {
		if cl.abandoned {
			continue
		}
		cl.done <- &RequestError{Op: cl.op, Opaque: cl.opaque, Addr: c.addr,
			Written: cl.end <= written, Err: cause, connEnded: true}
	}
	if live && c.opts.OnClose != nil {
		<-c.held // Dial is done delivering held server requests: no callback overlaps
		c.opts.OnClose(cause)
	}
	close(c.exited)
}

// Close closes the connection: every request in flight fails with an error
// matching ErrClosed. It waits until the connection's goroutines have
// exited, so it must not be called from handle or a callback. Closing twice
// is harmless. It returns nil.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	<-c.exited
	return nil
}

// Done is closed when the connection has ended (failed or closed).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended: ErrClosed after Close, a
// *ProtocolError, or a network error (wrapped; errors.Is(err, io.EOF) and
// the like work). It is nil while the connection is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Pending returns the number of requests in flight, cancelled ones whose
// response has not arrived included.
func (c *Conn) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Stats are counters of a connection's socket calls.
type Stats struct {
	// Writes is the number of Write calls: each carries every request
	// queued since the one before.
	Writes uint64
	// BytesWritten is what those calls accepted.
	BytesWritten uint64
	// Reads and BytesRead count the reader's Read calls and their bytes.
	Reads     uint64
	BytesRead uint64
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	return Stats{Writes: c.writes.Load(), BytesWritten: c.bytesOut.Load(),
		Reads: c.reads.Load(), BytesRead: c.bytesIn.Load()}
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

// ErrorMapDropped returns why the node's error map was dropped (it failed to
// parse, and the connection was made again without XERROR), nil otherwise.
func (c *Conn) ErrorMapDropped() error { return c.errMapErr }

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

// armSweeper sets the sweeper's timer to fire at t. Called with mu held.
func (c *Conn) armSweeper(t time.Time) {
	c.dlAt = t
	c.dlTimer.Reset(time.Until(t))
}

// sweepLoop is the sweeper goroutine: it expires calls whose deadline has
// passed.
func (c *Conn) sweepLoop() {
	defer close(c.sweepDone)
	for {
		select {
		case <-c.dlTimer.C:
			c.sweep()
		case <-c.done:
			c.dlTimer.Stop()
			return
		}
	}
}

// sweep ends every call whose deadline has passed and re-arms the timer for
// the next one. A call still in the write buffer is cut out (not written);
// one handed to the writer stays registered until its late response, which
// is dropped (written: the outcome is unknown), as for a cancellation.
func (c *Conn) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dlAt = time.Time{}
	if c.err != nil {
		return // teardown fails everything pending
	}
	now := time.Now()
	for c.dlHead != nil && !c.dlHead.deadline.After(now) {
		cl := c.dlHead
		c.dlUnlink(cl)
		written := cl.start < c.flushed
		if written {
			// The reader will drop the late response and must then leave
			// the call alone: its waiter may still be reading done.
			cl.abandoned = true
			cl.waiter = true
		} else {
			c.cut(cl)
			delete(c.pending, cl.opaque)
		}
		cl.expired = true
		cl.done <- &RequestError{Op: cl.op, Opaque: cl.opaque, Addr: c.addr, Written: written, Err: context.DeadlineExceeded}
	}
	if c.dlHead != nil {
		c.armSweeper(c.dlHead.deadline)
	}
}

// dlInsert links cl into the deadline list at its place: at the tail when
// its deadline is the latest, which it nearly always is. Called with mu held.
func (c *Conn) dlInsert(cl *call) {
	at := c.dlTail
	for at != nil && at.deadline.After(cl.deadline) {
		at = at.dlPrev
	}
	cl.dlPrev = at
	if at == nil {
		cl.dlNext = c.dlHead
		c.dlHead = cl
	} else {
		cl.dlNext = at.dlNext
		at.dlNext = cl
	}
	if cl.dlNext == nil {
		c.dlTail = cl
	} else {
		cl.dlNext.dlPrev = cl
	}
	cl.inDL = true
}

// dlUnlink takes cl out of the deadline list. Called with mu held.
func (c *Conn) dlUnlink(cl *call) {
	if cl.dlPrev == nil {
		c.dlHead = cl.dlNext
	} else {
		cl.dlPrev.dlNext = cl.dlNext
	}
	if cl.dlNext == nil {
		c.dlTail = cl.dlPrev
	} else {
		cl.dlNext.dlPrev = cl.dlPrev
	}
	cl.dlPrev, cl.dlNext, cl.inDL = nil, nil, false
}
