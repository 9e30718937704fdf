package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/client"
)

// benchConfig is what bench was asked to do.
type benchConfig struct {
	Concurrency int           `json:"concurrency"`
	Duration    time.Duration `json:"-"`
	DurationS   float64       `json:"duration_s,omitempty"`
	Ops         int64         `json:"ops_limit,omitempty"`
	Ratio       float64       `json:"get_ratio"`
	// Rate is the target of operations per second over all workers (0:
	// as fast as they go).
	Rate float64 `json:"rate"`
	// Values set have ValueSizeMin to ValueSizeMax bytes (uniformly).
	ValueSizeMin int    `json:"value_size_min"`
	ValueSizeMax int    `json:"value_size_max"`
	Keys         int    `json:"keys"`
	KeyDist      string `json:"key_dist"`
	// ZipfS is the zipfian distribution's exponent (with key_dist zipfian).
	ZipfS float64 `json:"zipf_s,omitempty"`
	// Durability is the level of the sets ("none": ordinary writes).
	Durability string `json:"durability"`
	// Batch is the keys per call: above 1, gets go as GetMany and sets as
	// UpsertMany of Batch keys.
	Batch     int    `json:"batch"`
	Preload   bool   `json:"preload"`
	KeyPrefix string `json:"key_prefix"`
	Seed      uint64 `json:"seed"`
}

// benchSummary is bench's result; --json prints it as one object.
type benchSummary struct {
	Config benchConfig `json:"config"`
	Target string      `json:"target"`
	// Stopped says how the run ended: "duration", "ops", "interrupted", or
	// "interrupted_preloading" (Ctrl-C before the run started: no
	// operations, and Preloaded says how far the preload got).
	Stopped string `json:"stopped"`
	// Preloaded is how many keys the preload set (0 with --preload=false).
	Preloaded int64   `json:"preloaded"`
	ElapsedS  float64 `json:"elapsed_s"`
	Ops       uint64  `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	Gets      uint64  `json:"gets"`
	Misses    uint64  `json:"misses"`
	Sets      uint64  `json:"sets"`
	// SetBytes is the value bytes the sets wrote.
	SetBytes uint64 `json:"set_bytes"`
	// Calls is the calls made: one per operation, or per batch with
	// --batch. The latencies are the calls'.
	Calls        uint64            `json:"calls"`
	Errors       uint64            `json:"errors"`
	ErrorsByKind map[string]uint64 `json:"errors_by_kind"`
	Retries      uint64            `json:"retries"`
	RetryReasons map[string]uint64 `json:"retries_by_reason"`
	LatencyUS    benchLatency      `json:"latency_us"`
	// LatencyFromScheduleUS, with --rate, counts each operation's latency
	// from its scheduled time instead of its start: it includes the wait
	// of an operation that started late, which latency_us leaves out
	// (coordinated omission).
	LatencyFromScheduleUS *benchLatency `json:"latency_from_schedule_us,omitempty"`
	// Rate is how well a run with --rate kept its schedule (absent
	// without --rate).
	Rate *benchRate `json:"rate,omitempty"`
	// FirstError is the first failed operation's message, for a person.
	FirstError string `json:"first_error,omitempty"`
}

// benchRate is how a paced run went: the achieved rate is ops_per_sec.
type benchRate struct {
	TargetOpsPerSec float64 `json:"target_ops_per_sec"`
	// LateOps is how many operations started more than 1 ms after their
	// scheduled time, and MaxLateUS the most any started behind it.
	LateOps   uint64  `json:"late_ops"`
	MaxLateUS float64 `json:"max_late_us"`
	// FinalLagUS is how far behind its scheduled time the last operation
	// started.
	FinalLagUS float64 `json:"final_lag_us"`
	// KeptUp is false when the run ended behind schedule by more than 1%
	// of its time (and 1 ms): the workers could not keep up with the rate.
	KeptUp bool `json:"kept_up"`
}

type benchLatency struct {
	Min   float64 `json:"min"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99.9"`
	Max   float64 `json:"max"`
	Count uint64  `json:"count"`
}

