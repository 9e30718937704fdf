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
// a stray. It is never called once the group has ended (answered, expired,
// cancelled, or failed with the connection).
type GetSink interface {
	GetAnswer(tag uint64, i int, p *memdx.Packet) bool
}

// StartGets queues a group of quiet gets, one per key, each a copy of tmpl
// (GETQ or GETKQ) with its key, followed by the NOOP that settles them, and
// returns at once. When the group is all there is to write (nothing else
// queued, nothing being written, not corked) and the socket is plain TCP,
// StartGets writes it from the calling goroutine, with one non-blocking
// attempt per 64 KiB: it never waits for the socket, and the writer
// goroutine writes what the socket did not take. It is Start for a batch of reads with no per-request
// bookkeeping: the group is one request on the connection (one opaque in
// the pending table, one deadline, one outcome), its gets take the
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
// queued.
func (c *Conn) StartGets(deadline time.Time, tmpl *memdx.Request, keys [][]byte, sink GetSink, n Notifier, tag uint64) (Pending, error) {
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
	cl.deadline = deadline
	cl.notify, cl.tag = n, tag
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
		c.wakeWriter()
	}
	return Pending{c: c, cl: cl, Opaque: opaque}, nil
}

// queueGets encodes a group's gets and its NOOP into wbuf and enqueues cl
// for them. Called with mu held.
func (c *Conn) queueGets(cl *call, tmpl *memdx.Request, keys [][]byte) (bool, error) {
	if c.err != nil {
		return false, &RequestError{Op: tmpl.OpCode, Addr: c.addr, Err: c.err, connEnded: true}
	}
	if c.active >= c.opts.MaxPending {
		return false, &RequestError{Op: tmpl.OpCode, Addr: c.addr, Err: kverr.ErrOverloaded}
	}
	base := c.reserveOpaques(uint32(len(keys)) + 1)
	n0 := len(c.wbuf)
	b := c.wbuf
	for i, k := range keys {
		var err error
		if b, err = tmpl.AppendWithKey(b, k, base+uint32(i)); err != nil {
			c.wbuf = c.wbuf[:n0]
			return false, &RequestError{Op: tmpl.OpCode, Opaque: base + uint32(i), Addr: c.addr, Err: err}
		}
	}
	noop := memdx.Request{OpCode: memdx.OpNoop}
	b, _ = noop.AppendTo(b, base+uint32(len(keys)))
	c.wbuf = b
	cl.gBase = base
	cl.opaque = base + uint32(len(keys))
	cl.start = c.queued
	c.queued += uint64(len(b) - n0)
	cl.end = c.queued
	c.enqueue(cl)
	c.groups = append(c.groups, cl)
	return n0 == 0 && c.corks == 0, nil
}

// reserveOpaques returns the first of n consecutive opaques, none 0 and
// none in use. A run that holds an opaque in use is tried again from just
// past the highest one it holds, so that finding a run costs a pass over
// it per obstacle, not per opaque. Called with mu held.
func (c *Conn) reserveOpaques(n uint32) uint32 {
	for {
		base := c.opaque + 1
		last := base + n - 1
		if base == 0 || last < base {
			c.opaque = 0 // the run would hold 0 or wrap: start again from 1
			c.wrapped = true
			continue
		}
		if !c.wrapped {
			c.opaque = last
			return base
		}
		used, ok := c.lastUsed(base, last)
		if !ok {
			c.opaque = last
			return base
		}
		c.opaque = used
	}
}

// lastUsed returns the highest opaque from first to last that a request
// in flight (a group's gets included) uses, if there is one.
func (c *Conn) lastUsed(first, last uint32) (uint32, bool) {
	var used uint32
	found := false
	for _, g := range c.groups {
		if g.gBase <= last && first <= g.gBase+g.gN {
			if o := min(last, g.gBase+g.gN); !found || o > used {
				used, found = o, true
			}
		}
	}
	for o := last; !found || o > used; o-- {
		c.reserveProbes++
		if _, ok := c.pending[o]; ok {
			return o, true
		}
		if o == first {
			break
		}
	}
	return used, found
}

// groupOf returns the group whose gets include opaque, or nil. Called with
// mu held.
func (c *Conn) groupOf(opaque uint32) *call {
	if g := c.lastGroup; g != nil && opaque-g.gBase < g.gN {
		return g
	}
	for _, g := range c.groups {
		c.groupProbes++
		if opaque-g.gBase < g.gN {
			c.lastGroup = g
			return g
		}
	}
	return nil
}

// unlinkGroup takes cl off the group list. Called with mu held.
func (c *Conn) unlinkGroup(cl *call) {
	if c.lastGroup == cl {
		c.lastGroup = nil
	}
	for i, g := range c.groups {
		if g == cl {
			last := len(c.groups) - 1
			c.groups[i] = c.groups[last]
			c.groups[last] = nil
			c.groups = c.groups[:last]
			return
		}
	}
}

// groupAnswer hands an answer to one of group g's gets to its sink, or
// says why it is a stray. Called with mu held.
func (c *Conn) groupAnswer(g *call, p *memdx.Packet) strayKind {
	switch {
	case p.OpCode != g.gOp:
		return strayWrongOpcode
	case g.state == reqAbandoned:
		return strayLate
	case g.state == reqQueued:
		// The gets' bytes are not in a Write yet. (Once the group's
		// first bytes are, an answer to any of its gets is taken: the
		// group may span several Write calls.)
		return strayUnsent
	}
	if !g.gSink.GetAnswer(g.tag, int(p.Opaque-g.gBase), p) {
		return strayUnknownOpaque
	}
	return 0
}
