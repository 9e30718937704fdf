package client

import (
	"context"
	"errors"
	"sync/atomic"
	"unsafe"

	"github.com/kvwire/kvwire/internal/fanout"
	"github.com/kvwire/kvwire/internal/hookguard"
	"github.com/kvwire/kvwire/internal/optrace"
	"github.com/kvwire/kvwire/memdx"
)

// GetReplicaResult is a read from the active copy or a replica.
type GetReplicaResult struct {
	GetResult
	// IsReplica is false for the active copy.
	IsReplica bool
	Node      string
}

// copiesOf returns the copies of key that the current map assigns to a
// server (cluster.Topology.Copies): 0 for the active copy, i for replica
// i. Memcached mode has only the active copy (a memcached bucket refuses
// replica reads: replicasRefused).
func (c *Client) copiesOf(key string) []int {
	return c.cl.Topology().Copies(unsafe.Slice(unsafe.StringData(key), len(key)))
}

// readCopy reads copy i of key: 0 is the active copy (GET), i > 0 replica i
// (GET_REPLICA).
func (col *Collection) readCopy(ctx context.Context, key string, i int, opts *GetReplicaOptions) (GetReplicaResult, error) {
	var p opParams
	if opts != nil {
		p = opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan}
	}
	req, name := memdx.NewGet(nil), "GetReplica(active)"
	if i > 0 {
		req, name = memdx.NewGetReplica(nil), "GetReplica"
	}
	p.copyRead = true
	o, err := col.newOp(ctx, name, kindGet, key, req, p)
	if err != nil {
		return GetReplicaResult{}, err
	}
	o.target.Replica = i
	o.copyRead = true
	return run(ctx, o, func(o *op) GetReplicaResult {
		r := GetReplicaResult{GetResult: o.getResult(), IsReplica: i > 0}
		if o.node != nil {
			r.Node = o.node.Addr()
		}
		return r
	})
}

// GetAnyReplica reads the active copy and every replica at once and
// returns the first that answers. Only the copies the current map assigns
// to a server are read: a replica the map has no server for (-1) is
// skipped, not waited for, and the read of a replica that a config
// arriving meanwhile leaves without a server (its node failed over) ends
// then, with ErrNoNodeAvailable. It is the one read that fans out: up to four
// goroutines for one call, which end when it returns.
//
// When no copy was read and one of them said the document does not exist,
// the error is the call's *KeyValueError matching ErrDocumentUnretrievable
// (RFC 0058), with that copy's error, which matches ErrDocumentNotFound, as
// its Cause. Any other failure of every copy (a timeout, say) is the
// copies' error, as for a read of one copy.
func (col *Collection) GetAnyReplica(ctx context.Context, key string, opts *GetReplicaOptions) (GetReplicaResult, error) {
	var o GetReplicaOptions
	if opts != nil {
		o = *opts
	}
	if err := col.replicasRefused(ctx, "GetAnyReplica", key); err != nil {
		col.refusedWrap(ctx, "get_any_replica", true, o.ParentSpan, err)
		return GetReplicaResult{}, err
	}
	var end func(error)
	ctx, o.ParentSpan, end = col.wrapCall(ctx, "get_any_replica", true, o.ParentSpan)
	defer end(errUnwound) // a panic in a read still ends the span (after end(err): nothing)
	r, err := readAnyCopy(ctx, col, "GetAnyReplica", key, func(ctx context.Context, i int) (GetReplicaResult, error) {
		return col.readCopy(ctx, key, i, &o)
	})
	end(err)
	return r, err
}

// GetAllReplicas reads the active copy and every replica and returns every
// copy that answered, active first. Only the copies the current map assigns
// to a server are read (see GetAnyReplica), so a bucket whose replicas have
// no node yet answers with the active copy alone, without waiting for the
// timeout. It fails only when none answered: with the same errors as
// GetAnyReplica (ErrDocumentUnretrievable, which matches
// ErrDocumentNotFound too, when a copy said the document does not exist).
func (col *Collection) GetAllReplicas(ctx context.Context, key string, opts *GetReplicaOptions) ([]GetReplicaResult, error) {
	var o GetReplicaOptions
	if opts != nil {
		o = *opts
	}
	if err := col.replicasRefused(ctx, "GetAllReplicas", key); err != nil {
		col.refusedWrap(ctx, "get_all_replicas", false, o.ParentSpan, err)
		return nil, err
	}
	var end func(error)
	ctx, o.ParentSpan, end = col.wrapCall(ctx, "get_all_replicas", false, o.ParentSpan)
	defer end(errUnwound) // a panic in a read still ends the span (after end(err): nothing)
	r, err := readAllCopies(ctx, col, "GetAllReplicas", key, func(ctx context.Context, i int) (GetReplicaResult, error) {
		return col.readCopy(ctx, key, i, &o)
	})
	end(err)
	return r, err
}

// wrapCall observes a call that reads several copies, named name (RFC
// 0067's wrapping span: get_any_replica, ...), under parent (its
// options', else the context's): when tracing, its span, which the reads
// of the copies take as their parent (the span it returns; parent itself
// when not tracing), with their retries summed (they run under the
// context it returns); when metered, its latency and outcome, one
// MetricOperationDuration point (the reads of the copies record none:
// they are its parts); for the slow-operation report, one entry, named
// name, with the record of the read that answered (first: the call
// returns the first answer), the reads none of their own
// (optrace.Copies). end ends it with the call's error.
func (col *Collection) wrapCall(ctx context.Context, name string, first bool, parent RequestSpan) (context.Context, RequestSpan, func(error)) {
	return col.c.wrapCall(ctx, name, col, parent, true, first)
}