// benchWorker is one worker's counters. The atomics are read by the
// progress line; the histogram and error kinds only after the worker ended.
type benchWorker struct {
	ops, gets, sets, misses, errs atomic.Uint64
	setBytes, calls               uint64
	lateness                      lateness
	hist                          histogram
	schedHist                     histogram // from the scheduled times (--rate)
	errKinds                      map[string]uint64
	firstErr                      string
	_                             [64]byte // keep workers' counters on separate cache lines
}

// retryCounter is bench's Observer: it counts retries by reason.
type retryCounter struct {
	byReason [64]atomic.Uint64
}

func (r *retryCounter) AttemptStart(a client.AttemptInfo) {
	if a.Retry && int(a.RetryReason) < len(r.byReason) {
		r.byReason[a.RetryReason].Add(1)
	}
}

func (r *retryCounter) AttemptEnd(client.AttemptInfo, error) {}

func (r *retryCounter) total() uint64 {
	var n uint64
	for i := range r.byReason {
		n += r.byReason[i].Load()
	}
	return n
}

func (r *retryCounter) byName() map[string]uint64 {
	out := map[string]uint64{}
	for i := range r.byReason {
		if n := r.byReason[i].Load(); n > 0 {
			out[client.RetryReason(i).String()] = n
		}
	}
	return out
}

// benchMaxBatch is the most keys --batch puts in one call.
const benchMaxBatch = 10000

// benchProgressEvery is how often bench prints its progress line.
const benchProgressEvery = time.Second

