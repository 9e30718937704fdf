package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/kvwire/kvwire/errmap"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/lifecycle"
	"github.com/kvwire/kvwire/memdx"
)

// Conn is one connection to one node: a socket, its bootstrap results and
// the requests in flight on it. Its methods are safe for concurrent use.
//
// See the package doc for the threading model and the exact failure rules.
type Conn struct {
	// A Conn is composed of a part per job, each with its own fields: the
	// in-flight table (inflight.go), the writer (writer.go), the reader
	// (reader.go), the monitor of deadlines and health (monitor.go) and
	// the gate on callbacks (callbacks.go). One mutex, mu, guards the state
	// they share, so that each transition of a request's lifecycle
	// (request.go) is one step under one lock.

	// The fields up to mu are written before Dial returns the Conn (by
	// newConn before it starts the goroutines; bootResults during the
	// bootstrap) and only read afterwards. done sits with them, away from
	// anything written per request: a caller checks it, without mu,
	// before every request (cluster's Node.Pick).
	nc     net.Conn
	addr   string
	id     string
	done   chan struct{} // closed when err is set
	exited chan struct{} // closed at the end of teardown: every request has failed, OnClose has returned
	opts   Options
	log    *slog.Logger
	clock  clock
	// health is the health check's clock (Options.Clock; clock when none).
	health clock
	// sysClock: clock is the system clock, whose readings a caller may
	// hand over (Origin.SentIsNow).
	sysClock bool
	bootResults

	// localAddr and remoteAddr are the socket's, as text (diagnostics,
	// orphans).
	localAddr, remoteAddr string

	// sub is the submission stack (submit.go): callers write its head
	// without mu, so it has cache lines of its own, away from the fields
	// above (read by every caller) and from mu's.
	_   [64]byte
	sub submissions
	_   [64]byte

	mu  sync.Mutex
	err error // why the connection ended; nil while it is open
	// lastActive is the last activity seen, in Unix nanoseconds
	// (noteActivity): each request's caller writes it, under mu, whose
	// line it shares rather than taking a line of its own to the
	// caller's processor.
	lastActive int64
	inflight   inflight
	writer     writer
	reader     reader
	monitor    monitor
	callbacks  callbacks
}

// bootResults are what Dial's bootstrap found: written before the Conn is
// returned, read-only afterwards.
type bootResults struct {
	memcached bool
	features  Features
	errMap    *errmap.Map
	errMapErr error // why a map was dropped (logged; read by tests)
	config    []byte
	// configStatus is GET_CLUSTER_CONFIG's status (0: not sent).
	configStatus memdx.Status
	version      string
	mech         string
	bucket       string
}

