// Command benchcmp compares kvwire with what a user would pick instead, in
// one run on one machine: against memcached, kvwire vs gomemcache vs a raw
// pipelined loop (the wire limit); against the mock cluster, kvwire vs
// gocbcore v10. `make bench` runs it (scripts/bench.sh starts the servers,
// each in a process of its own).
//
//	benchcmp -memcached 127.0.0.1:21211 -mock couchbase://127.0.0.1:p1,.../default \
//	    [-memcached-pid N] [-mock-pid N] [-duration 2s] [-warmup 500ms] [-rounds 5] \
//	    [-batch 256] [-sample 16] [-only REGEXP] [-out results.md] \
//	    [-profile REGEXP [-profile-dir DIR] [-profile-duration 5s]]
//
// Method. Every measurement runs a client's workers for -duration after a
// warm-up of -warmup, with a garbage collection before it. The workloads
// (Get of 32 B and 1 KiB values, Upsert of 1 KiB, a 50/50 mix of the two)
// run at 1, 16 and 256 goroutines on preloaded keys. A batch workload
// (-batch keys per call, 256 by default; batch.go) reads 32 B values from
// one goroutine: kvwire's GetMany against a raw batch in one write (GETQ +
// NOOP, what GetMany sends with binary_multiget but for its GETKQs' keys;
// plain GETs; and one text "gets" of every key, what it sends by default) and
// gomemcache's GetMulti on memcached, against gocbcore with a goroutine per
// key (and its async Gets from one goroutine) on the mock; its ops/s count
// keys. On memcached, at goroutine counts other than 1 and the best raw
// loop's, a lockstep row (lockstep.go) measures the ceiling of kvwire's
// shape, for context: N blocking goroutines on one connection, every write
// carrying all N requests. Measurements are interleaved: each round
// measures every cell, and within a cell every client in turn, starting
// with a different client each round; every figure is the median of the
// rounds, and every ratio a ratio of those medians. Each target also says
// in how many rounds it passes on that round's figures alone: one near its
// line passes in some rounds and not others, and so can land on either
// side in another run. A client that fails (an error, a miss, a value of
// the wrong length) is measured no more; every target over it reads
// FAILED, never PASS on the rounds before.
//
// Figures: ops/s; p50 and p99 latency of the timed operations (below); client
// CPU per op from getrusage(RUSAGE_SELF) before and after the interval, which
// is the client alone because every server runs in another process;
// allocations per op from runtime.MemStats.Mallocs; server CPU per op from
// /proc/<pid>/stat when the servers' pids are given.
//
// Fairness: every client runs in the same loop (clients.go; raw.go and
// batch.go for the raw loops and batches) and pays the same harness cost
// per operation inside the measured CPU, and the harness allocates nothing
// inside it (each job starts its goroutines before the interval: see
// gate). The one cost that differed was latency recording. Timed around
// every operation (time.Now, time.Since and a per-goroutine histogram of
// 35 KB, out of the cache at 256 goroutines), the clients paid about 200
// ns per operation on this machine, where a clock read alone costs 55–75
// ns, while a raw loop timing a window of 256 requests paid it once per
// 256; in a CPU profile of memcached/get-32B/256/kvwire it was about 10%
// of the process. Now each goroutine times one operation in -sample (16)
// drawn at random, the same operation numbers in every client's loop, and a
// raw window or a batch is timed whole when it carries a drawn operation
// (latency.go). In 15 s CPU profiles of kvwire at 256 goroutines on
// memcached and on the mock (a loaded machine, a few to a dozen samples
// each) the recording is 0.5–1.5% of the process, most of it the two
// clock reads of the timed operations, where it was about 10%;
// BenchmarkRecorder measures it alone. Every one-operation-per-call loop
// pays it alike; a window of W ≥ 16 requests pays less (one timed call per
// W requests), so the raw loops' advantage from recording is at most about
// 1% of the client's CPU. -sample 1 times every operation; -sample 0 none
// (no latency figures, no clock reads per operation).
//
// Profiles: -profile REGEXP measures each matching measurement (ids are
// backend/workload/goroutines/client, e.g. memcached/get-32B/256/kvwire)
// once more after the rounds, for -profile-duration with Go's CPU profiler
// on in this process, and writes the profile to -profile-dir as
// memcached_get-32B_256_kvwire.pprof (read it with go tool pprof). That
// interval's figures are logged and listed in the report but kept out of the
// medians; one that fails is listed as failed, and the report still written. Without -only, a profiling run measures only the cells holding a
// profiled measurement (every client of them, so their ratios are there).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/couchbase/gocbcore/v10"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/reftest/internal/benchlog"
)

// job is one client at one concurrency on one workload.
type job interface {
	prepare() error
	// run starts the job's goroutines, each waiting at the gate, opens
	// the gate once all have reached it, and returns once all have ended
	// (when the gate's stop is set): the operations done, and the first
	// error (which invalidates the measurement).
	run(g *gate, recs []*recorder) (int64, error)
	close()
}

