package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
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
// from the node), its scan is created again on the vbucket's node from the
// key after the last one returned (a sampling scan: again whole, without
// the keys already returned), as gocb does; the create follows the usual
// routing and retry rules.

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
// random. Each vbucket samples up to Limit of its documents, so the
// documents returned come from the vbuckets scanned first.
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
	// cancel), retries included; the client's KVTimeout by default. The
	// scan as a whole is bounded by Scan's context only.
	Timeout time.Duration
	// IDsOnly returns keys only (ScanItem.IDOnly), not documents.
	IDsOnly bool
	// ConsistentWith makes the scan see at least these mutations: a
	// vbucket with a token is scanned only once it has the token's
	// sequence number (the server waits up to 90% of Timeout for it, then
	// the create is retried as a temporary failure), and only
	// if it has the token's vbucket UUID (a vbucket that failed over
	// since fails the scan). Two tokens of one vbucket with different
	// UUIDs are ErrInvalidArgument.
	ConsistentWith []MutationToken
	// Concurrency is how many vbuckets are scanned at once (default 1).
	Concurrency int
	// BatchItemLimit and BatchByteLimit bound what one continue returns:
	// items, and bytes of keys and values (defaults 50 and 15000).
	BatchItemLimit uint32
	BatchByteLimit uint32
	// RetryStrategy overrides the client's strategy for the scan's
	// requests: a create's retries (as any operation's), a continue the
	// server refused for a while (a temporary failure, or a status the
	// node's error map says to retry), sent again to the same scan, and a
	// cancel's wait for its node.
	RetryStrategy RetryStrategy
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
// server-side scans still open and waits for the scan's goroutines. A
// canceled context does the same and ends the iteration with
// ErrRequestCanceled (or a timeout at its deadline); closing the client
// ends it with ErrClosed. A ScanResult is for one goroutine.
type ScanResult struct {
	run   *scanRun
	batch []ScanItem
	pos   int
	count uint64
	// halted: the scan's goroutines have ended (and its server-side scans
	// with them) while the current item is still the caller's; ended: the
	// iteration is over.
	halted bool
	ended  bool
	err    error
}

// errScanStopped is the cancel cause of a scan the caller stopped (Close,
// or a sampling scan that has its Limit).
var errScanStopped = errors.New("scan stopped")

// maxScanRestarts bounds the restarts of one vbucket's scan in a row that
// return nothing new.
const maxScanRestarts = 16

// scanRun is the shared state of one scan: its configuration, the
// vbuckets left, and the goroutines scanning them.
type scanRun struct {
	c       *Client
	col     *Collection
	parent  context.Context
	ctx     context.Context // canceled (with a cause) when the scan stops
	cancel  context.CancelCauseFunc
	timeout time.Duration
	// strategy decides the retries of the scan's requests (ScanOptions'
	// or the client's).
	strategy retry.Strategy

	keyOnly   bool
	rng       *memdx.RangeScanRange // nil for a sampling scan
	sampling  *memdx.RangeScanSampling
	limit     uint64 // sampling: items returned at most
	snap      map[uint16]memdx.RangeScanSnapshot
	itemLimit uint32
	byteLimit uint32

	out  chan []ScanItem // closed by the last worker to end
	live atomic.Int32
	// lastOp is 1<<8 | the opcode of the scan's last request sent (0:
	// none yet), which a timeout of the whole scan names.
	lastOp atomic.Uint32
	// unwatch stops the watch that fails the scan when the client closes.
	unwatch func() bool

	mu       sync.Mutex
	vbs      []uint16 // vbuckets not started yet
	finished int      // vbuckets scanned to the end
	total    int
	err      error // the first error that failed the scan
}

