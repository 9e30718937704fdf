package client

import (
	"context"
	"sync"
	"time"

	"github.com/kvwire/kvwire/conn"
	sched "github.com/kvwire/kvwire/internal/batch"
	"github.com/kvwire/kvwire/internal/multiget"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// batch runs many operations from one goroutine. Each goes through the
// steps execute takes (place, send, judge, wait: exec.go), with the sends
// started without waiting (conn.Start), grouped per connection and
// written together (Cork/Uncork), and the waits kept in one heap on the
// client's clock (internal/batch's Schedule, which holds each key's
// state). The connections tell the batch (RequestEnded) which requests
// ended; the batch goroutine collects and judges them.
type batch struct {
	s   sched.Schedule[bkey]
	c   *Client
	ctx context.Context
	now time.Time // when the batch began: every key's deadline counts from it
	// quietGets: gets on a memcached connection go as GETQ, settled by a
	// NOOP after each connection's group.
	quietGets bool
	done      func(i int, o *op, err error)
	obs       Observer

	// mg is a memcached GetMany's group reads (batchget.go).
	mg multiget.Window

	// sending and unsent are sendGroup's scratch: the keys it announced,
	// and those it could not start (or took back), judged once the
	// connection is uncorked.
	sending []sendItem
	unsent  []unsentKey
}

// sendItem is a key sendGroup announced (Observer, dispatch span) and is
// about to start: from is its request's Origin.
type sendItem struct {
	i    int32
	from *conn.Origin
}

// unsentKey is a key whose request sendGroup could not start, or took
// back, with what judge is to be told of it (answered: taken back after it
// was started, at the time sendGroup reads once uncorked).
type unsentKey struct {
	i        int32
	answered bool
	err      error
	at       time.Time
}

// bkey is the client's part of one key's operation in a batch (its
// schedule is the sched.Key holding it).
type bkey struct {
	o  *op
	pl placed
	nx next
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

// batchInFlight is the bound on a batch's keys in flight for this client.
func (c *Client) batchInFlight() int {
	return sched.InFlightBound(c.opts.MaxPendingPerConnection)
}

// batchPool keeps batches for reuse: once a batch has every outcome, no
// connection refers to it any more (conn.Notifier's rule).
var batchPool = sync.Pool{New: func() any { return new(batch) }}

func (c *Client) newBatch(ctx context.Context, n int) *batch {
	b := batchPool.Get().(*batch)
	b.c, b.ctx, b.now, b.obs = c, ctx, c.clock.Now(), c.observer
	b.s.Start(c.clock, n, c.batchInFlight())
	return b
}

// release pools b, keeping its buffers.
func (b *batch) release() {
	if !b.s.Reset() {
		return
	}
	b.mg.Reset()
	b.c, b.ctx, b.now, b.quietGets, b.done, b.obs = nil, nil, time.Time{}, false, nil, nil
	batchPool.Put(b)
}

// add sets key i's operation, or its error (a refused argument).
func (b *batch) add(i int, o *op, err error) {
	k := &b.s.Keys[i]
	if err != nil {
		k.Op.nx.err = err
		return
	}
	k.Op.o = o
	k.State = sched.Ready
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
	if clean && answered && !sched.IsFence(tag) {
		clean = b.s.Keys[sched.KeyOf(tag)].Op.o.status == memdx.StatusSuccess
	}
	return b.s.Ended(tag, clean)
}

// Wake implements conn.Notifier: it wakes the batch's goroutine.
func (b *batch) Wake() { b.s.Wake() }

// run drives every key to its outcome, reported to done (in no particular
// order) before run returns, and releases b.
func (b *batch) run(done func(i int, o *op, err error)) {
	b.done = done
	// A panic of the caller's code (an Observer, a RetryStrategy, a
	// Logger) on this goroutine still ends the spans of the keys begun and
	// not finished; b is not released then. Checked before the release,
	// after which b may be another call's.
	released := false
	defer func() {
		if !released {
			b.unwound()
		}
	}()
	for i := range b.s.Keys {
		k := &b.s.Keys[i]
		if k.State == sched.Got {
			continue
		}
		if k.State != sched.Ready {
			done(i, nil, k.Op.nx.err)
			k.Op.nx = next{}
			continue
		}
		b.s.Left++
		if err := b.c.begin(b.ctx, k.Op.o, b.now); err != nil {
			b.c.observeRefused(b.ctx, k.Op.o, err)
			b.finish(i, err)
			continue
		}
		o := k.Op.o
		b.c.obs.begin(b.ctx, &o.trace, o.spanName(), o.coll, o.parentSpan, b.now, o.st.Deadline().Sub(b.now))
		b.c.obs.Durability(&o.trace.Trace, o.req.Durability)
		if b.obs != nil {
			k.Op.opID = b.c.opIDs.Add(1)
		}
		if k.Op.grouped {
			b.judgeGrouped(i)
			continue
		}
		b.s.Ready = append(b.s.Ready, int32(i))
	}
	if b.s.Left > 0 { // none left when begin refused every key (a nil ctx)
		b.s.Watch(b.ctx.Done(), b.c.ctx.Done())
	}
	for b.s.Left > 0 {
		if b.s.CanSend() {
			b.round()
			continue
		}
		switch b.s.Sleep() {
		case sched.EventEnded:
			b.collect()
		case sched.EventDue:
			b.due()
		case sched.EventWoken:
			b.wakeAll()
		case sched.EventClosing:
			b.wakeEvery()
		case sched.EventCanceled:
			b.cancelAll()
		}
	}
	released = true
	b.release()
}

// unwound ends the spans of the keys that a panic left begun and not
// finished (observers.unwound).
func (b *batch) unwound() {
	for i := range b.s.Keys {
		if o := b.s.Keys[i].Op.o; o != nil {
			b.c.obs.unwound(o)
		}
	}
}

// finish gives key i its outcome, and tells its observers.
func (b *batch) finish(i int, err error) {
	k := &b.s.Keys[i]
	k.State = sched.Done
	k.Gen++
	b.s.Left--
	if o, ob := k.Op.o, b.c.obs; o != nil {
		ob.end(&o.trace, o.coll, err, o.st.Attempts(), ob.EndAt(&o.trace.Trace))
	}
	b.done(i, k.Op.o, err)
	putOp(k.Op.o)
	k.Op.o = nil
}

// round places the ready keys and starts them, one group per connection.
func (b *batch) round() {
	if !b.s.Canceled && b.ctx.Err() != nil {
		b.cancelAll() // as a single operation checks its context before sending
	}
	if b.s.Canceled {
		b.endReady()
		return
	}
	ready := b.s.TakeRound() // keys may become ready again below
	placed := 0
	// The round's keys are of one collection: when its id is not cached,
	// the first key's lookup runs (this goroutine waits for it, as each
	// key would need it before it is sent) and, when it fails, the
	// others routed to the same connection take its outcome rather than
	// each sending a lookup of its own, one after the other.
	var lookup lookupFailures
	for _, i := range ready {
		k := &b.s.Keys[i]
		// It may have waited for room in flight since its trace's last
		// clock reading (a first attempt's is the batch's start): a key
		// that ends here, or at the deadline check before its send, is
		// timed to when it ended, not to that reading.
		k.Op.o.trace.Waited()
		pl, nx := b.c.place(b.ctx, k.Op.o, k.Attempt, &lookup)
		k.Attempt++
		switch {
		case nx.err != nil:
			b.finish(int(i), nx.err)
			continue
		case !nx.done:
			b.wait(int(i), nx)
			continue
		}
		k.Op.pl = pl
		k.State = sched.InFlight
		b.s.InFlight++
		placed++
		b.s.Group(pl.cn)
	}
	now := b.c.clock.Now() // conn.Start reads no clock: the deadlines are checked here
	// Expected before they start (they may end at once): every key placed
	// and a NOOP per group, less those that do not start, after.
	b.s.ExpectAdd(placed + len(b.s.Groups))
	started := 0
	for gi := range b.s.Groups {
		started += b.sendGroup(&b.s.Groups[gi], ready, now)
	}
	b.s.ExpectAdd(started - placed - len(b.s.Groups))
}

// sendGroup starts the ready keys placed on g's connection, corked so
// that they go out together, and reports how many requests it started
// (a NOOP included). The cork holds back every other caller's writes on
// the connection, so no code of the caller's runs under it (a hook that
// blocks blocks its operation only): each key's attempt is announced (the
// Observer's AttemptStart, the tracer's dispatch span) before the cork,
// and the keys that could not be started, or were taken back, are judged
// (the retry strategy, the end of their span, the meter) after it. The
// Uncork is deferred, so that a panic cannot leave the writes held.
func (b *batch) sendGroup(g *sched.Group, ready []int32, now time.Time) (started int) {
	quiet := b.quietGets && g.Conn.Memcached()
	sending := b.sending[:0]
	for _, i := range ready {
		k := &b.s.Keys[i]
		if k.State != sched.InFlight || k.Op.pl.cn != g.Conn || k.Pend != (conn.Pending{}) {
			continue
		}
		if !now.Before(k.Op.o.st.Deadline()) {
			b.judge(int(i), false, &conn.RequestError{Op: k.Op.o.req.OpCode, Addr: g.Conn.Addr(), Err: context.DeadlineExceeded}, time.Time{})
			continue
		}
		sending = append(sending, sendItem{i: i, from: b.announce(int(i), quiet, now)})
	}
	unsent := b.unsent[:0]
	started, unsent = b.startCorked(g, sending, ready, quiet, now, unsent)
	var takenBack time.Time // when the quiet gets a fence could not settle were taken back
	for _, u := range unsent {
		at := u.at
		if u.answered {
			if takenBack.IsZero() {
				takenBack = b.c.clock.Now()
			}
			at = takenBack
		}
		b.judge(int(u.i), u.answered, u.err, at)
	}
	clear(sending)
	clear(unsent)
	b.sending, b.unsent = sending[:0], unsent[:0]
	return started
}

// startCorked starts the announced keys sending on g's connection between
// Cork and Uncork (now: the round's clock reading), and the NOOP that
// settles its quiet gets, if any. It calls the connection only; the keys
// it could not start, or took back, are appended to unsent for the caller
// to judge.
func (b *batch) startCorked(g *sched.Group, sending []sendItem, ready []int32, quiet bool, now time.Time, unsent []unsentKey) (int, []unsentKey) {
	g.Conn.Cork()
	defer g.Conn.Uncork()
	started := 0
	for _, it := range sending {
		k := &b.s.Keys[it.i]
		o := k.Op.o
		p, err := g.Conn.Start(o.st.Deadline(), &o.req, o.handle, b, sched.Tag(int(it.i), k.Gen), it.from)
		if err != nil {
			unsent = append(unsent, unsentKey{i: it.i, err: err, at: now})
			continue
		}
		k.Pend = p
		started++
		g.Quiet = g.Quiet || quiet
	}
	if g.Quiet {
		var fenced bool
		if fenced, unsent = b.fence(g.Conn, ready, unsent); fenced {
			started++
		}
	}
	return started, unsent
}

// announce begins key i's attempt at now (the round's clock reading): its
// generation, its Observer's AttemptStart, its dispatch span. It returns
// the Origin its request is to carry.
func (b *batch) announce(i int, quiet bool, now time.Time) *conn.Origin {
	k := &b.s.Keys[i]
	o := k.Op.o
	if quiet && o.kind == kindGet {
		// The answer names its key (onResponse checks it): a server
		// that gave this get another's answer could otherwise make
		// the NOOP after it settle this key as a miss.
		o.req.OpCode = memdx.OpGetKQ
	}
	k.Gen++
	if b.obs != nil {
		k.Op.start, k.Op.reported = time.Now(), true
		b.obs.AttemptStart(o.attemptInfo(k.Op.opID, k.Attempt-1, k.Op.start, k.Op.pl.Topo, k.Op.lastReason, k.Op.retried))
	}
	return b.c.obs.Send(&o.trace.Trace, k.Op.pl.cn, k.Op.pl.Node.Addr(), now)
}

// fenceOrigin is what a fence's NOOP tells its connection: it settles the
// batch's gets, and is one of them in the orphan report, should it be
// answered after the batch left (not a "ping": no Ping was made). It is
// never written to: every fence shares it.
var fenceOrigin = conn.Origin{Operation: multiget.OperationName}

// fence queues the NOOP that settles the quiet gets of ready before it on
// cn, with their deadline. When it cannot be queued, the quiet gets
// already started there would wait for one until their deadline: they
// are taken back (a get is sent again elsewhere), appended to unsent. It
// calls the connection only (it runs corked).
func (b *batch) fence(cn *conn.Conn, ready []int32, unsent []unsentKey) (bool, []unsentKey) {
	var deadline time.Time
	for _, i := range ready {
		if k := &b.s.Keys[i]; k.State == sched.InFlight && k.Op.pl.cn == cn {
			deadline = k.Op.o.st.Deadline()
			break
		}
	}
	err := b.s.Fence(cn, deadline, b, &fenceOrigin)
	if err == nil {
		return true, unsent
	}
	for _, i := range ready {
		if k := &b.s.Keys[i]; k.State == sched.InFlight && k.Op.pl.cn == cn && k.Op.o.req.OpCode.IsQuiet() && k.Pend != (conn.Pending{}) {
			if cerr, ended := k.Pend.Cancel(err); !ended {
				b.s.ExpectAdd(-1)
				unsent = append(unsent, unsentKey{i: i, answered: true, err: cerr}) // at: read once uncorked
			}
		}
	}
	return false, unsent
}

// collect takes the outcomes of the requests that ended (one clock
// reading is their end).
func (b *batch) collect() {
	ended := b.s.TakeEnded()
	var now time.Time
	if len(ended) > 0 {
		now = b.c.clock.Now()
	}
	for _, tag := range ended {
		if i, live := b.s.Live(tag); live { // else a fence, or ended by Cancel
			answered, err := b.s.Keys[i].Pend.Result()
			b.judge(i, answered, err, now)
		}
	}
	b.s.GiveBack(ended)
}

// judge takes key i's attempt's outcome, which came at at (zero: the
// request was not sent): answered false with no error is a quiet get
// settled by a NOOP, a miss.
func (b *batch) judge(i int, answered bool, err error, at time.Time) {
	k := &b.s.Keys[i]
	o := k.Op.o
	if o.opaque == 0 { // no answer: the error names the opaque sent
		o.opaque = k.Pend.Opaque
	}
	if !at.IsZero() {
		b.c.obs.Ended(&o.trace.Trace, k.Op.pl.cn, k.Pend.Opaque, at)
	}
	k.Pend = conn.Pending{}
	if k.State == sched.InFlight {
		b.s.InFlight-- // judge is the way out of InFlight
	}
	if err == nil && !answered {
		o.status = memdx.StatusKeyNotFound
	}
	if b.obs != nil && k.Op.reported {
		k.Op.reported = false
		info := o.attemptInfo(k.Op.opID, k.Attempt-1, k.Op.start, k.Op.pl.Topo, k.Op.lastReason, k.Op.retried)
		info.Duration = time.Since(k.Op.start)
		info.Status = statusOf(o.status)
		b.obs.AttemptEnd(info, err)
	}
	// A quiet get is judged as the GET it stands for (its error is a
	// Get's), and is a GET again when sent elsewhere.
	o.req.OpCode = o.st.OpCode()
	nx := b.c.judge(b.ctx, o, k.Op.pl, err)
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
	k := &b.s.Keys[i]
	o := k.Op.o
	k.Gen++
	k.Op.nx = nx
	b.c.obs.RetryDecided(&o.trace.Trace)
	k.Plan = b.c.planNext(o, nx)
	k.Op.lastReason, k.Op.retried = nx.reason, true
	k.Wake = nx.t.Wake(nx.reason)
	if (k.Wake != nil && sched.Closed(k.Wake)) || b.c.ctx.Err() != nil {
		// Woken already, or the client is closing (wakeEvery has woken
		// the keys that were waiting then): its placement ends it.
		b.resume(i, true, nil)
		return
	}
	d := k.Plan.Delay()
	if d <= 0 {
		b.resume(i, false, nil)
		return
	}
	if b.s.Canceled {
		b.resume(i, false, b.ctx.Err())
		return
	}
	b.s.WaitUntil(i, b.c.clock.Now().Add(d))
}

// resume ends key i's wait: a retry makes it ready, anything else ends it.
func (b *batch) resume(i int, woken bool, ctxErr error) {
	k := &b.s.Keys[i]
	k.Gen++
	k.Op.o.trace.Waited()
	if err := b.c.resumeNext(k.Op.o, k.Op.nx, k.Plan, woken, ctxErr); err != nil {
		b.finish(i, err)
		return
	}
	k.Op.o.trace.retryPending, k.Op.o.trace.retryReason = true, k.Op.nx.reason // its event: place
	k.State = sched.Ready
	k.Op.nx = next{}
	b.s.Ready = append(b.s.Ready, int32(i))
}

// due resumes the keys whose wait is over.
func (b *batch) due() {
	now := b.c.clock.Now()
	for i, ok := b.s.PopDue(now); ok; i, ok = b.s.PopDue(now) {
		b.resume(i, false, nil)
	}
}

// wakeAll resumes the waiting keys whose wake is closed (the topology was
// replaced: a newer config, or a node that has a connection again; see
// Topology.Wake); the others wait on the current topology's wake, which
// becomes the one watched (Schedule.NextWoken). A wait that is over by
// now is not woken but ended (due), as its timer would have: a wait for
// the deadline ends in a timeout, not a retry.
func (b *batch) wakeAll() {
	b.due()
	b.s.Unwatch()
	for i := b.s.NextWoken(0); i >= 0; i = b.s.NextWoken(i + 1) {
		b.resume(i, true, nil)
	}
}

// wakeEvery resumes every waiting key as woken: the client is closing, and
// each key's next placement ends it with ErrClosed.
func (b *batch) wakeEvery() {
	for i := b.s.NextWaiting(0); i >= 0; i = b.s.NextWaiting(i + 1) {
		b.resume(i, true, nil)
	}
	b.s.Unwatch()
}

// cancelAll ends every key when the batch's context ends: a request in
// flight is withdrawn or abandoned (a written mutation is then
// ambiguous), a wait ends, a key about to be sent is not.
func (b *batch) cancelAll() {
	cause := b.ctx.Err()
	now := b.c.clock.Now()
	b.s.Canceled = true
	b.s.CancelFences(cause)
	for i := range b.s.Keys {
		k := &b.s.Keys[i]
		switch k.State {
		case sched.InFlight:
			// One that has ended already is collected as usual: its
			// outcome stands.
			if err, ended := k.Pend.Cancel(cause); !ended {
				b.s.ExpectAdd(-1)
				b.judge(i, true, err, now)
			}
		case sched.Waiting:
			b.resume(i, false, cause)
		}
	}
	b.endReady()
}

// endReady ends the keys about to be sent once the batch's context has
// ended, as a send under that context ends: not written.
func (b *batch) endReady() {
	cause := b.ctx.Err()
	for len(b.s.Ready) > 0 {
		for _, i := range b.s.TakeReady() {
			if k := &b.s.Keys[i]; k.State == sched.Ready {
				k.Op.o.trace.Waited() // it ends now, not at its last reading (round)
				b.judge(int(i), true, &conn.RequestError{Op: k.Op.o.req.OpCode, Err: cause}, time.Time{})
			}
		}
	}
}
