package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/hookguard"
	"github.com/kvwire/kvwire/internal/optrace"
	"github.com/kvwire/kvwire/internal/panics"
	"github.com/kvwire/kvwire/internal/rangescan"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// KV range scans (Couchbase Server 7.2+): a scan reads every document of a
// collection whose key is in a range (RangeScan, PrefixScan), or a random
// sample of them (SamplingScan), vbucket by vbucket, with
// RANGE_SCAN_CREATE, RANGE_SCAN_CONTINUE and RANGE_SCAN_CANCEL (kv_engine's
// docs/range_scans).
//
// Each vbucket is scanned by a create on its active node, continues until
// the server says the scan is complete, and, when the scan stops early, a
// cancel. ScanOptions.Concurrency bounds the vbuckets scanned at once; each
// is scanned by one of that many goroutines, which end when the scan ends
// (ScanResult.Close waits for them). When a vbucket moves during its scan
// (NOT_MY_VBUCKET on a continue, the node's connection lost, the scan gone
// from the node) or the server drops its scan while a continue runs
// (RANGE_SCAN_CANCELLED: the scan's lifetime on the server ended, its
// vbucket or bucket went), its scan is created again on the vbucket's node
// from the key after the last one returned (a sampling scan: again whole,
// without the keys already returned), as gocb does for NOT_MY_VBUCKET; the
// create follows the usual routing and retry rules. A scan stopped by its
// caller (Close, its context) never restarts: it ends as stopped.

// ScanType is what a scan reads: RangeScan, PrefixScan or SamplingScan.
type ScanType interface{ scanType() }

// ScanTerm is one end of a RangeScan: a key, included unless Exclusive.
type ScanTerm struct {
	Term      string
	Exclusive bool
}

// scanTermMax is a key no document key exceeds: MaxKeyLength bytes of 0xff.
var scanTermMax = strings.Repeat("\xff", MaxKeyLength)

// ScanTermMinimum is the smallest key ("\x00", included).
func ScanTermMinimum() *ScanTerm { return &ScanTerm{Term: "\x00"} }

// ScanTermMaximum is a key no document key exceeds (MaxKeyLength bytes of
// 0xff, included).
func ScanTermMaximum() *ScanTerm { return &ScanTerm{Term: scanTermMax} }

// RangeScan reads the documents whose keys are between From and To, in
// byte order of the keys. A nil From is ScanTermMinimum, a nil To
// ScanTermMaximum: RangeScan{} reads the whole collection.
type RangeScan struct {
	From, To *ScanTerm
}

// PrefixScan reads the documents whose keys start with Prefix.
type PrefixScan struct {
	Prefix string
}

// SamplingScan reads a random sample of about Limit documents (at most
// Limit are returned). Seed seeds the server's choice; 0 picks one at
// random. Each vbucket samples about Limit of its documents (kv_engine
// keeps each with probability Limit/documents), so the documents returned
// come from the vbuckets scanned first.
type SamplingScan struct {
	Limit uint64
	Seed  uint32
}

func (RangeScan) scanType()    {}
func (PrefixScan) scanType()   {}
func (SamplingScan) scanType() {}

// Defaults of ScanOptions.
const (
	DefaultScanConcurrency    = 1
	DefaultScanBatchItemLimit = 50
	DefaultScanBatchByteLimit = 15000
)

