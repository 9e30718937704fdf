package conn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// readRole is who reads the socket. One goroutine at a time reads it and
// dispatches what it reads: the reader goroutine, which lends that role to
// a lone caller when it can, so that a caller that sends one request at a
// time waits for its answer in the poller itself, as a plain
// request-response loop does, instead of being woken by the reader
// goroutine: that hand-off woke a second thread per request (a futex wake,
// an idle processor's spin and sleep) and was about half of the client's
// CPU per operation at one goroutine.
//
//	reader ──lendRole──▶ lent ──borrowRole (Do, its caller reads)──▶ borrowed
//	  ▲                   │ ▲                                        │
//	  │  takeRole (any    │ └──── returnRole (nothing in flight) ────┤
//	  │  other request),  │                                          │
//	  │  lendFor, the end │                                          │
//	  └───────────────────┴────── returnRole (anything else) ◀───────┘
//
// The states:
//   - reader: the reader goroutine reads.
//   - lent: the reader goroutine waits (awaitRole); nothing is in flight,
//     and no one reads. The reader goroutine lends the role only when a
//     burst it dispatched handed one caller in Do its outcome and left
//     nothing in flight, no bootstrap request pending, no bytes of a
//     packet read: that caller will likely send again at once.
//   - borrowed: a caller reads (readFor) until its request has ended,
//     dispatching every packet that comes, others' answers included.
//
// A lent role goes to the next caller in Do whose request is a
// single-packet one, and back to the reader goroutine when any other
// request is queued (takeRole:
// the reader goroutine reads its answer), when it stayed lent for lendFor
// without a borrow (a caller that did not come back), or when the
// connection ends. A borrower that has its outcome keeps the role lent
// when nothing is in flight, and gives it back otherwise. Every transition
// is under Conn.mu.
//
// A borrower's read ends when its request does, or when its context is
// done; both interrupt the read the same way (interruptBorrower: the
// socket's read deadline set in the past). A request that expires (the
// monitor) has its outcome when the borrower wakes. A context that is
// done wakes the borrower through context.AfterFunc, registered for the
// read only (readFor): the borrower stops reading, gives the role back
// (its request is still in flight, so to the reader goroutine, which
// keeps whatever part of a packet was read and reads on for the others'
// answers and the late one), and cancels as any caller does (cancel:
// withdrawn if not written, a tombstone otherwise). A caller whose context
// cannot be cancelled registers nothing. The connection's end closes the
// socket, which fails the borrower's read; the teardown runs on the reader
// goroutine once the role is back.
type readRole struct {
	role     roleState // guarded by Conn.mu, as the fields below
	borrower *call     // the call whose caller reads, while borrowed
	// interrupted: the socket's read deadline was set to end a
	// borrower's read (interruptBorrower); cleared with it.
	interrupted bool
	// lends counts the borrows, so that the reader goroutine's timer
	// takes back only a role no one took for lendFor.
	lends uint64
	// lentAt: when the role was last lent (by the reader goroutine, or by
	// a borrower keeping it lent).
	lentAt time.Time
	back   chan struct{} // capacity 1: the role came back to the reader goroutine
	timer  timer         // the reader goroutine's lendFor timer, on the connection's clock
	// onCancel is borrowerCancelled, bound once: a method value made per
	// read would be an allocation per read.
	onCancel func()
	// catchUpHook, when a test sets it, runs as a borrower's catch-up
	// begins, before its read: a cancel's late interrupt can then be made
	// to land there (readrole_cancel_test.go). Nil otherwise.
	catchUpHook func()
}

type roleState uint8

const (
	roleReader roleState = iota
	roleLent
	roleBorrowed
)

// lendFor is how long a lent role waits for its caller to come back before
// the reader goroutine takes it back (and reads again, for a server's
// request or the connection's end, say).
const lendFor = time.Millisecond

