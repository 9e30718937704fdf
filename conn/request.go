package conn

import (
	"context"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// This file is the lifecycle of a request on a connection: its states, and
// the one function for each transition between them. Every transition runs
// with Conn.mu held; the reader, the writer, the monitor and the callers
// never change a call's state any other way.
//
//	queued ──hand-off──▶ sending ──accept──▶ written ──answer──▶ ended
//	   │                    │                   │
//	   │ withdraw           └────── abandon ────┴──▶ abandoned ──drop──▶ ended
//	   ▼                         (cancel, expire)      (late answer, evict,
//	 ended                                              connection end)
//
//   - queued: encoded into a write buffer, no byte handed to a Write call
//     yet. A cancel or an expiry withdraws it: its bytes are cut out and the
//     server never sees it (not written).
//   - sending: some of its bytes have been handed to Write, not all of them
//     accepted by the socket yet. It can no longer be taken back.
//   - written: the socket accepted every byte.
//   - abandoned: its caller left (ctx or deadline) after it was sent: a
//     tombstone that waits for the late answer and drops it. Tombstones do
//     not count against MaxPending; at most MaxAbandoned are kept, the
//     oldest is dropped past that (its answer, if it ever comes, is then a
//     stray).
//   - ended: off every list, out of pending; its outcome (answer or error)
//     has been or is being delivered.
//
// An answer is taken for a request only when the request is written, or
// when its last byte is in the Write call in progress (the socket may have
// taken it, the writer has not said so yet); an answer to one of a group's
// gets (StartGets), once any of the group's bytes are in a Write. Any
// other response is a stray (see dispatchResponse). The Write is the
// writer goroutine's, or a caller's non-blocking write of a group
// (writeInline): the two exclude each other (inWrite, out).
//
// Ownership: the connection holds a call while it is in pending (and the
// reader while it runs handle for a multi-packet answer); the caller holds
// it until it has its outcome. Whoever lets go last pools it (release).

// reqState is where a request is in its lifecycle.
type reqState uint8

const (
	reqQueued reqState = iota
	reqSending
	reqWritten
	reqAbandoned
	reqEnded
)

var reqStateNames = [...]string{"queued", "sending", "written", "abandoned", "ended"}

func (s reqState) String() string { return reqStateNames[s] }

// Which intrusive list a call's lPrev/lNext links it into.
const (
	listNone     = iota
	listDeadline // a live call with a deadline, earliest first
	listTomb     // an abandoned call, oldest first
)

// call is one request on the connection. Calls are pooled: a call goes back
// to the pool only when no one can touch it any more (release).
type call struct {
	handle func(*memdx.Packet) error
	done   chan error // capacity 1: the request's single outcome
	op     memdx.OpCode
	opaque uint32
	state  reqState
	// multi: the server answers with several packets, the last of which
	// ends the request (STAT, RANGE_SCAN_CONTINUE: see final).
	multi bool
	// start and end are the stream offsets of its encoded bytes.
	start, end uint64
	// wPrev/wNext link it into the wire list (queued and sending calls, in
	// stream order) until the socket has accepted all its bytes.
	wPrev, wNext *call
	// lPrev/lNext link it into the deadline list or the tombstone list.
	lPrev, lNext *call
	list         uint8
	deadline     time.Time // zero: none (DoDeadline)
	abandonedAt  time.Time // when it became a tombstone
	// kept: its outcome was sent on done while the connection still held
	// it (an expired tombstone, or the wake-up of a caller that waited for
	// handle). The caller then releases it under mu instead of pooling it.
	kept bool
	// callerGone: the caller has left; the connection pools the call when
	// it lets go of it.
	callerGone bool
	// busy: the reader is inside handle for a non-final packet of a multi
	// answer; waiter: a cancelling caller waits on done for it to return.
	busy, waiter bool
	err          error // first error handle returned (multi)
	// notify, when set (Start), is told tag when the call ends by any
	// means other than its caller's Cancel; the outcome is then in
	// outcome rather than on done.
	notify  Notifier
	tag     uint64
	outcome error
	// quiet: a quiet opcode (Start), on the quiet list (qPrev/qNext)
	// until answered or settled; answered: a response ended it.
	quiet, answered bool
	qPrev, qNext    *call
	// A group of quiet gets (StartGets) is one call, its NOOP: its bytes
	// are the gets' and the NOOP's, gN gets take the opaques from gBase,
	// each of opcode gOp, and their answers go to gSink.
	gSink GetSink
	gBase uint32
	gN    uint32
	gOp   memdx.OpCode
	// timer bounds the wait of a multi-packet call with a deadline: such a
	// call is not swept (its handle may be running when it expires). It
	// stays with the pooled call so that it is reused.
	timer timer
}

// isMulti reports whether the server answers op with several packets:
// STAT (one per statistic, then one with an empty key) and
// RANGE_SCAN_CONTINUE (any number of SUCCESS packets carrying keys or
// documents, then one with RANGE_SCAN_MORE, RANGE_SCAN_COMPLETE or an
// error).
func isMulti(op memdx.OpCode) bool {
	return op == memdx.OpStat || op == memdx.OpRangeScanContinue
}

// final reports whether p ends cl: any packet of a single-packet call; for
// a multi-packet one, a status other than SUCCESS, or (STAT) an empty key.
func (cl *call) final(p *memdx.Packet) bool {
	if !cl.multi || p.Status != memdx.StatusSuccess {
		return true
	}
	return cl.op == memdx.OpStat && len(p.Key) == 0
}

func getCall() *call { return callPool.Get().(*call) }

func putCall(cl *call) {
	done, timer := cl.done, cl.timer
	*cl = call{done: done, timer: timer}
	callPool.Put(cl)
}

// finish delivers cl's outcome: on done, or, for a call started with a
// Notifier, into the call and then to the Notifier (RequestEnded first,
// Wake later, from w). A caller that has taken the outcomes of all its
// requests knows that no RequestEnded for them is still to come.
func (cl *call) finish(err error, w *wakeList) {
	if n := cl.notify; n != nil {
		// Started: the outcome is kept in the call; the Notifier's own
		// synchronisation hands it over (Pending.Result), no channel.
		cl.outcome = err
		if n.RequestEnded(cl.tag, cl.answered, err) {
			w.note(n)
		}
		return
	}
	cl.done <- err
}

// wakeList holds the Notifiers told of ended requests and not yet woken:
// each goroutine that ends requests (the reader, the monitor, the
// teardown) has its own, and wakes them when it has no more outcomes in
// hand.
type wakeList []Notifier

// note adds n, unless it is the last one added (the usual case: one batch
// per burst of answers).
func (w *wakeList) note(n Notifier) {
	if l := len(*w); l > 0 && (*w)[l-1] == n {
		return
	}
	*w = append(*w, n)
}

// flush wakes the Notifiers noted and empties the list.
func (w *wakeList) flush() {
	for i, n := range *w {
		n.Wake()
		(*w)[i] = nil
	}
	*w = (*w)[:0]
}

// enqueue registers cl, just encoded at the end of wbuf: queued.
func (c *Conn) enqueue(cl *call) {
	cl.state = reqQueued
	c.pending[cl.opaque] = cl
	if !readOnly(cl.op) {
		c.writesPending++
	}
	c.active++
	c.batched++
	cl.wPrev = c.wTail
	if c.wTail == nil {
		c.wHead = cl
	} else {
		c.wTail.wNext = cl
	}
	c.wTail = cl
	if c.wQueued == nil {
		c.wQueued = cl
	}
	if cl.quiet {
		cl.qPrev = c.qTail
		if c.qTail == nil {
			c.qHead = cl
		} else {
			c.qTail.qNext = cl
		}
		c.qTail = cl
	}
	if !cl.deadline.IsZero() {
		c.dlInsert(cl)
		if c.dlAt.IsZero() || cl.deadline.Before(c.dlAt) {
			c.armSweeper(cl.deadline)
		}
	}
}

// handOff moves the queued calls that have a byte before c.writing (the end
// of the Write call about to be made) to sending.
func (c *Conn) handOff() {
	for cl := c.wQueued; cl != nil && cl.start < c.writing; cl = cl.wNext {
		if cl.state == reqQueued {
			cl.state = reqSending
		}
		c.wQueued = cl.wNext
	}
}

// accept moves the calls whose last byte the socket has accepted (before
// c.written) from sending to written, and off the wire list.
func (c *Conn) accept() {
	for cl := c.wHead; cl != nil && cl.end <= c.written; cl = c.wHead {
		c.wUnlink(cl)
		if cl.state == reqSending {
			cl.state = reqWritten
		}
	}
}

// answerable reports whether a response may be cl's answer: cl is written,
// or its last byte is in the Write call in progress.
func (c *Conn) answerable(cl *call) bool {
	switch cl.state {
	case reqWritten:
		return true
	case reqSending:
		return cl.end <= c.writing
	}
	return false
}

// withdraw ends a queued call: its bytes are cut out of the buffer that
// holds them and the offsets after them move back. The server never sees
// it.
func (c *Conn) withdraw(cl *call) {
	size := cl.end - cl.start
	if cl.start >= c.flushed { // in wbuf
		from, to := int(cl.start-c.flushed), int(cl.end-c.flushed)
		n := copy(c.wbuf[from:], c.wbuf[to:])
		c.wbuf = c.wbuf[:from+n]
		c.batched--
	} else { // in the writer's batch, after the Write in progress
		from, to := int(cl.start-c.outBase), int(cl.end-c.outBase)
		n := copy(c.out[from:], c.out[to:])
		c.out = c.out[:from+n]
		c.flushed -= size
	}
	c.queued -= size
	for o := cl.wNext; o != nil; o = o.wNext {
		o.start -= size
		o.end -= size
	}
	c.end(cl)
}

// abandon makes a call whose caller left after it was sent a tombstone: it
// stays in pending until its late answer (dropped), and no longer counts as
// live. Past MaxAbandoned tombstones the oldest is dropped.
func (c *Conn) abandon(cl *call, now time.Time) {
	if cl.list == listDeadline {
		c.lUnlink(cl)
	}
	cl.state = reqAbandoned
	cl.abandonedAt = now
	c.active--
	c.tombs++
	c.lAppendTomb(cl)
	if c.tombs > c.opts.MaxAbandoned {
		old := c.tombHead
		c.evicted.Add(1)
		if !readOnly(old.op) && old.end > c.evictedWrite {
			c.evictedWrite = old.end // it may still be applied (WritesInFlight)
		}
		c.drop(old)
	}
	c.healthNoteTomb(cl)
}

// end takes a live call out of pending and its lists: ended. Its outcome
// is the caller's business (a response, or an error on done).
func (c *Conn) end(cl *call) {
	delete(c.pending, cl.opaque)
	if !readOnly(cl.op) {
		c.writesPending--
	}
	if cl.quiet {
		c.qUnlink(cl)
	}
	if cl.gN != 0 {
		c.unlinkGroup(cl)
	}
	if cl.list != listNone {
		c.lUnlink(cl)
	}
	if c.onWire(cl) { // answered while its last Write was in progress
		c.wUnlink(cl)
	}
	cl.state = reqEnded
	c.active--
}

// drop takes a tombstone out of pending: ended. It pools the call when its
// caller has left and the reader is not inside its handle.
func (c *Conn) drop(cl *call) {
	delete(c.pending, cl.opaque)
	if !readOnly(cl.op) {
		c.writesPending--
	}
	if cl.quiet {
		c.qUnlink(cl)
	}
	if cl.gN != 0 {
		c.unlinkGroup(cl)
	}
	c.lUnlink(cl)
	if c.onWire(cl) {
		c.wUnlink(cl)
	}
	cl.state = reqEnded
	c.tombs--
	c.release(cl)
}

// release pools cl if no one holds it any more. Called with mu held.
func (c *Conn) release(cl *call) {
	if cl.state == reqEnded && cl.callerGone && !cl.busy {
		putCall(cl)
	}
}

// leave is the caller letting go of cl after it received its outcome.
func (c *Conn) leave(cl *call) {
	if !cl.kept {
		putCall(cl) // the connection let go before sending the outcome
		return
	}
	c.mu.Lock()
	cl.callerGone = true
	c.release(cl)
	c.mu.Unlock()
}

// expire ends a call whose deadline has passed (the monitor): a queued one
// is withdrawn, a sent one abandoned. The outcome goes on done.
func (c *Conn) expire(cl *call, now time.Time, w *wakeList) {
	written := cl.state != reqQueued
	if written {
		c.abandon(cl, now)
		cl.kept = true
	} else {
		c.withdraw(cl)
	}
	cl.finish(&RequestError{Op: cl.op, Opaque: cl.opaque, Addr: c.addr, Written: written, Err: context.DeadlineExceeded}, w)
}

// settleQuiet ends the quiet calls sent before noop, which is being
// answered: the server has processed them (it answers a connection's
// requests in order; Start refuses quiet opcodes under unordered
// execution), so those still unanswered will never be: their success
// (or miss, for a quiet get) was not sent. Each ends with no error and
// answered false; a tombstone among them is dropped.
func (c *Conn) settleQuiet(noop *call, w *wakeList) {
	for q := c.qHead; q != nil && q.end <= noop.start; q = c.qHead {
		if q.state == reqAbandoned {
			c.drop(q)
			continue
		}
		c.end(q)
		q.finish(nil, w)
	}
	// So are the groups of quiet gets sent before it whose own NOOP's
	// answer did not come: they end answered (their gets were processed).
	for i := 0; i < len(c.groups); {
		g := c.groups[i]
		if g == noop || g.end > noop.start {
			i++
			continue
		}
		// Both take g off c.groups, moving another into its place.
		if g.state == reqAbandoned {
			c.drop(g)
			continue
		}
		c.end(g)
		g.answered = true
		g.finish(nil, w)
	}
}

// qUnlink takes cl off the quiet list.
func (c *Conn) qUnlink(cl *call) {
	if cl.qPrev == nil {
		if c.qHead != cl {
			return // not on the list
		}
		c.qHead = cl.qNext
	} else {
		cl.qPrev.qNext = cl.qNext
	}
	if cl.qNext == nil {
		c.qTail = cl.qPrev
	} else {
		cl.qNext.qPrev = cl.qPrev
	}
	cl.qPrev, cl.qNext = nil, nil
}

// onWire reports whether cl is on the wire list.
func (c *Conn) onWire(cl *call) bool { return cl.wPrev != nil || c.wHead == cl }

// wUnlink takes cl off the wire list.
func (c *Conn) wUnlink(cl *call) {
	if c.wQueued == cl {
		c.wQueued = cl.wNext
	}
	if cl.wPrev == nil {
		c.wHead = cl.wNext
	} else {
		cl.wPrev.wNext = cl.wNext
	}
	if cl.wNext == nil {
		c.wTail = cl.wPrev
	} else {
		cl.wNext.wPrev = cl.wPrev
	}
	cl.wPrev, cl.wNext = nil, nil
}

// dlInsert links cl into the deadline list at its place: at the tail when
// its deadline is the latest, which it nearly always is.
func (c *Conn) dlInsert(cl *call) {
	at := c.dlTail
	for at != nil && at.deadline.After(cl.deadline) {
		at = at.lPrev
	}
	cl.lPrev = at
	if at == nil {
		cl.lNext = c.dlHead
		c.dlHead = cl
	} else {
		cl.lNext = at.lNext
		at.lNext = cl
	}
	if cl.lNext == nil {
		c.dlTail = cl
	} else {
		cl.lNext.lPrev = cl
	}
	cl.list = listDeadline
}

// lAppendTomb links cl at the tail of the tombstone list.
func (c *Conn) lAppendTomb(cl *call) {
	cl.lPrev, cl.lNext = c.tombTail, nil
	if c.tombTail == nil {
		c.tombHead = cl
	} else {
		c.tombTail.lNext = cl
	}
	c.tombTail = cl
	cl.list = listTomb
}

// lUnlink takes cl out of the list it is in.
func (c *Conn) lUnlink(cl *call) {
	head, tail := &c.dlHead, &c.dlTail
	if cl.list == listTomb {
		head, tail = &c.tombHead, &c.tombTail
	}
	if cl.lPrev == nil {
		*head = cl.lNext
	} else {
		cl.lPrev.lNext = cl.lNext
	}
	if cl.lNext == nil {
		*tail = cl.lPrev
	} else {
		cl.lNext.lPrev = cl.lPrev
	}
	cl.lPrev, cl.lNext, cl.list = nil, nil, listNone
}
