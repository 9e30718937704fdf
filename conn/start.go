package conn

import (
	"fmt"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Notifier is told when requests started with Start have ended, so that
// one goroutine can drive many requests. RequestEnded(tag, answered, err)
// says that the request started with tag has ended, and how (what Result
// will return); its outcome is ready for Pending.Result. When it returns
// true, Wake follows, once the connection has no more outcomes in hand
// (the reader before it waits for more bytes, the deadline monitor after a
// sweep, the teardown of a dying connection): Wake is where the caller is
// woken, so that a burst of answers wakes it once, and a caller that needs
// to see only some outcomes at once (failures, the last one) is woken only
// for those.
//
// Both run on the connection's goroutines, possibly with its lock held:
// they must not block and must not call the connection. RequestEnded is
// called once per request, and not at all for a request whose caller ended
// it with Pending.Cancel; once a caller has taken the outcome of each of
// its requests, no RequestEnded for them is still to come. A Wake may come
// after that: it must then do no harm.
type Notifier interface {
	RequestEnded(tag uint64, answered bool, err error) (wake bool)
	Wake()
}

// Pending is a request started with Start. Its caller collects its outcome
// once, with Result after its Notifier was told, or with Cancel.
type Pending struct {
	c  *Conn
	cl *call
	// Opaque is the opaque the request was sent with.
	Opaque uint32
}

// Start queues req with a fresh opaque and returns at once: the request's
// outcome is reported to n (with tag) when it ends, and collected with
// Result. It is DoDeadline without the wait, for a caller that drives many
// requests from one goroutine (a batch): the outcomes are those of
// DoDeadline, handle is called as for Do (on the goroutine reading the
// connection, the packet valid only during the call), and deadline (zero:
// none) bounds the request in the same way, except that Start does not
// read the clock: a request whose deadline has already passed is expired
// by the monitor at once, perhaps after it was written. The caller checks the deadline first (once for a
// batch that shares one).
//
// Quiet opcodes are accepted: the server answers a quiet request only when
// it does not succeed (GETQ, GETKQ: only when the key is found). The
// caller queues a NOOP after its quiet requests (that NOOP is admitted
// even when the connection has Options.MaxPending requests in flight);
// when the NOOP is answered, every quiet request sent before it that got
// no answer ends with Result's answered false and no error. Quiet requests need a server
// that answers in order: Start refuses them on a connection that
// negotiated unordered execution. Multi-packet opcodes (STAT,
// RANGE_SCAN_CONTINUE) are refused.
//
// Between Cork and Uncork, what Start queues is written in one go when
// Uncork is called. from is as DoDeadline's.
func (c *Conn) Start(deadline time.Time, req *memdx.Request, handle func(*memdx.Packet) error, n Notifier, tag uint64, from *Origin) (Pending, error) {
	if isMulti(req.OpCode) {
		return Pending{}, &RequestError{Op: req.OpCode, Addr: c.addr,
			Err: fmt.Errorf("%s is answered with several packets, which Start does not take: %w", req.OpCode, memdx.ErrInvalidRequest)}
	}
	if n == nil {
		return Pending{}, &RequestError{Op: req.OpCode, Addr: c.addr,
			Err: fmt.Errorf("no Notifier to report the request's end to: %w", memdx.ErrInvalidRequest)}
	}
	quiet := req.OpCode.IsQuiet()
	if err := c.refuseUnorderedQuiet(quiet, req.OpCode); err != nil {
		return Pending{}, err
	}
	cl := getCall()
	cl.handle = handle
	cl.op = req.OpCode
	cl.deadline = deadline
	cl.notify, cl.tag = n, tag
	cl.from = from
	if quiet {
		cl.kind = kindQuiet
	}
	c.mu.Lock()
	// A NOOP after quiet requests is what settles them: it is admitted
	// past MaxPending, or quiet requests that filled the connection
	// could only be taken back.
	bounded := !(req.OpCode == memdx.OpNoop && c.inflight.quiet.tail != nil)
	wake, err := c.queue(cl, req, bounded)
	opaque := cl.opaque
	c.mu.Unlock()
	if err != nil {
		putCall(cl)
		return Pending{}, err
	}
	if wake {
		c.writer.wake()
	}
	return Pending{c: c, cl: cl, Opaque: opaque}, nil
}

// Result takes the outcome of a request whose Notifier was told it ended
// (RequestEnded, with tag; the caller must have seen that call, through
// its own synchronisation, before calling Result). err is what DoDeadline
// would have returned (handle's error, or a *RequestError); answered is
// false when a response never came: the request failed (err says how), or
// it was a quiet request settled by a NOOP's answer (err nil). The Pending
// must not be used afterwards.
func (p Pending) Result() (answered bool, err error) {
	cl := p.cl
	err, answered = cl.outcome, cl.answered
	p.c.leave(cl)
	return answered, err
}

// Cancel is the caller giving up on the request with cause (ctx.Err(),
// say): one still queued is withdrawn (a *RequestError, not written), one
// sent is abandoned (Written: its outcome is unknown; its late answer is
// dropped). The connection stays usable. ended reports that the request
// had already ended: its Notifier has been or will be told, and its
// outcome is then taken with Result as usual. Otherwise the Notifier is
// not told, and the Pending must not be used afterwards.
func (p Pending) Cancel(cause error) (err error, ended bool) {
	c, cl := p.c, p.cl
	c.mu.Lock()
	switch cl.state {
	case reqEnded, reqAbandoned:
		// Answered, expired or failed by the connection first.
		c.mu.Unlock()
		return nil, true
	case reqQueued:
		if c.err != nil {
			c.end(cl) // the connection is ending: its buffers are gone
		} else {
			c.withdraw(cl)
		}
		err = &RequestError{Op: cl.op, Opaque: cl.opaque, Addr: c.addr, Err: cause}
		c.mu.Unlock()
		putCall(cl)
		return err, false
	}
	c.abandon(cl, c.health.Now())
	err = &RequestError{Op: cl.op, Opaque: cl.opaque, Addr: c.addr, Written: true, Err: cause}
	c.letGo(cl)
	c.mu.Unlock()
	return err, false
}

// Cork holds back the writer: requests Start queues from now on wait in
// the write buffer until Uncork, which hands them to the writer at once, so
// that a batch goes out in as few writes as the socket takes. Every Cork
// must be followed by one Uncork, soon: other callers' requests wait too.
func (c *Conn) Cork() { c.cork() }

// Uncork ends a Cork.
func (c *Conn) Uncork() { c.uncork() }

// refuseUnorderedQuiet refuses a quiet opcode on a connection that
// negotiated unordered execution. kv_engine treats quiet commands and NOOP
// as barriers there, so a NOOP would settle them; but conn settles quiet
// requests by a NOOP's answer only where every server answers in order,
// and does not rest a miss (or a quiet write's success) on a server's
// barrier rules: a conservative choice.
func (c *Conn) refuseUnorderedQuiet(quiet bool, op memdx.OpCode) error {
	if !quiet || !c.features.Has(memdx.FeatureUnorderedExecution) {
		return nil
	}
	return &RequestError{Op: op, Addr: c.addr,
		Err: fmt.Errorf("quiet opcode %s on a connection with unordered execution: send it on an ordered connection: %w", op, memdx.ErrInvalidRequest)}
}