// catchUpAfter: a borrower that takes a role lent this long ago or longer
// first reads what came meanwhile (catchUp), before it writes, so that a
// connection the server closed while no one read ends before a request is
// written on it. A caller that comes back sooner writes at once: the reader
// goroutine, reading, would not have noticed the close much sooner either
// (a wake-up takes a few to tens of microseconds). So does a caller whose
// request is sent again anyway if the connection ends after writing it
// (Origin.Resendable).
const catchUpAfter = 20 * time.Microsecond

// lendRole is the reader goroutine, having dispatched a burst that handed
// one caller in Do its outcome, lending the read role if it can. Called
// without mu.
func (c *Conn) lendRole() bool {
	rd := &c.reader
	if rd.raw == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.inflight.size() != 0 || rd.r != rd.w || c.callbacks.heldBack.Load() {
		return false
	}
	rd.role = roleLent
	rd.lentAt = c.clock.Now()
	return true
}

// awaitRole is the reader goroutine waiting, after lendRole, for the role
// to come back: given back (returnRole, or a request queued that its
// caller does not read for), or taken back after lendFor without a borrow.
// It returns false when the connection ended meanwhile: the role is then
// back, and the reader goroutine tears the connection down.
func (c *Conn) awaitRole() bool {
	rd := &c.reader
	c.mu.Lock()
	lends := rd.lends
	c.mu.Unlock()
	if rd.timer == nil {
		rd.timer = c.clock.NewTimer()
	}
	rd.timer.Reset(lendFor)
	defer rd.timer.Stop()
	for {
		select {
		case <-rd.back:
			select {
			case <-c.done: // a borrower saw the connection end
				return false
			default:
				return true
			}
		case <-rd.timer.C():
			c.mu.Lock()
			if rd.role == roleLent && rd.lends == lends {
				rd.role = roleReader
				c.mu.Unlock()
				return true
			}
			lends = rd.lends
			c.mu.Unlock()
			rd.timer.Reset(lendFor)
		case <-c.done:
			c.mu.Lock()
			if rd.role == roleLent {
				rd.role = roleReader
				c.mu.Unlock()
				return false
			}
			c.mu.Unlock()
			<-rd.back // the borrower's read fails on the closed socket
			return false
		}
	}
}

// borrowRole gives the lent role to cl's caller, who reads for cl (cl.reads)
// until it ends (readFor). It reports whether the role has been lent for
// catchUpAfter or longer at now: the caller then reads what came meanwhile
// before it writes (catchUp). Called with mu held, before cl is queued.
//
// now is the reading DoDeadline made for the deadline. A caller without a
// deadline (Do) made none, and the clock is read here, for it alone (the
// client always has a deadline). The reading stays: without it such a
// borrower would have to catch up every time (a system call, costing many
// times a clock reading, on each request of the lone caller in a loop that
// lending serves) or never (a request written on a connection the server
// closed meanwhile ends as written, where it could have been refused
// unwritten and sent again, a mutation included).
func (c *Conn) borrowRole(cl *call, now time.Time) (catchUp bool) {
	rd := &c.reader
	rd.role, rd.borrower = roleBorrowed, cl
	rd.lends++
	cl.borrowed = true
	if now.IsZero() {
		now = c.clock.Now()
	}
	return now.Sub(rd.lentAt) >= catchUpAfter
}

// takeRole gives a lent role back to the reader goroutine when cl, just
// enqueued, is not read for by its caller: the reader goroutine reads cl's
// answer. Called with mu held.
func (c *Conn) takeRole(cl *call) {
	rd := &c.reader
	if rd.role != roleLent || cl.borrowed {
		return
	}
	rd.role = roleReader
	rd.giveBack()
}

// giveBack wakes the reader goroutine waiting for the role (awaitRole).
// Called with mu held, once per lend.
func (rd *reader) giveBack() {
	select {
	case rd.back <- struct{}{}:
	default: // a signal is already there
	}
}