// newConn wraps a connected socket and starts its reader, writer and
// monitor goroutines.
func newConn(nc net.Conn, addr string, opts *Options, id string) *Conn {
	c := &Conn{
		nc:     nc,
		addr:   addr,
		id:     id,
		opts:   *opts,
		log:    opts.Logger.With("addr", addr, "conn", id),
		clock:  opts.clock,
		health: opts.health,
		done:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	_, c.sysClock = opts.clock.(systemClock)
	c.localAddr, c.remoteAddr = addrString(nc.LocalAddr()), addrString(nc.RemoteAddr())
	c.inflight.init()
	c.writer.init(nc, &c.mu)
	c.reader.init(nc)
	c.reader.onCancel = c.borrowerCancelled
	c.callbacks.init()
	c.initMonitor()
	// Marked as the client's own: Close, called from a logger's handler
	// on one of them, must not wait for it (internal/lifecycle).
	lifecycle.Go(c.writeLoop)
	lifecycle.Go(c.runMonitor)
	lifecycle.Go(c.readLoop)
	return c
}

// Do sends req with a fresh opaque and waits for its response or for ctx.
//
// On a response, handle is called exactly once with it, on the goroutine
// reading the connection (its reader goroutine, or this caller when it
// borrowed the read role: see the package doc), and Do returns what handle
// returned. The packet and its
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
// Otherwise Do returns a *RequestError and handle is not called (but for
// two cases: a STAT or RANGE_SCAN_CONTINUE answer cut off after some of
// its packets, which handle was called with; and an answer handle judged
// to be another request's, whose error the RequestError wraps): the
// connection ended (errors.Is(err, kverr.ErrConnectionClosed)), ctx ended
// (errors.Is(err, context.Canceled) or DeadlineExceeded), the connection was
// overloaded (kverr.ErrOverloaded), or req could not be encoded
// (memdx.ErrInvalidRequest). Its Written field says whether the request may
// have reached the server. Quiet opcodes (GETQ, SETQ, ...) are refused: their
// success has no response to wait for.
//
// req is encoded before Do returns: the caller may reuse it afterwards, not
// before (on a crowded connection the writer goroutine encodes it while Do
// waits). No goroutine is started per call.
func (c *Conn) Do(ctx context.Context, req *memdx.Request, handle func(*memdx.Packet) error) error {
	_, err := c.DoDeadline(ctx, time.Time{}, req, handle, nil)
	return err
}

// DoDeadline is Do with a deadline of its own (the zero Time: none): when it
// passes before the response, the request ends as if ctx's deadline had
// passed (a *RequestError matching context.DeadlineExceeded: not written
// when it expired still queued, withdrawn before any byte was handed to the
// socket; written, outcome unknown, once it was being sent).
// It lets a caller bound every attempt without deriving a context per
// request: deadlines are kept in a list per connection, ordered by deadline
// (a request with the latest deadline, the usual case, joins at the tail in
// O(1); an earlier one walks back to its place), and expired by one
// monitor goroutine, so a request with a deadline costs no timer and no
// clock reading beyond checking that the deadline has not already passed (a
// request whose deadline has passed is refused unsent: not written), and
// not that one when from hands over a reading of its own
// (Origin.SentIsNow). It also
// returns the opaque the request was sent with (0 when it was never queued).
//
// from, when not nil, says what the request was sent for: a tombstone
// keeps it for the orphan report (Options.OnOrphan); see Origin for how
// long it must stay unchanged.
func (c *Conn) DoDeadline(ctx context.Context, deadline time.Time, req *memdx.Request, handle func(*memdx.Packet) error, from *Origin) (uint32, error) {
	if req.OpCode.IsQuiet() {
		return 0, &RequestError{Op: req.OpCode, Addr: c.addr,
			Err: fmt.Errorf("quiet opcode %s sends no response on success, which Do needs: %w", req.OpCode, memdx.ErrInvalidRequest)}
	}
	if err := ctx.Err(); err != nil {
		return 0, &RequestError{Op: req.OpCode, Addr: c.addr, Err: err}
	}
	var now time.Time
	if !deadline.IsZero() {
		if from != nil && from.SentIsNow && c.sysClock {
			now = from.Sent // the caller's reading, made just now
		} else {
			now = c.clock.Now()
		}
		if !now.Before(deadline) {
			return 0, &RequestError{Op: req.OpCode, Addr: c.addr, Err: context.DeadlineExceeded}
		}
	}
	queued := from != nil && from.Queued != nil
	cl, err := c.start(req, handle, deadline, now, from, true, !queued)
	if err != nil {
		return 0, err
	}
	if queued {
		c.queuedHook(from.Queued, cl)
	}
	return c.wait(ctx, deadline, cl)
}

// queuedHook calls h (Origin.Queued) for cl, just queued. Should h not
// return (a panic of the caller's code it runs, an Observer's, or a
// Goexit), its caller is gone: cl is given up first, as a cancel gives it
// up (withdrawn if still queued; abandoned if written, its late answer
// unneeded, no orphan), so that nothing of the caller's (the handler and
// what it writes into, the Origin) stays bound to the connection.
func (c *Conn) queuedHook(h QueuedHook, cl *call) {
	returned := false
	defer func() {
		if !returned {
			_, _ = c.cancel(ErrNotNeeded, true, cl)
		}
	}()
	h.Queued()
	returned = true
}

// start queues req and registers its call, or, for a Do call on a crowded
// connection, submits it (submit.go): the writer queues it. bounded applies
// Options.MaxPending; the bootstrap's requests are not bounded (Dial must
// work whatever MaxPending is, and it sends at most one pipeline of them
// before anyone else can use the connection).
// now is the time DoDeadline read, zero when it read none; reads: the
// caller may borrow the read role (readrole.go), whatever its context (Do;
// the bootstrap's requests are read by the reader goroutine, which lends
// the role only once Dial has returned).
func (c *Conn) start(req *memdx.Request, handle func(*memdx.Packet) error, deadline, now time.Time, from *Origin, bounded, reads bool) (*call, error) {
	cl := getCall()
	cl.handle = handle
	cl.op = req.OpCode
	cl.from = from
	if isMulti(req.OpCode) {
		cl.kind = kindMulti // bounded by a timer of its own (waitTimer), not swept
	} else {
		cl.kind = kindSingle
		cl.deadline = deadline
		cl.reads = reads
	}
	if cl.reads && bounded && c.sub.crowded.Load() && c.submit(cl, req) {
		return cl, nil // the writer queues it (submit.go)
	}
	c.mu.Lock()
	if cl.reads && c.reader.role == roleLent {
		if c.borrowRole(cl, now) && (from == nil || !from.Resendable) {
			c.mu.Unlock()
			c.catchUp()
			c.mu.Lock()
		}
	}
	wake, err := c.queue(cl, req, bounded)
	failed := false
	if err == nil && wake && c.inflight.active == 1 && c.writer.expect.Load() == 0 {
		// A lone request, and no caller answered just now who could
		// join it: write it from here, sparing the writer's wake-up.
		wake, failed = c.writeInline()
	}
	c.mu.Unlock()
	if err != nil {
		if cl.borrowed {
			c.returnRole()
		}
		putCall(cl)
		return nil, err
	}
	if failed {
		c.closeFailed()
	}
	if wake {
		c.writer.wake()
	}
	return cl, nil
}

// queue encodes req into the write buffer with a fresh opaque and
// enqueues cl for it. It reports whether the writer needs a wake-up.
// Called with mu held.
func (c *Conn) queue(cl *call, req *memdx.Request, bounded bool) (bool, error) {
	if c.err != nil {
		return false, &RequestError{Op: req.OpCode, Addr: c.addr, Err: c.err, connEnded: true}
	}
	if bounded && c.inflight.active >= c.opts.MaxPending {
		return false, &RequestError{Op: req.OpCode, Addr: c.addr, Err: kverr.ErrOverloaded}
	}
	if cl.from != nil && cl.from.Barrier && (c.inflight.promised != 0 || !c.inflight.evictedBound.IsZero()) &&
		!c.latestBound(c.health.Now()).IsZero() {
		return false, &RequestError{Op: req.OpCode, Addr: c.addr, Err: ErrBoundedAhead}
	}
	opaque := c.inflight.nextOpaque()
	b, err := req.AppendTo(c.writer.wbuf, opaque)
	if err != nil {
		return false, &RequestError{Op: req.OpCode, Addr: c.addr, Err: err}
	}
	cl.opaque = opaque
	if req.Durability != memdx.DurabilityNone || len(req.FramingExtras) != 0 || req.OpCode == memdx.OpRangeScanContinue {
		if cl.answerIn = answerWithin(req); cl.answerIn != 0 {
			cl.answerBy = c.health.Now().Add(cl.answerIn) // until written (answerWritten)
		}
	}
	wake := c.writer.commit(cl, b)
	c.enqueue(cl)
	if cl.from != nil {
		c.noteActivity(cl.from.Sent)
	}
	return wake, nil
}

// wait blocks until cl ends or ctx is done, and returns the opaque cl was
// sent with (0 when it was never queued) and its outcome. A call with a
// deadline is ended by the monitor, through cl.done like a response:
// without a cancellable ctx, waiting is one channel receive. A caller that
// borrowed the read role first reads until cl ends or ctx is done
// (readFor).
func (c *Conn) wait(ctx context.Context, deadline time.Time, cl *call) (uint32, error) {
	if !deadline.IsZero() && cl.kind == kindMulti {
		return c.waitTimer(ctx, deadline, cl)
	}
	ctxDone := ctx.Done()
	if cl.borrowed {
		c.readFor(ctx, cl)
	}
	if ctxDone == nil {
		return c.took(cl, <-cl.done)
	}
	select {
	case err := <-cl.done:
		return c.took(cl, err)
	case <-ctxDone:
		return c.cancel(ctx.Err(), notNeeded(ctx), cl)
	}
}

// took is the caller, having received cl's outcome err from done, letting
// go of cl: it returns cl's opaque, read first (a submitted call has one
// only once the writer queued it), and err.
func (c *Conn) took(cl *call, err error) (uint32, error) {
	opaque := cl.opaque
	c.leave(cl)
	return opaque, err
}

// waitTimer waits for a multi-packet call with a deadline on a timer of
// its own.
func (c *Conn) waitTimer(ctx context.Context, deadline time.Time, cl *call) (uint32, error) {
	if cl.timer == nil {
		cl.timer = c.clock.NewTimer()
	}
	cl.timer.Reset(deadline.Sub(c.clock.Now()))
	select {
	case err := <-cl.done:
		cl.timer.Stop()
		return c.took(cl, err)
	case <-ctx.Done():
		cl.timer.Stop()
		return c.cancel(ctx.Err(), notNeeded(ctx), cl)
	case <-cl.timer.C():
		return c.cancel(context.DeadlineExceeded, false, cl)
	}
}

// cancel is the caller giving up on cl (ctx, or a multi-packet call's
// deadline): a submitted or queued call is withdrawn (not written), a sent
// one abandoned (written: the outcome is unknown; its late answer is
// expected, no orphan, when unneeded: ErrNotNeeded). If the call has
// already ended, its outcome is on done and is returned instead. It returns
// cl's opaque too, as wait does.
func (c *Conn) cancel(cause error, unneeded bool, cl *call) (uint32, error) {
	c.mu.Lock()
	opaque := cl.opaque
	switch cl.state {
	case reqEnded, reqAbandoned:
		// Answered, expired or failed by the connection first: the
		// outcome is on done (or about to be, after handle).
		c.mu.Unlock()
		return c.took(cl, <-cl.done)
	case reqSubmitted:
		err := &RequestError{Op: cl.op, Addr: c.addr, Err: cause}
		c.withdrawSubmitted(cl) // the writer pools it
		c.mu.Unlock()
		return 0, err
	case reqQueued:
		if c.err != nil {
			c.end(cl) // the connection is ending: its buffers are gone
		} else {
			c.withdraw(cl)
		}
		err := &RequestError{Op: cl.op, Opaque: opaque, Addr: c.addr, Err: cause}
		c.mu.Unlock()
		putCall(cl)
		return opaque, err
	}
	// Sent: the server may answer. Keep the opaque as a tombstone until it
	// does, and drop that answer.
	cl.unneeded = unneeded
	c.abandon(cl, c.health.Now())
	err := &RequestError{Op: cl.op, Opaque: opaque, Addr: c.addr, Written: true, Err: cause}
	if c.awaitHandle(cl) {
		// The reader is inside handle for this call: let it return first.
		c.mu.Unlock()
		<-cl.done
		c.mu.Lock()
	}
	c.letGo(cl)
	c.mu.Unlock()
	return opaque, err
}

// notNeeded reports whether ctx was canceled because its caller no longer
// needs the answer (its cause wraps ErrNotNeeded).
func notNeeded(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrNotNeeded)
}

