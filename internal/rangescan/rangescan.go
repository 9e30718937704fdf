// Package rangescan runs a KV range scan (Couchbase Server 7.2+, kv_engine's
// docs/range_scans) over a bucket's vbuckets: a create on a vbucket's
// active node, continues until the server says the scan is complete, and,
// when the scan stops early, a cancel. At most Config.Concurrency vbuckets
// are scanned at once, each by one of that many goroutines, which end
// when the scan ends (Stop waits for them). When a vbucket moves during its
// scan (its continue meets NOT_MY_VBUCKET, the node's connection is lost,
// the scan is gone from the node), its scan is created again on the
// vbucket's node from the key after the last one returned (a sampling
// scan: again whole, without the keys already returned), as gocb does.
//
// The requests themselves are the caller's (Requests): each goes through
// the client's request engine, with its routing, retry and deadline rules.
// This package decides what to ask next; it sends nothing itself.
package rangescan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/panics"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/vbmap"
)

// Item is one document a scan returned; Value is the caller's own copy
// (nil with KeyOnly). Its fields are client.ScanItem's, which converts it.
type Item struct {
	ID     string
	IDOnly bool
	Value  []byte
	Flags  uint32
	Cas    uint64
	Expiry time.Time
}

// Config is what a scan reads and how.
type Config struct {
	KeyOnly  bool
	Range    *memdx.RangeScanRange // nil for a sampling scan
	Sampling *memdx.RangeScanSampling
	// Limit: a sampling scan's items returned at most.
	Limit uint64
	// Snapshots: per vbucket, the sequence number to wait for.
	Snapshots map[uint16]memdx.RangeScanSnapshot
	// ItemLimit and ByteLimit bound what one continue returns.
	ItemLimit, ByteLimit uint32
	// TimeLimitMs bounds how long one continue runs on the server
	// (ContinueTimeLimit of the request timeout; never 0, which kv_engine
	// reads as no limit). The client sets it again for each attempt from
	// the time it has left (SetContinueTimeLimit).
	TimeLimitMs uint32
	// Vbuckets are scanned in this order (Order).
	Vbuckets    []uint16
	Concurrency int
}

// Requests are a scan's requests, each run by the client's engine: Create
// on a vbucket's active node, Continue and Cancel on the node holding the
// scan.
type Requests interface {
	// Create creates vb's scan of cfg and returns its id and node. It is
	// not ended by the scan stopping (only its timeout ends it): a create
	// abandoned after it was written could leave a scan whose id is never
	// learned; the scan cancels what it created.
	Create(vb uint16, cfg *memdx.RangeScanCreate) (memdx.RangeScanID, *cluster.Node, error)
	// Continue asks for the scan's next batch within ctx, decoding it with
	// dec (Decoder.Handle takes each packet of the answer).
	Continue(ctx context.Context, n *cluster.Node, vb uint16, req memdx.RangeScanContinue, dec *Decoder) error
	// Cancel cancels the scan, even once the scan's context has ended.
	Cancel(n *cluster.Node, vb uint16, id memdx.RangeScanID)
	// Empty reports whether a create's error says the range has no
	// document in vb.
	Empty(err error) bool
	// Invalid is the error of a continue of vb's scan on n whose items
	// break the scan's rules (cause says how): the scan fails with it.
	Invalid(vb uint16, n *cluster.Node, cause error) error
	// Restart reports whether a continue's error means vb's scan is to be
	// created again (the vbucket moved, the scan is gone, the node could
	// not be reached), and whether the node may still hold the scan
	// (cancel it first).
	Restart(err error) (restart, cancel bool)
}

// errStopped is the cancel cause of a scan stopped by Stop. It wraps
// conn.ErrNotNeeded: a continue in flight is given up as the scan's caller
// meant to (Close, a loop broken early, a sampling scan at its Limit), and
// its connection expects its late answer, which is then neither an orphan
// nor a stray response to warn of.
var errStopped = fmt.Errorf("scan stopped: %w", conn.ErrNotNeeded)