// Scan starts a scan of the collection: a RangeScan, PrefixScan or
// SamplingScan. It checks the arguments and that the bucket offers range
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
	fail := func(sentinel error, format string, args ...any) (*ScanResult, error) {
		return nil, &KeyValueError{Op: "Scan", Bucket: c.opts.Bucket, Scope: col.scope, Collection: col.name,
			Err: sentinel, Cause: fmt.Errorf(format, args...)}
	}
	if c.ctx.Err() != nil {
		return fail(ErrClosed, "the client is closed")
	}
	if c.memcached {
		return fail(ErrFeatureNotAvailable, "memcached has no range scans")
	}
	t := c.topo.Load()
	if t == nil || t.cfg == nil || !t.cfg.HasVbucketMap() {
		return fail(ErrFeatureNotAvailable, "range scans need a bucket with vbuckets")
	}
	if !t.cfg.HasBucketCapability("rangeScan") {
		return fail(ErrFeatureNotAvailable, "the bucket does not offer range scans (capability rangeScan, Couchbase Server 7.2+)")
	}
	if o.Concurrency < 0 || o.Timeout < 0 {
		return fail(ErrInvalidArgument, "negative Concurrency or Timeout")
	}
	r := &scanRun{c: c, col: col, parent: ctx, keyOnly: o.IDsOnly, timeout: o.Timeout,
		itemLimit: o.BatchItemLimit, byteLimit: o.BatchByteLimit}
	if r.timeout == 0 {
		r.timeout = c.opts.KVTimeout
	}
	r.strategy = internalStrategy(o.RetryStrategy, nil)
	if r.strategy == nil {
		r.strategy = c.strategy
	}
	if r.itemLimit == 0 {
		r.itemLimit = DefaultScanBatchItemLimit
	}
	if r.byteLimit == 0 {
		r.byteLimit = DefaultScanBatchByteLimit
	}
	switch s := st.(type) {
	case RangeScan:
		from, to := s.From, s.To
		if from == nil {
			from = ScanTermMinimum()
		}
		if to == nil {
			to = ScanTermMaximum()
		}
		r.rng = &memdx.RangeScanRange{Start: []byte(from.Term), ExclusiveStart: from.Exclusive,
			End: []byte(to.Term), ExclusiveEnd: to.Exclusive}
	case *RangeScan:
		if s == nil {
			return fail(ErrInvalidArgument, "nil *RangeScan")
		}
		return col.Scan(ctx, *s, opts)
	case PrefixScan:
		if len(s.Prefix) > MaxKeyLength {
			return fail(ErrInvalidArgument, "prefix of %d bytes, at most %d", len(s.Prefix), MaxKeyLength)
		}
		start := s.Prefix
		if start == "" {
			start = "\x00"
		}
		r.rng = &memdx.RangeScanRange{Start: []byte(start), End: []byte(s.Prefix + scanTermMax[len(s.Prefix):])}
	case SamplingScan:
		if s.Limit == 0 {
			return fail(ErrInvalidArgument, "a sampling scan needs a Limit above 0")
		}
		seed := s.Seed
		for seed == 0 {
			seed = rand.Uint32()
		}
		r.sampling = &memdx.RangeScanSampling{Samples: s.Limit, Seed: seed}
		r.limit = s.Limit
	default:
		return fail(ErrInvalidArgument, "scan type %T is not RangeScan, PrefixScan or SamplingScan", st)
	}
	if r.rng != nil {
		for _, k := range [][]byte{r.rng.Start, r.rng.End} {
			if len(k) == 0 || len(k) > MaxKeyLength {
				return fail(ErrInvalidArgument, "range term of %d bytes: 1 to %d", len(k), MaxKeyLength)
			}
		}
	}
	if len(o.ConsistentWith) > 0 {
		r.snap = make(map[uint16]memdx.RangeScanSnapshot, len(o.ConsistentWith))
		for _, tok := range o.ConsistentWith {
			if int(tok.Vbucket) >= t.cfg.NumVbuckets() {
				return fail(ErrInvalidArgument, "mutation token of vbucket %d; the bucket has %d", tok.Vbucket, t.cfg.NumVbuckets())
			}
			cur, ok := r.snap[tok.Vbucket]
			if ok && cur.VbUUID != tok.VbUUID {
				return fail(ErrInvalidArgument, "two mutation tokens of vbucket %d with different UUIDs (%d, %d)", tok.Vbucket, cur.VbUUID, tok.VbUUID)
			}
			if !ok || tok.Seqno > cur.Seqno {
				// The server waits for the seqno 90% of the request's
				// timeout, so that it answers before the client gives up.
				r.snap[tok.Vbucket] = memdx.RangeScanSnapshot{VbUUID: tok.VbUUID, Seqno: tok.Seqno,
					TimeoutMs: uint32(min(max((r.timeout*9/10).Milliseconds(), 1), 1<<31))}
			}
		}
	}
	// Encoding checks what the server would refuse as invalid.
	if _, err := memdx.AppendRangeScanCreateValue(nil, r.createConfig(0, nil)); err != nil {
		return fail(ErrInvalidArgument, "%v", err)
	}
	r.vbs = scanOrder(t)
	r.total = len(r.vbs)
	workers := o.Concurrency
	if workers == 0 {
		workers = DefaultScanConcurrency
	}
	workers = min(workers, len(r.vbs))
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	r.unwatch = context.AfterFunc(c.ctx, func() {
		r.fail(&KeyValueError{Op: "Scan", Bucket: c.opts.Bucket, Scope: col.scope, Collection: col.name, Err: ErrClosed})
	})
	r.out = make(chan []ScanItem, workers)
	r.live.Store(int32(workers))
	for range workers {
		go r.work()
	}
	return &ScanResult{run: r}, nil
}

