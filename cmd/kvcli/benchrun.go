package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/client"
)

// This file runs bench's load: the preload, the workers, and what they
// count. Only operations that succeeded (a get's miss included: the server
// answered) count as throughput and latency; a failed one counts as an
// error of its kind, and its latency goes apart, so that a dead server's
// instant refusals do not read as a fast server.

type bench struct {
	inv    *invocation
	cfg    benchConfig
	col    *client.Collection
	rc     *retryCounter
	target string
	keys   []string
	// value is --value-size's largest value; a set of n bytes sends
	// value[:n].
	value      []byte
	durability client.DurabilityLevel
	// clock paces a run with --rate.
	clock   client.Clock
	pace    *pacer
	workers []*benchWorker
	// preloaded counts the keys the preload set.
	preloaded atomic.Int64
	// close closes the client: its reports log what they hold.
	close func()
}

// benchWorker is one worker's counters. The atomics are read by the
// progress line; the histograms and error kinds only after the worker
// ended.
type benchWorker struct {
	// ok counts the operations that succeeded: gets (misses included)
	// and sets; errs those that failed.
	ok, gets, sets, misses, errs atomic.Uint64
	setBytes, calls              uint64
	lateness                     lateness
	hist                         histogram // calls whose every operation succeeded
	errHist                      histogram // calls with a failed operation
	schedHist                    histogram // hist's calls, from their scheduled times (--rate)
	errKinds                     map[string]uint64
	firstErr                     string
	_                            [64]byte // keep workers' counters on separate cache lines
}

func (b *bench) run(ctx context.Context) int {
	b.keys = make([]string, b.cfg.Keys)
	for i := range b.keys {
		b.keys[i] = fmt.Sprintf("%s%08d", b.cfg.KeyPrefix, i)
	}
	// Random letters: valid UTF-8, and incompressible enough that snappy
	// does not turn the value size into a fiction.
	rng := rand.New(rand.NewPCG(b.cfg.Seed, 0x6b76636c69))
	b.value = make([]byte, b.cfg.ValueSizeMax)
	for i := range b.value {
		b.value[i] = byte('a' + rng.IntN(26))
	}
	// Operations finish even after Ctrl-C (which only stops new ones), so
	// that an interrupted run reports no spurious failures.
	opCtx := context.WithoutCancel(ctx)

	if b.cfg.Preload {
		if code, ok := b.preload(ctx, opCtx); !ok {
			return code
		}
		if ctx.Err() != nil {
			// Ctrl-C is the normal way to stop bench, in the preload too:
			// a summary (of no run) and exit 0.
			return b.report("interrupted_preloading", 0)
		}
	}
	stopped, elapsed := b.load(ctx, opCtx)
	return b.report(stopped, elapsed)
}

// load runs the workers until --ops operations have run, --duration has
// passed or ctx ends, with the progress line, and says which ended it.
func (b *bench) load(ctx, opCtx context.Context) (stopped string, elapsed time.Duration) {
	b.workers = make([]*benchWorker, b.cfg.Concurrency)
	for i := range b.workers {
		b.workers[i] = &benchWorker{errKinds: map[string]uint64{}, lateness: newLateness()}
	}
	var stop atomic.Bool
	stopCh := make(chan struct{})
	halt := func() { stop.Store(true); close(stopCh) }
	var claimed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	if b.cfg.Rate > 0 {
		b.pace = &pacer{clock: b.clock, start: b.clock.Now(), rate: b.cfg.Rate}
	}
	for i, w := range b.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.work(opCtx, w, rand.New(rand.NewPCG(b.cfg.Seed, uint64(i)+1)), &stop, stopCh, &claimed)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	var deadline <-chan time.Time
	if b.cfg.Duration > 0 {
		t := time.NewTimer(b.cfg.Duration)
		defer t.Stop()
		deadline = t.C
	}
	line := &benchProgress{start: start}
	stopProgress := b.inv.startProgress(nil, func(now time.Time) string {
		s := line.line(now, b.totals())
		if ctx.Err() != nil {
			// Ctrl-C: the operations in flight finish (against a server
			// that stopped answering, at their timeout). Say so.
			s += fmt.Sprintf("  interrupted: finishing the operations in flight (each ends within -t %v); Ctrl-C again stops at once", b.inv.opTimeout)
		}
		return s
	})
	stopped = "ops"
	select {
	case <-done:
	case <-deadline:
		stopped = "duration"
		halt()
		<-done
	case <-ctx.Done():
		stopped = "interrupted"
		halt()
		<-done
	}
	elapsed = time.Since(start)
	stopProgress()
	return stopped, elapsed
}