// maxRestarts bounds the restarts of one vbucket's scan in a row that
// return nothing new.
const maxRestarts = 16

// Run is one scan in progress: the vbuckets left and the goroutines
// scanning them.
type Run struct {
	cfg    Config
	reqs   Requests
	ctx    context.Context // canceled (with a cause) when the scan stops
	cancel context.CancelCauseFunc

	out  chan []Item // closed by the last worker to end
	live atomic.Int32
	// lastOp is the opcode of the scan's last create or continue sent (0:
	// none yet), which a timeout of the whole scan names (Incomplete).
	lastOp atomic.Uint32

	mu       sync.Mutex
	vbs      []uint16 // vbuckets not started yet
	finished int      // vbuckets scanned to the end
	err      error    // the first error that failed the scan
	// panicked is how the first worker that ended abnormally did (nil:
	// none did), until Raise raised it (raised).
	panicked *panics.Ended
	raised   bool
}

// Start starts the scan's goroutines; ctx bounds the whole scan.
func Start(ctx context.Context, cfg Config, reqs Requests) *Run {
	r := &Run{cfg: cfg, reqs: reqs, vbs: cfg.Vbuckets}
	workers := max(1, min(cfg.Concurrency, len(cfg.Vbuckets)))
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	r.out = make(chan []Item, workers)
	r.live.Store(int32(workers))
	for range workers {
		go r.work()
	}
	return r
}

// Out gives the scan's batches of items, in key order within a vbucket;
// it is closed once every goroutine has ended.
func (r *Run) Out() <-chan []Item { return r.out }