// scanOrder lists the vbuckets of t's config, alternating between their
// active nodes so that concurrent vbucket scans spread over the nodes.
func scanOrder(t *topology) []uint16 {
	n := t.cfg.NumVbuckets()
	byServer := map[int][]uint16{}
	var servers []int
	for vb := range n {
		s, err := t.cfg.VbucketServer(uint16(vb), 0, false)
		if err != nil {
			s = -1
		}
		if _, ok := byServer[s]; !ok {
			servers = append(servers, s)
		}
		byServer[s] = append(byServer[s], uint16(vb))
	}
	out := make([]uint16, 0, n)
	for len(out) < n {
		for _, s := range servers {
			if l := byServer[s]; len(l) > 0 {
				out = append(out, l[0])
				byServer[s] = l[1:]
			}
		}
	}
	return out
}

// createConfig is the create request's configuration for vb, starting
// after the key after (a restart; nil: from the range's start).
func (r *scanRun) createConfig(vb uint16, after []byte) *memdx.RangeScanCreate {
	cfg := &memdx.RangeScanCreate{KeyOnly: r.keyOnly, Sampling: r.sampling}
	if r.rng != nil {
		rng := *r.rng
		if after != nil {
			rng.Start, rng.ExclusiveStart = after, true
		}
		cfg.Range = &rng
	}
	if s, ok := r.snap[vb]; ok {
		cfg.Snapshot = &s
	}
	return cfg
}

// work scans vbuckets until none is left or the scan stops. The last
// worker to end closes out.
func (r *scanRun) work() {
	defer func() {
		if r.live.Add(-1) == 0 {
			close(r.out)
		}
	}()
	for {
		r.mu.Lock()
		if len(r.vbs) == 0 {
			r.mu.Unlock()
			return
		}
		vb := r.vbs[0]
		r.vbs = r.vbs[1:]
		r.mu.Unlock()
		done, err := r.scanVbucket(vb)
		if err != nil {
			r.fail(err)
			return
		}
		if !done {
			return // the scan stopped
		}
		r.mu.Lock()
		r.finished++
		r.mu.Unlock()
	}
}

// fail records the scan's first error and stops the scan. An error met
// because the scan had already stopped is not recorded.
func (r *scanRun) fail(err error) {
	if r.ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
	r.cancel(err)
}