// gate starts and stops one interval of a job. Starting the goroutines
// allocates (their closures), so the job starts them all first, waits
// until each has reached the gate, and then opens it: the interval's
// figures are taken in between (onOpen), and the harness allocates nothing
// inside them.
//
// A goroutine waits at the gate by yielding (runtime.Gosched) until it
// opens, not by blocking on a channel: a goroutine that parks takes a
// sudog from its P's cache, and allocates one when that cache is empty,
// as it is in a fresh process or after a collection. The goroutines the
// other P ran only after the figures were taken then allocated one each
// inside the interval (about one run in five of
// TestClientJobAllocatesNothingInTheInterval, one allocation per
// goroutine).
type gate struct {
	d       time.Duration
	onOpen  func() // called as the gate opens, before the interval's timer is set
	arrived atomic.Int64
	opened  atomic.Bool
	stop    atomic.Bool // set d after the gate opened
	timer   *time.Timer
}

// idleTimer is how long the interval's timer is first set for, before the
// gate opens: it is made then (making it allocates) and reset to d once
// the interval's figures are taken.
const idleTimer = 24 * time.Hour

func newGate(d time.Duration, onOpen func()) *gate {
	return &gate{d: d, onOpen: onOpen}
}

// open starts the interval: the job's run calls it once, after starting
// its n goroutines that wait at the gate; it returns when they are let go.
func (g *gate) open(n int) {
	for g.arrived.Load() < int64(n) {
		runtime.Gosched()
	}
	// The timer is made before the figures are taken (it allocates) and
	// set after them: onOpen reads MemStats, which stops the world and, on
	// a loaded machine, can take longer than a short d, which must not
	// elapse before the goroutines are let go.
	g.timer = time.AfterFunc(idleTimer, func() { g.stop.Store(true) })
	if g.onOpen != nil {
		g.onOpen()
	}
	g.timer.Reset(g.d)
	g.opened.Store(true)
}

// wait holds a job's goroutine at the gate until it opens, yielding its P
// meanwhile.
func (g *gate) wait() {
	g.arrived.Add(1)
	for !g.opened.Load() {
		runtime.Gosched()
	}
}

// end releases the timer once the job has ended.
func (g *gate) end() {
	if g.timer != nil {
		g.timer.Stop()
	}
}

type workload struct {
	name  string
	ks    *keyset
	mix   opMix
	get   bool // Get only: the raw loop and the memcached targets apply
	batch int  // keys per batch (batch workloads; see batch.go)
}

type variant struct {
	// stable: "kvwire", "kvwire-4c", "kvwire-ctx", "kvwire-opctx",
	// "gomemcache", "raw", "raw-best", "gocbcore"; in batch cells also "raw-get", "raw-text", "kvwire-fanout",
	// "gocbcore-async"
	id   string
	name string // shown
	job  func() (job, error)
	// goroutines, when not 0, is the number shown instead of the cell's:
	// a batch variant that fans out to a goroutine per key.
	goroutines int
}

type cell struct {
	backend  string
	wl       *workload
	conc     int
	variants []*variant
	samples  map[string][]sample
	jobs     map[string]job
	failed   map[string]error
}

func (c *cell) id(v *variant) string {
	return fmt.Sprintf("%s/%s/%d/%s", c.backend, c.wl.name, c.conc, v.id)
}

// sample is one measurement.
type sample struct {
	opsPerSec   float64
	p50, p99    float64 // µs
	cpuPerOp    float64 // µs
	allocsPerOp float64
	srvPerOp    float64 // µs; < 0 when unknown
	steal       float64 // % of machine time
	// reads and writes per op: the harness's read and write system calls
	// (< 0 when unknown)
	readsPerOp, writesPerOp float64
	// mutexWaitPerOp: µs goroutines spent waiting for a lock (a
	// sync.Mutex or RWMutex, or the runtime's own), per op (runtime/metrics
	// /sync/mutex/wait/total:seconds; < 0 when unknown)
	mutexWaitPerOp float64
}

type config struct {
	memcached, mock       string
	memcachedPid, mockPid int
	duration, warmup      time.Duration
	rounds                int
	keys                  int
	concs                 []int
	bestConns, bestWindow int
	batch                 int
	timeout               time.Duration
	only                  *regexp.Regexp
	sample                int // -sample: one operation in sample timed; 0 none
	// profile selects the measurements profiled (-profile); profileDir
	// and profileDuration say where and how long.
	profile         *regexp.Regexp
	profileDir      string
	profileDuration time.Duration
	out, readme     string
	command, note   string
	// label names a side run (a server configured otherwise): its
	// targets are shown as context, prefixed with it.
	label string
}