// report prints the summary and returns bench's exit code. It closes
// the client first, so that its reports log what they hold.
func (b *bench) report(stopped string, elapsed time.Duration) int {
	if b.close != nil {
		b.close()
	}
	sum := b.summary(stopped, elapsed)
	if b.inv.g.json {
		b.inv.printJSON(sum)
	} else {
		printBenchSummary(b.inv, sum)
	}
	if sum.Errors > 0 {
		return exitError
	}
	return exitOK
}

// preload sets every key once, spread over the workers, with a progress
// line. On Ctrl-C it stops starting new sets, lets those in flight finish
// and returns ok; it returns false with the exit code when a set failed.
func (b *bench) preload(ctx, opCtx context.Context) (int, bool) {
	inv := b.inv
	total := len(b.keys)
	fmt.Fprintf(inv.diag(), "kvcli bench: preloading %d keys (%s-byte values)...\n", total, b.cfg.valueSizeText())
	last, lastN := time.Now(), int64(0)
	stopProgress := inv.startProgress(nil, func(now time.Time) string {
		n := b.preloaded.Load()
		s := fmt.Sprintf("kvcli bench: preloading: %d of %d keys (%.0f keys/s)", n, total, rate(uint64(n-lastN), last, now))
		last, lastN = now, n
		return s
	})
	var wg sync.WaitGroup
	var firstErr error
	var firstKey string
	var mu sync.Mutex
	var stop atomic.Bool
	opts := &client.UpsertOptions{Timeout: inv.opTimeout}
	for w := range b.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			size := valueSizes(b.cfg.ValueSizeMin, b.cfg.ValueSizeMax, rand.New(rand.NewPCG(b.cfg.Seed, 1<<32+uint64(w))))
			for i := w; i < total; i += b.cfg.Concurrency {
				if stop.Load() || ctx.Err() != nil {
					return
				}
				if _, err := b.col.Upsert(opCtx, b.keys[i], b.value[:size()], opts); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr, firstKey = err, b.keys[i]
					}
					mu.Unlock()
					stop.Store(true)
					return
				}
				b.preloaded.Add(1)
			}
		}()
	}
	wg.Wait()
	stopProgress()
	if firstErr != nil {
		fmt.Fprintf(inv.diag(), "kvcli bench: preload failed\n")
		return inv.fail(firstKey, "bench", firstErr), false
	}
	if ctx.Err() != nil {
		fmt.Fprintf(inv.diag(), "kvcli bench: interrupted while preloading (%d of %d keys set)\n", b.preloaded.Load(), total)
	}
	return exitOK, true
}

// work is one worker: operations one after another until told to stop
// (stop, and stopCh closed, for a worker waiting for its scheduled time).
// Operations are numbered over all workers by claimed: that number is
// the operation's slot in --rate's schedule and bounds the run to --ops.
// A batch of --batch operations takes as many numbers and starts at its
// first one's time.
func (b *bench) work(ctx context.Context, w *benchWorker, rng *rand.Rand, stop *atomic.Bool, stopCh <-chan struct{}, claimed *atomic.Int64) {
	c := b.newCaller(w, rng)
	var timer client.Timer
	if b.pace != nil {
		timer = b.clock.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
	}
	for !stop.Load() {
		n := int64(b.cfg.Batch)
		i := claimed.Add(n) - n
		if b.cfg.Ops > 0 {
			if i >= b.cfg.Ops {
				return
			}
			n = min(n, b.cfg.Ops-i)
		}
		if b.pace != nil {
			late, ok := b.pace.wait(timer, i, stopCh)
			if !ok {
				return
			}
			w.lateness.note(i, late, n)
		}
		get := rng.Float64() < b.cfg.Ratio
		t0 := time.Now()
		failed := c.call(ctx, get, int(n))
		d := time.Since(t0)
		if failed {
			w.errHist.record(d)
		} else {
			w.hist.record(d)
			if b.pace != nil {
				w.schedHist.record(b.clock.Now().Sub(b.pace.at(i)))
			}
		}
		w.calls++
	}
}

// caller makes one worker's calls: a get or set of one key, or with
// --batch a GetMany or UpsertMany, reusing its slices.
type caller struct {
	b        *bench
	w        *benchWorker
	nextKey  func() int
	nextSize func() int
	keys     []string
	items    []client.UpsertManyItem
	gopts    *client.GetOptions
	sopts    *client.UpsertOptions
	gmopts   *client.GetManyOptions
	smopts   *client.UpsertManyOptions
}