// scanVbucket scans vb to its end (done) or until the scan stops (not
// done, no error).
func (r *scanRun) scanVbucket(vb uint16) (done bool, err error) {
	var last []byte          // the last key returned (range scans restart after it)
	var seen map[string]bool // sampling: the keys returned, skipped after a restart
	var restartErr error     // why the last restart happened
	restarts := 0            // restarts in a row that returned nothing new
	var rs retry.State       // the retries of a continue the server refused
	retrying := false        // rs holds a continue's retries
	for {
		if r.ctx.Err() != nil {
			return false, nil
		}
		if restarts > maxScanRestarts {
			return false, fmt.Errorf("scan of vbucket %d restarted %d times without progress: %w", vb, restarts, restartErr)
		}
		id, n, err := r.create(vb, last)
		var inCreate map[string]bool // sampling: the keys this create's scan returned
		sampled := uint64(0)         // sampling: how many
		if err != nil {
			if errors.Is(err, ErrDocumentNotFound) {
				return true, nil // nothing in the range
			}
			if r.ctx.Err() != nil {
				return false, nil
			}
			return false, err
		}
		if r.ctx.Err() != nil {
			r.cancelScan(n, vb, id)
			return false, nil
		}
		progress := false
		for {
			items, complete, reason, err := r.continueScan(n, vb, id)
			if cerr := r.checkItems(vb, n, items, last, &inCreate, &sampled); cerr != nil {
				r.cancelScan(n, vb, id) // one the server no longer has answers KEY_ENOENT
				return false, cerr
			}
			if r.sampling != nil && len(items) > 0 {
				if seen == nil {
					seen = map[string]bool{}
				}
				kept := items[:0]
				for _, it := range items {
					if !seen[it.ID] {
						seen[it.ID] = true
						kept = append(kept, it)
					}
				}
				items = kept
			}
			if len(items) > 0 {
				progress = true
				last = []byte(items[len(items)-1].ID)
				select {
				case r.out <- items:
				case <-r.ctx.Done():
					if !complete {
						r.cancelScan(n, vb, id)
					}
					return false, nil
				}
			}
			if err != nil {
				if r.ctx.Err() != nil {
					// Stopped while the continue was in flight: the
					// server may still hold the scan.
					r.cancelScan(n, vb, id)
					return false, nil
				}
				if restartable(err) {
					restartErr = err
					var ke *KeyValueError
					if errors.As(err, &ke) && ke.Status == 0 {
						// The node was not reached or the connection
						// ended: the node may still hold the scan.
						r.cancelScan(n, vb, id)
					}
					retrying = false
					break
				}
				if reason != retry.ReasonUnknown {
					// The server refused this continue (it applied
					// nothing): the strategy says whether to send it
					// again, within the request timeout.
					if !retrying {
						rs.Init(r.ctx, memdx.OpRangeScanContinue, r.strategy, r.c.clock.Now().Add(r.timeout))
						rs.SetOperation("Scan")
						retrying = true
					}
					werr := r.c.orch.Wait(&rs, reason, err)
					if werr == nil {
						continue
					}
					if r.ctx.Err() != nil {
						r.cancelScan(n, vb, id)
						return false, nil
					}
					err = continueRetryError(err, werr, &rs)
				}
				r.cancelScan(n, vb, id)
				return false, err
			}
			retrying = false
			if complete {
				return true, nil
			}
		}
		if progress {
			restarts = 0
		}
		restarts++
	}
}

// checkItems checks the keys a continue of vb's scan on n returned, before
// any is given to the caller: a range scan's keys are in its range and
// each is after the one before it in the vbucket's stream (last: the last
// key returned before them, by this scan or the one a restart replaced);
// a sampling scan returns no key twice and no more keys than its Samples
// (inCreate and sampled count this create's keys). A server that breaks
// that (repeating keys forever, or keys of another range) would otherwise
// pass them all through.
func (r *scanRun) checkItems(vb uint16, n *node, items []ScanItem, last []byte, inCreate *map[string]bool, sampled *uint64) error {
	fail := func(format string, args ...any) error {
		return &KeyValueError{Op: "Scan", OpCode: OpCode(memdx.OpRangeScanContinue), Bucket: r.c.opts.Bucket,
			Scope: r.col.scope, Collection: r.col.name, Vbucket: vb, Node: n.addr, Err: ErrServerFailure,
			Cause: fmt.Errorf("range scan of vbucket %d: %s: %w", vb, fmt.Sprintf(format, args...), memdx.ErrMalformed)}
	}
	if r.sampling != nil {
		for _, it := range items {
			if *inCreate == nil {
				*inCreate = map[string]bool{}
			}
			if (*inCreate)[it.ID] {
				return fail("the sampling scan returned key %q twice", it.ID)
			}
			(*inCreate)[it.ID] = true
			if *sampled++; *sampled > r.sampling.Samples {
				return fail("the sampling scan returned more than the %d keys asked for", r.sampling.Samples)
			}
		}
		return nil
	}
	prev := string(last)
	have := last != nil
	for _, it := range items {
		switch {
		case have && it.ID <= prev:
			return fail("key %q is not after the key before it, %q", it.ID, prev)
		case !r.inRange(it.ID):
			return fail("key %q is outside the range scanned, %s", it.ID, r.rangeString())
		}
		prev, have = it.ID, true
	}
	return nil
}

// inRange reports whether key is in the range scanned.
func (r *scanRun) inRange(key string) bool {
	g := r.rng
	if c := strings.Compare(key, string(g.Start)); c < 0 || c == 0 && g.ExclusiveStart {
		return false
	}
	c := strings.Compare(key, string(g.End))
	return c < 0 || c == 0 && !g.ExclusiveEnd
}