// fail ends the connection with err (the first error wins). It does not
// wait: the reader notices the closed socket, waits for the writer and fails
// every request in flight (teardown).
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
	c.writer.wbuf = nil
	return true
}

// closeFailed is fail's second half, run once, without mu.
//
// A TLS connection that failed (anything but Close, or Abort without a
// reason) is closed under its TLS layer, without the close_notify alert:
// crypto/tls waits up to 5 s of real time to send it (unless a Write is in
// progress), and the socket of a node that stopped reading is full, so the
// connection's end, and its requests' failures, would wait on it. Close
// sends the alert only when the socket takes it at once (watchedConn's
// writeClosing): Close does not wait on a node that stopped reading either.
func (c *Conn) closeFailed() {
	close(c.done)
	c.writer.wake() // the writer goroutine waits on kick alone
	c.mu.Lock()
	failed := c.err != kverr.ErrConnectionClosed
	c.mu.Unlock()
	if tc, ok := c.nc.(*tls.Conn); ok && failed {
		tc.NetConn().Close()
		return
	}
	closeNet(c.nc)
}

// teardown runs on the reader goroutine once the connection has ended: it
// waits for the writer to stop, so that the count of written bytes is
// final, then fails every request in flight exactly once.
func (c *Conn) teardown() {
	<-c.writer.exited
	<-c.monitor.exited
	c.mu.Lock()
	for c.writer.inWrite { // a caller's writeInline: its count of written bytes
		c.writer.inWriteDone.Wait()
	}
	cause := c.err
	live := c.callbacks.live
	for cl := range c.inflight.all() {
		if cl.state == reqAbandoned {
			c.drop(cl)
			continue
		}
		written := cl.state == reqWritten
		c.end(cl)
		cl.finish(&RequestError{Op: cl.op, Opaque: cl.opaque, Addr: c.addr,
			Written: written, Err: cause, connEnded: true}, &c.reader.wake)
	}
	c.failSubmitted(cause)
	c.reader.wake.flush()
	c.inflight.close()
	c.mu.Unlock()
	if live && c.opts.OnClose != nil {
		<-c.callbacks.held // Dial is done delivering held server requests: no callback overlaps
		c.opts.OnClose(cause)
	}
	close(c.exited)
}

