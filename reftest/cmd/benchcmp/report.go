package main

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/reftest/internal/benchlog"
)

// env is what the report says about the machine and the run.
type env struct {
	start, end      time.Time
	cpuModel        string
	kernel          string
	loadStart       string
	loadEnd         string
	ct0, ct1        cpuTimes
	ctOK0, ctOK1    bool
	goVersion       string
	gomaxprocs      int
	numCPU          int
	command, note   string
	rounds          int
	duration, warm  time.Duration
	keys            int
	sample          int
	profiles        []profile // -profile's files, in the order taken
	profileDuration time.Duration
}

func captureEnv(cfg *config) *env {
	e := &env{start: time.Now(), goVersion: runtime.Version(), gomaxprocs: runtime.GOMAXPROCS(0),
		numCPU: runtime.NumCPU(), command: cfg.command, note: cfg.note, rounds: cfg.rounds,
		duration: cfg.duration, warm: cfg.warmup, keys: cfg.keys, sample: cfg.sample, profileDuration: cfg.profileDuration}
	e.cpuModel = "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				e.cpuModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.kernel = strings.TrimSpace(string(b))
	}
	e.loadStart = loadAvg()
	e.ct0, e.ctOK0 = readCPUTimes()
	return e
}

func (e *env) finish() {
	e.end = time.Now()
	e.loadEnd = loadAvg()
	e.ct1, e.ctOK1 = readCPUTimes()
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// figures are the medians of one client's samples in one cell.
type figures struct {
	ok                                      bool
	n                                       int
	ops, spread, p50, p99, cpu, allocs, srv float64
	steal, reads, writes, mutexWait         float64
	// rounds are the samples, one a round in round order: a client
	// that failed in a round has none from it on (run stops measuring
	// it), so the i-th samples of two clients are from the same round.
	rounds []sample
	// failed is the client's failure (an error, a miss, a value of the
	// wrong length), when it failed in a round: its figures, if any, are
	// from the rounds before.
	failed error
}

func medians(ss []sample) figures {
	if len(ss) == 0 {
		return figures{}
	}
	values := func(f func(sample) float64) []float64 {
		xs := make([]float64, len(ss))
		for i, s := range ss {
			xs[i] = f(s)
		}
		return xs
	}
	col := func(f func(sample) float64) float64 { return benchlog.Median(values(f)) }
	// known is col of a figure that can be unknown (< 0) in a round (a
	// round that timed no operation has no p50).
	known := func(f func(sample) float64) float64 { return benchlog.MedianKnown(values(f)) }
	fg := figures{ok: true, n: len(ss), rounds: ss,
		ops:       col(func(s sample) float64 { return s.opsPerSec }),
		p50:       known(func(s sample) float64 { return s.p50 }),
		p99:       known(func(s sample) float64 { return s.p99 }),
		cpu:       col(func(s sample) float64 { return s.cpuPerOp }),
		allocs:    col(func(s sample) float64 { return s.allocsPerOp }),
		srv:       known(func(s sample) float64 { return s.srvPerOp }),
		steal:     col(func(s sample) float64 { return s.steal }),
		reads:     known(func(s sample) float64 { return s.readsPerOp }),
		writes:    known(func(s sample) float64 { return s.writesPerOp }),
		mutexWait: known(func(s sample) float64 { return s.mutexWaitPerOp }),
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		lo, hi = min(lo, s.opsPerSec), max(hi, s.opsPerSec)
	}
	if fg.ops > 0 {
		fg.spread = 100 * (hi - lo) / fg.ops
	}
	return fg
}

type target struct {
	what     string
	required string // "≥ 0.70", "≤ 0.50", or "" for a figure shown for context
	measured float64
	ok       bool // measured exists
	pass     bool
	// rounds is the figure in each round, from that round's own
	// samples (perRound); passing counts those that pass.
	rounds  []float64
	passing int
	// failed: a client the figure is of failed in some round (shown as
	// FAILED, never PASS: its figures, if any, are from the rounds before).
	failed bool
}

// perRound is f(a) ÷ f(b) in each round both were measured, from that
// round's samples alone.
func perRound(a, b figures, f func(figures) float64) []float64 {
	var ms []float64
	for i := range min(len(a.rounds), len(b.rounds)) {
		fa, fb := medians(a.rounds[i:i+1]), medians(b.rounds[i:i+1])
		if f(fa) >= 0 && f(fb) > 0 {
			ms = append(ms, f(fa)/f(fb))
		}
	}
	return ms
}

type report struct {
	env     *env
	header  []string
	rows    [][]string
	targets []target
	notes   []string
}

func buildReport(cfg *config, e *env, cells []*cell) *report {
	r := &report{env: e}
	r.header = []string{"backend", "workload", "goroutines", "client", "ops/s", "kvwire ÷ this",
		"spread", "p50 µs", "p99 µs", "client CPU µs/op", "allocs/op", "writes/op", "reads/op", "server CPU µs/op", "mutex wait µs/op"}
	get := func(backend, wl string, conc int, id string) figures {
		for _, c := range cells {
			if c.backend == backend && c.wl.name == wl && c.conc == conc {
				fg := medians(c.samples[id])
				fg.failed = c.failed[id]
				return fg
			}
		}
		return figures{}
	}
	for _, c := range cells {
		kv := medians(c.samples["kvwire"])
		for _, v := range c.variants {
			fg := medians(c.samples[v.id])
			conc := c.conc
			if v.goroutines > 0 {
				conc = v.goroutines
			}
			row := []string{c.backend, c.wl.name, fmt.Sprint(conc), v.name}
			if err := c.failed[v.id]; err != nil && !fg.ok {
				row = append(row, "FAILED: "+oneLine(err.Error()), "", "", "", "", "", "", "", "", "", "")
				r.rows = append(r.rows, row)
				continue
			}
			ratio := ""
			if v.id != "kvwire" && kv.ok && fg.ok && fg.ops > 0 {
				ratio = fmt.Sprintf("%.2fx", kv.ops/fg.ops)
			}
			srv := "n/a"
			if fg.srv >= 0 {
				srv = fmt.Sprintf("%.2f", fg.srv)
			}
			row = append(row, fmtOps(fg.ops), ratio, fmt.Sprintf("%.0f%%", fg.spread),
				latency(fg.p50), latency(fg.p99),
				fmt.Sprintf("%.2f", fg.cpu), fmt.Sprintf("%.2f", fg.allocs), perOp(fg.writes), perOp(fg.reads), srv, mutexWait(fg.mutexWait))
			if err := c.failed[v.id]; err != nil {
				row[3] += " (failed in a later round)"
			}
			r.rows = append(r.rows, row)
		}
	}

	// value adds the target m (measured when ok), passed when pass says
	// so of m as shown, to two decimals (a context figure when req is "").
	value := func(what, req string, m float64, ok bool, pass func(float64) bool, rounds []float64, failed bool) {
		if cfg.label != "" {
			// A side run: its figures are context for the main run's
			// targets, named after what the side run changed.
			what, req = cfg.label+": "+strings.TrimLeft(what, " "), ""
		}
		t := target{what: what, required: req, failed: failed}
		if ok {
			t.ok = true
			t.measured = m
			t.pass = pass(math.Round(m*100) / 100)
			t.rounds = rounds
			for _, x := range rounds {
				if pass(math.Round(x*100) / 100) {
					t.passing++
				}
			}
		}
		if !t.ok && !t.failed && cfg.label != "" {
			return // a side run shows what it measured
		}
		r.targets = append(r.targets, t)
	}
	// ratio adds the target f(a) ÷ f(b).
	ratio := func(what, req string, a, b figures, f func(figures) float64, pass func(float64) bool) {
		ok := a.ok && b.ok && f(a) >= 0 && f(b) > 0
		m := 0.0
		var rounds []float64
		if ok {
			m = f(a) / f(b)
			rounds = perRound(a, b, f)
		}
		value(what, req, m, ok, pass, rounds, a.failed != nil || b.failed != nil)
	}
	atLeast := func(limit float64) func(float64) bool { return func(m float64) bool { return m >= limit } }
	atMost := func(limit float64) func(float64) bool { return func(m float64) bool { return m <= limit } }
	above := func(limit float64) func(float64) bool { return func(m float64) bool { return m > limit } }
	context := atLeast(0)
	ops := func(f figures) float64 { return f.ops }
	p50 := func(f figures) float64 { return f.p50 }
	cpu := func(f figures) float64 { return f.cpu }
	srv := func(f figures) float64 { return f.srv }
	top := cfg.bestConns * cfg.bestWindow
	for _, wl := range []string{"get-32B", "get-1KiB"} {
		if has(cfg.concs, top) {
			kv := get("memcached", wl, top, "kvwire")
			same, multi := get("memcached", wl, top, "raw"), get("memcached", wl, top, "raw-best")
			// The target is against the best raw figure of the run: the
			// faster of the two raw loops.
			best, name := same, fmt.Sprintf("1 conn × %d", top)
			if !same.ok || (multi.ok && multi.ops > same.ops) {
				best, name = multi, fmt.Sprintf("%d conns × %d", cfg.bestConns, cfg.bestWindow)
			}
			if best.failed == nil {
				// The other raw loop failed: which is the best is
				// not known.
				best.failed = cmp.Or(same.failed, multi.failed)
			}
			ratio(fmt.Sprintf("memcached %s, %d goroutines: kvwire ops/s ÷ best raw loop (here %s)", wl, top, name),
				"≥ 0.60", kv, best, ops, atLeast(0.60))
			ratio(fmt.Sprintf("  same, ÷ raw loop on kvwire's connections (1 conn × %d)", top),
				"", kv, same, ops, context)
			ratio(fmt.Sprintf("  kvwire with %d conns per node ÷ best raw loop", cfg.bestConns),
				"", get("memcached", wl, top, fmt.Sprintf("kvwire-%dc", cfg.bestConns)), best, ops, context)
		}
		if has(cfg.concs, 16) {
			kv := get("memcached", wl, 16, "kvwire")
			ratio(fmt.Sprintf("memcached %s, 16 goroutines: kvwire ops/s ÷ raw 1 conn × 16 window", wl),
				"≥ 0.80", kv, get("memcached", wl, 16, "raw"), ops, atLeast(0.80))
			ratio("  same, kvwire ÷ gomemcache (a connection per goroutine)",
				"", kv, get("memcached", wl, 16, "gomemcache"), ops, context)
			lock := get("memcached", wl, 16, "lockstep")
			ratio("  the shape's ceiling: lockstep (16 blocking goroutines, whole batches) ÷ raw 1 conn × 16 window",
				"", lock, get("memcached", wl, 16, "raw"), ops, context)
			ratio("  kvwire ÷ lockstep", "", kv, lock, ops, context)
		}
		if has(cfg.concs, 1) {
			ratio(fmt.Sprintf("memcached %s, 1 goroutine: kvwire p50 ÷ raw round trip p50", wl),
				"≤ 1.05", get("memcached", wl, 1, "kvwire"), get("memcached", wl, 1, "raw"), p50, atMost(1.05))
		}
	}
	bw := batchWorkload(cfg)
	if cfg.batch > 0 {
		kv := get("memcached", bw, 1, "kvwire")
		pre := fmt.Sprintf("memcached %s, 1 goroutine: kvwire GetMany keys/s ÷ ", bw)
		ratio(pre+fmt.Sprintf("raw batch (%d %s + NOOP in 1 write)", cfg.batch, rawBatchQuiet),
			"≥ 0.85", kv, get("memcached", bw, 1, "raw"), ops, atLeast(0.85))
		ratio(fmt.Sprintf("  same, ÷ raw batch of %d plain GETs in 1 write", cfg.batch),
			"", kv, get("memcached", bw, 1, "raw-get"), ops, context)
		rawText := get("memcached", bw, 1, "raw-text")
		ratio(fmt.Sprintf("  same, ÷ raw text multi-get (1 gets of %d keys)", cfg.batch),
			"", kv, rawText, ops, context)
		kvBin := get("memcached", bw, 1, "kvwire-binary")
		ratio(fmt.Sprintf("  kvwire GetMany with binary_multiget (%d %s + NOOP) ÷ the raw batch", cfg.batch, memdx.OpGetKQ),
			"", kvBin, get("memcached", bw, 1, "raw"), ops, context)
		ratio("  kvwire GetMany ÷ kvwire GetMany with binary_multiget", "", kv, kvBin, ops, context)
		gm, raw := get("memcached", bw, 1, "gomemcache"), get("memcached", bw, 1, "raw")
		ratio(pre+"gomemcache GetMulti", "> 1.00", kv, gm, ops, above(1))
		ratio("  same, client CPU/key", "", kv, gm, cpu, context)
		ratio("  same, server CPU/key", "", kv, gm, srv, context)
		ratio(fmt.Sprintf("  same, ÷ kvwire Get with a goroutine per key (%d)", cfg.batch),
			"", kv, get("memcached", bw, 1, "kvwire-fanout"), ops, context)
		ratio(fmt.Sprintf("  the raw batch (%d %s + NOOP, no client work) ÷ gomemcache GetMulti", cfg.batch, rawBatchQuiet),
			"", raw, gm, ops, context)
		ratio(fmt.Sprintf("  the raw text multi-get (1 gets of %d keys, no client work) ÷ gomemcache GetMulti", cfg.batch),
			"", rawText, gm, ops, context)
	}
	for _, wl := range []string{"get-32B", "get-1KiB", "upsert-1KiB", "mix-1KiB"} {
		for _, conc := range cfg.concs {
			kv, cb := get("mock", wl, conc, "kvwire"), get("mock", wl, conc, "gocbcore")
			if !kv.ok && !cb.ok && kv.failed == nil && cb.failed == nil {
				continue // not measured
			}
			pre := fmt.Sprintf("mock %s, %d goroutine%s: kvwire ÷ gocbcore", wl, conc, plural(conc))
			if conc > 1 {
				ratio(pre+" ops/s", "≥ 1.50", kv, cb, ops, atLeast(1.5))
			} else {
				ratio(pre+" ops/s (latency-bound: context)", "", kv, cb, ops, context)
			}
			ratio(pre+" client CPU/op", "≤ 0.50", kv, cb, cpu, atMost(0.5))
		}
	}
	if cfg.batch > 0 {
		kv, cb := get("mock", bw, 1, "kvwire"), get("mock", bw, 1, "gocbcore")
		ratio(fmt.Sprintf("mock %s: kvwire GetMany (1 goroutine) keys/s ÷ gocbcore Get with a goroutine per key (%d)", bw, cfg.batch),
			"> 1.00", kv, cb, ops, above(1))
		ratio("  same, client CPU/op", "", kv, cb, cpu, context)
		ratio(fmt.Sprintf("  same, ÷ gocbcore's %d async Gets from 1 goroutine", cfg.batch),
			"", kv, get("mock", bw, 1, "gocbcore-async"), ops, context)
		ratio(fmt.Sprintf("  same, ÷ kvwire Get with a goroutine per key (%d)", cfg.batch),
			"", kv, get("mock", bw, 1, "kvwire-fanout"), ops, context)
	}
	// Allocations: kvwire's own, per operation, at its worst concurrency
	// (a Get allocates its result's value, an Upsert nothing).
	for _, backend := range []string{"memcached", "mock"} {
		for _, a := range []struct {
			wl    string
			limit float64
		}{{"get-32B", 1}, {"get-1KiB", 1}, {"upsert-1KiB", 0}, {"mix-1KiB", 0.5}} {
			most, ok, failed := 0.0, false, false
			var rounds []float64 // the most of each round
			for _, conc := range cfg.concs {
				kv := get(backend, a.wl, conc, "kvwire")
				failed = failed || kv.failed != nil
				if kv.ok {
					most, ok = max(most, kv.allocs), true
					for i, s := range kv.rounds {
						if i == len(rounds) {
							rounds = append(rounds, s.allocsPerOp)
						}
						rounds[i] = max(rounds[i], s.allocsPerOp)
					}
				}
			}
			if !ok && !failed {
				continue
			}
			value(fmt.Sprintf("%s %s: kvwire allocs/op, the most at %s goroutines", backend, a.wl, joinInts(cfg.concs)),
				fmt.Sprintf("≤ %.2f", a.limit), most, ok, atMost(a.limit), rounds, failed)
		}
	}
	r.notes = []string{
		"ops/s, latency, CPU and allocations are medians over the rounds; every ratio is a ratio of those medians. " +
			"spread: (max − min) ÷ median of the rounds' ops/s.",
		"rounds passing: in how many rounds a target passes when judged on that round's figures alone (its clients are measured one after another in the round, seconds apart). " +
			"A target that passes in most rounds but not all sits near its line: another run of the same code can land on its other side.",
		"kvwire ÷ this: kvwire's ops/s (default options, one connection per node) divided by the row's.",
		"client CPU: getrusage(RUSAGE_SELF) user+sys of the harness, which hosts only the clients (servers run in their own processes; the clients not being measured stay connected, idle but for their config polls every 2.5 s); " +
			"server CPU: the server process's utime+stime from /proc (10 ms ticks).",
		"writes/op and reads/op: the harness's write and read system calls (/proc/self/io) per operation.",
		"mutex wait: the time the harness's goroutines spent blocked on a sync.Mutex or sync.RWMutex, or waiting for one of the runtime's own locks " +
			"(a channel's, the scheduler's, the network poller's), per operation (runtime/metrics /sync/mutex/wait/total:seconds, which the runtime samples; " +
			"the raw loops, which take no mutex, show the last kind alone); " +
			"time waited, not CPU, summed over goroutines. kvwire's callers, reader and writer share a lock per connection: when it is contended, this rises.",
		latencyNote(cfg.sample),
		"raw, 1 conn × N: one connection, N GETs encoded into one buffer and sent in one write, then every answer read (status and value length checked) " +
			"before the next N (a lockstep window); at 1 goroutine the round trip; raw, 4 conns × 64: four such loops. " +
			"The 16-goroutine target divides by the 16-window on one connection, as kvwire uses one connection per node; " +
			"its ratio to gomemcache, which opens a connection per goroutine, is context.",
		"lockstep, N blocking goroutines on 1 conn: the ceiling of kvwire's shape, for context. N goroutines each do one blocking Get at a time " +
			"on one shared connection, as kvwire's callers do, batched with what a client cannot know, the number of its callers: " +
			"the last of the N to queue writes all N requests in one write, " +
			"and a reader goroutine hands each goroutine its answer on a channel of its own. Nothing else: no value copy, no opaque table, " +
			"no deadline, cancel, retry or routing. What it pays over the raw window is what any blocking call per goroutine pays: " +
			"each request's hand-off from its goroutine to the connection's and back.",
		"A target is judged on its figure as shown, to two decimals: allocs/op of 1.004 is 1.00. The harness allocates nothing inside the interval " +
			"(its goroutines start before it); the runtime's own allocations for the client's goroutines count as the client's: " +
			"a few hundred per interval, mostly refilling what the collection before each interval empties (sudogs of blocked channel operations, sync.Pool). kvwire allocs/op: the most of its rows at any goroutine count.",
		"gomemcache: ASCII protocol, MaxIdleConns = goroutines, Timeout = the KV timeout, one reused Item per goroutine. " +
			"gocbcore v10.8.1: one connection per node (its default), mutation tokens and snappy on (as kvwire; gocb's defaults), " +
			"SCRAM-SHA512, default collection, a deadline of the KV timeout per op, a channel per goroutine to wait for callbacks (as gocb's synchronous API).",
		"Values are random bytes (incompressible): kvwire and gocbcore try snappy on the 1 KiB writes and send them uncompressed.",
	}
	for _, t := range r.targets {
		if t.failed {
			r.notes = append(r.notes, "FAILED: a client of the target's figure failed in some round (an error, a miss or a value of the wrong length: "+
				"its row in the figures says which, the log how) and was measured no more; the figure shown, if any, is from the rounds before, and is not judged.")
			break
		}
	}
	if len(e.profiles) > 0 {
		var ps []string
		for _, p := range e.profiles {
			if p.err != nil {
				ps = append(ps, fmt.Sprintf("%s: FAILED: %s", p.id, oneLine(p.err.Error())))
				continue
			}
			ps = append(ps, fmt.Sprintf("%s: %s (%s ops/s, %.2f µs/op client CPU under the profiler)", p.id, p.path, fmtOps(p.s.opsPerSec), p.s.cpuPerOp))
		}
		r.notes = append(r.notes, fmt.Sprintf("CPU profiles (-profile): after the rounds, one more measured interval of %v per profiled measurement, "+
			"with Go's CPU profiler on in this process (the client's; its figures are not in the medians): %s.", e.profileDuration, strings.Join(ps, "; ")))
	}
	if cfg.batch > 0 {
		r.notes = append(r.notes, fmt.Sprintf("Batch rows (%s): one goroutine reads %d consecutive preloaded keys (32 B values, all hits) per call, the same keys for every client; "+
			"ops/s counts keys per second (a batch of %d is %d ops), and CPU, allocations and system calls per op are per key; "+
			"a timed key is recorded at its batch's time (the whole call). "+
			"kvwire GetMany: default options, one connection per node; on memcached it reads each server's keys as one text multi-get "+
			"(\"gets k1 k2 ...\", after a \"version\" request whose answer must come first) on a text connection of its own; with binary_multiget (MemcachedOptions.BinaryMultiGet) as %[6]s per key and a NOOP on its binary connection. "+
			"raw: one connection, the batch's requests encoded into one buffer and sent in one write, read until every answer is in; "+
			"the target's raw loop (the issue's pipelined loop) sends a quiet get (%[5]s) per key and a NOOP: the requests of kvwire's binary path but for the key in each answer "+
			"(kvwire sends %[6]s, whose answers carry it, to check them), "+
			"so kvwire's binary_multiget row over it is the client's cost over nearly the same server work; the plain-GET loop is shown for context, "+
			"and so is raw text: one \"gets\" of all keys in one write, read until END, checking each VALUE's key, order and length "+
			"(memcached serves it as one request, where it serves at most -R, 20 by default, binary requests of a connection per event-loop turn): "+
			"the wire limit of kvwire's default path. "+
			"gomemcache GetMulti: one \"gets\" command of all keys (ASCII). "+
			"A goroutine per key: what a user without a batch API writes, a goroutine per key each doing one blocking Get, then a wait for all "+
			"(the goroutines column counts them); gocbcore's async row issues every Get from one goroutine and waits once.",
			bw, cfg.batch, cfg.batch, cfg.batch, rawBatchQuiet, memdx.OpGetKQ))
	}
	return r
}

// mutexWait formats µs of mutex wait per op ("n/a" when unknown).
func mutexWait(us float64) string {
	if us < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", us)
}

// sampleMethod says in a few words which operations the loops time.
func sampleMethod(every int) string {
	switch every {
	case 0:
		return "latency not measured (-sample 0)"
	case 1:
		return "latency of every operation (-sample 1)"
	}
	return fmt.Sprintf("latency of one operation in %d, drawn at random, in every loop alike (-sample %d)", every, every)
}

// latencyNote is the report's note on how latency is recorded, and why
// that is fair to every client.
func latencyNote(every int) string {
	if every == 0 {
		return "Latency: not measured (-sample 0): no loop reads the clock per operation; p50 and p99 are n/a and so is the 1-goroutine target."
	}
	drawn := fmt.Sprintf("draws the operations it times at random, one in %d on average (-sample %d; gaps uniform in [1, %d]", every, every, 2*every-1)
	if every == 1 {
		drawn = "times every operation (-sample 1"
	}
	return "Latency, recorded alike by every loop: each measuring goroutine (a client's, a raw loop's, a batch's) " + drawn +
		", the same operation numbers for goroutine g of every client). A timed operation costs two reads of the monotonic clock around its call " +
		"and one update of the goroutine's own histogram; any other costs a decrement and a compare. A raw window or a batch is one call carrying " +
		"W operations: it is timed whole when it carries a drawn one, and each drawn one is recorded at the call's time (its requests are in flight together). " +
		"So every one-operation-per-call loop (kvwire, gomemcache, gocbcore, the raw round trip) pays the same recording cost inside the measured CPU, " +
		"and a window or batch pays no more than that (one timed call per W operations at most). " +
		"p50 and p99 are quantiles of the timed operations, which are drawn before they run, whatever their latency."
}

// latency shows a latency in µs, "n/a" when none was recorded (-sample 0).
func latency(us float64) string {
	if us < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", us)
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func perOp(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", v)
}

func has(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func fmtOps(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// targetHeader heads the target rows: "rounds passing" is in how many
// rounds the target's figure, from that round's samples alone, passes.
var targetHeader = []string{"target", "required", "measured", "result", "rounds passing"}

func (r *report) targetRows() [][]string {
	var rows [][]string
	for _, t := range r.targets {
		m, res := "n/a", "not run"
		if t.ok {
			m = fmt.Sprintf("%.2f", t.measured)
			res = "MISS"
			if t.pass {
				res = "PASS"
			}
		}
		req := t.required
		if req == "" {
			req, res = "—", "context"
			if !t.ok {
				res = "n/a"
			}
		}
		if t.failed {
			res = "FAILED"
		}
		passing := "—"
		if t.required != "" && len(t.rounds) > 0 {
			passing = fmt.Sprintf("%d of %d", t.passing, len(t.rounds))
		}
		rows = append(rows, []string{t.what, req, m, res, passing})
	}
	return rows
}

func (r *report) envLines() []string {
	e := r.env
	steal := "unknown"
	if e.ctOK0 && e.ctOK1 {
		steal = fmt.Sprintf("%.1f%%", stealPercent(e.ct0, e.ct1))
	}
	lines := []string{
		"Command: " + e.command,
		fmt.Sprintf("Date: %s (run took %s)", e.start.UTC().Format("2006-01-02 15:04 MST"), e.end.Sub(e.start).Round(time.Second)),
		fmt.Sprintf("Go: %s, GOMAXPROCS %d; CPU: %s × %d; kernel %s", e.goVersion, e.gomaxprocs, e.cpuModel, e.numCPU, e.kernel),
		fmt.Sprintf("Load average: %s at start, %s at end; CPU steal during the run: %s", e.loadStart, e.loadEnd, steal),
		fmt.Sprintf("Method: %d interleaved rounds; each measurement %v after a %v warm-up; %d preloaded keys per value size; %s",
			e.rounds, e.duration, e.warm, e.keys, sampleMethod(e.sample)),
	}
	if e.note != "" {
		lines = append(lines, e.note)
	}
	return lines
}

func (r *report) text() string {
	var b strings.Builder
	b.WriteString("\n")
	for _, l := range r.envLines() {
		b.WriteString(l + "\n")
	}
	b.WriteString("\n")
	writeAligned(&b, r.header, r.rows)
	b.WriteString("\nTargets (ratios of medians from this run)\n\n")
	writeAligned(&b, targetHeader, r.targetRows())
	b.WriteString("\n")
	r.writeNotes(&b)
	return b.String()
}

func (r *report) markdown() string {
	var b strings.Builder
	b.WriteString("# kvwire benchmarks\n\n")
	r.writeEnvList(&b)
	b.WriteString("\n## Targets\n\n")
	writeMarkdown(&b, targetHeader, r.targetRows())
	b.WriteString("\n## All figures\n\n")
	writeMarkdown(&b, r.header, r.rows)
	b.WriteString("\n")
	r.writeNotes(&b)
	return b.String()
}

// readmeSection is the report as the README shows it, between its
// bench markers: the run's header, the targets, every figure folded.
func (r *report) readmeSection() string {
	var b strings.Builder
	b.WriteString("Every figure below comes from one run of the command named, on the machine described; " +
		"`reftest/bench-results.md` has the same report. The clients, the servers and the method are in " +
		"`reftest/cmd/benchcmp` (package doc).\n\n")
	r.writeEnvList(&b)
	b.WriteString("\n")
	writeMarkdown(&b, targetHeader, r.targetRows())
	b.WriteString("\n<details><summary>All figures</summary>\n\n")
	writeMarkdown(&b, r.header, r.rows)
	b.WriteString("\n")
	r.writeNotes(&b)
	b.WriteString("\n</details>\n")
	return b.String()
}

// writeEnvList writes the run's header lines as a markdown list, the
// command in backquotes.
func (r *report) writeEnvList(b *strings.Builder) {
	for _, l := range r.envLines() {
		if c, rest, ok := strings.Cut(l, ": "); ok && c == "Command" {
			l = "Command: `" + rest + "`"
		}
		b.WriteString("- " + l + "\n")
	}
}

// writeNotes writes the method notes as a list.
func (r *report) writeNotes(b *strings.Builder) {
	for _, n := range r.notes {
		b.WriteString("- " + n + "\n")
	}
}

func writeAligned(b *strings.Builder, header []string, rows [][]string) {
	w := make([]int, len(header))
	for i, h := range header {
		w[i] = runeLen(h)
	}
	for _, row := range rows {
		for i, c := range row {
			if i < len(w) {
				w[i] = max(w[i], runeLen(c))
			}
		}
	}
	line := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", w[i]-runeLen(c))
			if i >= 4 && i < len(cells) && numeric(c) {
				b.WriteString(pad + c)
			} else if i == len(cells)-1 {
				b.WriteString(c)
			} else {
				b.WriteString(c + pad)
			}
		}
		b.WriteString("\n")
	}
	line(header)
	var sep []string
	for _, n := range w {
		sep = append(sep, strings.Repeat("-", n))
	}
	line(sep)
	for _, row := range rows {
		line(row)
	}
}

func numeric(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	return c >= '0' && c <= '9'
}

func runeLen(s string) int { return len([]rune(s)) }

func writeMarkdown(b *strings.Builder, header []string, rows [][]string) {
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for range header {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, row := range rows {
		cells := make([]string, len(header))
		copy(cells, row)
		for i := range cells {
			cells[i] = strings.ReplaceAll(cells[i], "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
}
