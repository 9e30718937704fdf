package conn

import (
	"errors"
	"net"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Origin says what a request was sent for, for the orphan report (Couchbase
// SDK RFC 0067): the operation, when its caller sent it and with what
// timeout. A caller that has one passes it to DoDeadline, Start or
// StartGets. The connection keeps only the pointer while the request is in
// flight and copies what it points to when the request is abandoned (a
// tombstone keeps the copy for Options.OnOrphan), so the caller must leave
// it unchanged until DoDeadline returns, or until it has taken the
// request's Result or cancelled it. A nil Origin is allowed: an orphan of
// that request says only its opcode.
//
// Sent is also the connection's last activity (LastActivity): the caller
// reads the clock for its own reasons (a deadline, a latency), and the
// connection, which reads no clock per request, takes that reading.
type Origin struct {
	// Operation is the caller's name for the operation ("get"); "" for
	// none.
	Operation string
	// Sent is when the caller sent the request, on its own clock; zero
	// when unknown.
	Sent time.Time
	// Timeout is the timeout the caller gave the request; 0 for none.
	Timeout time.Duration
	// SentIsNow says that Sent is a reading of the system clock made just
	// before DoDeadline was called (nothing but routing and encoding
	// between, microseconds): DoDeadline then takes Sent as the current
	// time for its check that the deadline has not passed, rather than
	// reading the clock a second time for the same request. A request
	// whose deadline falls in those microseconds is then written and
	// expires as soon as it is swept, as one whose deadline falls just
	// after the check always could. Leave it false when Sent comes from
	// another clock (a fake one) or is older.
	SentIsNow bool
	// Resendable says that the caller sends the request again should its
	// connection end after it was written, as it would were the request
	// refused for a connection found ended before (the client: an
	// idempotent request to its key's node, under one of its own retry
	// strategies): a borrower of the read role then writes it without
	// first reading what came while the role was lent (catchUp,
	// readrole.go). The catch-up is there to fail a request on a
	// connection the server closed meanwhile as not written, so that even
	// a mutation can be sent again; for a request its caller resends
	// either way, it is a system call per request for nothing (a
	// connection used every few dozen microseconds, as each of a
	// cluster's by one goroutine, borrows a role lent 20 µs ago or more
	// every time). The request's end then reads as a close in flight, not
	// as a refusal, in its retry reasons.
	Resendable bool
	// Barrier says that the request is a barrier its caller holds rather
	// than send behind a request the server answers only by a bound of its
	// own (BarrierWait: a synchronous write, a range scan's continue),
	// having found the connection free of them: when, as it is queued, the
	// connection has one after all (queued meanwhile by another caller),
	// the request is refused, not written, with ErrBoundedAhead, for its
	// caller to hold it. The check is made where the order of the
	// requests on the wire is decided, under the connection's lock.
	Barrier bool
	// Queued, when not nil, is called by DoDeadline on the caller's
	// goroutine once the request is queued on the connection (it may be
	// written already), before DoDeadline waits for its answer; never
	// for a request refused unqueued (ErrBoundedAhead, the connection
	// ended, ErrOverloaded): a caller that reports an attempt only once
	// it was sent (a barrier, which may be refused) reports it there.
	// The caller then waits for the answer without borrowing the
	// connection's read role (readrole.go), so that Queued, which may run
	// the caller's code, never holds other requests' answers. Should
	// Queued panic, the request is given up (withdrawn, or abandoned with
	// its answer unneeded) before the panic goes on. Orphans carry none.
	Queued QueuedHook
}

// QueuedHook is told that a request was queued on its connection
// (Origin.Queued).
type QueuedHook interface {
	Queued()
}

// ErrBoundedAhead is the cause of a request refused, not written, because
// its Origin says it is a barrier and the connection had a request ahead
// of it that the server answers only by a bound of its own (Origin.Barrier).
var ErrBoundedAhead = errors.New("a request the server answers only by a bound of its own is ahead on the connection; a barrier is not sent behind it")

// Orphan is a late answer: the response to a request whose caller left
// after it was sent (its context ended or its deadline passed; it was a
// tombstone), as Options.OnOrphan receives it. It holds no key or value.
type Orphan struct {
	// Origin is the request's, as its caller gave it (zero when it gave
	// none).
	Origin
	OpCode memdx.OpCode
	Opaque uint32
	Status memdx.Status
	// ConnID, LocalAddr and RemoteAddr are the connection's (ID,
	// LocalAddr, RemoteAddr).
	ConnID                string
	LocalAddr, RemoteAddr string
	// Abandoned is when the caller left; Arrived when the answer was
	// read. Both are readings of Options.Clock (the system clock when it
	// is nil), the clock a caller that set it reads Sent on too.
	Abandoned, Arrived time.Time
	// ServerDuration is the time the server says it spent on the request
	// (the answer's server-duration frame info, on a connection that
	// negotiated HELLO Tracing), when HasServerDuration.
	ServerDuration    time.Duration
	HasServerDuration bool
}

// orphanOf describes tombstone cl's final answer p, which arrived now.
// Called with mu held; p is valid only during the reader's dispatch of it.
func (c *Conn) orphanOf(cl *call, p *memdx.Packet, now time.Time) Orphan {
	o := Orphan{Origin: cl.orphan, OpCode: cl.op, Opaque: cl.opaque, Status: p.Status,
		ConnID: c.id, LocalAddr: c.localAddr, RemoteAddr: c.remoteAddr, Abandoned: cl.abandonedAt, Arrived: now}
	o.ServerDuration, o.HasServerDuration = p.ServerDuration()
	return o
}

// noteActivity records t as the connection's last activity when it is the
// latest seen. Called with mu held.
func (c *Conn) noteActivity(t time.Time) {
	if n := t.UnixNano(); n > c.lastActive {
		c.lastActive = n
	}
}

// LastActivity returns the time of the connection's last activity as far
// as it knows without reading a clock per request: the latest of its
// bootstrap's end, the Sent time of each request's Origin, and the arrival
// of late answers (orphans). It is what diagnostics report.
func (c *Conn) LastActivity() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Unix(0, c.lastActive)
}

// LocalAddr returns the socket's local address ("ip:port").
func (c *Conn) LocalAddr() string { return c.localAddr }

// RemoteAddr returns the socket's remote address ("ip:port"): the address
// the connection reached, which may differ from Addr (a host name, a
// proxy).
func (c *Conn) RemoteAddr() string { return c.remoteAddr }

// addrString is a's text, "" for none.
func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// ErrNotNeeded, wrapped by the cause of a caller's context
// (context.WithCancelCause), says that the caller gave its request up, as
// it meant to, because it no longer needs the answer: another request
// answered for it (the read of one copy of a document that another copy's
// read beat). A late answer to that request is expected: it is counted
// (Stats.LateResponses, StrayResponses) but is no orphan
// (Options.OnOrphan) and is not logged as a stray response, both of which
// say that something went wrong.
var ErrNotNeeded = errors.New("the answer is no longer needed")