// Close closes the connection: every request in flight fails with an error
// matching kverr.ErrConnectionClosed. It waits until the connection's
// goroutines have exited, so it must not be called from handle or a callback.
// Closing twice is harmless. It returns nil. Over TLS the close_notify
// alert is sent only if the socket takes it at once: crypto/tls would wait
// up to 5 s (on a connection that ignores write deadlines, until the node
// reads) to send it to a node that stopped reading.
func (c *Conn) Close() error {
	c.fail(kverr.ErrConnectionClosed)
	<-c.exited
	return nil
}

// Abort ends the connection with why, without waiting for its goroutines
// to exit (Close waits): a caller may abort the connection its request was
// answered on, whose reader may still be handing others their answers.
// Every request in flight fails as on Close, with an error matching
// kverr.ErrConnectionClosed and why (a nil why: as on Close). Aborting a
// connection that has ended does nothing.
func (c *Conn) Abort(why error) {
	if why == nil {
		c.fail(kverr.ErrConnectionClosed)
		return
	}
	c.fail(fmt.Errorf("%w: %w", kverr.ErrConnectionClosed, why))
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
// answer has not arrived (tombstones) included; not those still on the
// submission stack (a crowded connection's: see the package doc), which
// the writer has not queued yet.
func (c *Conn) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight.size()
}