// ScanOptions are the options of Scan. nil means the defaults.
type ScanOptions struct {
	// Timeout bounds each request the scan sends (a create, a continue, a
	// cancel), retries included; 0 means the client's KVTimeout, and a
	// negative one is refused (ErrInvalidArgument). The scan as a whole is
	// bounded by Scan's context only. A continue also asks the server to
	// stop reading after half of the time it has left, at most 1 s (its
	// time limit, at least 1 ms): the server then answers with the items
	// read so far (at least one) and the scan asks for more, so a slow
	// vbucket (a sparse range, documents read from disk) neither times the
	// continue out nor holds the node's connection, whose other requests
	// wait behind a continue, for longer.
	Timeout time.Duration
	// IDsOnly returns keys only (ScanItem.IDOnly), not documents.
	IDsOnly bool
	// ConsistentWith makes the scan see at least these mutations: a
	// vbucket with a token is scanned only once it has the token's
	// sequence number (the server waits up to 90% of Timeout for it, then
	// the create is retried as a temporary failure), and only
	// if it has the token's vbucket UUID (a vbucket that failed over
	// since fails the scan). Two tokens of one vbucket with different
	// UUIDs are ErrInvalidArgument, and so are the zero MutationToken
	// (a write's when the server sent none), which names no mutation, and
	// a token of another bucket (MutationToken.Bucket).
	ConsistentWith []MutationToken
	// Concurrency is how many vbuckets are scanned at once (default 1).
	Concurrency int
	// BatchItemLimit and BatchByteLimit bound what one continue returns:
	// items, and bytes of keys and values (defaults 50 and 15000); its
	// time limit (Timeout) may end it sooner.
	BatchItemLimit uint32
	BatchByteLimit uint32
	// RetryStrategy overrides the client's strategy for the scan's
	// requests: a create's retries (as any operation's), a continue the
	// server refused for a while (a temporary failure, or a status the
	// node's error map says to retry), sent again to the same scan, and a
	// cancel's wait for its node.
	RetryStrategy RetryStrategy
	// ParentSpan is the span the scan's span ("scan") goes under when
	// Options.Tracer records (else the context's, ContextWithParentSpan).
	// The scan is one operation, traced, metered (MetricOperationDuration,
	// "scan") and, when slow, reported (one slow-operation entry) from
	// Scan until Next returns false or Close (a ScanResult dropped
	// unclosed: until the garbage collector stops it): its requests
	// (RANGE_SCAN_CREATE, _CONTINUE, _CANCEL) are its dispatch spans, and
	// couchbase.retries sums their retries, each also a retry event on the
	// scan's span (added when the scan ends, at the time of the retry; at
	// most 64).
	ParentSpan RequestSpan
}

// ScanItem is one document a scan returned. Value is the caller's own
// copy (nil with IDsOnly).
type ScanItem struct {
	ID string
	// IDOnly is true when the scan returned keys only (IDsOnly): the other
	// fields are zero.
	IDOnly bool
	Value  []byte
	Flags  uint32
	Cas    uint64
	// Expiry is when the document expires (zero: never).
	Expiry time.Time

	transcoder Transcoder // the client's, for ContentAs
}

// ContentAs decodes the value into out (a non-nil pointer) as
// GetResult.ContentAs does: with the client's Transcoder, by the
// document's flags. An item of an IDsOnly scan has no value to decode:
// ErrInvalidArgument.
func (it ScanItem) ContentAs(out any) error {
	if it.IDOnly {
		return fmt.Errorf("%w: ScanItem.ContentAs: the scan returned keys only (IDsOnly)", ErrInvalidArgument)
	}
	return GetResult{Value: it.Value, Flags: it.Flags, transcoder: it.transcoder}.ContentAs(out)
}

// ScanResult iterates over a scan's documents, in key order within a
// vbucket and interleaved across vbuckets:
//
//	res, err := col.Scan(ctx, client.PrefixScan{Prefix: "user:"}, nil)
//	if err != nil {
//		return err
//	}
//	defer res.Close()
//	for res.Next() {
//		item := res.Item()
//		fmt.Println(item.ID, string(item.Value))
//	}
//	if err := res.Err(); err != nil {
//		return err
//	}
//
// or, with All, a range-over-func loop that closes the result when it ends.
// The scan runs ahead of the caller by at most two batches per vbucket
// scanned at once (one queued, one waiting to be). Close
// must be called unless Next returned false: it stops the scan, cancels the
// server-side scans still open and waits for the scan's goroutines (up to
// about twice the scan's Timeout when a node does not answer: see Close).
// A ScanResult dropped unclosed is stopped likewise only once the garbage
// collector finds it unreachable, its goroutines and server-side scans held
// until then; its span and latency then end failed (error.type _OTHER),
// and a panic of the caller's code in its requests is logged, not raised
// (found after the client's Close, it is only stopped: the client calls
// none of the caller's code once Close has returned).
// A
// canceled context does the same and ends the iteration with
// ErrRequestCanceled (or a timeout at its deadline); closing the client
// ends it with ErrClosed. A panic in the caller's code that the scan's
// requests run (an Observer, a RetryStrategy) stops the scan and is raised
// again by Next (or Close) once its goroutines have ended. A ScanResult is
// for one goroutine.
type ScanResult struct {
	cur        rangescan.Cursor
	transcoder Transcoder // the client's, for ScanItem.ContentAs
	// call is the scan as its observers see it (nil: none records), which
	// ends when Next returns false, at Close, or when a panic unwinds
	// either (c's clock times it).
	c    *Client
	call *optrace.Call
}