func main() {
	var cfg config
	var concs, only, profile string
	flag.StringVar(&cfg.memcached, "memcached", os.Getenv("KV_MEMCACHED_ADDR"), "memcached address (host:port); empty skips memcached")
	flag.StringVar(&cfg.mock, "mock", "", "mock cluster connection string with bucket (mockserver prints it); empty skips the mock")
	flag.IntVar(&cfg.memcachedPid, "memcached-pid", 0, "memcached's pid, for server CPU per op")
	flag.IntVar(&cfg.mockPid, "mock-pid", 0, "the mock server's pid, for server CPU per op")
	flag.DurationVar(&cfg.duration, "duration", 2*time.Second, "measured interval per measurement")
	flag.DurationVar(&cfg.warmup, "warmup", 500*time.Millisecond, "warm-up before each measurement")
	flag.IntVar(&cfg.rounds, "rounds", 5, "interleaved rounds; figures are their medians")
	flag.IntVar(&cfg.keys, "keys", 10000, "preloaded keys per value size")
	flag.StringVar(&concs, "conc", "1,16,256", "goroutine counts")
	flag.IntVar(&cfg.bestConns, "raw-conns", 4, "connections of the best raw loop")
	flag.IntVar(&cfg.bestWindow, "raw-window", 64, "window depth of the best raw loop")
	flag.IntVar(&cfg.batch, "batch", 256, "keys per batch of the batch workloads (0: none)")
	flag.DurationVar(&cfg.timeout, "timeout", client.DefaultKVTimeout, "KV timeout of every client")
	flag.StringVar(&only, "only", "", "run only measurements whose id (backend/workload/conc/client) matches this regexp")
	flag.IntVar(&cfg.sample, "sample", defaultSample, "time one operation in this many, drawn at random, in every loop alike (1: every one; 0: none, no latency figures)")
	flag.StringVar(&profile, "profile", "", "after the rounds, write a CPU profile of this process during one more measured interval of each measurement whose id matches this regexp; without -only, only the cells holding such a measurement are run")
	flag.StringVar(&cfg.profileDir, "profile-dir", ".", "directory for -profile's files (ID with / as _, .pprof)")
	flag.DurationVar(&cfg.profileDuration, "profile-duration", 5*time.Second, "measured interval of each -profile run (also in -quick)")
	flag.StringVar(&cfg.out, "out", "", "also write the report as markdown to this file")
	flag.StringVar(&cfg.readme, "readme", "", "also write the report as the README's section (between its bench markers) to this file")
	flag.StringVar(&cfg.label, "label", "", "a side run's name: its targets become context figures prefixed with it")
	flag.StringVar(&cfg.command, "command", "", "the command to name in the report (default: this one's arguments)")
	flag.StringVar(&cfg.note, "note", "", "a line added to the report's header (server versions, ...)")
	quick := flag.Bool("quick", false, "a quick run for development: 3 rounds of 300 ms after 100 ms warm-ups (unless those flags are given)")
	flag.Parse()
	if *quick { // explicit flags still win
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["rounds"] {
			cfg.rounds = 3
		}
		if !set["duration"] {
			cfg.duration = 300 * time.Millisecond
		}
		if !set["warmup"] {
			cfg.warmup = 100 * time.Millisecond
		}
	}
	for _, s := range strings.Split(concs, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n < 1 {
			fatalf("-conc %q: want positive integers separated by commas", concs)
		}
		cfg.concs = append(cfg.concs, n)
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			fatalf("-only: %v", err)
		}
		cfg.only = re
	}
	if cfg.command == "" {
		cfg.command = strings.Join(os.Args, " ")
	}
	if cfg.memcached == "" && cfg.mock == "" {
		fatalf("nothing to measure: give -memcached and/or -mock")
	}
	if cfg.rounds < 1 || cfg.duration <= 0 || cfg.keys < 1 {
		fatalf("-rounds, -duration and -keys must be positive")
	}
	if cfg.batch < 0 || cfg.batch > cfg.keys {
		fatalf("-batch %d: want 0 (no batch workloads) up to -keys (%d)", cfg.batch, cfg.keys)
	}
	if cfg.sample < 0 {
		fatalf("-sample %d: want 0 (no latency) or more", cfg.sample)
	}
	if profile != "" {
		re, err := regexp.Compile(profile)
		if err != nil {
			fatalf("-profile: %v", err)
		}
		cfg.profile = re
		if cfg.profileDuration <= 0 {
			fatalf("-profile-duration must be positive")
		}
		if err := os.MkdirAll(cfg.profileDir, 0o755); err != nil {
			fatalf("-profile-dir: %v", err)
		}
	}
	if err := run(&cfg); err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchcmp: "+format+"\n", args...)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// clients holds every client of the run, created once (lazily: a filtered
// run creates only what it measures) and closed at the end.
type clients struct {
	cfg     *config
	mu      sync.Mutex
	kvMC    map[int]*client.Client // by connections per node (negative: BinaryMultiGet)
	kvMock  *client.Client
	gomc    map[int]*memcache.Client // by MaxIdleConns
	agent   *gocbcore.Agent
	closers []func()
}

func (cs *clients) kvwireMemcached(conns int) (*client.Client, error) {
	return cs.kvwireMemcachedWith(conns, false)
}