// BarrierWait returns how long a barrier sent now (a command outside
// kv_engine's is_reorder_supported: GET_CLUSTER_CONFIG, GET_COLLECTION_ID,
// NOOP, STAT...) may wait, on a connection with UnorderedExecution, for the
// requests in flight that the server answers only by a bound of its own
// (a synchronous write, by its durability timeout; a RANGE_SCAN_CONTINUE,
// by its time limit; abandoned ones included): the time until the latest
// of those bounds, 0 when none is still to come. Every request sent after
// the barrier would wait as long (see the package doc, Health). A
// synchronous write sent with the server's default timeout has no known
// bound and is not counted. (On a connection without UnorderedExecution
// every request waits for the ones before it.)
func (c *Conn) BarrierWait() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight.promised == 0 && c.inflight.evictedBound.IsZero() {
		return 0
	}
	now := c.health.Now()
	if latest := c.latestBound(now); !latest.IsZero() {
		return latest.Sub(now)
	}
	return 0
}

// BarrierFreed is BarrierWait with, when the wait is not 0, a channel
// closed once no request with such a bound is left in flight on the
// connection (each was answered, or its tombstone forgotten), or the
// connection ended: a caller holding a barrier until
// the connection is free of them, rather than sending it behind them,
// wakes then without polling. A request forgotten past MaxAbandoned
// counts in the wait until its bound, not in the channel (which closes
// once the others ended): the caller's wait for the bound covers it. Only
// the requests with such a bound pay for the channel (at their end), and
// only while a caller waits.
func (c *Conn) BarrierFreed() (time.Duration, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight.promised == 0 && c.inflight.evictedBound.IsZero() {
		return 0, nil
	}
	now := c.health.Now()
	latest := c.latestBound(now)
	if latest.IsZero() {
		return 0, nil
	}
	if c.err != nil {
		return 0, nil // ended: its requests fail, nothing is held on it
	}
	if c.inflight.unpromised == nil {
		c.inflight.unpromised = make(chan struct{})
	}
	return latest.Sub(now), c.inflight.unpromised
}