// rangeString is the range scanned, for errors: [start, end] with ( or )
// for an exclusive end.
func (r *scanRun) rangeString() string {
	open, closing := "[", "]"
	if r.rng.ExclusiveStart {
		open = "("
	}
	if r.rng.ExclusiveEnd {
		closing = ")"
	}
	return fmt.Sprintf("%s%q, %q%s", open, r.rng.Start, r.rng.End, closing)
}

// restartable reports whether a continue's error means the vbucket's scan
// is to be created again: the vbucket moved (NOT_MY_VBUCKET), the scan is
// gone from the node (KEY_ENOENT: it expired, or the vbucket changed
// state), or the node could not be reached.
func restartable(err error) bool {
	var ke *KeyValueError
	if errors.As(err, &ke) {
		return ke.Status == StatusNotMyVbucket || ke.Status == StatusKeyNotFound ||
			errors.Is(err, ErrNoNodeAvailable) || errors.As(err, new(*conn.RequestError))
	}
	return false
}

// create creates vb's scan (after the key after, if not nil) with the
// client's routing and retry rules, and returns its id and node. A scan
// that stops meanwhile, even by its context, does not end the create (only
// the request timeout does): a create abandoned after it was
// written could leave a scan on the server whose id the client never
// learns, so the scan waits for its answer and cancels the scan it made.
func (r *scanRun) create(vb uint16, after []byte) (memdx.RangeScanID, *node, error) {
	c := r.c
	o := c.getOp("Scan", kindScanCreate, r.col, "")
	defer putOp(o)
	cfg := r.createConfig(vb, after)
	o.req = memdx.Request{OpCode: memdx.OpRangeScanCreate, Datatype: memdx.DatatypeJSON}
	o.byVbucket, o.fixedVb, o.scanCfg = true, vb, cfg
	o.timeout, o.strategy = r.timeout, r.strategy
	r.lastOp.Store(1<<8 | uint32(memdx.OpRangeScanCreate))
	if err := c.execute(context.WithoutCancel(r.parent), o); err != nil {
		return memdx.RangeScanID{}, nil, err
	}
	return o.scanID, o.node, nil
}

// continueResult collects one continue's answer on the connection's reader.
// It keeps at most max items (the continue's item limit, which the server
// never exceeds: kv_engine ends a continue once it has sent that many):
// past it the continue fails and nothing more is kept, so that a server
// streaming packets to one continue without end does not fill memory.
type continueResult struct {
	items    []ScanItem
	max      int
	status   memdx.Status
	errCtx   memdx.ErrorContext
	decodeTo []memdx.RangeScanDocument
	keys     [][]byte
	over     error // the continue returned more than max items
}

func (cr *continueResult) handle(p *memdx.Packet) error {
	cr.status = p.Status
	switch p.Status {
	case memdx.StatusSuccess, memdx.StatusRangeScanMore, memdx.StatusRangeScanComplete:
	default:
		if ec, ok := memdx.DecodeErrorContext(p.Datatype, p.Value); ok {
			cr.errCtx = ec
		}
		return nil
	}
	if cr.over != nil {
		return cr.over
	}
	content, err := memdx.DecodeRangeScanContent(p)
	if err != nil {
		return err
	}
	if content == memdx.RangeScanKeys {
		cr.keys, err = memdx.DecodeRangeScanKeys(cr.keys[:0], p.Value)
		if err != nil {
			return err
		}
		if err := cr.room(len(cr.keys)); err != nil {
			return err
		}
		for _, k := range cr.keys {
			cr.items = append(cr.items, ScanItem{ID: string(k), IDOnly: true})
		}
		return nil
	}
	cr.decodeTo, err = memdx.DecodeRangeScanDocuments(cr.decodeTo[:0], p.Value)
	if err != nil {
		return err
	}
	if err := cr.room(len(cr.decodeTo)); err != nil {
		return err
	}
	for i := range cr.decodeTo {
		d := &cr.decodeTo[i]
		it := ScanItem{ID: string(d.Key), Flags: d.Flags, Cas: d.Cas}
		if d.Expiry != 0 {
			it.Expiry = time.Unix(int64(d.Expiry), 0)
		}
		if d.Datatype.Has(memdx.DatatypeSnappy) {
			v, err := memdx.DecompressSnappy(nil, d.Value, 0)
			if err != nil {
				return fmt.Errorf("document %q of a range scan: %w", d.Key, err)
			}
			it.Value = v
		} else {
			it.Value = bytes.Clone(d.Value)
			if it.Value == nil {
				it.Value = []byte{}
			}
		}
		cr.items = append(cr.items, it)
	}
	return nil
}