// kvwireMemcachedWith is kvwireMemcached's client, or with binary set one
// whose GetMany reads with binary quiet gets (MemcachedOptions.BinaryMultiGet).
func (cs *clients) kvwireMemcachedWith(conns int, binary bool) (*client.Client, error) {
	key := conns
	if binary {
		key = -conns
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.kvMC[key]; c != nil {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, "memcached://"+cs.cfg.memcached,
		&client.Options{KVTimeout: cs.cfg.timeout, ConnectionsPerNode: conns,
			Memcached: client.MemcachedOptions{BinaryMultiGet: binary}})
	if err != nil {
		return nil, err
	}
	cs.kvMC[key] = c
	cs.closers = append(cs.closers, func() { _ = c.Close() })
	return c, nil
}

func (cs *clients) kvwireMock() (*client.Client, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.kvMock != nil {
		return cs.kvMock, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, cs.cfg.mock, &client.Options{Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword, KVTimeout: cs.cfg.timeout})
	if err != nil {
		return nil, err
	}
	cs.kvMock = c
	cs.closers = append(cs.closers, func() { _ = c.Close() })
	return c, nil
}

func (cs *clients) gomemcache(conc int) *memcache.Client {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if mc := cs.gomc[conc]; mc != nil {
		return mc
	}
	mc := newGomemcache(cs.cfg.memcached, conc, cs.cfg.timeout)
	cs.gomc[conc] = mc
	cs.closers = append(cs.closers, func() { _ = mc.Close() })
	return mc
}

func (cs *clients) gocbcore() (*gocbcore.Agent, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.agent != nil {
		return cs.agent, nil
	}
	cstr, err := client.ParseConnStr(cs.cfg.mock)
	if err != nil {
		return nil, err
	}
	bucket := cstr.Bucket
	cstr.Bucket = ""
	agent, err := newGocbcoreAgent(cstr.String(), mockcluster.DefaultUser, mockcluster.DefaultPassword, bucket, cs.cfg.timeout)
	if err != nil {
		return nil, err
	}
	cs.agent = agent
	cs.closers = append(cs.closers, func() { _ = agent.Close() })
	return agent, nil
}

func (cs *clients) closeAll() {
	for i := len(cs.closers) - 1; i >= 0; i-- {
		cs.closers[i]()
	}
}

// plan lists the cells of the matrix, in the order each round measures
// them.
func plan(cfg *config, cs *clients, small, large *keyset) []*cell {
	wls := []*workload{
		{name: "get-32B", ks: small, mix: mixGet, get: true},
		{name: "get-1KiB", ks: large, mix: mixGet, get: true},
		{name: "upsert-1KiB", ks: large, mix: mixUpsert},
		{name: "mix-1KiB", ks: large, mix: mixAlternate},
	}
	var cells []*cell
	add := func(c *cell) {
		var kept []*variant
		profiled := false
		for _, v := range c.variants {
			if cfg.only == nil || cfg.only.MatchString(c.id(v)) {
				kept = append(kept, v)
			}
			profiled = profiled || cfg.profiled(c, v)
		}
		if cfg.only == nil && cfg.profile != nil && !profiled {
			return // a profiling run measures the profiled rows' cells
		}
		if len(kept) > 0 {
			c.variants = kept
			c.samples = map[string][]sample{}
			c.jobs = map[string]job{}
			c.failed = map[string]error{}
			cells = append(cells, c)
		}
	}
	kvJobCtx := func(get func() (*client.Client, error), conc int, wl *workload, mode ctxMode) func() (job, error) {
		return func() (job, error) {
			c, err := get()
			if err != nil {
				return nil, err
			}
			col := c.DefaultCollection()
			return &clientJob{conc: conc, mix: wl.mix, ks: wl.ks,
				newWorker: func() worker { return newKvwireWorker(col, wl.ks, mode) }}, nil
		}
	}
	kvJob := func(get func() (*client.Client, error), conc int, wl *workload) func() (job, error) {
		return kvJobCtx(get, conc, wl, ctxBackground)
	}
	// kvCtx adds, to a Get cell at one goroutine, kvwire with contexts
	// that can be cancelled: a lone caller's path depends on its context
	// (conn's read role), and services pass request contexts.
	kvCtx := func(c *cell, get func() (*client.Client, error)) {
		if c.conc != 1 || !c.wl.get {
			return
		}
		c.variants = append(c.variants,
			&variant{id: "kvwire-ctx", name: "kvwire, one cancellable ctx",
				job: kvJobCtx(get, c.conc, c.wl, ctxCancellable)},
			&variant{id: "kvwire-opctx", name: "kvwire, a cancellable ctx per op",
				job: kvJobCtx(get, c.conc, c.wl, ctxPerOp)})
	}
	// The batch workload: 32 B values, as get-32B.
	var bw *workload
	if cfg.batch > 0 {
		bw = &workload{name: batchWorkload(cfg), ks: small, mix: mixGet, batch: cfg.batch}
	}
	kvBatch := func(get func() (*client.Client, error)) func() (job, error) {
		return func() (job, error) {
			c, err := get()
			if err != nil {
				return nil, err
			}
			col := c.DefaultCollection()
			return &batchJob{ks: bw.ks, size: bw.batch, newB: func() (batcher, error) {
				return &kvwireBatch{col: col, ks: bw.ks}, nil
			}}, nil
		}
	}
	kvFanout := func(get func() (*client.Client, error)) func() (job, error) {
		return func() (job, error) {
			c, err := get()
			if err != nil {
				return nil, err
			}
			col := c.DefaultCollection()
			return &batchJob{ks: bw.ks, size: bw.batch, newB: func() (batcher, error) {
				return newFanout(bw.batch, func() worker { return newKvwireWorker(col, bw.ks, ctxBackground) }), nil
			}}, nil
		}
	}
	if cfg.memcached != "" {
		for _, wl := range wls {
			for _, conc := range cfg.concs {
				c := &cell{backend: "memcached", wl: wl, conc: conc}
				c.variants = append(c.variants, &variant{id: "kvwire", name: "kvwire",
					job: kvJob(func() (*client.Client, error) { return cs.kvwireMemcached(1) }, conc, wl)})
				kvCtx(c, func() (*client.Client, error) { return cs.kvwireMemcached(1) })
				if wl.get && conc == cfg.bestConns*cfg.bestWindow {
					name := fmt.Sprintf("kvwire, %d conns", cfg.bestConns)
					c.variants = append(c.variants, &variant{id: "kvwire-" + fmt.Sprint(cfg.bestConns) + "c", name: name,
						job: kvJob(func() (*client.Client, error) { return cs.kvwireMemcached(cfg.bestConns) }, conc, wl)})
				}
				c.variants = append(c.variants, &variant{id: "gomemcache", name: "gomemcache",
					job: func() (job, error) {
						mc := cs.gomemcache(conc)
						return &clientJob{conc: conc, mix: wl.mix, ks: wl.ks,
							newWorker: func() worker { return &gomemcacheWorker{mc: mc, ks: wl.ks} }}, nil
					}})
				if wl.get {
					name := fmt.Sprintf("raw, 1 conn × %d", conc)
					if conc == 1 {
						name = "raw round trip"
					}
					c.variants = append(c.variants, &variant{id: "raw", name: name,
						job: func() (job, error) {
							return &rawJob{addr: cfg.memcached, conns: 1, window: conc, ks: wl.ks}, nil
						}})
					if conc > 1 && conc != cfg.bestConns*cfg.bestWindow { // the shape's ceiling, for the N-window's target
						c.variants = append(c.variants, &variant{id: "lockstep",
							name: fmt.Sprintf("lockstep, %d blocking goroutines on 1 conn", conc),
							job: func() (job, error) {
								return newLockstepJob(cfg.memcached, conc, wl.ks), nil
							}})
					}
					if conc == cfg.bestConns*cfg.bestWindow {
						c.variants = append(c.variants, &variant{id: "raw-best",
							name: fmt.Sprintf("raw, %d conns × %d", cfg.bestConns, cfg.bestWindow),
							job: func() (job, error) {
								return &rawJob{addr: cfg.memcached, conns: cfg.bestConns, window: cfg.bestWindow, ks: wl.ks}, nil
							}})
					}
				}
				add(c)
			}
		}
		if bw != nil {
			c := &cell{backend: "memcached", wl: bw, conc: 1}
			c.variants = append(c.variants, &variant{id: "kvwire", name: fmt.Sprintf("kvwire GetMany × %d", bw.batch),
				job: kvBatch(func() (*client.Client, error) { return cs.kvwireMemcached(1) })})
			c.variants = append(c.variants, &variant{id: "kvwire-binary", name: fmt.Sprintf("kvwire GetMany × %d, binary_multiget", bw.batch),
				job: kvBatch(func() (*client.Client, error) { return cs.kvwireMemcachedWith(1, true) })})
			c.variants = append(c.variants, &variant{id: "raw", name: fmt.Sprintf("raw, %d %s + NOOP in 1 write", bw.batch, rawBatchQuiet),
				job: func() (job, error) {
					return &batchJob{ks: bw.ks, size: bw.batch, newB: func() (batcher, error) {
						return &rawBatch{rawConn: rawConn{addr: cfg.memcached}, quiet: rawBatchQuiet, ks: bw.ks}, nil
					}}, nil
				}})
			c.variants = append(c.variants, &variant{id: "raw-get", name: fmt.Sprintf("raw, %d GETs in 1 write", bw.batch),
				job: func() (job, error) {
					return &batchJob{ks: bw.ks, size: bw.batch, newB: func() (batcher, error) {
						return &rawBatch{rawConn: rawConn{addr: cfg.memcached}, ks: bw.ks}, nil
					}}, nil
				}})
			c.variants = append(c.variants, &variant{id: "raw-text", name: fmt.Sprintf("raw, 1 text gets of %d keys in 1 write", bw.batch),
				job: func() (job, error) {
					return &batchJob{ks: bw.ks, size: bw.batch, newB: func() (batcher, error) {
						return &rawTextBatch{rawConn: rawConn{addr: cfg.memcached}, ks: bw.ks}, nil
					}}, nil
				}})
			c.variants = append(c.variants, &variant{id: "gomemcache", name: fmt.Sprintf("gomemcache GetMulti × %d", bw.batch),
				job: func() (job, error) {
					return &batchJob{ks: bw.ks, size: bw.batch, newB: func() (batcher, error) {
						return &gomemcacheBatch{mc: cs.gomemcache(1), ks: bw.ks}, nil
					}}, nil
				}})
			c.variants = append(c.variants, &variant{id: "kvwire-fanout", goroutines: bw.batch,
				name: fmt.Sprintf("kvwire Get, a goroutine per key × %d", bw.batch),
				job:  kvFanout(func() (*client.Client, error) { return cs.kvwireMemcached(1) })})
			add(c)
		}
	}
	if cfg.mock != "" {
		for _, wl := range wls {
			for _, conc := range cfg.concs {
				c := &cell{backend: "mock", wl: wl, conc: conc}
				c.variants = append(c.variants, &variant{id: "kvwire", name: "kvwire",
					job: kvJob(cs.kvwireMock, conc, wl)})
				kvCtx(c, cs.kvwireMock)
				c.variants = append(c.variants, &variant{id: "gocbcore", name: "gocbcore v10",
					job: func() (job, error) {
						agent, err := cs.gocbcore()
						if err != nil {
							return nil, err
						}
						return &clientJob{conc: conc, mix: wl.mix, ks: wl.ks,
							newWorker: func() worker { return newGocbcoreWorker(agent, wl.ks, cfg.timeout) }}, nil
					}})
				add(c)
			}
		}
		if bw != nil {
			c := &cell{backend: "mock", wl: bw, conc: 1}
			c.variants = append(c.variants, &variant{id: "kvwire", name: fmt.Sprintf("kvwire GetMany × %d", bw.batch),
				job: kvBatch(cs.kvwireMock)})
			c.variants = append(c.variants, &variant{id: "gocbcore", goroutines: bw.batch,
				name: fmt.Sprintf("gocbcore v10 Get, a goroutine per key × %d", bw.batch),
				job: func() (job, error) {
					agent, err := cs.gocbcore()
					if err != nil {
						return nil, err
					}
					return &batchJob{ks: bw.ks, size: bw.batch, newB: func() (batcher, error) {
						return newFanout(bw.batch, func() worker { return newGocbcoreWorker(agent, bw.ks, cfg.timeout) }), nil
					}}, nil
				}})
			c.variants = append(c.variants, &variant{id: "gocbcore-async",
				name: fmt.Sprintf("gocbcore v10, %d async Gets, 1 wait", bw.batch),
				job: func() (job, error) {
					agent, err := cs.gocbcore()
					if err != nil {
						return nil, err
					}
					return &batchJob{ks: bw.ks, size: bw.batch, newB: func() (batcher, error) {
						return newGocbcoreAsync(agent, bw.ks, cfg.timeout), nil
					}}, nil
				}})
			c.variants = append(c.variants, &variant{id: "kvwire-fanout", goroutines: bw.batch,
				name: fmt.Sprintf("kvwire Get, a goroutine per key × %d", bw.batch),
				job:  kvFanout(cs.kvwireMock)})
			add(c)
		}
	}
	return cells
}

// rawBatchQuiet is the quiet get of the raw batch the memcached target
// compares GetMany with. GetMany's binary path (binary_multiget) sends
// GETKQ, whose answers carry the key it checks; the raw batch sends the
// least a batch can, answers without keys.
const rawBatchQuiet = memdx.OpGetQ

// batchWorkload is the batch workload's name: its keys per batch and value
// size.
func batchWorkload(cfg *config) string { return fmt.Sprintf("batch%d-get-32B", cfg.batch) }

// preload writes every key of every keyset through kvwire, 64 at a time.
func preload(c *client.Client, sets ...*keyset) error {
	col := c.DefaultCollection()
	for _, ks := range sets {
		var wg sync.WaitGroup
		var first atomic.Pointer[error]
		const par = 64
		for g := range par {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(ks.keys); i += par {
					if _, err := col.Upsert(context.Background(), ks.keys[i], ks.value, nil); err != nil {
						keepFirst(&first, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if p := first.Load(); p != nil {
			return fmt.Errorf("preloading: %w", *p)
		}
	}
	return nil
}

func run(cfg *config) error {
	env := captureEnv(cfg)
	small := newKeyset("kvb:s:", cfg.keys, 32, 1)
	large := newKeyset("kvb:l:", cfg.keys, 1024, 2)
	cs := &clients{cfg: cfg, kvMC: map[int]*client.Client{}, gomc: map[int]*memcache.Client{}}
	defer cs.closeAll()
	cells := plan(cfg, cs, small, large)
	if len(cells) == 0 {
		return fmt.Errorf("-only %q matches no measurement", cfg.only)
	}
	backends := map[string]bool{}
	for _, c := range cells {
		backends[c.backend] = true
	}
	if backends["memcached"] {
		c, err := cs.kvwireMemcached(1)
		if err != nil {
			return fmt.Errorf("memcached at %s: %w", cfg.memcached, err)
		}
		if err := preload(c, small, large); err != nil {
			return fmt.Errorf("memcached: %w", err)
		}
	}
	if backends["mock"] {
		c, err := cs.kvwireMock()
		if err != nil {
			return fmt.Errorf("mock cluster at %s: %w", cfg.mock, err)
		}
		if err := preload(c, small, large); err != nil {
			return fmt.Errorf("mock: %w", err)
		}
	}

	maxConc := max(cfg.bestConns, 1)
	for _, c := range cfg.concs {
		maxConc = max(maxConc, c)
	}
	// One recorder per measuring goroutine, seeded by its index: goroutine
	// g of every client times the same operation numbers.
	recs := make([]*recorder, maxConc)
	for i := range recs {
		recs[i] = newRecorder(cfg.sample, uint64(i+1))
	}
	n := 0
	for _, c := range cells {
		n += len(c.variants)
	}
	nprof := 0
	for _, c := range cells {
		for _, v := range c.variants {
			if cfg.profiled(c, v) {
				nprof++
			}
		}
	}
	logf("benchcmp: %d measurements per round, %d rounds, %v + %v warm-up each, %d profiled for %v after them (about %v)",
		n, cfg.rounds, cfg.duration, cfg.warmup, nprof, cfg.profileDuration,
		(time.Duration(n*cfg.rounds)*(cfg.duration+cfg.warmup+150*time.Millisecond) +
			time.Duration(nprof)*(cfg.profileDuration+cfg.warmup+150*time.Millisecond)).Round(time.Second))
	for r := range cfg.rounds {
		for _, c := range cells {
			for k := range c.variants {
				v := c.variants[(k+r)%len(c.variants)]
				if c.failed[v.id] != nil {
					continue
				}
				s, err := measureOne(cfg, c, v, recs, cfg.duration, nil)
				if err != nil {
					c.failed[v.id] = err
					logf("%s", benchlog.Failed(r+1, cfg.rounds, c.id(v), err))
					continue
				}
				c.samples[v.id] = append(c.samples[v.id], s)
				logf("%s", benchlog.Line(r+1, cfg.rounds, c.id(v), benchlog.Figures{OpsPerSec: s.opsPerSec, P50: s.p50,
					CPUPerOp: s.cpuPerOp, AllocsPerOp: s.allocsPerOp, WritesPerOp: s.writesPerOp, ReadsPerOp: s.readsPerOp,
					MutexWaitPerOp: s.mutexWaitPerOp}))
			}
		}
	}
	profileAll(cfg, env, cells, recs)
	for _, c := range cells {
		for _, j := range c.jobs {
			j.close()
		}
	}
	env.finish()
	rep := buildReport(cfg, env, cells)
	fmt.Print(rep.text())
	if cfg.out != "" {
		if err := os.WriteFile(cfg.out, []byte(rep.markdown()), 0o644); err != nil {
			return err
		}
		logf("benchcmp: wrote %s", cfg.out)
	}
	if cfg.readme != "" {
		if err := os.WriteFile(cfg.readme, []byte(rep.readmeSection()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// profiled says whether -profile selects v in c.
func (cfg *config) profiled(c *cell, v *variant) bool {
	return cfg.profile != nil && cfg.profile.MatchString(c.id(v))
}

// profile is one -profile file: the measurement, where its profile is,
// and the figures of the profiled interval (not in the report's medians:
// the profiler's own cost is in them).
type profile struct {
	id, path string
	s        sample
	err      error // the profiled interval failed: no figures, and the file may be partial
}

// profileAll runs -profile's measurements, after the rounds, adding them
// to e.profiles. One that fails is reported as failed: the rounds' report
// is still written.
func profileAll(cfg *config, e *env, cells []*cell, recs []*recorder) {
	for _, c := range cells {
		for _, v := range c.variants {
			if !cfg.profiled(c, v) || c.failed[v.id] != nil {
				continue
			}
			p, err := profileOne(cfg, c, v, recs)
			if err != nil {
				p.err = err
				logf("profile %-40s FAILED: %v", p.id, err)
			}
			e.profiles = append(e.profiles, p)
		}
	}
}

// profileOne measures v once more for -profile-duration with the CPU
// profiler on, writing the profile to -profile-dir.
func profileOne(cfg *config, c *cell, v *variant, recs []*recorder) (profile, error) {
	p := profile{id: c.id(v), path: filepath.Join(cfg.profileDir, strings.ReplaceAll(c.id(v), "/", "_")+".pprof")}
	f, err := os.Create(p.path)
	if err != nil {
		return p, err
	}
	p.s, err = measureOne(cfg, c, v, recs, cfg.profileDuration, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return p, err
	}
	logf("profile %-40s %10.0f ops/s  cpu %6.2fµs/op (profiler on) -> %s", p.id, p.s.opsPerSec, p.s.cpuPerOp, p.path)
	return p, nil
}

// measureOne runs v's warm-up, then a measured interval of d; with prof
// set, the CPU profile of the measured interval goes there.
func measureOne(cfg *config, c *cell, v *variant, recs []*recorder, d time.Duration, prof io.Writer) (sample, error) {
	j := c.jobs[v.id]
	if j == nil {
		var err error
		if j, err = v.job(); err != nil {
			return sample{}, err
		}
		if err := j.prepare(); err != nil {
			return sample{}, err
		}
		c.jobs[v.id] = j
	}
	// Warm-up: connections, pools, caches and the runtime's own state.
	for _, r := range recs {
		r.reset()
	}
	if _, err := interval(j, cfg.warmup, recs); err != nil {
		return sample{}, err
	}
	for _, r := range recs {
		r.reset()
	}
	srvPid := cfg.memcachedPid
	if c.backend == "mock" {
		srvPid = cfg.mockPid
	}
	runtime.GC()
	srv0, srvOK0 := cpuOf(srvPid)
	ct0, _ := readCPUTimes()
	io0, ioOK0 := readIOCounts()
	// Innermost, the figures of this process: CPU time, and around it the
	// allocation count (outside the reads of /proc, which allocate), taken
	// as the job's goroutines, all started, are let go.
	var (
		ms0, ms1 runtime.MemStats
		cpu0     time.Duration
		t0       time.Time
		profErr  error
		mw0, mw1 = mutexWaitMetric(), mutexWaitMetric()
	)
	g := newGate(d, func() {
		if prof != nil {
			profErr = pprof.StartCPUProfile(prof)
		}
		metrics.Read(mw0)
		runtime.ReadMemStats(&ms0)
		cpu0 = cpuSelf()
		t0 = time.Now()
	})
	ops, err := j.run(g, recs)
	elapsed := time.Since(t0)
	cpu1 := cpuSelf()
	runtime.ReadMemStats(&ms1)
	metrics.Read(mw1)
	if prof != nil && profErr == nil {
		pprof.StopCPUProfile()
	}
	io1, ioOK1 := readIOCounts()
	ct1, _ := readCPUTimes()
	srv1, srvOK1 := cpuOf(srvPid)
	g.end()
	if err == nil {
		err = profErr
	}
	if err != nil {
		return sample{}, err
	}
	if ops == 0 {
		return sample{}, fmt.Errorf("no operation completed")
	}
	var all hist
	for _, r := range recs {
		all.merge(r.latencies())
	}
	s := sample{
		opsPerSec:   float64(ops) / elapsed.Seconds(),
		p50:         -1,
		p99:         -1,
		cpuPerOp:    float64(cpu1-cpu0) / 1e3 / float64(ops),
		allocsPerOp: float64(ms1.Mallocs-ms0.Mallocs) / float64(ops),
		srvPerOp:    -1,
		steal:       stealPercent(ct0, ct1),
	}
	s.mutexWaitPerOp = -1
	if mw0[0].Value.Kind() == metrics.KindFloat64 && mw1[0].Value.Kind() == metrics.KindFloat64 {
		s.mutexWaitPerOp = (mw1[0].Value.Float64() - mw0[0].Value.Float64()) * 1e6 / float64(ops)
	}
	if all.count() > 0 {
		s.p50 = float64(all.quantile(0.50)) / 1e3
		s.p99 = float64(all.quantile(0.99)) / 1e3
	}
	s.readsPerOp, s.writesPerOp = -1, -1
	if ioOK0 && ioOK1 {
		// The two reads of /proc/self/io count themselves: one syscr
		// each (open and close are neither).
		s.readsPerOp = float64(io1.reads-io0.reads-1) / float64(ops)
		s.writesPerOp = float64(io1.writes-io0.writes) / float64(ops)
	}
	if srvOK0 && srvOK1 {
		s.srvPerOp = float64(srv1-srv0) / 1e3 / float64(ops)
	}
	return s, nil
}

// mutexWaitMetric is a sample of the runtime's total time goroutines have
// spent blocked on a sync.Mutex or sync.RWMutex or waiting for one of the
// runtime's own locks (a channel's, the scheduler's; both sampled by the
// runtime): contention on one (a connection's lock taken from both
// processors, say) shows there first.
func mutexWaitMetric() []metrics.Sample {
	return []metrics.Sample{{Name: "/sync/mutex/wait/total:seconds"}}
}

// interval runs j for d, unmeasured.
func interval(j job, d time.Duration, recs []*recorder) (int64, error) {
	if d <= 0 {
		return 0, nil
	}
	g := newGate(d, nil)
	defer g.end()
	return j.run(g, recs)
}
