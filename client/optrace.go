package client

import (
	"context"
	"time"

	"github.com/kvwire/kvwire/internal/hookguard"
	"github.com/kvwire/kvwire/internal/optrace"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// opTrace is what an operation shows its observers (observers.go): its
// span, timings, record and Origin, which internal/optrace keeps. It
// lives in the pooled op and is reset with it. Every hook call happens on
// the operation's goroutine; the response handler, on a connection's
// reader, only copies the response's encoded server duration
// (SetServer).
type opTrace struct {
	optrace.Trace
	// encStart and encEnd bound the encoding of a typed write's value,
	// done before the operation began (its start is then encStart).
	encStart, encEnd time.Time
	// retryPending: a retry for retryReason was decided and waited for;
	// its span event goes out when the retry is placed (place), not if
	// the client closed first (the retry is then not sent, nor counted).
	retryPending bool
	retryReason  retry.Reason
}

// begin starts observing an operation named name (optrace.NameOf the
// client's name, "GetAndLock", and opcode: op.spanName), at start, with
// timeout to its deadline. parent is its options' ParentSpan (nil: the
// context's).
func (ob *observers) begin(ctx context.Context, t *opTrace, name optrace.Name, coll *Collection, parent RequestSpan, start time.Time, timeout time.Duration) {
	var c *optrace.Coll
	var p hookguard.Span
	if ob.Tracing() {
		c, p = ob.coll(coll), parentSpan(ctx, parent)
	}
	ob.Begin(ctx, &t.Trace, name, c, p, start, timeout)
	if !t.encStart.IsZero() {
		ob.Encoded(&t.Trace, t.encStart, t.encEnd) // under the span, once it exists
	}
}

// end ends the operation at at with err (nil: success), after retries
// retries (optrace's End).
func (ob *observers) end(t *opTrace, coll *Collection, err error, retries int, at time.Time) {
	var c *optrace.Coll
	if coll != nil && ob.Metered() {
		if c = coll.meters.Load(); c == nil {
			c = ob.newColl(coll)
		}
	}
	ob.End(&t.Trace, c, err, retries, at)
}

// unwound ends o's spans when a panic of the caller's code (an Observer,
// a RetryStrategy, a Logger) unwound o before end (optrace's Unwound).
// execute and a batch defer it; after end it does nothing, at the cost of
// one comparison.
func (ob *observers) unwound(o *op) {
	if o.trace.Traced() {
		ob.unwoundTraced(o)
	}
}

func (ob *observers) unwoundTraced(o *op) {
	o.trace.Waited() // its end is now
	ob.Unwound(&o.trace.Trace, o.st.Attempts(), ob.EndAt(&o.trace.Trace))
}

// done shows its observers n operations that had no operation of their
// own (the gets a memcached GetMany's group read hit in one window): each
// begun at start, ended at end, in one attempt. When only the meter sees
// them (no tracer, none slow enough for the slow-operation report), it
// records the n alike in one step.
func (ob *observers) done(ctx context.Context, name string, opc memdx.OpCode, coll *Collection, parent RequestSpan, start, end time.Time, n int) {
	d := end.Sub(start)
	if n <= 0 || !ob.Wants(d) {
		return
	}
	if ob.MeterOnly(d) {
		ob.RecordN(ob.coll(coll), name, opc, d, n)
		return
	}
	on := optrace.NameOf(name, opc)
	for range n {
		var t opTrace
		ob.begin(ctx, &t, on, coll, parent, start, 0)
		ob.end(&t, coll, nil, 0, end)
	}
}

// unsent shows its observers an operation named name (sent as opc) on
// coll, under parent (nil: the context's), that failed with err before
// any request of its existed, at at: a typed write whose value its
// Transcoder could not encode, or that was refused once its value was
// encoded (storeOp), from start, when its encoding began (RFC 0067: every
// operation call has its span; the encoding's, start to end, is under
// it). Its span carries the durability its caller asked for (dur:
// memdx.DurabilityNone for none), as that of a write sent does. An
// operation begun on a closed client is not observed, as begin refuses it.
func (c *Client) unsent(ctx context.Context, name string, opc memdx.OpCode, coll *Collection, parent RequestSpan, dur memdx.DurabilityLevel, start, end, at time.Time, err error) {
	c.showRefused(ctx, opTrace{encStart: start, encEnd: end}, optrace.NameOf(name, opc), coll, parent, dur, start, at, err)
}

// showRefused shows its observers an operation, named name on coll, under
// parent (nil: ctx's), that failed with err before any attempt: its span
// and point, from start (t's encoding, if any, under it) to at, with the
// durability dur asked for (memdx.DurabilityNone: none). unsent,
// observeRefused and refusedCall tell it what they know. Nothing is
// observed for a client closed, as begin refuses it.
func (c *Client) showRefused(ctx context.Context, t opTrace, name optrace.Name, coll *Collection, parent RequestSpan, dur memdx.DurabilityLevel, start, at time.Time, err error) {
	if c.ctx.Err() != nil {
		return
	}
	if ctx == nil { // no parent span from it (an op's begin would refuse it)
		ctx = context.Background()
	}
	c.obs.begin(ctx, &t, name, coll, parent, start, 0)
	c.obs.Durability(&t.Trace, dur)
	c.obs.end(&t, coll, err, 0, at)
}

// observeRefused shows its observers operation o, called with ctx, that
// failed with err before any attempt: an argument refused (newOp,
// argumentRefused; a nil ctx, begin), a feature its bucket lacks. RFC
// 0067 has a span for each operation its caller calls, started as soon as
// it is called, and a latency point for each: its span (under its
// options' ParentSpan, else the context's), failed with err's error.type,
// with the durability asked for when that was no reason for the refusal,
// and its point, ended at one reading of the clock (begun then too, or,
// for a typed write, when its encoding, under it, began). Nothing is
// observed when nothing records, nor for a client closed (as begin
// refuses it), a read of one copy for a call that reads several (the
// call's span and point show its failure), or a request of a scan.
// Called only once an operation is refused: a valid one pays nothing.
func (c *Client) observeRefused(ctx context.Context, o *op, err error) {
	if o.copyRead || o.call != nil || !c.obs.Observed() || c.ctx.Err() != nil {
		return
	}
	now := c.clock.Now()
	start := now
	t := opTrace{encStart: o.trace.encStart, encEnd: o.trace.encEnd} // a typed write's encoding (begin's refusal)
	if !t.encStart.IsZero() {
		start = t.encStart
	}
	c.showRefused(ctx, t, o.spanName(), o.coll, o.parentSpan, durabilityAsked(DurabilityLevel(o.req.Durability)), start, now, err)
}

// refusedCall is observeRefused for an operation refused before it had an
// op: named name (sent as opc) on coll, under parent (nil: the context's),
// failed with err.
func (c *Client) refusedCall(ctx context.Context, name string, opc memdx.OpCode, coll *Collection, parent RequestSpan, err error) {
	if !c.obs.Observed() || c.ctx.Err() != nil {
		return
	}
	now := c.clock.Now()
	c.showRefused(ctx, opTrace{}, optrace.NameOf(name, opc), coll, parent, memdx.DurabilityNone, now, now, err)
}