func cmdBench(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("bench")
	cfg := benchConfig{}
	fs.IntVar(&cfg.Concurrency, "concurrency", 16, "concurrent workers (each runs one operation at a time)")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to run (ignored with --ops)")
	fs.Int64Var(&cfg.Ops, "ops", 0, "stop after this many operations instead of after --duration")
	fs.Float64Var(&cfg.Ratio, "ratio", 0.5, "fraction of operations that are gets (the rest are sets)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "target `ops/s` over all workers, on a fixed schedule (0: as fast as they go)")
	valueSize := fs.String("value-size", "32", "bytes per value set: `N`, or MIN-MAX for sizes drawn uniformly in that range")
	fs.IntVar(&cfg.Keys, "keys", 10000, "number of distinct keys")
	fs.StringVar(&cfg.KeyDist, "key-dist", keyDistUniform, "how keys are chosen: uniform, or zipfian (key k with probability proportional to (1+k)^-s)")
	fs.Float64Var(&cfg.ZipfS, "zipf-s", benchDefaultZipfS, "the zipfian exponent s (more than 1; larger is more skewed)")
	fs.IntVar(&cfg.Batch, "batch", 1, "keys per call: with N > 1 a worker's gets go as one GetMany of `N` keys and its sets as one UpsertMany")
	durability := fs.String("durability", "none", "durability of the run's sets (not the preload's): none, majority, majorityAndPersistActive or persistToMajority (Couchbase only)")
	fs.BoolVar(&cfg.Preload, "preload", true, "set every key once before the run, so gets find documents")
	fs.StringVar(&cfg.KeyPrefix, "key-prefix", "kvcli-bench:", "prefix of the keys")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the choice of keys, operations and value sizes")
	if _, code, ok := inv.parse(fs, args, 0, 0); !ok {
		return code
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	cfg.ValueSizeMin, cfg.ValueSizeMax, err = parseValueSize(*valueSize)
	if err != nil {
		inv.usageError("%v", err)
		return exitUsage
	}
	level, err := parseDurability(*durability)
	if err != nil {
		inv.usageError("%v", err)
		return exitUsage
	}
	cfg.Durability = level.String()
	switch {
	case cfg.Concurrency < 1 || cfg.Concurrency > 10000:
		inv.usageError("--concurrency %d: want 1 to 10000", cfg.Concurrency)
		return exitUsage
	case cfg.Ratio < 0 || cfg.Ratio > 1:
		inv.usageError("--ratio %v: want 0 to 1 (the fraction of gets)", cfg.Ratio)
		return exitUsage
	case !validRate(cfg.Rate):
		inv.usageError("--rate %v: want 0 (as fast as possible) or a positive number of operations per second", cfg.Rate)
		return exitUsage
	case cfg.KeyDist != keyDistUniform && cfg.KeyDist != keyDistZipfian:
		inv.usageError("--key-dist %q: want uniform or zipfian", cfg.KeyDist)
		return exitUsage
	case given["zipf-s"] && cfg.KeyDist != keyDistZipfian:
		inv.usageError("--zipf-s is the zipfian exponent: give it with --key-dist zipfian")
		return exitUsage
	case !(cfg.ZipfS > 1) || math.IsInf(cfg.ZipfS, 0):
		inv.usageError("--zipf-s %v: want a finite number more than 1", cfg.ZipfS)
		return exitUsage
	case cfg.Batch < 1 || cfg.Batch > benchMaxBatch:
		inv.usageError("--batch %d: want 1 to %d keys per call", cfg.Batch, benchMaxBatch)
		return exitUsage
	case cfg.Keys < 1:
		inv.usageError("--keys %d: want at least 1", cfg.Keys)
		return exitUsage
	case cfg.Ops < 0:
		inv.usageError("--ops %d: want a positive count", cfg.Ops)
		return exitUsage
	case cfg.Ops == 0 && cfg.Duration <= 0:
		inv.usageError("--duration must be positive (or give --ops)")
		return exitUsage
	}
	if cfg.Ops > 0 {
		cfg.Duration = 0
	}
	cfg.DurationS = cfg.Duration.Seconds()
	if cfg.KeyDist != keyDistZipfian {
		cfg.ZipfS = 0
	}
	// memcached has no synchronous writes: refuse before connecting (a
	// target that does not resolve is left for connect to report).
	if t, err := inv.resolveTarget(); err == nil && t.cs.Scheme.IsMemcached() && level != client.DurabilityNone {
		inv.usageError("--durability %s: %s:// has no durable writes (durability is Couchbase Server's); drop --durability", level, t.cs.Scheme)
		return exitUsage
	}
	rc := &retryCounter{}
	s, code := inv.connect(ctx, rc)
	if s == nil {
		return code
	}
	defer s.Close()
	b := &bench{inv: inv, cfg: cfg, col: s.col, rc: rc, target: redactConnStr(s.t.connStr), durability: level, clock: realClock{}}
	return b.run(ctx)
}

// redactConnStr is the connection string to print (it never holds a
// password, but options may be long): the scheme, hosts and bucket.
func redactConnStr(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		return s[:i]
	}
	return s
}

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
}

func (b *bench) run(ctx context.Context) int {
	inv := b.inv
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
	tick := time.NewTicker(benchProgressEvery)
	defer tick.Stop()
	p := &progress{w: inv.diag(), tty: isTerminal(inv.env.stderr), start: start}
	stopped := "ops"
loop:
	for {
		select {
		case <-done:
			break loop
		case <-deadline:
			stopped = "duration"
			halt()
			<-done
			break loop
		case <-ctx.Done():
			stopped = "interrupted"
			halt()
			<-done
			break loop
		case now := <-tick.C:
			p.line(now, b.totals())
		}
	}
	elapsed := time.Since(start)
	p.end()
	return b.report(stopped, elapsed)
}

