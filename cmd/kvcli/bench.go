package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
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
	ValueSize   int           `json:"value_size"`
	Keys        int           `json:"keys"`
	Preload     bool          `json:"preload"`
	KeyPrefix   string        `json:"key_prefix"`
	Seed        uint64        `json:"seed"`
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
	Preloaded    int64             `json:"preloaded"`
	ElapsedS     float64           `json:"elapsed_s"`
	Ops          uint64            `json:"ops"`
	OpsPerSec    float64           `json:"ops_per_sec"`
	Gets         uint64            `json:"gets"`
	Misses       uint64            `json:"misses"`
	Sets         uint64            `json:"sets"`
	Errors       uint64            `json:"errors"`
	ErrorsByKind map[string]uint64 `json:"errors_by_kind"`
	Retries      uint64            `json:"retries"`
	RetryReasons map[string]uint64 `json:"retries_by_reason"`
	LatencyUS    benchLatency      `json:"latency_us"`
	// FirstError is the first failed operation's message, for a person.
	FirstError string `json:"first_error,omitempty"`
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
	hist                          histogram
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

// benchProgressEvery is how often bench prints its progress line.
const benchProgressEvery = time.Second

func cmdBench(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("bench")
	cfg := benchConfig{}
	fs.IntVar(&cfg.Concurrency, "concurrency", 16, "concurrent workers (each runs one operation at a time)")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to run (ignored with --ops)")
	fs.Int64Var(&cfg.Ops, "ops", 0, "stop after this many operations instead of after --duration")
	fs.Float64Var(&cfg.Ratio, "ratio", 0.5, "fraction of operations that are gets (the rest are sets)")
	fs.IntVar(&cfg.ValueSize, "value-size", 32, "bytes per value set")
	fs.IntVar(&cfg.Keys, "keys", 10000, "number of distinct keys")
	fs.BoolVar(&cfg.Preload, "preload", true, "set every key once before the run, so gets find documents")
	fs.StringVar(&cfg.KeyPrefix, "key-prefix", "kvcli-bench:", "prefix of the keys")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the key and operation choice")
	if _, code, ok := inv.parse(fs, args, 0, 0); !ok {
		return code
	}
	switch {
	case cfg.Concurrency < 1 || cfg.Concurrency > 10000:
		inv.usageError("--concurrency %d: want 1 to 10000", cfg.Concurrency)
		return exitUsage
	case cfg.Ratio < 0 || cfg.Ratio > 1:
		inv.usageError("--ratio %v: want 0 to 1 (the fraction of gets)", cfg.Ratio)
		return exitUsage
	case cfg.ValueSize < 0 || cfg.ValueSize > 20<<20:
		inv.usageError("--value-size %d: want 0 to 20 MiB", cfg.ValueSize)
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
	rc := &retryCounter{}
	s, code := inv.connect(ctx, rc)
	if s == nil {
		return code
	}
	defer s.Close()
	b := &bench{inv: inv, cfg: cfg, col: s.col, rc: rc, target: redactConnStr(s.t.connStr)}
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
	inv     *invocation
	cfg     benchConfig
	col     *client.Collection
	rc      *retryCounter
	target  string
	keys    []string
	value   []byte
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
	b.value = make([]byte, b.cfg.ValueSize)
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
		b.workers[i] = &benchWorker{errKinds: map[string]uint64{}}
	}
	var stop atomic.Bool
	var claimed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i, w := range b.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.work(opCtx, w, rand.New(rand.NewPCG(b.cfg.Seed, uint64(i)+1)), &stop, &claimed)
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
			stop.Store(true)
			<-done
			break loop
		case <-ctx.Done():
			stopped = "interrupted"
			stop.Store(true)
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
	fmt.Fprintf(inv.diag(), "kvcli bench: preloading %d keys (%d-byte values)...\n", len(b.keys), len(b.value))
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
			for i := w; i < len(b.keys); i += b.cfg.Concurrency {
				if stop.Load() || ctx.Err() != nil {
					return
				}
				if _, err := b.col.Upsert(opCtx, b.keys[i], b.value, opts); err != nil {
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

// work is one worker: operations one after another until told to stop.
func (b *bench) work(ctx context.Context, w *benchWorker, rng *rand.Rand, stop *atomic.Bool, claimed *atomic.Int64) {
	gopts := &client.GetOptions{Timeout: b.inv.opTimeout}
	mopts := &client.UpsertOptions{Timeout: b.inv.opTimeout}
	for !stop.Load() {
		if b.cfg.Ops > 0 && claimed.Add(1) > b.cfg.Ops {
			return
		}
		key := b.keys[rng.IntN(len(b.keys))]
		get := rng.Float64() < b.cfg.Ratio
		var err error
		t0 := time.Now()
		if get {
			_, err = b.col.Get(ctx, key, gopts)
		} else {
			_, err = b.col.Upsert(ctx, key, b.value, mopts)
		}
		w.hist.record(time.Since(t0))
		if get {
			w.gets.Add(1)
		} else {
			w.sets.Add(1)
		}
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
		w.ops.Add(1)
	}
}

type benchTotals struct{ ops, errs, retries uint64 }

func (b *bench) totals() benchTotals {
	var t benchTotals
	for _, w := range b.workers {
		t.ops += w.ops.Load()
		t.errs += w.errs.Load()
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
	var h histogram
	s := &benchSummary{Config: b.cfg, Target: b.target, Stopped: stopped, Preloaded: b.preloaded.Load(),
		ElapsedS: elapsed.Seconds(), ErrorsByKind: map[string]uint64{}}
	for _, w := range b.workers {
		h.merge(&w.hist)
		s.Ops += w.ops.Load()
		s.Gets += w.gets.Load()
		s.Sets += w.sets.Load()
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
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	s.LatencyUS = benchLatency{
		Min: us(time.Duration(h.min)), Mean: us(h.mean()),
		P50: us(h.percentile(0.50)), P90: us(h.percentile(0.90)), P99: us(h.percentile(0.99)),
		P999: us(h.percentile(0.999)), Max: us(time.Duration(h.max)), Count: h.n,
	}
	return s
}

func printBenchSummary(inv *invocation, s *benchSummary) {
	w := inv.env.stdout
	c := s.Config
	fmt.Fprintf(w, "kvcli bench: %s: %d workers, %.0f%% gets, %d-byte values, %d keys\n",
		s.Target, c.Concurrency, c.Ratio*100, c.ValueSize, c.Keys)
	if s.Stopped == "interrupted_preloading" {
		fmt.Fprintf(w, "time       0s (interrupted while preloading: %d of %d keys set; no operations ran)\n", s.Preloaded, c.Keys)
		return
	}
	how := map[string]string{"duration": "ran for --duration", "ops": "ran --ops", "interrupted": "interrupted"}[s.Stopped]
	fmt.Fprintf(w, "time       %.2fs (%s)\n", s.ElapsedS, how)
	fmt.Fprintf(w, "ops        %d (%.0f ops/s): %d gets (%d misses), %d sets\n", s.Ops, s.OpsPerSec, s.Gets, s.Misses, s.Sets)
	fmt.Fprintf(w, "errors     %d%s\n", s.Errors, countsSuffix(s.ErrorsByKind))
	if s.FirstError != "" {
		fmt.Fprintf(w, "           first: %s\n", s.FirstError)
	}
	fmt.Fprintf(w, "retries    %d%s\n", s.Retries, countsSuffix(s.RetryReasons))
	l := s.LatencyUS
	d := func(us float64) string { return fmtDuration(time.Duration(us * 1e3)) }
	fmt.Fprintf(w, "latency    min %s  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (mean %s)\n",
		d(l.Min), d(l.P50), d(l.P90), d(l.P99), d(l.P999), d(l.Max), d(l.Mean))
}

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
