package conn

import (
	"context"
	"sync"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// This file is the lifecycle of a request on a connection: its states, and
// the one function for each transition between them. Every transition runs
// with Conn.mu held but one: a caller pushing its own call onto the
// submission stack (submitted), which only a holder of mu takes it off.
// The reader, the writer, the monitor and the callers never change a
// call's state any other way.
//
//	submitted ──queue──▶ queued ──hand-off──▶ sending ──accept──▶ written ──answer──▶ ended
//	   │                    │                    │                   │
//	   │ withdraw,          │ withdraw           └────── abandon ────┴──▶ abandoned ──drop──▶ ended
//	   ▼ failed             ▼                         (cancel, expire)      (late answer, evict,
//	 ended                ended                                              connection end)
//
//   - submitted: a Do call on a crowded connection's submission stack
//     (submit.go), pushed without the lock; the writer queues it. Not in
//     the table, no opaque, no bytes: a cancel withdraws it, an error at
//     queueing or the connection's end fails it, never written.
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
//   - ended: off every list, out of the in-flight table; its outcome
//     (answer or error) has been or is being delivered.
//
// An answer is taken for a request only when the request is written, or
// when its last byte is in the Write call in progress (the socket may have
// taken it, the writer has not said so yet); an answer to one of a group's
// gets (StartGets), once any of the group's bytes are in a Write. Any
// other response is a stray (see dispatchResponse). The Write is the
// writer goroutine's, or a caller's non-blocking write of a group
// (writeInline): the two exclude each other (writer.inWrite, writer.out).
//
// Ownership is one value per call (owner), set only by the functions
// below: the connection holds a call while it is in the in-flight table
// (and the reader while it runs handle for a multi-packet answer); the
// caller holds it until it has its outcome. Whoever lets go last pools it
// (release, leave).

// reqState is where a request is in its lifecycle.
type reqState uint8

const (
	reqQueued reqState = iota
	reqSending
	reqWritten
	reqAbandoned
	reqEnded
	reqSubmitted
)

var reqStateNames = [...]string{"queued", "sending", "written", "abandoned", "ended", "submitted"}

func (s reqState) String() string { return reqStateNames[s] }

// owner says who holds a call besides the table: the caller, the reader
// inside handle, or no one but the connection. Whoever lets go last pools
// the call (release, leave). The transitions below are the only places
// that change it.
type owner uint8

const (
	// ownCaller: the caller holds the call until it has its outcome (and
	// the connection holds it while it is in the table). When the
	// connection let go before sending the outcome, the caller pools it
	// without taking the lock (leave).
	ownCaller owner = iota
	// ownHandle: as ownCaller, and the reader is inside handle for a
	// non-final packet of a multi-packet answer (handleBegins).
	ownHandle
	// ownHandleWaited: as ownHandle, and a cancelling caller waits on done
	// for handle to return (cancel).
	ownHandleWaited
	// ownKept: the call's outcome went on done while the connection still
	// held it (an expired tombstone, or the wake-up of a caller that
	// waited for handle): the caller lets go under the lock (leave).
	ownKept
	// ownConn: the caller has let go; the connection pools the call when
	// it ends (release).
	ownConn
)

var ownerNames = [...]string{"caller", "caller, reader in handle", "caller waiting for handle", "caller, outcome kept", "connection"}

func (o owner) String() string { return ownerNames[o] }

// callKind is what kind of request a call is, which says how it is
// answered and which of the table's lists it joins.
type callKind uint8

const (
	// kindSingle: answered with one packet.
	kindSingle callKind = iota
	// kindMulti: answered with several packets, the last of which ends it
	// (STAT, RANGE_SCAN_CONTINUE: see final).
	kindMulti
	// kindQuiet: a quiet opcode (Start), answered only when it does not
	// succeed; on the table's quiet list until answered or settled.
	kindQuiet
	// kindGroup: a group of quiet gets and their NOOP (StartGets).
	kindGroup
)

// call is one request on the connection. Calls are pooled: a call goes back
// to the pool only when no one can touch it any more (release).
type call struct {
	handle func(*memdx.Packet) error
	done   chan error // capacity 1: the request's single outcome
	op     memdx.OpCode
	kind   callKind
	state  reqState
	owner  owner
	// answered: a response ended it (Result's answered).
	answered bool
	opaque   uint32
	// start and end are the stream offsets of its encoded bytes.
	start, end uint64
	// links place it on the writer's wire list and the table's lists
	// (see linkSlot).
	links       [numLinkSlots]link
	deadline    time.Time // zero: none (DoDeadline)
	abandonedAt time.Time // when it became a tombstone
	err         error     // first error handle returned (multi)
	// answerBy, when not zero, is when the server is bound to have
	// answered: a synchronous write's durability timeout, a range-scan
	// continue's time limit (answerIn, answerWithin), counted from when
	// the socket took its last byte (answerWritten), and until then from
	// its queueing. The health check reads it.
	answerBy time.Time
	answerIn time.Duration
	// from is the caller's Origin (nil: none), valid while the caller
	// waits for the outcome; orphan is the copy a tombstone keeps of it.
	from   *Origin
	orphan Origin
	// unneeded: its caller gave it up because it no longer needs the
	// answer (ErrNotNeeded): its late answer is expected, no orphan.
	unneeded bool
	// notify, when set (Start), is told tag when the call ends by any
	// means other than its caller's Cancel; the outcome is then in
	// outcome rather than on done.
	notify  Notifier
	tag     uint64
	outcome error
	// reads: its caller reads the socket for it if the read role is lent
	// (Do: readrole.go); borrowed: it did.
	reads, borrowed bool
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
	// req and subNext: a Do call on the submission stack (submit.go), its
	// request and the call pushed before it.
	req     *memdx.Request
	subNext *call
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
	if cl.kind != kindMulti || p.Status != memdx.StatusSuccess {
		return true
	}
	return cl.op == memdx.OpStat && len(p.Key) == 0
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan error, 1)} }}

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