// Scan starts a scan of the collection: a RangeScan, PrefixScan or
// SamplingScan (or a pointer to one). It checks the arguments and that the bucket offers range
// scans (ErrFeatureNotAvailable otherwise: memcached://, a memcached
// bucket, a server without the rangeScan capability), then returns at once;
// the documents come through the ScanResult, and so do the errors met
// while scanning. ctx bounds the whole scan.
func (col *Collection) Scan(ctx context.Context, st ScanType, opts *ScanOptions) (*ScanResult, error) {
	c := col.c
	var o ScanOptions
	if opts != nil {
		o = *opts
	}
	// A scan type by pointer scans as its value (a nil one is refused
	// by scanConfig, naming it).
	switch p := st.(type) {
	case *RangeScan:
		if p != nil {
			st = *p
		}
	case *PrefixScan:
		if p != nil {
			st = *p
		}
	case *SamplingScan:
		if p != nil {
			st = *p
		}
	}
	fail := func(sentinel error, err error) (*ScanResult, error) {
		e := c.refused("Scan", 0, col, "", sentinel, err)
		// Refused before it began, it is a scan all the same to its
		// observers (observeRefused), unless the client is closed.
		if ob := c.obs; ob.Observed() && c.ctx.Err() == nil {
			bctx := ctx
			if bctx == nil {
				bctx = context.Background()
			}
			var p hookguard.Span
			if ps := parentSpan(bctx, o.ParentSpan); ps != nil {
				p = ps
			}
			now := c.clock.Now()
			ob.EndCall(ob.BeginCall(bctx, spanScan, ob.coll(col), p, now), e, now)
		}
		return nil, e
	}
	if ctx == nil {
		return fail(ErrInvalidArgument, errNilContext)
	}
	if c.ctx.Err() != nil {
		return fail(ErrClosed, errors.New("the client is closed"))
	}
	cfg, err := rangescan.Offered(c.memcached, c.cl.Topology(), c.opts.Bucket)
	if err != nil {
		return fail(ErrFeatureNotAvailable, err)
	}
	if o.Concurrency < 0 {
		return fail(ErrInvalidArgument, fmt.Errorf("negative Concurrency %d", o.Concurrency))
	}
	if err := checkTimeout(o.Timeout); err != nil {
		return fail(ErrInvalidArgument, err)
	}
	reqs := &scanRequests{c: c, col: col, parent: ctx, timeout: cmp.Or(o.Timeout, c.opts.KVTimeout),
		strategy: cmp.Or(internalStrategy(o.RetryStrategy, nil), c.strategy)}
	sc, err := scanConfig(st, &o, cfg, c.opts.Bucket, reqs.timeout)
	if err != nil {
		return fail(ErrInvalidArgument, err)
	}
	// The scan is one operation to the tracer and the meter ("scan"), from
	// here until its results end or it is closed; its requests are its
	// dispatch spans.
	if ob := c.obs; ob.Observed() {
		var p hookguard.Span
		if ps := parentSpan(ctx, o.ParentSpan); ps != nil {
			p = ps
		}
		reqs.call = ob.BeginCall(ctx, spanScan, ob.coll(col), p, c.clock.Now())
	}
	run := rangescan.Start(ctx, sc, reqs)
	// The watch fails the scan when the client closes.
	unwatch := context.AfterFunc(c.ctx, func() {
		run.Fail(c.refused("Scan", 0, col, "", ErrClosed, nil))
	})
	res := &ScanResult{cur: rangescan.NewCursor(run, &sc, unwatch, reqs.incomplete), transcoder: col.c.transcoder,
		c: c, call: reqs.call}
	runtime.AddCleanup(res, stopDropped, droppedScan{c: c, call: reqs.call, run: run, unwatch: unwatch})
	return res, nil
}