// catchUp is a borrower's first read, one that does not wait, made before
// its request is queued: what arrived while the role was lent (a server's
// request, a late packet, the connection's end) is dispatched first, and a
// connection that ended meanwhile fails before the request is written.
// A read refused because the borrower's read was interrupted reads
// nothing: the interrupt is a cancel's meant for an earlier borrower (its
// AfterFunc ran after readFor had stopped watching), or for this caller's
// context, which readFor's watch, on a context already done, interrupts
// again. Called without mu.
func (c *Conn) catchUp() {
	rd := &c.reader
	if rd.catchUpHook != nil {
		rd.catchUpHook()
	}
	n, err := rd.raw.tryRead(rd.buf[rd.w:])
	c.noteRead(n)
	if n == 0 && err == errWouldBlock {
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.clearInterrupt()
		return
	}
	if perr := c.consume(); perr != nil {
		c.failProtocol(perr)
		return
	}
	c.burstDispatched()
	if err != nil && err != errWouldBlock {
		c.fail(fmt.Errorf("conn %s: read: %w%s", c.addr, err, c.liveHangupHint(err)))
	}
}

// readFor is a borrower reading the socket and dispatching what comes
// until cl, its request, has its outcome on done, or ctx is done; then it
// returns the role. A ctx that can be cancelled is watched for the read
// only: its AfterFunc is stopped before readFor returns. Called without
// mu.
func (c *Conn) readFor(ctx context.Context, cl *call) {
	rd := &c.reader
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, rd.onCancel)
	}
	for len(cl.done) == 0 {
		n, err := rd.raw.readNet(rd.buf[rd.w:])
		c.noteRead(n)
		if perr := c.consume(); perr != nil {
			c.failProtocol(perr)
			break
		}
		c.burstDispatched()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Interrupted: cl expired (its outcome is on done), or ctx
			// is done (wait cancels cl).
			c.clearInterrupt()
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if err != nil {
			c.fail(fmt.Errorf("conn %s: read: %w%s", c.addr, err, c.liveHangupHint(err)))
			break
		}
	}
	if stop != nil {
		stop()
	}
	c.returnRole()
}

// borrowerCancelled runs, on a goroutine of its own (context.AfterFunc),
// when the context of a borrower's caller is done: it interrupts the
// borrower's read. The borrower is the one that registered it, or, if
// stop lost the race to the cancel, a later one: that one finds its own
// context not done and reads on.
func (c *Conn) borrowerCancelled() {
	c.mu.Lock()
	if rd := &c.reader; rd.role == roleBorrowed {
		c.interruptBorrower(rd.borrower)
	}
	c.mu.Unlock()
}

// returnRole is the borrower done reading: the role stays lent when
// nothing is in flight, and goes back to the reader goroutine otherwise.
func (c *Conn) returnRole() {
	rd := &c.reader
	c.mu.Lock()
	defer c.mu.Unlock()
	rd.borrower = nil
	c.clearInterruptLocked()
	if c.err == nil && c.inflight.size() == 0 && rd.r == rd.w {
		rd.role = roleLent
		rd.lentAt = c.clock.Now()
		return
	}
	rd.role = roleReader
	rd.giveBack()
}

// interruptBorrower ends the read of cl's caller, who borrowed the role
// (cl expired, or its caller's context is done): the socket's read
// deadline is set in the past. Called with mu held.
func (c *Conn) interruptBorrower(cl *call) {
	rd := &c.reader
	if rd.role != roleBorrowed || rd.borrower != cl || rd.interrupted {
		return
	}
	rd.interrupted = true
	_ = c.nc.SetReadDeadline(aLongTimeAgo)
}

// clearInterrupt clears the read deadline that ended a borrower's read.
func (c *Conn) clearInterrupt() {
	c.mu.Lock()
	c.reader.interrupted = true // whoever set it, the deadline goes
	c.clearInterruptLocked()
	c.mu.Unlock()
}

func (c *Conn) clearInterruptLocked() {
	if rd := &c.reader; rd.interrupted {
		rd.interrupted = false
		_ = c.nc.SetReadDeadline(time.Time{})
	}
}

// aLongTimeAgo is a read deadline that has passed.
var aLongTimeAgo = time.Unix(1, 0)