// report prints the summary and returns bench's exit code.
func (b *bench) report(stopped string, elapsed time.Duration) int {
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

// preload sets every key once, spread over the workers. On Ctrl-C it stops
// starting new sets, lets those in flight finish and returns ok; it returns
// false with the exit code when a set failed.
func (b *bench) preload(ctx, opCtx context.Context) (int, bool) {
	inv := b.inv
	fmt.Fprintf(inv.diag(), "kvcli bench: preloading %d keys (%s-byte values)...\n", len(b.keys), b.cfg.valueSizeText())
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
			for i := w; i < len(b.keys); i += b.cfg.Concurrency {
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
	if firstErr != nil {
		fmt.Fprintf(inv.diag(), "kvcli bench: preload failed\n")
		return inv.fail(firstKey, "bench", firstErr), false
	}
	if ctx.Err() != nil {
		fmt.Fprintf(inv.diag(), "kvcli bench: interrupted while preloading (%d of %d keys set)\n", b.preloaded.Load(), len(b.keys))
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
	gopts := &client.GetOptions{Timeout: b.inv.opTimeout}
	mopts := &client.UpsertOptions{Timeout: b.inv.opTimeout, Durability: b.durability}
	gmopts := &client.GetManyOptions{Timeout: b.inv.opTimeout}
	mmopts := &client.UpsertManyOptions{Timeout: b.inv.opTimeout, Durability: b.durability}
	nextKey := keyChooser(b.cfg.KeyDist, b.cfg.ZipfS, len(b.keys), rng)
	nextSize := valueSizes(b.cfg.ValueSizeMin, b.cfg.ValueSizeMax, rng)
	var keys []string
	var items []client.UpsertManyItem
	if b.cfg.Batch > 1 {
		keys = make([]string, b.cfg.Batch)
		items = make([]client.UpsertManyItem, b.cfg.Batch)
	}
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
		switch {
		case b.cfg.Batch == 1 && get:
			key := b.keys[nextKey()]
			t0 := time.Now()
			_, err := b.col.Get(ctx, key, gopts)
			w.hist.record(time.Since(t0))
			b.count(w, key, get, err)
		case b.cfg.Batch == 1:
			key, value := b.keys[nextKey()], b.value[:nextSize()]
			t0 := time.Now()
			_, err := b.col.Upsert(ctx, key, value, mopts)
			w.hist.record(time.Since(t0))
			w.setBytes += uint64(len(value))
			b.count(w, key, get, err)
		case get:
			keys := keys[:n]
			for j := range keys {
				keys[j] = b.keys[nextKey()]
			}
			t0 := time.Now()
			res := b.col.GetMany(ctx, keys, gmopts)
			w.hist.record(time.Since(t0))
			for _, r := range res {
				b.count(w, r.Key, get, r.Err)
			}
		default:
			items := items[:n]
			for j := range items {
				items[j] = client.UpsertManyItem{Key: b.keys[nextKey()], Value: b.value[:nextSize()]}
				w.setBytes += uint64(len(items[j].Value))
			}
			t0 := time.Now()
			res := b.col.UpsertMany(ctx, items, mmopts)
			w.hist.record(time.Since(t0))
			for _, r := range res {
				b.count(w, r.Key, get, r.Err)
			}
		}
		if b.pace != nil {
			w.schedHist.record(b.clock.Now().Sub(b.pace.at(i)))
		}
		w.calls++
		if get {
			w.gets.Add(uint64(n))
		} else {
			w.sets.Add(uint64(n))
		}
		w.ops.Add(uint64(n))
	}
}

// count records one operation's outcome: a get's miss is not an error.
func (b *bench) count(w *benchWorker, key string, get bool, err error) {
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
	}
}

type benchTotals struct {
	ops, errs, retries uint64
	// late is the operations started behind --rate's schedule; paced says
	// whether there is a schedule.
	late  uint64
	paced bool
}

func (b *bench) totals() benchTotals {
	t := benchTotals{paced: b.pace != nil}
	for _, w := range b.workers {
		t.ops += w.ops.Load()
		t.errs += w.errs.Load()
		t.late += w.lateness.late.Load()
	}
	t.retries = b.rc.total()
	return t
}

// progress prints the live line: rewritten in place on a terminal, one
// line per interval otherwise.
type progress struct {
	w       interface{ Write([]byte) (int, error) }
	tty     bool
	start   time.Time
	last    time.Time
	lastOps uint64
	printed bool
}

func (p *progress) line(now time.Time, t benchTotals) {
	since := p.last
	if since.IsZero() {
		since = p.start
	}
	rate := float64(t.ops-p.lastOps) / now.Sub(since).Seconds()
	p.last, p.lastOps = now, t.ops
	s := fmt.Sprintf("[%5.1fs] %9.0f ops/s  ops %d  errors %d  retries %d",
		now.Sub(p.start).Seconds(), rate, t.ops, t.errs, t.retries)
	if t.paced {
		s += fmt.Sprintf("  late %d", t.late)
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", s)
	} else {
		fmt.Fprintf(p.w, "%s\n", s)
	}
	p.printed = true
}

func (p *progress) end() {
	if p.tty && p.printed {
		fmt.Fprintf(p.w, "\n")
	}
}

func (b *bench) summary(stopped string, elapsed time.Duration) *benchSummary {
	var h, sh histogram
	var late uint64
	var maxLate time.Duration
	ls := make([]*lateness, 0, len(b.workers))
	s := &benchSummary{Config: b.cfg, Target: b.target, Stopped: stopped, Preloaded: b.preloaded.Load(),
		ElapsedS: elapsed.Seconds(), ErrorsByKind: map[string]uint64{}}
	for _, w := range b.workers {
		h.merge(&w.hist)
		sh.merge(&w.schedHist)
		s.Ops += w.ops.Load()
		s.Gets += w.gets.Load()
		s.Sets += w.sets.Load()
		s.SetBytes += w.setBytes
		s.Calls += w.calls
		late += w.lateness.late.Load()
		maxLate = max(maxLate, w.lateness.maxLate)
		ls = append(ls, &w.lateness)
		s.Misses += w.misses.Load()
		s.Errors += w.errs.Load()
		for k, n := range w.errKinds {
			s.ErrorsByKind[k] += n
		}
		if s.FirstError == "" {
			s.FirstError = w.firstErr
		}
	}
	if elapsed > 0 {
		s.OpsPerSec = float64(s.Ops) / elapsed.Seconds()
	}
	s.Retries = b.rc.total()
	s.RetryReasons = b.rc.byName()
	if b.cfg.Rate > 0 && stopped != "interrupted_preloading" {
		lag := finalLag(ls)
		s.Rate = &benchRate{TargetOpsPerSec: b.cfg.Rate, LateOps: late, MaxLateUS: us(maxLate),
			FinalLagUS: us(lag), KeptUp: keptUp(lag, elapsed)}
		fs := latencyOf(&sh)
		s.LatencyFromScheduleUS = &fs
	}
	s.LatencyUS = latencyOf(&h)
	return s
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// latencyOf summarises h in microseconds.
func latencyOf(h *histogram) benchLatency {
	return benchLatency{
		Min: us(time.Duration(h.min)), Mean: us(h.mean()),
		P50: us(h.percentile(0.50)), P90: us(h.percentile(0.90)), P99: us(h.percentile(0.99)),
		P999: us(h.percentile(0.999)), Max: us(time.Duration(h.max)), Count: h.n,
	}
}

func printBenchSummary(inv *invocation, s *benchSummary) {
	w := inv.env.stdout
	c := s.Config
	fmt.Fprintf(w, "kvcli bench: %s: %d workers, %.0f%% gets, %s-byte values, %d keys (%s)%s\n",
		s.Target, c.Concurrency, c.Ratio*100, c.valueSizeText(), c.Keys, c.keyDistText(), c.extraText())
	if s.Stopped == "interrupted_preloading" {
		fmt.Fprintf(w, "time       0s (interrupted while preloading: %d of %d keys set; no operations ran)\n", s.Preloaded, c.Keys)
		return
	}
	how := map[string]string{"duration": "ran for --duration", "ops": "ran --ops", "interrupted": "interrupted"}[s.Stopped]
	fmt.Fprintf(w, "time       %.2fs (%s)\n", s.ElapsedS, how)
	fmt.Fprintf(w, "ops        %d (%.0f ops/s): %d gets (%d misses), %d sets", s.Ops, s.OpsPerSec, s.Gets, s.Misses, s.Sets)
	if c.Batch > 1 {
		fmt.Fprintf(w, ", in %d batches (GetMany, UpsertMany) of up to %d", s.Calls, c.Batch)
	}
	fmt.Fprintf(w, "\n")
	if r := s.Rate; r != nil {
		d := func(us float64) string { return fmtDuration(time.Duration(us * 1e3)) }
		fmt.Fprintf(w, "rate       target %s ops/s, achieved %.0f ops/s; %d operations started over %s late (at most %s), the last %s late\n",
			fmtRate(r.TargetOpsPerSec), s.OpsPerSec, r.LateOps, benchLateAfter, d(r.MaxLateUS), d(r.FinalLagUS))
		if !r.KeptUp {
			fmt.Fprintf(w, "           the client could not keep up with --rate (it ended %s behind schedule): raise --concurrency (each worker runs one operation at a time) or lower --rate\n",
				d(r.FinalLagUS))
		}
	}
	fmt.Fprintf(w, "errors     %d%s\n", s.Errors, countsSuffix(s.ErrorsByKind))
	if s.FirstError != "" {
		fmt.Fprintf(w, "           first: %s\n", s.FirstError)
	}
	fmt.Fprintf(w, "retries    %d%s\n", s.Retries, countsSuffix(s.RetryReasons))
	per, from := "", ", from each operation's scheduled time"
	if c.Batch > 1 {
		per, from = ", per batch", ", per batch, from its scheduled time"
	}
	printLatency(w, "latency   ", s.LatencyUS, per)
	if l := s.LatencyFromScheduleUS; l != nil {
		printLatency(w, "scheduled ", *l, from)
	}
}

// printLatency prints a latency line: the label, the percentiles, and
// the mean with what follows it in parentheses.
func printLatency(w io.Writer, label string, l benchLatency, note string) {
	d := func(us float64) string { return fmtDuration(time.Duration(us * 1e3)) }
	fmt.Fprintf(w, "%s min %s  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (mean %s%s)\n",
		label, d(l.Min), d(l.P50), d(l.P90), d(l.P99), d(l.P999), d(l.Max), d(l.Mean), note)
}

// valueSizeText is --value-size as bench read it: "32" or "64-4096".
func (c benchConfig) valueSizeText() string {
	if c.ValueSizeMin == c.ValueSizeMax {
		return strconv.Itoa(c.ValueSizeMin)
	}
	return fmt.Sprintf("%d-%d", c.ValueSizeMin, c.ValueSizeMax)
}

// keyDistText is "uniform" or "zipfian s=1.01".
func (c benchConfig) keyDistText() string {
	if c.KeyDist == keyDistZipfian {
		return fmt.Sprintf("zipfian s=%v", c.ZipfS)
	}
	return c.KeyDist
}

// extraText is the summary's header's note of --durability and --rate.
func (c benchConfig) extraText() string {
	var s string
	if c.Durability != client.DurabilityNone.String() {
		s += ", durability " + c.Durability
	}
	if c.Rate > 0 {
		s += ", --rate " + fmtRate(c.Rate) + " ops/s"
	}
	if c.Batch > 1 {
		s += fmt.Sprintf(", --batch %d", c.Batch)
	}
	return s
}

// fmtRate prints a rate without a fraction when it has none.
func fmtRate(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }

// countsSuffix renders " (a 1, b 2)" sorted by name, or "".
func countsSuffix(m map[string]uint64) string {
	if len(m) == 0 {
		return ""
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