// droppedScan is what a ScanResult's cleanup stops (stopDropped): it
// references no ScanResult.
type droppedScan struct {
	c       *Client
	call    *optrace.Call // the scan as its observers see it (nil: none records)
	run     *rangescan.Run
	unwatch func() bool
}

// stopDropped stops the scan of a ScanResult its caller dropped unclosed
// (Close must be called unless Next returned false), once the garbage
// collector found it unreachable: nobody can take its batches any more,
// and its goroutines, waiting to queue one, its server-side scans (until
// the server's own limit on their life) and the client's watch of it
// would otherwise stay for as long as the client lives (one of each per
// scan dropped). It stops the scan as Close would, on a goroutine of its
// own (Stop waits for the cancels), then ends the scan to its observers,
// failed with errDroppedScan (its span, its latency), once its goroutines,
// which trace under its span, have ended. A panic of the caller's code in
// its requests (an Observer, a RetryStrategy) has no caller's goroutine
// to be raised on: it is logged at error. A scan that ended or was closed
// before stops at once, and its observers saw it end then.
//
// What calls the caller's code once the scan stopped (the Logger, the
// Tracer's span, the Meter) runs on a goroutine of the client's own
// (Client.bg), which the shutdown waits for: the client calls none of it
// once Close has returned. A scan stopped once the shutdown has begun
// ends without its observers told, as they are not of an operation begun
// then. The stop itself is not one the shutdown waits for: the scan's
// goroutines run the caller's code (an Observer in a continue), which
// may call Close, and Close does not wait for the goroutine it runs on.
func stopDropped(d droppedScan) {
	go func() {
		d.unwatch()
		_ = d.run.Stop()
		p := d.run.Dropped()
		if p == nil && (d.call == nil || d.call.Ended()) {
			droppedScanStopped(d.c) // closed or ended before: nothing to tell
			return
		}
		if !d.c.bg.Go(func() {
			if p != nil && !p.Goexit {
				d.c.opts.Logger.Error("kvwire: the caller's code panicked in a range scan whose ScanResult was dropped unclosed; the panic is dropped",
					"panic", fmt.Sprint(p.V))
			}
			d.c.obs.EndCall(d.call, errDroppedScan, d.c.clock.Now())
			droppedScanStopped(d.c)
		}) {
			droppedScanStopped(d.c)
		}
	}()
}

// droppedScanStopped calls testHookDroppedScan, if set.
func droppedScanStopped(c *Client) {
	if h := testHookDroppedScan.Load(); h != nil {
		(*h)(c)
	}
}

// testHookDroppedScan, when set by this package's tests, is called with
// the client once the cleanup of a ScanResult of its dropped unclosed
// (stopDropped) is done. It is atomic: a cleanup of an earlier test's
// scan may run while a test sets it.
var testHookDroppedScan atomic.Pointer[func(*Client)]

// errDroppedScan is the error a scan's observers see it end with when its
// ScanResult was dropped unclosed (stopDropped).
var errDroppedScan = errors.New("client: the scan's ScanResult was dropped unclosed (Close must be called unless Next returned false)")

// spanScan is the name of a scan's span and of its latency's
// db.operation.name.
const spanScan = "scan"