// Fail records the scan's first error and stops the scan. An error met
// because the scan had already stopped is not recorded.
func (r *Run) Fail(err error) {
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

// Stop stops the scan's goroutines, which cancel their server-side scans,
// and waits for them; the batches they had queued are dropped. It returns
// the scan's first error.
func (r *Run) Stop() error {
	r.cancel(errStopped)
	for range r.out {
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Result is how a scan whose Out is closed ended: its first error, whether
// every vbucket was scanned to its end, and the cause of its context's end
// (the caller's cancellation or deadline, when not complete and err is
// nil). It releases the scan's context.
func (r *Run) Result() (err error, complete bool, cause error) {
	r.mu.Lock()
	err, complete = r.err, r.finished == len(r.cfg.Vbuckets)
	r.mu.Unlock()
	cause = context.Cause(r.ctx)
	r.cancel(errStopped)
	return err, complete, cause
}

// Order lists the vbuckets of cfg, alternating between their active nodes
// so that concurrent vbucket scans spread over the nodes.
func Order(cfg *vbmap.Config) []uint16 {
	n := cfg.NumVbuckets()
	byServer := map[int][]uint16{}
	var servers []int
	for vb := range n {
		s, err := cfg.VbucketServer(uint16(vb), 0, false)
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

// CreateConfig is the create request's configuration for vb, starting
// after the key after (a restart; nil: from the range's start).
func (c *Config) CreateConfig(vb uint16, after []byte) *memdx.RangeScanCreate {
	cfg := &memdx.RangeScanCreate{KeyOnly: c.KeyOnly, Sampling: c.Sampling}
	if c.Range != nil {
		rng := *c.Range
		if after != nil {
			rng.Start, rng.ExclusiveStart = after, true
		}
		cfg.Range = &rng
	}
	if s, ok := c.Snapshots[vb]; ok {
		cfg.Snapshot = &s
	}
	return cfg
}

// work scans vbuckets until none is left or the scan stops. The last
// worker to end closes out.
func (r *Run) work() {
	var p *panics.Ended
	defer func() {
		if p != nil {
			// The caller's code (an Observer, a RetryStrategy) panicked
			// in a request, or ended the goroutine (Goexit): the scan
			// stops, and the Cursor raises it on the caller's goroutine
			// once every worker has ended (Raise).
			r.mu.Lock()
			if r.panicked == nil && !r.raised {
				r.panicked = p
			}
			r.mu.Unlock()
			r.cancel(errPanicked)
		}
		if r.live.Add(-1) == 0 {
			close(r.out)
		}
	}()
	panics.Catch(&p, r.scanVbuckets)
}

// errPanicked is the cancel cause of a scan whose worker panicked.
var errPanicked = errors.New("a scan's request panicked")

// Raise ends the caller's goroutine as a worker's ended, with its panic
// or Goexit, the first time it is called after every worker has ended
// (Out closed); it does nothing when none ended so, or after that.
func (r *Run) Raise() {
	r.mu.Lock()
	p := r.panicked
	r.panicked, r.raised = nil, true
	r.mu.Unlock()
	p.Raise()
}

// Dropped is Raise for a scan nobody reads any more (its result dropped
// unclosed): it returns how the first worker that ended abnormally did
// (nil: none did, or Raise raised it), for its caller to report, there
// being no goroutine of the caller's to raise it on.
func (r *Run) Dropped() *panics.Ended {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.panicked
	r.panicked, r.raised = nil, true
	return p
}

// scanVbuckets scans vbuckets until none is left or the scan stops.
func (r *Run) scanVbuckets() {
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
			r.Fail(err)
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

// vbucketScan is one vbucket's scan: what it returned so far, and why
// it restarted.
type vbucketScan struct {
	vb         uint16
	last       []byte          // the last key returned (range scans restart after it)
	seen       map[string]bool // sampling: the keys returned, skipped after a restart
	restartErr error           // why the last restart happened
}

// scanVbucket scans vb to its end (done) or until the scan stops (not
// done, no error): a create, then continues, and, when a continue says
// the vbucket's scan is to be made again, another create after the last
// key returned, at most maxRestarts times in a row without progress.
func (r *Run) scanVbucket(vb uint16) (done bool, err error) {
	s := vbucketScan{vb: vb}
	for restarts := 0; ; restarts++ {
		if r.ctx.Err() != nil {
			return false, nil
		}
		if restarts > maxRestarts {
			// restarts counts the continues that asked for one: the
			// last is not carried out.
			return false, fmt.Errorf("scan of vbucket %d restarted %d times in a row without progress, then ended again: %w", vb, maxRestarts, s.restartErr)
		}
		r.lastOp.Store(uint32(memdx.OpRangeScanCreate))
		id, n, err := r.reqs.Create(vb, r.cfg.CreateConfig(vb, s.last))
		if err != nil {
			if r.reqs.Empty(err) {
				return true, nil // nothing in the range
			}
			if r.ctx.Err() != nil {
				return false, nil
			}
			return false, err
		}
		if r.ctx.Err() != nil {
			r.reqs.Cancel(n, vb, id)
			return false, nil
		}
		progress, done, err := r.continues(&s, n, id)
		if done || err != nil || r.ctx.Err() != nil {
			return done, err
		}
		if progress {
			restarts = 0 // counts from 1 after a restart that returned something
		}
	}
}

// continues asks for s's batches from the scan id on n until the scan is
// complete (done), stops (not done, no error), fails (err), or is to be
// created again (not done, no error, the scan still running); progress
// says whether it returned anything new.
func (r *Run) continues(s *vbucketScan, n *cluster.Node, id memdx.RangeScanID) (progress, done bool, err error) {
	req := memdx.RangeScanContinue{ID: id, ItemLimit: r.cfg.ItemLimit, TimeLimitMs: max(r.cfg.TimeLimitMs, 1), ByteLimit: r.cfg.ByteLimit}
	var c created
	for {
		dec := Decoder{Max: int(r.cfg.ItemLimit)}
		r.lastOp.Store(uint32(memdx.OpRangeScanContinue))
		err := r.reqs.Continue(r.ctx, n, s.vb, req, &dec)
		cerr := r.check(&c, s.last, dec.Items)
		if cerr == nil && err == nil && len(dec.Items) == 0 && dec.Status != memdx.StatusRangeScanComplete {
			// kv_engine's continue returns at least one item unless the
			// scan ended or failed: an empty "more" would be asked again
			// forever.
			cerr = fmt.Errorf("a continue answered %v with no item: %w", dec.Status, memdx.ErrMalformed)
		}
		if cerr != nil {
			r.reqs.Cancel(n, s.vb, id) // one the server no longer has answers KEY_ENOENT
			return progress, false, r.reqs.Invalid(s.vb, n, cerr)
		}
		items := s.fresh(dec.Items, r.cfg.Sampling != nil)
		complete := err == nil && dec.Status == memdx.StatusRangeScanComplete
		if len(items) > 0 {
			progress = true
			s.last = []byte(items[len(items)-1].ID)
			select {
			case r.out <- items:
			case <-r.ctx.Done():
				if !complete {
					r.reqs.Cancel(n, s.vb, id)
				}
				return progress, false, nil
			}
		}
		if err != nil {
			restart, cancelFirst := r.reqs.Restart(err)
			switch {
			case r.ctx.Err() != nil:
				// Stopped while the continue was in flight: the server
				// may still hold the scan.
				r.reqs.Cancel(n, s.vb, id)
				return progress, false, nil
			case !restart:
				r.reqs.Cancel(n, s.vb, id)
				return progress, false, err
			}
			s.restartErr = err
			if cancelFirst {
				r.reqs.Cancel(n, s.vb, id)
			}
			return progress, false, nil
		}
		if complete {
			return progress, true, nil
		}
	}
}

// created is what one create's scan returned so far: a sampling scan's
// keys.
type created struct {
	keys map[string]bool
}

// check checks the keys a continue returned, before any is given to the
// caller: a range scan's keys are in its range and each is after the one
// before it in the vbucket's stream (last: the last key returned before
// them, by this scan or the one a restart replaced); a sampling scan
// returns no key twice (c holds this create's keys). A server that breaks
// that (repeating keys forever, or keys of another range) would otherwise
// pass them all through. A sampling scan may return more keys than its
// Samples: kv_engine keeps each key of a vbucket holding more than Samples
// with probability Samples/items (RangeScan::skipItem, a Bernoulli draw
// per key), so a vbucket's sample is only about Samples long; the Cursor
// stops the scan at its Limit.
func (r *Run) check(c *created, last []byte, items []Item) error {
	if r.cfg.Sampling != nil {
		for _, it := range items {
			if c.keys == nil {
				c.keys = map[string]bool{}
			}
			if c.keys[it.ID] {
				return fmt.Errorf("the sampling scan returned key %q twice: %w", it.ID, memdx.ErrMalformed)
			}
			c.keys[it.ID] = true
		}
		return nil
	}
	prev := string(last)
	have := last != nil
	for _, it := range items {
		switch {
		case have && it.ID <= prev:
			return fmt.Errorf("key %q is not after the key before it, %q: %w", it.ID, prev, memdx.ErrMalformed)
		case !inRange(r.cfg.Range, it.ID):
			return fmt.Errorf("key %q is outside the range scanned, %s: %w", it.ID, rangeString(r.cfg.Range), memdx.ErrMalformed)
		}
		prev, have = it.ID, true
	}
	return nil
}

// inRange reports whether key is in g.
func inRange(g *memdx.RangeScanRange, key string) bool {
	if c := strings.Compare(key, string(g.Start)); c < 0 || c == 0 && g.ExclusiveStart {
		return false
	}
	c := strings.Compare(key, string(g.End))
	return c < 0 || c == 0 && !g.ExclusiveEnd
}

// rangeString is g, for errors: [start, end] with ( or ) for an exclusive
// end.
func rangeString(g *memdx.RangeScanRange) string {
	open, closing := "[", "]"
	if g.ExclusiveStart {
		open = "("
	}
	if g.ExclusiveEnd {
		closing = ")"
	}
	return fmt.Sprintf("%s%q, %q%s", open, g.Start, g.End, closing)
}

// fresh drops from a sampling scan's items those returned before a
// restart.
func (s *vbucketScan) fresh(items []Item, sampling bool) []Item {
	if !sampling || len(items) == 0 {
		return items
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	kept := items[:0]
	for _, it := range items {
		if !s.seen[it.ID] {
			s.seen[it.ID] = true
			kept = append(kept, it)
		}
	}
	return kept
}

// Decoder takes a continue's answer, packet by packet, on the connection's
// reader: the items of its successes, and the status it ended on. It keeps
// at most Max items per attempt (the continue's item limit, which the
// server never exceeds: kv_engine ends a continue once it has sent that
// many): past it the continue fails and nothing more is kept, so that a
// server streaming packets to one continue without end does not fill
// memory. A continue sent again (its strategy retried a refusal) is a new
// attempt with a new opaque, answered with up to Max items of its own; the
// items an earlier attempt delivered are kept, the scan having moved past
// them.
type Decoder struct {
	Items  []Item
	Status memdx.Status
	Max    int
	// opaque is the attempt being answered, base the items before it.
	opaque   uint32
	base     int
	over     error // the continue returned more than Max items
	decodeTo []memdx.RangeScanDocument
	keys     [][]byte
}

// Handle takes a packet of the answer: a success's keys or documents, or
// the failure status the continue ends on (false: the caller judges it).
func (d *Decoder) Handle(p *memdx.Packet) (bool, error) {
	if p.Opaque != d.opaque {
		d.opaque, d.base = p.Opaque, len(d.Items)
	}
	d.Status = p.Status
	switch p.Status {
	case memdx.StatusSuccess, memdx.StatusRangeScanMore, memdx.StatusRangeScanComplete:
	default:
		return false, nil
	}
	if d.over != nil {
		return true, d.over
	}
	return true, d.decode(p)
}

// room checks that n more items keep the continue within its item limit.
func (d *Decoder) room(n int) error {
	if len(d.Items)-d.base+n > d.Max {
		d.over = fmt.Errorf("a range scan continue returned more than the %d items asked for: %w", d.Max, memdx.ErrMalformed)
		d.Items = nil
		return d.over
	}
	return nil
}

// decode appends a success packet's keys or documents to the items.
func (d *Decoder) decode(p *memdx.Packet) error {
	content, err := memdx.DecodeRangeScanContent(p)
	if err != nil {
		return err
	}
	if content == memdx.RangeScanKeys {
		d.keys, err = memdx.DecodeRangeScanKeys(d.keys[:0], p.Value)
		if err != nil {
			return err
		}
		if err := d.room(len(d.keys)); err != nil {
			return err
		}
		for _, k := range d.keys {
			d.Items = append(d.Items, Item{ID: string(k), IDOnly: true})
		}
		return nil
	}
	d.decodeTo, err = memdx.DecodeRangeScanDocuments(d.decodeTo[:0], p.Value)
	if err != nil {
		return err
	}
	if err := d.room(len(d.decodeTo)); err != nil {
		return err
	}
	for i := range d.decodeTo {
		doc := &d.decodeTo[i]
		it := Item{ID: string(doc.Key), Flags: doc.Flags, Cas: doc.Cas}
		if doc.Expiry != 0 {
			it.Expiry = time.Unix(int64(doc.Expiry), 0)
		}
		if doc.Datatype.Has(memdx.DatatypeSnappy) {
			v, err := memdx.DecompressSnappy(nil, doc.Value, 0)
			if err != nil {
				return fmt.Errorf("document %q of a range scan: %w", doc.Key, err)
			}
			it.Value = v
		} else {
			it.Value = bytes.Clone(doc.Value)
			if it.Value == nil {
				it.Value = []byte{}
			}
		}
		d.Items = append(d.Items, it)
	}
	return nil
}

// Stopped reports whether the scan has stopped (failed, stopped, or its
// context ended), Queued how many batches wait to be taken, and Workers how
// many of its goroutines are still running (tests).
func (r *Run) Stopped() bool { return r.ctx.Err() != nil }
func (r *Run) Queued() int   { return len(r.out) }
func (r *Run) Workers() int  { return int(r.live.Load()) }