// refusedWrap shows the observers a call wrapCall would observe, called
// with ctx, that was refused (err) before it read any copy: its span and
// point, failed, begun and ended at once (observeRefused says why).
func (col *Collection) refusedWrap(ctx context.Context, name string, first bool, parent RequestSpan, err error) {
	if ctx == nil { // no parent span from it
		ctx = context.Background()
	}
	_, _, end := col.wrapCall(ctx, name, first, parent)
	end(err)
}

// wrapSpan is wrapCall for a call on coll (nil: none, as a Ping's) whose
// operations are metered and reported as their own: its span alone.
func (c *Client) wrapSpan(ctx context.Context, name string, coll *Collection, parent RequestSpan) (context.Context, RequestSpan, func(error)) {
	return c.wrapCall(ctx, name, coll, parent, false, false)
}

// wrapState is what the operations of a call (wrapCall) run under a
// context carrying it (wrapStateKey) give the call: their retries, summed
// (when traced), and their records for the slow-operation report (when
// the call's reads are its parts and the report is on: copies).
type wrapState struct {
	retries atomic.Int64
	copies  *optrace.Copies
	c       optrace.Copies
}

type wrapStateKey struct{}

// addWrapRetries adds n retries of a traced operation run under ctx to
// its call's, when ctx carries one (wrapCall).
func addWrapRetries(ctx context.Context, n int) {
	if w, ok := ctx.Value(wrapStateKey{}).(*wrapState); ok {
		w.retries.Add(int64(n))
	}
}

// wrapCopies is the optrace.Copies of the call whose read of a copy runs
// under ctx, nil when the slow-operation report is off.
func wrapCopies(ctx context.Context) *optrace.Copies {
	if w, ok := ctx.Value(wrapStateKey{}).(*wrapState); ok {
		return w.copies
	}
	return nil
}

// wrapCall is Collection.wrapCall for a call on coll (nil: none); parts:
// the call's operations are its parts, with a latency point and a
// slow-operation entry of the call's own (first: it returns the first
// answer).
func (c *Client) wrapCall(ctx context.Context, name string, coll *Collection, parent RequestSpan, parts, first bool) (context.Context, RequestSpan, func(error)) {
	ob := c.obs
	metered := parts && ob.Metered()
	reported := parts && ob.Reported()
	if !ob.Tracing() && !metered && !reported || c.ctx.Err() != nil {
		// Closed: its operations are refused before they begin (begin),
		// and, as a plain operation so refused, it shows the observers
		// nothing: no span, no point, no entry.
		return ctx, parent, func(error) {}
	}
	start := c.clock.Now()
	var s hookguard.Span
	rs := parent
	var w *wrapState
	if ob.Tracing() || reported {
		w = &wrapState{}
		if reported {
			w.copies = &w.c
			w.c.First = first
		}
		ctx = context.WithValue(ctx, wrapStateKey{}, w)
	}
	if ob.Tracing() {
		var p hookguard.Span
		if ps := parentSpan(ctx, parent); ps != nil {
			p = ps
		}
		s = ob.BeginWrap(ctx, name, ob.coll(coll), p, start)
		rs, _ = s.(RequestSpan) // the client's tracer's span (spanStarter)
	}
	ended := false
	return ctx, rs, func(err error) {
		if ended { // ended once: the call ends it, and defers its end for a panic
			return
		}
		ended = true
		at := c.clock.Now()
		if err != errUnwound { // unwound by a panic: no outcome to record, as for an operation
			if metered {
				ob.RecordCall(ob.coll(coll), name, err, at.Sub(start))
			}
			if reported {
				ob.EndCopies(w.copies, name, at.Sub(start))
			}
		}
		if s != nil {
			ob.EndWrap(s, err, w.retries.Load(), at)
		}
	}
}

// errUnwound is the error a call's wrapping span (wrapSpan) ends with when
// a panic of the caller's code in one of its operations unwound the call.
var errUnwound = errors.New("client: a panic of the caller's code unwound the call")

// readAnyCopy reads the copies of key on col at once for the call named
// name and returns the first answer (fanout.First), or the call's error
// (copiesError).
func readAnyCopy[T any](ctx context.Context, col *Collection, name, key string, read func(context.Context, int) (T, error)) (T, error) {
	r, errs := fanout.First(ctx, col.c.copiesOf(key), read)
	if errs == nil {
		return r, nil
	}
	return r, copiesError(col, name, key, errs)
}

// readAllCopies reads the copies of key on col at once for the call named
// name and returns every answer, in the order of the copies (fanout.All);
// it fails only when none answered, with the call's error (copiesError).
func readAllCopies[T any](ctx context.Context, col *Collection, name, key string, read func(context.Context, int) (T, error)) ([]T, error) {
	out, errs := fanout.All(ctx, col.c.copiesOf(key), read)
	if len(out) == 0 {
		return nil, copiesError(col, name, key, errs)
	}
	return out, nil
}

// copiesError is the error of the call named name that read no copy of
// key, the copies' errors errs: fanout.Error's choice of them, and when
// that is a copy's document not found, the call's ErrDocumentUnretrievable
// wrapping it (so that ErrDocumentNotFound matches too). RFC 0058 names
// so a read of any copy that found none, and RFC 0053 (sdk-rfcs
// rfc/0053-sdk3-crud.md) defines that as the empty answer of a read of
// all copies (gocb's GetAnyReplica is GetAllReplicas' empty stream): the
// read of all copies ends alike. A timeout, a cancellation or another
// failure of every copy stays what it was.
func copiesError(col *Collection, name, key string, errs []error) error {
	err := fanout.Error(key, errs)
	if errors.Is(err, ErrDocumentNotFound) {
		err = col.c.refused(name, 0, col, key, ErrDocumentUnretrievable, err)
	}
	return err
}