// room checks that n more items keep the continue within its item limit.
func (cr *continueResult) room(n int) error {
	if len(cr.items)+n > cr.max {
		cr.over = fmt.Errorf("a range scan continue returned more than the %d items asked for: %w", cr.max, memdx.ErrMalformed)
		cr.items = nil
		return cr.over
	}
	return nil
}

// continueScan asks vb's scan on n for its next batch: the items, whether
// the scan is complete (and gone from the server), and the error that
// ended the continue (with the items it returned before) with the retry
// reason of the status it ended on (0: none).
func (r *scanRun) continueScan(n *node, vb uint16, id memdx.RangeScanID) ([]ScanItem, bool, retry.Reason, error) {
	req := memdx.NewRangeScanContinue(memdx.RangeScanContinue{ID: id, ItemLimit: r.itemLimit, ByteLimit: r.byteLimit})
	req.Vbucket = vb
	cr := continueResult{max: int(r.itemLimit)}
	r.lastOp.Store(1<<8 | uint32(memdx.OpRangeScanContinue))
	reason, err := r.do(n, vb, &req, cr.handle, func() memdx.Status { return cr.status }, &cr.errCtx)
	return cr.items, err == nil && cr.status == memdx.StatusRangeScanComplete, reason, err
}

// continueRetryError is the error of a continue that failed with err and
// that the orchestrator did not send again (werr: the strategy refused, or
// the timeout came): err with the retries made and werr as its cause.
func continueRetryError(err, werr error, rs *retry.State) error {
	var ke *KeyValueError
	if !errors.As(err, &ke) {
		return werr
	}
	e := *ke
	e.RetryAttempts, e.RetryReasons = rs.Attempts(), retryReasonsOf(rs.Reasons())
	e.Cause = werr
	if errors.Is(werr, ErrTimeout) {
		e.Err = nil // the timeout's own sentinels
	}
	return &e
}

// cancelScan cancels vb's scan on n, even when the scan's context is done,
// waiting (as the retry strategy says, within the request timeout counted
// on the client's Clock) for n to have a live connection when it has none.
// Closing the client ends the cancel at once, waiting or in flight. A scan
// the server no longer has (KEY_ENOENT) is as good as cancelled; other
// failures leave it to the server, which drops it after its lifetime.
func (r *scanRun) cancelScan(n *node, vb uint16, id memdx.RangeScanID) {
	req := memdx.NewRangeScanCancel(id)
	req.Vbucket = vb
	var st memdx.Status
	// The caller's values, not its cancellation; the client's Close ends it.
	ctx, stop := context.WithCancel(context.WithoutCancel(r.parent))
	defer stop()
	defer context.AfterFunc(r.c.ctx, stop)()
	var rs retry.State
	rs.Init(ctx, memdx.OpRangeScanCancel, r.strategy, r.c.clock.Now().Add(r.timeout))
	rs.SetOperation("Scan")
	for {
		_, err := r.doCtx(ctx, n, vb, &req, func(p *memdx.Packet) error { st = p.Status; return nil },
			func() memdx.Status { return st }, nil)
		if err == nil {
			return
		}
		var ke *KeyValueError
		if errors.As(err, &ke) && ke.Status == StatusKeyNotFound {
			return
		}
		if errors.As(err, &ke) && ke.Status == 0 && errors.Is(err, ErrNoNodeAvailable) && r.c.ctx.Err() == nil {
			// The node has no live connection (its last one may have
			// just failed under a continue): wait for it as an
			// operation would, then send the cancel again (a second
			// cancel of a cancelled scan answers KEY_ENOENT).
			if r.c.orch.Wait(&rs, retry.ReasonNodeNotAvailable, err) == nil {
				continue
			}
		}
		r.c.opts.Logger.Debug("kvwire: range scan cancel failed; the server drops the scan after its lifetime",
			"node", n.addr, "vbucket", vb, "err", err)
		return
	}
}