func (b *bench) newCaller(w *benchWorker, rng *rand.Rand) *caller {
	t := b.inv.opTimeout
	c := &caller{b: b, w: w,
		nextKey:  keyChooser(b.cfg.KeyDist, b.cfg.ZipfS, len(b.keys), rng),
		nextSize: valueSizes(b.cfg.ValueSizeMin, b.cfg.ValueSizeMax, rng),
		gopts:    &client.GetOptions{Timeout: t},
		sopts:    &client.UpsertOptions{Timeout: t, Durability: b.durability},
		gmopts:   &client.GetManyOptions{Timeout: t},
		smopts:   &client.UpsertManyOptions{Timeout: t, Durability: b.durability},
	}
	if b.cfg.Batch > 1 {
		c.keys = make([]string, b.cfg.Batch)
		c.items = make([]client.UpsertManyItem, b.cfg.Batch)
	}
	return c
}

// call runs one call of n operations (n is 1 without --batch) and counts
// each one's outcome; failed says whether any operation failed.
func (c *caller) call(ctx context.Context, get bool, n int) (failed bool) {
	b, w := c.b, c.w
	switch {
	case b.cfg.Batch == 1 && get:
		key := b.keys[c.nextKey()]
		_, err := b.col.Get(ctx, key, c.gopts)
		return !b.count(w, key, true, 0, err)
	case b.cfg.Batch == 1:
		key, value := b.keys[c.nextKey()], b.value[:c.nextSize()]
		_, err := b.col.Upsert(ctx, key, value, c.sopts)
		return !b.count(w, key, false, len(value), err)
	case get:
		keys := c.keys[:n]
		for j := range keys {
			keys[j] = b.keys[c.nextKey()]
		}
		for _, r := range b.col.GetMany(ctx, keys, c.gmopts) {
			failed = !b.count(w, r.Key, true, 0, r.Err) || failed
		}
		return failed
	}
	items := c.items[:n]
	for j := range items {
		items[j] = client.UpsertManyItem{Key: b.keys[c.nextKey()], Value: b.value[:c.nextSize()]}
	}
	for j, r := range b.col.UpsertMany(ctx, items, c.smopts) {
		failed = !b.count(w, r.Key, false, len(items[j].Value), r.Err) || failed
	}
	return failed
}

// count records one operation's outcome and reports whether it succeeded:
// a get's miss is a success (the server answered), and a set's bytes
// count only when it was written.
func (b *bench) count(w *benchWorker, key string, get bool, bytes int, err error) bool {
	switch {
	case err == nil:
	case get && errors.Is(err, client.ErrDocumentNotFound):
		w.misses.Add(1)
	default:
		p := b.inv.explain(key, err)
		w.errKinds[p.kind]++
		if w.firstErr == "" {
			w.firstErr = p.line
		}
		w.errs.Add(1)
		return false
	}
	if get {
		w.gets.Add(1)
	} else {
		w.sets.Add(1)
		w.setBytes += uint64(bytes)
	}
	w.ok.Add(1)
	return true
}

// benchTotals are the counters the progress line shows.
type benchTotals struct {
	ok, errs, retries uint64
	// late is the operations started behind --rate's schedule; paced says
	// whether there is a schedule.
	late  uint64
	paced bool
}

func (b *bench) totals() benchTotals {
	t := benchTotals{paced: b.pace != nil}
	for _, w := range b.workers {
		t.ok += w.ok.Load()
		t.errs += w.errs.Load()
		t.late += w.lateness.late.Load()
	}
	t.retries = b.rc.total()
	return t
}

// benchProgress builds the run's progress line: the operations that
// succeeded per second since the last line, and the errors beside them.
type benchProgress struct {
	start, last     time.Time
	lastOK, lastErr uint64
}

func (p *benchProgress) line(now time.Time, t benchTotals) string {
	since := p.last
	if since.IsZero() {
		since = p.start
	}
	okRate, errRate := rate(t.ok-p.lastOK, since, now), rate(t.errs-p.lastErr, since, now)
	p.last, p.lastOK, p.lastErr = now, t.ok, t.errs
	s := fmt.Sprintf("[%5.1fs] %9.0f ops/s  ops %d  errors %d (%.0f/s)  retries %d",
		now.Sub(p.start).Seconds(), okRate, t.ok, t.errs, errRate, t.retries)
	if t.paced {
		s += fmt.Sprintf("  late %d", t.late)
	}
	return s
}
