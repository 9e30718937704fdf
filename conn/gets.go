package conn

import (
	"fmt"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// GetSink receives the answers to a group of quiet gets (StartGets).
//
// GetAnswer is called on the connection's reader for each answer to one of
// the group's gets (a hit, or a failure status: a quiet get that misses is
// not answered), with i the get's index in the group and tag the group's.
// It runs with the connection's lock held and the packet valid only during
// the call: it must only record the answer (copying what it keeps), never
// block, and never call the connection. It reports false for an answer it
// does not take (a second answer to the same get), which is then counted as
// a stray. An error wrapping kverr.ErrProtocol says the answer is not the
// get's at all (a GETKQ answer naming another key than the get's): the
// server has mixed up its answers, and the connection closes with a
// *ProtocolError wrapping it before anything read after the answer is
// dispatched (the NOOP after the gets settles nothing), so the group ends
// with the connection's error. It is never called once the group has ended
// (answered, expired, cancelled, or failed with the connection).
type GetSink interface {
	GetAnswer(tag uint64, i int, p *memdx.Packet) (taken bool, err error)
}

// StartGets queues a group of quiet gets, one per key, each a copy of tmpl
// (GETQ or GETKQ) with its key, followed by the NOOP that settles them, and
// returns at once. When the group is all there is to write (nothing else
// queued, nothing being written, not corked) and the socket is plain TCP,
// StartGets writes it from the calling goroutine, with one non-blocking
// attempt per 64 KiB: it never waits for the socket, and the writer
// goroutine writes what the socket did not take. It is Start for a batch of reads with no per-request
// bookkeeping: the group is one request on the connection (one opaque in
// the in-flight table, one deadline, one outcome), its gets take the
// opaques just before the NOOP's, and their answers go to sink as they
// arrive. The group's outcome is the NOOP's, reported to n with tag and
// taken with Pending.Result, as Start's: answered true means the server
// processed every get before the NOOP, so a get sink was not told of
// missed; otherwise err says why the group ended (an expired deadline, the
// connection's end: a *RequestError whose Op is NOOP) and the gets sink was
// not told of have no outcome. Pending.Cancel withdraws or abandons the
// whole group; sink is told of nothing after it returns.
//
// The group counts as one request against Options.MaxPending: its caller
// bounds the gets it puts in one. Quiet gets need a server that answers in
// order: StartGets refuses them on a connection that negotiated unordered
// execution. A key the codec refuses fails the group before anything is
// queued. from is as DoDeadline's: an abandoned group whose NOOP is
// answered late is one orphan.
func (c *Conn) StartGets(deadline time.Time, tmpl *memdx.Request, keys [][]byte, sink GetSink, n Notifier, tag uint64, from *Origin) (Pending, error) {
	op := tmpl.OpCode
	switch {
	case op != memdx.OpGetQ && op != memdx.OpGetKQ:
		return Pending{}, &RequestError{Op: op, Addr: c.addr,
			Err: fmt.Errorf("StartGets sends quiet gets, not %s: %w", op, memdx.ErrInvalidRequest)}
	case len(keys) == 0 || n == nil || sink == nil:
		return Pending{}, &RequestError{Op: op, Addr: c.addr,
			Err: fmt.Errorf("a group of gets needs keys, a sink and a Notifier: %w", memdx.ErrInvalidRequest)}
	}
	if err := c.refuseUnorderedQuiet(true, op); err != nil {
		return Pending{}, err
	}
	cl := getCall()
	cl.op = memdx.OpNoop
	cl.kind = kindGroup
	cl.deadline = deadline
	cl.notify, cl.tag = n, tag
	cl.from = from
	cl.gSink, cl.gOp, cl.gN = sink, op, uint32(len(keys))
	c.mu.Lock()
	wake, err := c.queueGets(cl, tmpl, keys)
	opaque := cl.opaque
	failed := false
	if err == nil && wake {
		// The group is all there is to write: write it from here.
		wake, failed = c.writeInline()
	}
	c.mu.Unlock()
	if err != nil {
		putCall(cl)
		return Pending{}, err
	}
	if failed {
		c.closeFailed()
	}
	if wake {
		c.writer.wake()
	}
	return Pending{c: c, cl: cl, Opaque: opaque}, nil
}

// queueGets encodes a group's gets and its NOOP into the write buffer and
// enqueues cl for them. Called with mu held.
func (c *Conn) queueGets(cl *call, tmpl *memdx.Request, keys [][]byte) (bool, error) {
	if c.err != nil {
		return false, &RequestError{Op: tmpl.OpCode, Addr: c.addr, Err: c.err, connEnded: true}
	}
	if c.inflight.active >= c.opts.MaxPending {
		return false, &RequestError{Op: tmpl.OpCode, Addr: c.addr, Err: kverr.ErrOverloaded}
	}
	base := c.inflight.reserve(uint32(len(keys)) + 1)
	b := c.writer.wbuf
	for i, k := range keys {
		var err error
		if b, err = tmpl.AppendWithKey(b, k, base+uint32(i)); err != nil {
			return false, &RequestError{Op: tmpl.OpCode, Opaque: base + uint32(i), Addr: c.addr, Err: err}
		}
	}
	noop := memdx.Request{OpCode: memdx.OpNoop}
	b, _ = noop.AppendTo(b, base+uint32(len(keys)))
	cl.gBase = base
	cl.opaque = base + uint32(len(keys))
	wake := c.writer.commit(cl, b)
	c.enqueue(cl)
	if cl.from != nil {
		c.noteActivity(cl.from.Sent)
	}
	return wake, nil
}

// groupAnswer hands an answer to one of group g's gets to its sink, or
// says why it is a stray, or that it is a protocol violation (the sink
// found it is another get's). Called with mu held.
func (c *Conn) groupAnswer(g *call, p *memdx.Packet) (strayKind, *ProtocolError) {
	switch {
	case p.OpCode != g.gOp:
		return strayWrongOpcode, nil
	case g.state == reqAbandoned:
		return strayLate, nil
	case g.state == reqQueued:
		// The gets' bytes are not in a Write yet. (Once the group's
		// first bytes are, an answer to any of its gets is taken: the
		// group may span several Write calls.)
		return strayUnsent, nil
	}
	taken, err := g.gSink.GetAnswer(g.tag, int(p.Opaque-g.gBase), p)
	if err != nil {
		return 0, c.foreignAnswer(p, err)
	}
	if !taken {
		return strayUnknownOpaque, nil
	}
	return 0, nil
}

// foreignAnswer is the violation of a response that its request's handle
// (or a group's sink) found is not its request's: err wraps
// kverr.ErrProtocol and says why.
func (c *Conn) foreignAnswer(p *memdx.Packet, err error) *ProtocolError {
	return &ProtocolError{Addr: c.addr, Err: err,
		What: fmt.Sprintf("the %s answer with opaque %d answers another request", p.OpCode, p.Opaque)}
}