// enqueue registers cl, just encoded at the end of the write buffer
// (writer.commit): queued.
func (c *Conn) enqueue(cl *call) {
	cl.state = reqQueued
	c.inflight.add(cl)
	c.writer.addToWire(cl)
	c.takeRole(cl)
	if !cl.deadline.IsZero() && (c.monitor.dlAt.IsZero() || cl.deadline.Before(c.monitor.dlAt)) {
		c.armSweeper(cl.deadline)
	}
}

// handOff moves the queued calls that have a byte before writer.writing
// (the end of the Write call about to be made) to sending.
func (c *Conn) handOff() {
	w := &c.writer
	for cl := w.sendNext; cl != nil && cl.start < w.writing; cl = w.wire.next(cl) {
		if cl.state == reqQueued {
			cl.state = reqSending
		}
		w.sendNext = w.wire.next(cl)
	}
}

// accept moves the calls whose last byte the socket has accepted (before
// writer.written) from sending to written, and off the wire list.
func (c *Conn) accept() {
	w := &c.writer
	for cl := w.wire.head; cl != nil && cl.end <= w.written; cl = w.wire.head {
		w.unlinkWire(cl)
		if cl.state == reqSending {
			cl.state = reqWritten
		}
		if cl.answerIn != 0 {
			c.answerWritten(cl)
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
		return cl.end <= c.writer.writing
	}
	return false
}

// withdraw ends a queued call: its bytes are cut out of the buffer that
// holds them (writer.cut). The server never sees it.
func (c *Conn) withdraw(cl *call) {
	c.writer.cut(cl)
	c.end(cl)
}

// abandon makes a call whose caller left after it was sent a tombstone: it
// stays in the table until its late answer (dropped), and no longer counts
// as live. Past MaxAbandoned tombstones the oldest is dropped.
func (c *Conn) abandon(cl *call, now time.Time) {
	t := &c.inflight
	t.bury(cl)
	cl.state = reqAbandoned
	cl.abandonedAt = now
	if cl.from != nil {
		cl.orphan = *cl.from // the caller may reuse it once it has left
		cl.orphan.Queued = nil
		cl.from = nil
	}
	if t.tombs > c.opts.MaxAbandoned {
		old := t.tombstones.head
		t.evicted.Add(1)
		if !readOnly(old.op) && old.end > t.evictedWrite {
			t.evictedWrite = old.end // it may still be applied (WritesInFlight)
		}
		if old.answerBy.After(t.evictedBound) {
			t.evictedBound = old.answerBy // the node may hold it till then (latestBound)
		}
		c.drop(old)
	}
	c.healthNoteTomb(cl)
}

// end takes a live call out of the table and off every list: ended. Its
// outcome is the caller's business (a response, or an error on done).
func (c *Conn) end(cl *call) {
	c.inflight.remove(cl)
	c.writer.leaveWire(cl) // answered while its last Write was in progress
	cl.state = reqEnded
}

// drop takes a tombstone out of the table: ended. It pools the call when
// its caller has let go (release).
func (c *Conn) drop(cl *call) {
	c.inflight.remove(cl)
	c.writer.leaveWire(cl)
	cl.state = reqEnded
	c.release(cl)
}

// release pools cl if no one holds it any more: it has ended and its
// caller has let go.
func (c *Conn) release(cl *call) {
	if cl.state == reqEnded && cl.owner == ownConn {
		putCall(cl)
	}
}

// letGo is the caller letting go of a call the connection may still hold
// (a tombstone): the connection pools it when it ends.
func (c *Conn) letGo(cl *call) {
	cl.owner = ownConn
	c.release(cl)
}

// leave is the caller letting go of cl after it received its outcome.
// Called without mu.
func (c *Conn) leave(cl *call) {
	if cl.owner != ownKept {
		putCall(cl) // the connection let go before sending the outcome
		return
	}
	c.mu.Lock()
	c.letGo(cl)
	c.mu.Unlock()
}

// handleBegins: the reader is about to run handle, without mu, for a
// non-final packet of cl's multi-packet answer; a caller that cancels
// meanwhile waits for it to return (awaitHandle).
func (c *Conn) handleBegins(cl *call) { cl.owner = ownHandle }

// handleReturns: that handle has returned. It reports whether a cancelling
// caller waits for it: the reader then sends on done, and the call is kept
// (the caller lets go of it under mu).
func (c *Conn) handleReturns(cl *call) (wake bool) {
	if cl.owner == ownHandleWaited {
		cl.owner = ownKept
		return true
	}
	cl.owner = ownCaller
	return false
}

// awaitHandle is a cancelling caller asking whether the reader is inside
// cl's handle: if so, the caller must wait on done for it to return before
// letting go.
func (c *Conn) awaitHandle(cl *call) bool {
	if cl.owner != ownHandle {
		return false
	}
	cl.owner = ownHandleWaited
	return true
}

// expire ends a call whose deadline has passed (the monitor): a queued one
// is withdrawn, a sent one abandoned. The outcome goes on done.
func (c *Conn) expire(cl *call, now time.Time, w *wakeList) {
	written := cl.state != reqQueued
	if written {
		c.abandon(cl, now)
		cl.owner = ownKept
	} else {
		c.withdraw(cl)
	}
	cl.finish(&RequestError{Op: cl.op, Opaque: cl.opaque, Addr: c.addr, Written: written, Err: context.DeadlineExceeded}, w)
	c.interruptBorrower(cl)
}

// settleQuiet ends the quiet calls sent before noop, which is being
// answered: the server has processed them (it answers a connection's
// requests in order; Start refuses quiet opcodes under unordered
// execution), so those still unanswered will never be: their success
// (or miss, for a quiet get) was not sent. Each ends with no error and
// answered false; a tombstone among them is dropped.
func (c *Conn) settleQuiet(noop *call, w *wakeList) {
	t := &c.inflight
	for q := t.quiet.head; q != nil && q.end <= noop.start; q = t.quiet.head {
		if q.state == reqAbandoned {
			c.drop(q)
			continue
		}
		c.end(q)
		q.finish(nil, w)
	}
	// So are the groups of quiet gets sent before it whose own NOOP's
	// answer did not come: they end answered (their gets were processed).
	for i := 0; i < len(t.groups); {
		g := t.groups[i]
		if g == noop || g.end > noop.start {
			i++
			continue
		}
		// Both take g off t.groups, moving another into its place.
		if g.state == reqAbandoned {
			c.drop(g)
			continue
		}
		c.end(g)
		g.answered = true
		g.finish(nil, w)
	}
}