func (r *scanRun) do(n *node, vb uint16, req *memdx.Request, handle func(*memdx.Packet) error,
	status func() memdx.Status, errCtx *memdx.ErrorContext) (retry.Reason, error) {
	return r.doCtx(r.ctx, n, vb, req, handle, status, errCtx)
}

// doCtx sends req once to node n, where the scan lives (never re-routed),
// and returns nil when it ends on a success status, or a *KeyValueError
// and the status's retry reason (doOnNode).
func (r *scanRun) doCtx(ctx context.Context, n *node, vb uint16, req *memdx.Request, handle func(*memdx.Packet) error,
	status func() memdx.Status, errCtx *memdx.ErrorContext) (retry.Reason, error) {
	reason, err := r.c.doOnNode(ctx, n, "Scan", req, r.timeout, handle, status, errCtx)
	var e *KeyValueError
	if errors.As(err, &e) {
		e.Scope, e.Collection = r.col.scope, r.col.name
		if e.Status == StatusRangeScanCancelled {
			e.Err = ErrRequestCanceled
		}
	}
	return reason, err
}

// Next advances to the next document, waiting for it; it returns false at
// the end of the scan, on an error (Err), or after Close.
func (r *ScanResult) Next() bool {
	if r.ended {
		return false
	}
	if r.halted {
		r.stop()
		return false
	}
	run := r.run
	r.pos++
	for r.pos >= len(r.batch) {
		b, ok := <-run.out
		if !ok {
			r.end()
			return false
		}
		r.batch, r.pos = b, 0
	}
	r.count++
	if run.limit > 0 && r.count >= run.limit {
		// The sample is complete: stop the other vbuckets' scans now,
		// not when the caller next calls Next or Close.
		r.halt()
	}
	return true
}

// Item returns the document Next moved to.
func (r *ScanResult) Item() ScanItem {
	if r.pos < len(r.batch) {
		return r.batch[r.pos]
	}
	return ScanItem{}
}

// Err returns the error that ended the scan, nil when it ended normally
// or was closed.
func (r *ScanResult) Err() error { return r.err }

// Close stops the scan if it is still running: it cancels the server-side
// scans still open and waits for the scan's goroutines. It returns Err.
// Calling it more than once is harmless.
func (r *ScanResult) Close() error {
	if !r.ended {
		r.stop()
	}
	return r.err
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
		defer r.Close()
		for r.Next() {
			if !yield(r.Item(), nil) {
				return
			}
		}
		if err := r.Err(); err != nil {
			yield(ScanItem{}, err)
		}
	}
}

// stop ends the iteration early (see halt).
func (r *ScanResult) stop() {
	if !r.halted {
		r.halt()
	}
	r.ended = true
	r.batch, r.pos = nil, 0
}

// halt stops the scan's goroutines, which cancel their server-side scans,
// and waits for them; the batches they had queued are dropped.
func (r *ScanResult) halt() {
	run := r.run
	run.unwatch()
	run.cancel(errScanStopped)
	for range run.out {
	}
	r.halted = true
	run.mu.Lock()
	r.err = run.err
	run.mu.Unlock()
}

// end records how the scan ended once every worker has.
func (r *ScanResult) end() {
	run := r.run
	run.unwatch()
	r.ended = true
	r.batch, r.pos = nil, 0
	run.mu.Lock()
	err, finished := run.err, run.finished == run.total
	run.mu.Unlock()
	if err == nil && !finished {
		cause := context.Cause(run.ctx)
		// The scan as a whole ended: its error names the request it sent
		// last (a GET's opcode, 0, would be a lie).
		op := memdx.OpRangeScanCreate
		if v := run.lastOp.Load(); v != 0 {
			op = memdx.OpCode(v & 0xff)
		}
		e := &KeyValueError{Op: "Scan", OpCode: OpCode(op), Bucket: run.c.opts.Bucket, Scope: run.col.scope,
			Collection: run.col.name, Cause: cause}
		switch {
		case errors.Is(cause, context.DeadlineExceeded):
			e.Cause = &retry.TimeoutError{OpCode: op, LastErr: cause}
		case errors.Is(cause, context.Canceled):
			e.Err = ErrRequestCanceled
		default:
			e.Err = ErrServerFailure
		}
		err = e
	}
	run.cancel(errScanStopped) // releases the context
	r.err = err
}