// scanConfig is what scan type st with options o reads on bucket of
// config cfg (timeout: each request's), or why it is refused.
func scanConfig(st ScanType, o *ScanOptions, cfg *vbmap.Config, bucket string, timeout time.Duration) (rangescan.Config, error) {
	sp := rangescan.Spec{KeyOnly: o.IDsOnly, Concurrency: cmp.Or(o.Concurrency, DefaultScanConcurrency),
		ItemLimit: cmp.Or(o.BatchItemLimit, DefaultScanBatchItemLimit), ByteLimit: cmp.Or(o.BatchByteLimit, DefaultScanBatchByteLimit),
		MaxKeyLength: MaxKeyLength, Timeout: timeout}
	switch s := st.(type) {
	case RangeScan:
		from, to := cmp.Or(s.From, ScanTermMinimum()), cmp.Or(s.To, ScanTermMaximum())
		sp.Range = &memdx.RangeScanRange{Start: []byte(from.Term), ExclusiveStart: from.Exclusive,
			End: []byte(to.Term), ExclusiveEnd: to.Exclusive}
	case PrefixScan:
		var err error
		if sp.Range, err = rangescan.PrefixRange(s.Prefix, MaxKeyLength); err != nil {
			return rangescan.Config{}, err
		}
	case SamplingScan:
		sp.Samples, sp.Seed = s.Limit, s.Seed
	case *RangeScan, *PrefixScan, *SamplingScan:
		return rangescan.Config{}, fmt.Errorf("nil %T", st)
	default:
		return rangescan.Config{}, fmt.Errorf("scan type %T is not RangeScan, PrefixScan or SamplingScan", st)
	}
	for i, tok := range o.ConsistentWith {
		if tok == (MutationToken{}) {
			// Sent, it would ask vbucket 0 for history UUID 0, which the
			// server refuses as a vbucket that failed over.
			return rangescan.Config{}, fmt.Errorf("ConsistentWith[%d] is the zero MutationToken, which names no mutation "+
				"(a write returns it when the server sent none: Options.DisableMutationTokens?)", i)
		}
		if tok.Bucket != "" && tok.Bucket != bucket {
			// Its vbucket and UUID are another bucket's.
			return rangescan.Config{}, fmt.Errorf("ConsistentWith[%d] is a token of bucket %q; the scan reads bucket %q", i, tok.Bucket, bucket)
		}
		sp.Tokens = append(sp.Tokens, rangescan.Token{Vbucket: tok.Vbucket, VbUUID: tok.VbUUID, Seqno: tok.Seqno})
	}
	return sp.Config(cfg)
}

// scanRequests are a scan's requests, run by execute (rangescan.Requests):
// the create addressed to a vbucket, with the client's routing and retry
// rules; the continue and the cancel addressed to the node holding the
// scan, never routed elsewhere.
type scanRequests struct {
	c       *Client
	col     *Collection
	parent  context.Context // Scan's: the create keeps its values, not its cancellation
	timeout time.Duration
	// strategy decides the retries of the scan's requests (ScanOptions'
	// or the client's).
	strategy retry.Strategy
	// call is the scan as its observers see it (nil: none records):
	// each request is a part of it.
	call *optrace.Call
}

// Create creates vb's scan. A scan that stops meanwhile, even by its
// context, does not end the create (only the request timeout does): a
// create abandoned after it was written could leave a scan on the server
// whose id the client never learns, so the scan waits for its answer and
// cancels the scan it made.
func (sr *scanRequests) Create(vb uint16, cfg *memdx.RangeScanCreate) (memdx.RangeScanID, *cluster.Node, error) {
	o := sr.c.getOp("Scan", kindScanCreate, sr.col, "")
	defer putOp(o)
	o.req = memdx.Request{OpCode: memdx.OpRangeScanCreate, Datatype: memdx.DatatypeJSON}
	o.target.ByVbucket, o.target.Vbucket, o.scanCfg = true, vb, cfg
	o.timeout, o.strategy, o.call = sr.timeout, sr.strategy, sr.call
	if err := sr.c.execute(context.WithoutCancel(sr.parent), o); err != nil {
		var kv *KeyValueError
		if o.st.InDoubt() && errors.As(err, &kv) && kv.Cause != nil {
			// Written, no answer: the server may have opened a scan
			// whose id the client never learnt (it changed no data).
			kv.Cause = fmt.Errorf("%w (a scan it opened may stay on the server until its idle timeout drops it)", kv.Cause)
			kv.seal()
		}
		return memdx.RangeScanID{}, nil, err
	}
	return o.scanID, o.node, nil
}