// Awaited returns the number of requests in flight whose callers still
// wait for them: Pending less the tombstones (abandoned requests, whose
// late answer no caller reads).
func (c *Conn) Awaited() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight.active
}

// WritesInFlight is the number of requests on the connection that may
// change data and have no answer yet: queued, written, or abandoned (a
// tombstone: its request may still be applied; one evicted past
// MaxAbandoned counts as one more until a request sent after it is
// answered). A read sent to the same
// server on another connection can overtake them; one sent on this
// connection cannot, since a server answers a connection's requests in
// order. A request on the submission stack, not queued yet, is not
// counted: its Do has not returned, so nothing was promised of it.
func (c *Conn) WritesInFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight.writesInFlight()
}

// readOnly reports whether a request of op only reads
// (memdx.OpCode.IsReadOnly): it cannot change what a later read sees. Any
// other opcode counts as a write (WritesInFlight).
func readOnly(op memdx.OpCode) bool { return op.IsReadOnly() }

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
	// Reads and BytesRead count the reads of the socket (the reader
	// goroutine's, and those of callers that borrowed the read role) and
	// their bytes.
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
	// Submitted counts the requests that callers handed to the writer
	// goroutine without taking the connection's lock, as they do while
	// the connection is crowded (see the package doc).
	Submitted uint64
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	tombs, submitted := c.inflight.tombs, c.sub.queued
	c.mu.Unlock()
	return Stats{Writes: c.writer.writes.Load(), BytesWritten: c.writer.bytesOut.Load(),
		Reads: c.reader.reads.Load(), BytesRead: c.reader.bytesIn.Load(),
		StrayResponses: c.reader.strays.Load(), LateResponses: c.reader.late.Load(),
		Abandoned: tombs, Forgotten: c.inflight.evicted.Load(), Probes: c.monitor.probes.Load(),
		Submitted: submitted}
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

// ClusterConfigStatus returns the status GET_CLUSTER_CONFIG answered during
// bootstrap: success with a config (ClusterConfig), or why there is none:
// KEY_ENOENT from a node that holds no config for the bucket (a memcached
// bucket, whose config the cluster manager serves over HTTP only),
// UNKNOWN_COMMAND or NOT_SUPPORTED from a server without it, NO_BUCKET
// without a bucket on a server that has no global config. 0 when it was
// not sent (memcached mode, Options.NoClusterConfig).
func (c *Conn) ClusterConfigStatus() memdx.Status { return c.configStatus }

// ServerVersion returns what VERSION answered during bootstrap ("" when it
// failed).
func (c *Conn) ServerVersion() string { return c.version }

// Mechanism returns the SASL mechanism used, "" when none was.
func (c *Conn) Mechanism() string { return c.mech }

// Bucket returns the selected bucket, "" when none was.
func (c *Conn) Bucket() string { return c.bucket }
