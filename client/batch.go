package client

import (
	"context"
	"sync"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/multiget"
	"github.com/kvwire/kvwire/internal/timeheap"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// batch runs many operations from one goroutine. Each goes through the
// steps execute takes (place, send, judge, wait: exec.go), with the sends
// started without waiting (conn.Start), grouped per connection and
// written together (Cork/Uncork), and the waits kept in one heap on the
// client's clock. The connections tell the batch (RequestEnded) which
// requests ended; the batch goroutine collects and judges them.
type batch struct {
	c   *Client
	ctx context.Context
	now time.Time // when the batch began: every key's deadline counts from it
	// quietGets: gets on a memcached connection go as GETQ, settled by a
	// NOOP after each connection's group.
	quietGets bool
	// canceled: the context ended; no key is sent or waits any more.
	canceled    bool
	keys        []bkey
	left        int // keys and fences not ended
	inflight    int // keys in bkInFlight (at most maxInFlight)
	maxInFlight int
	done        func(i int, o *op, err error)
	obs         Observer

	ready   []int32       // keys to place and send in the next round
	sending []int32       // the round's keys (round swaps it with ready)
	waiting timeheap.Heap // the waiting keys, by the end of their wait
	timer   retry.Timer
	timerAt time.Time
	watch   <-chan struct{} // the wake of a waiting key (see wakeAll)
	fences  []conn.Pending  // NOOPs in flight
	groups  []sendGroup

	// mg is a memcached GetMany's group reads (batchget.go).
	mg multiget.Window

	mu    sync.Mutex
	ended []uint64 // tags of the requests that ended, from RequestEnded
	// expect counts the started requests not yet told of (expectAdd).
	expect int
	// wantRoom: keys wait for room in flight (maxInFlight), so the next
	// request that ends, even a success, wakes the batch (awaitRoom).
	wantRoom bool
	spare    []uint64
	kick     chan struct{} // capacity 1: Wake's signal
}

// bkey is one key's operation in a batch.
type bkey struct {
	o       *op
	state   bkeyState
	gen     uint32 // bumped at each send and each wait: tags and heap entries of older ones are stale
	attempt int
	pl      placed
	pend    conn.Pending
	nx      next
	plan    retry.Plan
	wake    <-chan struct{}
	// Observer bookkeeping. reported: AttemptStart saw the attempt, so
	// AttemptEnd is due (an attempt ended before its send is not reported).
	opID       uint64
	start      time.Time
	lastReason retry.Reason
	retried    bool
	reported   bool
	// grouped: its first attempt was a group's get (judgeGrouped), read
	// by gotAt.
	grouped bool
	gotAt   time.Time
}

type bkeyState uint8

const (
	bkDone     bkeyState = iota // has its result (or has none to get)
	bkReady                     // to be placed and sent
	bkInFlight                  // started on a connection
	bkWaiting                   // waiting for a retry
	bkGot                       // a hit read in a group: its result is given
)

// sendGroup is one connection's share of a round.
type sendGroup struct {
	cn    *conn.Conn
	quiet bool
}

// maxBatchInFlight bounds a batch's keys in flight at once; the others
// wait for room. A connection refuses requests past its MaxPending (4096
// by default) as overloaded, which a batch of more keys would meet as
// retries, so a batch also keeps to half of MaxPendingPerConnection
// (batchInFlight), leaving the other half to other callers.
const maxBatchInFlight = 2048

// batchInFlight is the bound on a batch's keys in flight for this client.
func (c *Client) batchInFlight() int {
	mp := c.opts.MaxPendingPerConnection
	if mp <= 0 {
		mp = conn.DefaultMaxPending
	}
	return max(1, min(maxBatchInFlight, mp/2))
}

// fenceTag marks a NOOP's tag; the rest is its index in fences.
const fenceTag = 1 << 63

// batchPool keeps batches for reuse: once a batch has every outcome, no
// connection refers to it any more (conn.Notifier's rule).
var batchPool = sync.Pool{New: func() any { return &batch{kick: make(chan struct{}, 1)} }}

// maxPooledBatch bounds the keys of a batch kept for reuse.
const maxPooledBatch = 4096

func (c *Client) newBatch(ctx context.Context, n int) *batch {
	b := batchPool.Get().(*batch)
	b.c, b.ctx, b.now, b.obs, b.maxInFlight = c, ctx, c.clock.Now(), c.opts.Observer, c.batchInFlight()
	if cap(b.keys) < n {
		b.keys = make([]bkey, n)
	}
	b.keys = b.keys[:n]
	if cap(b.ready) < n {
		b.ready = make([]int32, 0, n)
	}
	return b
}

// release pools b, keeping its buffers.
func (b *batch) release() {
	if b.timer != nil {
		b.timer.Stop()
	}
	if cap(b.keys) > maxPooledBatch {
		return
	}
	clear(b.keys)
	clear(b.fences)
	clear(b.groups)
	b.mg.Reset()
	// Field by field: a late Wake may read kick meanwhile.
	b.c, b.ctx, b.now, b.quietGets, b.canceled, b.left, b.inflight, b.done, b.obs = nil, nil, time.Time{}, false, false, 0, 0, nil, nil
	b.keys, b.ready, b.sending, b.waiting = b.keys[:0], b.ready[:0], b.sending[:0], b.waiting[:0]
	b.timer, b.timerAt, b.watch = nil, time.Time{}, nil
	b.fences, b.groups = b.fences[:0], b.groups[:0]
	b.ended, b.spare, b.expect, b.wantRoom = b.ended[:0], b.spare[:0], 0, false
	batchPool.Put(b)
}

// add sets key i's operation, or its error (a refused argument).
func (b *batch) add(i int, o *op, err error) {
	k := &b.keys[i]
	if err != nil {
		k.nx.err = err
		return
	}
	k.o = o
	k.state = bkReady
}

// RequestEnded implements conn.Notifier: it records the tag, and asks to
// be woken for an outcome that needs judging at once (anything but an
// answered success or a settled quiet get: a retry must not wait for the
// other keys), for the last request the batch expects, or for the first
// request to end while keys wait for room in flight (awaitRoom). Other
// successes wait for the batch's goroutine to wake for another reason:
// they need nothing before the batch returns. An answered key's status
// was set by its handle, on this goroutine, just before.
func (b *batch) RequestEnded(tag uint64, answered bool, err error) bool {
	clean := err == nil
	if clean && answered && tag&fenceTag == 0 {
		clean = b.keys[tag>>32].o.status == memdx.StatusSuccess
	}
	b.mu.Lock()
	b.ended = append(b.ended, tag)
	b.expect--
	wake := !clean || b.expect == 0 || b.wantRoom
	b.wantRoom = false
	b.mu.Unlock()
	return wake
}

// awaitRoom is the batch about to wait with keys ready that have no room
// in flight: the next request to end makes room, so it wakes the batch,
// even a success that would not otherwise (a key held by a node that
// stopped answering must not hold back the keys waiting behind it until
// its deadline, when they could only time out unsent). A request that has
// ended already and was not collected wakes it at once.
func (b *batch) awaitRoom() {
	b.mu.Lock()
	ended := len(b.ended) > 0
	b.wantRoom = !ended
	b.mu.Unlock()
	if ended {
		b.Wake()
	}
}

// expectAdd changes the count of started requests whose end the batch has
// not been told of; a request taken back (not started, cancelled) is
// taken off, and when that leaves none expected with ends not collected,
// the batch is woken for them.
func (b *batch) expectAdd(d int) {
	b.mu.Lock()
	b.expect += d
	kick := d < 0 && b.expect == 0 && len(b.ended) > 0
	b.mu.Unlock()
	if kick {
		b.Wake()
	}
}

// Wake implements conn.Notifier: it wakes the batch's goroutine (a wake
// left for a batch that has ended makes its next user look once at an
// empty list).
func (b *batch) Wake() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// run drives every key to its outcome, reported to done (in no particular
// order) before run returns, and releases b.
func (b *batch) run(done func(i int, o *op, err error)) {
	b.done = done
	for i := range b.keys {
		k := &b.keys[i]
		if k.state == bkGot {
			continue
		}
		if k.state != bkReady {
			done(i, nil, k.nx.err)
			k.nx = next{}
			continue
		}
		b.left++
		if err := b.c.begin(b.ctx, k.o, b.now); err != nil {
			b.finish(i, err)
			continue
		}
		o := k.o
		b.c.obs.begin(b.ctx, &o.trace, o.name, o.req.OpCode, o.coll, o.parentSpan, b.now, o.st.Deadline().Sub(b.now))
		if b.obs != nil {
			k.opID = b.c.opIDs.Add(1)
		}
		if k.grouped {
			b.judgeGrouped(i)
			continue
		}
		b.ready = append(b.ready, int32(i))
	}
	ctxDone := b.ctx.Done()
	if b.canceled {
		ctxDone = nil
	}
	closing := b.c.ctx.Done()
	for b.left > 0 {
		if len(b.ready) > 0 && (b.inflight < b.maxInFlight || b.canceled) {
			b.round()
			continue
		}
		if len(b.ready) > 0 {
			b.awaitRoom()
		}
		b.armTimer()
		var timerC <-chan time.Time
		if b.timer != nil && !b.timerAt.IsZero() {
			timerC = b.timer.C()
		}
		select {
		case <-b.kick:
			b.collect()
		case <-timerC:
			b.timerAt = time.Time{}
			b.due()
		case <-b.watch:
			b.wakeAll()
		case <-closing:
			closing = nil
			b.wakeEvery()
		case <-ctxDone:
			b.cancelAll()
		}
		if b.canceled {
			ctxDone = nil
		}
	}
	b.release()
}

// finish gives key i its outcome, and tells its observers.
func (b *batch) finish(i int, err error) {
	k := &b.keys[i]
	k.state = bkDone
	k.gen++
	b.left--
	if o, ob := k.o, b.c.obs; o != nil {
		ob.end(&o.trace, o.coll, err, o.st.Attempts(), ob.endAt(&o.trace))
	}
	b.done(i, k.o, err)
	putOp(k.o)
	k.o = nil
}

// round places the ready keys and starts them, one group per connection.
func (b *batch) round() {
	if !b.canceled && b.ctx.Err() != nil {
		b.cancelAll() // as a single operation checks its context before sending
	}
	if b.canceled {
		b.endReady()
		return
	}
	ready := b.ready
	b.ready, b.sending = b.sending[:0], ready // keys may become ready again below
	if room := b.maxInFlight - b.inflight; len(ready) > room {
		// The rest wait for room, ahead of what becomes ready below.
		b.ready = append(b.ready, ready[room:]...)
		ready = ready[:room]
	}
	b.groups = b.groups[:0]
	placed := 0
	for _, i := range ready {
		k := &b.keys[i]
		pl, nx := b.c.place(b.ctx, k.o, k.attempt)
		k.attempt++
		switch {
		case nx.err != nil:
			b.finish(int(i), nx.err)
			continue
		case !nx.done:
			b.wait(int(i), nx)
			continue
		}
		k.pl = pl
		k.state = bkInFlight
		b.inflight++
		placed++
		found := false
		for _, g := range b.groups {
			if g.cn == pl.cn {
				found = true
				break
			}
		}
		if !found {
			b.groups = append(b.groups, sendGroup{cn: pl.cn})
		}
	}
	now := b.c.clock.Now() // conn.Start reads no clock: the deadlines are checked here
	// Expected before they start (they may end at once): every key placed
	// and a NOOP per group, less those that do not start, after.
	b.expectAdd(placed + len(b.groups))
	started := 0
	for gi := range b.groups {
		started += b.sendGroup(&b.groups[gi], ready, now)
	}
	b.expectAdd(started - placed - len(b.groups))
}

// sendGroup starts the ready keys placed on g's connection, corked so
// that they go out together, and reports how many requests it started
// (a NOOP included). The Uncork is deferred: the Observer and the retry
// strategy run while the connection is corked, and a panic of theirs must
// not leave the connection's writes held.
func (b *batch) sendGroup(g *sendGroup, ready []int32, now time.Time) (started int) {
	quiet := b.quietGets && g.cn.Memcached()
	g.cn.Cork()
	defer g.cn.Uncork()
	for _, i := range ready {
		k := &b.keys[i]
		if k.state != bkInFlight || k.pl.cn != g.cn || k.pend != (conn.Pending{}) {
			continue
		}
		if !now.Before(k.o.st.Deadline()) {
			b.judge(int(i), false, &conn.RequestError{Op: k.o.req.OpCode, Addr: g.cn.Addr(), Err: context.DeadlineExceeded}, time.Time{})
			continue
		}
		if b.start(int(i), quiet, now) {
			started++
			g.quiet = g.quiet || quiet
		}
	}
	if g.quiet && b.fence(g.cn, ready) {
		started++
	}
	return started
}

// start sends key i's request on its connection at now (the round's
// clock reading), and reports whether it did.
func (b *batch) start(i int, quiet bool, now time.Time) bool {
	k := &b.keys[i]
	o := k.o
	if quiet && o.kind == kindGet {
		// The answer names its key (onResponse checks it): a server
		// that gave this get another's answer could otherwise make
		// the NOOP after it settle this key as a miss.
		o.req.OpCode = memdx.OpGetKQ
	}
	k.gen++
	if b.obs != nil {
		k.start, k.reported = time.Now(), true
		b.obs.AttemptStart(o.attemptInfo(k.opID, k.attempt-1, k.start, k.pl.Topo, k.lastReason, k.retried))
	}
	from := b.c.obs.send(&o.trace, k.pl.cn, k.pl.Node.Addr(), now)
	p, err := k.pl.cn.Start(o.st.Deadline(), &o.req, o.handle, b, uint64(i)<<32|uint64(k.gen), from)
	if err != nil {
		b.judge(i, false, err, now)
		return false
	}
	k.pend = p
	return true
}

// fence queues the NOOP that settles the quiet gets of ready before it on
// cn, with their deadline. When it cannot be queued, the quiet gets
// already started there would wait for one until their deadline: they
// are taken back (a get is sent again elsewhere).
func (b *batch) fence(cn *conn.Conn, ready []int32) bool {
	var deadline time.Time
	for _, i := range ready {
		if k := &b.keys[i]; k.state == bkInFlight && k.pl.cn == cn {
			deadline = k.o.st.Deadline()
			break
		}
	}
	req := memdx.Request{OpCode: memdx.OpNoop}
	p, err := cn.Start(deadline, &req, nil, b, fenceTag|uint64(len(b.fences)), nil)
	if err == nil {
		b.fences = append(b.fences, p)
		b.left++
		return true
	}
	for _, i := range ready {
		if k := &b.keys[i]; k.state == bkInFlight && k.pl.cn == cn && k.o.req.OpCode.IsQuiet() {
			if cerr, ended := k.pend.Cancel(err); !ended {
				b.expectAdd(-1)
				b.judge(int(i), true, cerr, b.c.clock.Now())
			}
		}
	}
	return false
}

// collect takes the outcomes of the requests that ended (one clock
// reading is their end).
func (b *batch) collect() {
	b.mu.Lock()
	ended := b.ended
	b.ended = b.spare[:0]
	b.mu.Unlock()
	var now time.Time
	if len(ended) > 0 {
		now = b.c.clock.Now()
	}
	for _, tag := range ended {
		if tag&fenceTag != 0 {
			f := int(tag &^ fenceTag)
			if b.fences[f] != (conn.Pending{}) {
				_, _ = b.fences[f].Result()
				b.fences[f] = conn.Pending{}
				b.left--
			}
			continue
		}
		i, gen := int(tag>>32), uint32(tag)
		k := &b.keys[i]
		if k.state != bkInFlight || k.gen != gen {
			continue // ended by Cancel
		}
		answered, err := k.pend.Result()
		b.judge(i, answered, err, now)
	}
	b.spare = ended[:0]
}

// judge takes key i's attempt's outcome, which came at at (zero: the
// request was not sent): answered false with no error is a quiet get
// settled by a NOOP, a miss.
func (b *batch) judge(i int, answered bool, err error, at time.Time) {
	k := &b.keys[i]
	o := k.o
	if o.opaque == 0 { // no answer: the error names the opaque sent
		o.opaque = k.pend.Opaque
	}
	if !at.IsZero() {
		b.c.obs.ended(&o.trace, k.pl.cn, k.pend.Opaque, at)
	}
	k.pend = conn.Pending{}
	if k.state == bkInFlight {
		b.inflight-- // judge is the way out of bkInFlight
	}
	if err == nil && !answered {
		o.status = memdx.StatusKeyNotFound
	}
	if b.obs != nil && k.reported {
		k.reported = false
		info := o.attemptInfo(k.opID, k.attempt-1, k.start, k.pl.Topo, k.lastReason, k.retried)
		info.Duration = time.Since(k.start)
		info.Status = statusOf(o.status)
		b.obs.AttemptEnd(info, err)
	}
	// A quiet get is judged as the GET it stands for (its error is a
	// Get's), and is a GET again when sent elsewhere.
	o.req.OpCode = o.st.OpCode()
	nx := b.c.judge(b.ctx, o, k.pl, err)
	switch {
	case nx.done:
		b.finish(i, nil)
	case nx.err != nil:
		b.finish(i, nx.err)
	default:
		b.wait(i, nx)
	}
}

// wait plans key i's retry and waits for it in the heap, or retries it
// now (no delay, or woken already), or ends it.
func (b *batch) wait(i int, nx next) {
	k := &b.keys[i]
	o := k.o
	k.gen++
	k.nx = nx
	b.c.obs.retryDecided(&o.trace)
	k.plan = b.c.planNext(o, nx)
	k.lastReason, k.retried = nx.reason, true
	k.wake = nx.t.Wake(nx.reason)
	if (k.wake != nil && closed(k.wake)) || b.c.ctx.Err() != nil {
		// Woken already, or the client is closing (wakeEvery has woken
		// the keys that were waiting then): its placement ends it.
		b.resume(i, true, nil)
		return
	}
	d := k.plan.Delay()
	if d <= 0 {
		b.resume(i, false, nil)
		return
	}
	if b.canceled {
		b.resume(i, false, b.ctx.Err())
		return
	}
	k.state = bkWaiting
	b.waiting.Push(timeheap.Entry{At: b.c.clock.Now().Add(d), I: int32(i), Gen: k.gen})
	if k.wake != nil && b.watch == nil {
		b.watch = k.wake
	}
}

// resume ends key i's wait: a retry makes it ready, anything else ends it.
func (b *batch) resume(i int, woken bool, ctxErr error) {
	k := &b.keys[i]
	k.gen++
	k.o.trace.waited()
	if err := b.c.resumeNext(k.o, k.nx, k.plan, woken, ctxErr); err != nil {
		b.finish(i, err)
		return
	}
	b.c.obs.retried(&k.o.trace, retryReasonOf(k.nx.reason))
	k.state = bkReady
	k.nx = next{}
	b.ready = append(b.ready, int32(i))
}

// armTimer sets the timer for the earliest wait.
func (b *batch) armTimer() {
	for len(b.waiting) > 0 {
		e := b.waiting[0]
		if k := &b.keys[e.I]; k.state != bkWaiting || k.gen != e.Gen {
			b.waiting.Pop()
			continue
		}
		if e.At.Equal(b.timerAt) {
			return
		}
		d := e.At.Sub(b.c.clock.Now())
		if b.timer == nil {
			b.timer = b.c.clock.NewTimer(d)
		} else {
			b.timer.Reset(d)
		}
		b.timerAt = e.At
		return
	}
	if !b.timerAt.IsZero() {
		b.timer.Stop()
		b.timerAt = time.Time{}
	}
}

// due resumes the keys whose wait is over.
func (b *batch) due() {
	now := b.c.clock.Now()
	for len(b.waiting) > 0 && !b.waiting[0].At.After(now) {
		e := b.waiting.Pop()
		if k := &b.keys[e.I]; k.state == bkWaiting && k.gen == e.Gen {
			b.resume(int(e.I), false, nil)
		}
	}
}

// wakeAll resumes the waiting keys whose wake is closed (the topology was
// replaced: a newer config, or a node that has a connection again; see
// Topology.Wake). Only the current topology's wake is open, so every
// waiting key with a wake is either woken now or waits on that one, which
// becomes the one watched. A wait that is over by now is not woken but
// ended (due), as its timer would have: a wait for the deadline ends in
// a timeout, not a retry.
func (b *batch) wakeAll() {
	b.due()
	b.watch = nil
	for i := range b.keys {
		k := &b.keys[i]
		if k.state != bkWaiting || k.wake == nil {
			continue
		}
		if closed(k.wake) {
			b.resume(i, true, nil)
		} else if b.watch == nil {
			b.watch = k.wake
		}
	}
}

// wakeEvery resumes every waiting key as woken: the client is closing, and
// each key's next placement ends it with ErrClosed.
func (b *batch) wakeEvery() {
	for i := range b.keys {
		if b.keys[i].state == bkWaiting {
			b.resume(i, true, nil)
		}
	}
	b.watch = nil
}

// cancelAll ends every key when the batch's context ends: a request in
// flight is withdrawn or abandoned (a written mutation is then
// ambiguous), a wait ends, a key about to be sent is not.
func (b *batch) cancelAll() {
	cause := b.ctx.Err()
	now := b.c.clock.Now()
	b.canceled = true
	for f := range b.fences {
		if b.fences[f] != (conn.Pending{}) {
			if _, ended := b.fences[f].Cancel(cause); !ended {
				b.fences[f] = conn.Pending{}
				b.left--
				b.expectAdd(-1)
			}
		}
	}
	for i := range b.keys {
		k := &b.keys[i]
		switch k.state {
		case bkInFlight:
			// One that has ended already is collected as usual: its
			// outcome stands.
			if err, ended := k.pend.Cancel(cause); !ended {
				b.expectAdd(-1)
				b.judge(i, true, err, now)
			}
		case bkWaiting:
			b.resume(i, false, cause)
		}
	}
	b.endReady()
}

// endReady ends the keys about to be sent once the batch's context has
// ended, as a send under that context ends: not written.
func (b *batch) endReady() {
	cause := b.ctx.Err()
	for len(b.ready) > 0 {
		ready := b.ready
		b.ready, b.sending = b.sending[:0], ready
		for _, i := range ready {
			if k := &b.keys[i]; k.state == bkReady {
				b.judge(int(i), true, &conn.RequestError{Op: k.o.req.OpCode, Err: cause}, time.Time{})
			}
		}
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