// Continue asks vb's scan on n for its next batch. A continue the server
// refused for a while (TMPFAIL, an error-map retry) is sent again to the
// same scan as the scan's strategy says (rangescan.ContinueStrategy).
func (sr *scanRequests) Continue(ctx context.Context, n *cluster.Node, vb uint16, req memdx.RangeScanContinue, dec *rangescan.Decoder) error {
	o := sr.nodeOp(n, vb, memdx.NewRangeScanContinue(req))
	o.strategy = rangescan.ContinueStrategy{S: sr.strategy}
	o.handler = dec.Handle
	return runNode(ctx, o)
}

// Cancel cancels vb's scan on n, even when the scan's context is done,
// waiting (as the retry strategy says, within the request timeout counted
// on the client's Clock) for n to have a live connection when it has none,
// unless n has left the cluster (rangescan.CancelStrategy).
// Closing the client ends the cancel at once, waiting or in flight. A scan
// the server no longer has (KEY_ENOENT) is as good as cancelled; other
// failures leave it to the server, which drops it after its lifetime.
//
// A cancel held because every connection of n has a request the server
// answers only by a bound of its own (RANGE_SCAN_CANCEL, a barrier in
// kv_engine, is not sent behind it: pickBarrier) is waited for while the
// hold is no longer than a continue can hold a connection
// (rangescan.MaxContinueTimeLimit: the scan's own continue given up, or
// another vbucket's). Held longer (a durable write waiting for
// replication, up to its durability timeout), it goes on on its own from
// then on, within its timeout, and Cancel returns: the scan's error, or
// its Close, is not held back for it. The client's Close ends it and
// waits for it.
func (sr *scanRequests) Cancel(n *cluster.Node, vb uint16, id memdx.RangeScanID) {
	held := make(chan struct{})
	ended := make(chan *panics.Ended, 1)
	run := func() {
		var p *panics.Ended
		detached := false
		defer func() {
			if !detached {
				ended <- p // raised on the scan's goroutine
			} else if p != nil && !p.Goexit {
				// The caller's code (an Observer, a RetryStrategy)
				// panicked in a cancel the scan no longer waits
				// for: there is no caller's goroutine to raise it on.
				sr.c.opts.Logger.Error("kvwire: the caller's code panicked in a range scan's cancel sent after the scan had returned; the panic is dropped",
					"node", n.Addr(), "vbucket", vb, "panic", fmt.Sprint(p.V))
			}
		}()
		panics.Catch(&p, func() {
			sr.cancel(n, vb, id, func() {
				detached = true
				close(held)
			})
		})
	}
	if !sr.c.bg.Go(run) {
		run() // the client is closing: the cancel ends at once
	}
	select {
	case p := <-ended:
		p.Raise()
	case <-held:
	}
}

// cancel runs Cancel's request; detach is called once it is held longer
// than rangescan.MaxContinueTimeLimit (op.onHold): from then on the scan
// does not wait for it, and it traces nothing more under the scan's span,
// which may end (optrace.Trace.Detach).
func (sr *scanRequests) cancel(n *cluster.Node, vb uint16, id memdx.RangeScanID, detach func()) {
	// The caller's values, not its cancellation; the client's Close ends it.
	ctx, stop := context.WithCancel(context.WithoutCancel(sr.parent))
	defer stop()
	defer context.AfterFunc(sr.c.ctx, stop)()
	o := sr.nodeOp(n, vb, memdx.NewRangeScanCancel(id))
	o.strategy = rangescan.CancelStrategy{S: sr.strategy, Cl: sr.c.cl, N: n}
	detached := false
	o.onHold = func(wait time.Duration) {
		if !detached && wait > rangescan.MaxContinueTimeLimit {
			detached = true
			o.trace.Detach() // before the scan may end its span
			detach()
		}
	}
	err := runNode(ctx, o)
	var ke *KeyValueError
	if err == nil || errors.As(err, &ke) && ke.Status == StatusKeyNotFound {
		return
	}
	sr.c.opts.Logger.Debug("kvwire: range scan cancel failed; the server drops the scan after its lifetime",
		"node", n.Addr(), "vbucket", vb, "err", err)
}

// nodeOp is the scan's request req to node n, where vb's scan lives, with
// the scan's timeout and strategy.
func (sr *scanRequests) nodeOp(n *cluster.Node, vb uint16, req memdx.Request) *op {
	o := sr.c.getOp("Scan", kindNoop, sr.col, "")
	req.Vbucket = vb
	o.req, o.timeout, o.strategy, o.call = req, sr.timeout, sr.strategy, sr.call
	o.target.Node, o.target.Vbucket = n, vb
	// RANGE_SCAN_CONTINUE and _CANCEL are barriers in kv_engine under
	// UnorderedExecution (not is_reorder_supported): sent behind a
	// synchronous write waiting for replication, they waited for it (up
	// to its durability timeout) and held every later request on the
	// connection. They go on a connection of n free of such requests, or
	// are held until one is (pickBarrier). Any connection of n will do:
	// kv_engine keeps the scan by its id in its vbucket
	// (VB::RangeScanOwner), and a continue or cancel names it by that id
	// from whichever connection of the same user it comes.
	o.barrier = true
	return o
}

// Invalid is the error of a continue of vb's scan on n whose items break
// the scan's rules (cause).
func (sr *scanRequests) Invalid(vb uint16, n *cluster.Node, cause error) error {
	e := sr.c.refused("Scan", memdx.OpRangeScanContinue, sr.col, "", ErrServerFailure,
		fmt.Errorf("range scan of vbucket %d: %w", vb, cause))
	e.Vbucket, e.Node = vb, n.Addr()
	return e
}

// Empty: a create answered KEY_ENOENT has nothing in its range.
func (sr *scanRequests) Empty(err error) bool { return errors.Is(err, ErrDocumentNotFound) }

// Restart: a continue that failed with a KeyValueError restarts as
// rangescan.Restart says of its status; the node was not reached, or the
// connection ended, when no node was available or conn reported the error.
func (sr *scanRequests) Restart(err error) (restart, cancel bool) {
	var ke *KeyValueError
	if !errors.As(err, &ke) {
		return false, false
	}
	return rangescan.Restart(ke.Status.wire(), errors.Is(err, ErrNoNodeAvailable) || errors.As(err, new(*conn.RequestError)))
}

// Next advances to the next document, waiting for it; it returns false at
// the end of the scan, on an error (Err), or after Close.
func (r *ScanResult) Next() bool {
	if r.call == nil {
		return r.cur.Next()
	}
	return r.nextObserved()
}

// nextObserved is Next of a scan its observers see: the scan's span and
// latency end when it returns false, or when a panic of the caller's code
// that the scan ran unwinds it.
func (r *ScanResult) nextObserved() (more bool) {
	returned := false
	defer func() {
		if !returned {
			r.endCall(errUnwound)
		} else if !more {
			r.endCall(r.cur.Err())
		}
	}()
	more = r.cur.Next()
	returned = true
	return more
}

// endCall ends the scan's observed operation with err (once: later calls
// do nothing).
func (r *ScanResult) endCall(err error) {
	r.c.obs.EndCall(r.call, err, r.c.clock.Now())
}

// Item returns the document Next moved to.
func (r *ScanResult) Item() ScanItem {
	if it := r.cur.Item(); it != nil {
		return ScanItem{ID: it.ID, IDOnly: it.IDOnly, Value: it.Value, Flags: it.Flags, Cas: it.Cas, Expiry: it.Expiry,
			transcoder: r.transcoder}
	}
	return ScanItem{}
}

// Err returns the error that ended the scan, nil when it ended normally
// or was closed.
func (r *ScanResult) Err() error { return r.cur.Err() }

// Close stops the scan if it is still running: it cancels the server-side
// scans still open and waits for the scan's goroutines. It returns Err.
// Calling it more than once is harmless.
//
// Close does not end at once when a server-side scan has to be cancelled
// and its node has no live connection (or does not answer): the cancel
// waits, as the scan's retry strategy says, for up to the scan's Timeout
// (ScanOptions.Timeout, default Options.KVTimeout: 2.5 s) on the client's
// Clock. A create in flight is waited for too (up to Timeout: the scan it
// makes must be cancelled), so Close can take up to about twice Timeout
// (the vbuckets scanned at once are cancelled in parallel). Closing the
// client ends these waits at once. A cancel that must wait because every
// connection to the node holds a durable write waiting for replication
// (RANGE_SCAN_CANCEL, a barrier in kv_engine, is not sent behind one)
// does not hold Close back, nor the scan's error: it is sent on its own
// once a connection is free, within the scan's Timeout, unless the client
// is closed first (the server then drops the scan after its lifetime).
//
// Deferred (defer res.Close()) in a function whose loop over Next panics,
// Close ends the scan as failed to its observers (a span with status
// Error, error.type _OTHER), and the panic goes on with its value (under
// GODEBUG=panicnil=1, which hides a panic(nil) from it, Close leaves
// every panic alone and the scan ends as closed).
func (r *ScanResult) Close() error {
	if r.call != nil && !r.call.Ended() {
		// A panic of the caller's code may be unwinding the function that
		// deferred Close: recover, called here, directly by the deferred
		// call, is Go's one way to tell (elsewhere it returns nil and
		// stops nothing). The scan did not end as its caller asked; the
		// panic is raised again, unchanged, once the scan is closed.
		// Not where recover cannot tell panic(nil) from no panic
		// (GODEBUG=panicnil=1): it would stop that panic for good.
		if recoverSeesNilPanics() {
			if p := recover(); p != nil {
				r.close(true)
				panic(p)
			}
		}
	}
	return r.close(false)
}

// recoverSeesNilPanics reports whether recover returns a value for
// panic(nil) (a *runtime.PanicNilError), as it does unless the program
// runs with GODEBUG=panicnil=1 (its environment, a //go:debug line),
// which may change while it runs: asked at each Close that may recover.
func recoverSeesNilPanics() (sees bool) {
	defer func() { sees = recover() != nil }()
	panic(nil)
}

// close is Close; unwound: a panic of the caller's code is unwinding it
// (All's loop body), and the scan ends failed with errUnwound.
func (r *ScanResult) close(unwound bool) error {
	if r.call == nil {
		return r.cur.Close()
	}
	returned := false
	defer func() {
		if !returned {
			r.endCall(errUnwound)
		}
	}()
	err := r.cur.Close()
	returned = true
	if unwound {
		r.endCall(errUnwound)
	} else {
		r.endCall(err)
	}
	return err
}

// All iterates over the documents, then yields the scan's error (with a
// zero ScanItem) if it failed. Breaking out of the loop closes the scan,
// and so does reaching its end.
//
//	res, err := col.Scan(ctx, client.RangeScan{}, nil) // the whole collection
//	if err != nil {
//		return err
//	}
//	for item, err := range res.All() {
//		if err != nil {
//			return err
//		}
//		fmt.Println(item.ID)
//	}
func (r *ScanResult) All() iter.Seq2[ScanItem, error] {
	return func(yield func(ScanItem, error) bool) {
		returned := false
		// A panic (or runtime.Goexit) in the loop's body unwinds the
		// loop: the scan did not end as its caller asked, and its span
		// and latency say so (errUnwound), not Ok. The panic goes on.
		defer func() { r.close(!returned) }()
		for r.Next() {
			if !yield(r.Item(), nil) {
				returned = true
				return
			}
		}
		if err := r.Err(); err != nil {
			yield(ScanItem{}, err)
		}
		returned = true
	}
}

// incomplete is the error of a scan that ended before every vbucket was
// scanned, without an error of its own (rangescan.Run.Incomplete).
func (sr *scanRequests) incomplete(op memdx.OpCode, sentinel, cause error) error {
	return sr.c.refused("Scan", op, sr.col, "", sentinel, cause)
}
