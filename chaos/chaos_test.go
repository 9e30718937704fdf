package chaos

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

var (
	flagSeed     = flag.Int64("chaos.seed", 42, "seed of the fault schedule and the operation mix")
	flagDuration = flag.Duration("chaos.duration", 0, "how long the chaos runs in all, split evenly over -chaos.configs (0: the short run of make test, "+shortDuration.String()+" per configuration)")
	flagConfigs  = flag.String("chaos.configs", "default,besteffort,memcached,http", "client configurations to run, comma-separated: default (client.DefaultRetryStrategy), besteffort (client.BestEffort), pool (3 connections per node, RFC 0005 NMV wait), memcached (memcached:// to two private memcached servers behind fault proxies), http (bootstrap_on=http, configs streamed through fault proxies in front of the REST ports)")
	flagWorkers  = flag.Int("chaos.workers", 0, "worker goroutines, each owning its keys (0: 16 in the short run, 32 in a long one)")
	flagKeys     = flag.Int("chaos.keys", 8, "keys per worker (a quarter of them counters)")
	flagHeap     = flag.Int("chaos.heapslack", 64, "MiB the heap in use may grow past its level after warm-up")
	flagHeapOp   = flag.Int("chaos.heapperop", defaultHeapPerOp, "bytes per operation the heap in use may grow by after warm-up, beyond "+strconv.Itoa(heapGrowthFixed>>20)+" MiB (0: no per-operation check)")
	flagBatches  = flag.Int("chaos.batches", defaultBatchShare, "percentage of the workers' steps that are batch calls (GetMany, UpsertMany, RemoveMany)")
	flagCancels  = flag.Int("chaos.cancels", defaultCancelShare, "percentage of the workers' steps (single operations and batch calls) whose context the harness cancels: before the call, after a drawn delay, or when a request reaches a node")
	flagVerbose  = flag.Bool("chaos.v", false, "log every fault episode and the outcomes by operation")
	flagFaults   = flag.String("chaos.faults", "all", "fault kinds to inject, comma-separated (all, none, or: "+strings.Join(faultNames[:], ", ")+")")
)

// shortDuration is the run of `make test`, per configuration: long enough
// for every fault kind to act in each (a run goes on until they have).
const shortDuration = 2500 * time.Millisecond

// The heap in use after a GC may grow, from its level after warm-up to the
// end of the run, by heapGrowthFixed plus heapPerOp bytes per operation
// done meanwhile. The harness itself keeps every operation's record until
// it is settled, 5 s (settleAge) after it ended, so in a short run the heap
// grows by a few hundred bytes per operation with no leak (up to 700 seen,
// and at most 1.2 MiB in all); 2 KiB per operation leaves room for that
// while a client retaining 16 KiB per operation (TestChaosDetectsLeak), or
// only per Get and Upsert (about 7 KiB per operation of the mix), fails.
// The fixed part absorbs the noise of heap fragmentation and topology
// changes (a node added, its connections and buffers).
const (
	defaultHeapPerOp = 2 << 10
	heapGrowthFixed  = 2 << 20
)

// config is one chaos run.
type config struct {
	name      string
	opts      func(*client.Options) // changes to the client's options
	seed      int64
	duration  time.Duration
	short     bool
	workers   int
	keys      int
	kinds     []faultKind       // nil: all
	prob      float64           // when > 0, every per-request fault's probability
	wrap      func(kvAPI) kvAPI // the detection test's lying client
	rerun     string            // the command that reruns this run
	heap      uint64            // heap slack in bytes
	heapPerOp uint64            // heap growth allowed per operation, beyond heapGrowthFixed (0: unchecked)
	// until, in a short run, is what must have happened before it ends
	// (besides every fault kind having acted): the run goes on past its
	// duration until it holds, so that a slow machine makes it longer, not
	// vacuous. nil: nothing more.
	until func(*harness) bool
	logf  func(string, ...any)
	// batches is the percentage of steps that are batch calls.
	batches int
	// cancels is the percentage of steps whose context is cancelled.
	cancels int
	// memcached: the client talks memcached:// to private memcached
	// servers behind fault proxies (memcached_test.go), not to the mock.
	memcached bool
	// http: the client bootstraps with bootstrap_on=http through fault
	// proxies in front of the nodes' REST ports (http_test.go).
	http bool
	// allFaults: kinds holds every fault kind of the run's server (the
	// short run's requirements apply).
	allFaults bool
}

// harness is the state of one run shared by workers, hook and Observer.
type harness struct {
	bucket *mockcluster.Bucket
	keys   map[string]*keyState // read-only once the run starts
	faults faultSet
	// bothGetPaths, on memcached, reports whether GetMany has read by a
	// binary group and by a text multi-get: the short run goes on until
	// it has (exercised).
	bothGetPaths func() bool
	// Writes closed on after they were applied, and before: the short run
	// goes on until it has seen both (ambiguous outcomes of each kind).
	doubtApplied, doubtNotApplied atomic.Int64
	// expiredWrites counts the attempts of writes that the client's
	// Observer saw end at their deadline, written and unanswered: the
	// short run goes on until there is one (hookFault.hold makes them).
	expiredWrites atomic.Int64
	// heldAnswers counts the answers the hook held until their operation
	// had returned (hookFault.hold): the short run goes on until there is
	// one.
	heldAnswers atomic.Int64
	// opsDone counts finished operations, for the heap's growth per
	// operation.
	opsDone atomic.Int64
	// Outcomes of finished operations and retries sent, by reason, for
	// config.until (the workers' stats are their own until the run ends).
	outcomes [numOutcomes]atomic.Int64
	retried  [64]atomic.Int64
	// batchShare is the percentage of the workers' steps that are batch
	// calls.
	batchShare int
	// Keys of batches retried (for any reason) and ended ambiguous.
	batchRetried, batchAmbiguous atomic.Int64
	// cancelShare is the percentage of the workers' steps whose context
	// the harness cancels; cancelClean and cancelAmbiguous count the
	// operations cancelled before they returned that ended not written
	// (outCanceled) and ambiguous.
	cancelShare                  int
	cancelClean, cancelAmbiguous atomic.Int64
	// memcached: the run is against memcached (memcached_test.go).
	memcached bool
	// pooled: several connections per node, so a read-back can overtake
	// the write in doubt it is meant to settle (model.inDoubt).
	pooled bool
	heap   *heapSampler

	pmu      sync.Mutex
	problems map[string]int
	details  []string
	// batchProblems counts, by category, the problems of keys of batch
	// calls (also in problems).
	batchProblems map[string]int
}

const maxDetails = 20

// problem records a failed check.
func (h *harness) problem(category, format string, args ...any) {
	h.pmu.Lock()
	defer h.pmu.Unlock()
	h.problems[category]++
	if len(h.details) < maxDetails {
		h.details = append(h.details, category+": "+fmt.Sprintf(format, args...))
	}
}

// report is what a run found.
type report struct {
	cfg      config
	elapsed  time.Duration
	st       stats
	started  [numFaultKinds]int
	fired    [numFaultKinds]int
	hits     [numFaultKinds]int64
	problems map[string]int
	details  []string
	infra    []string
	// batchProblems are the problems of keys of batch calls, by category.
	batchProblems map[string]int
	heapst        heapStats
	// getq and noop are the quiet gets and NOOPs the memcached proxies
	// relayed: GetMany's binary groups (and the connections' health
	// probes); textGets its text multi-gets.
	getq, noop, textGets uint64
	// unsettledResets: memcached proxies' resets made with forwarded
	// requests still unanswered.
	unsettledResets int
	// expiredWrites: attempts of writes that ended at their deadline,
	// written and unanswered (harness.expiredWrites).
	expiredWrites int64
	// heldAnswers: answers held until their operation returned.
	heldAnswers int64
	heap1       uint64 // largest sample in the first half after warm-up
	heap2       uint64 // ... in the second half
	summary     string
}

func (r *report) failures() []string {
	var out []string
	cats := make([]string, 0, len(r.problems))
	for c := range r.problems {
		cats = append(cats, c)
	}
	sort.Strings(cats)
	for _, c := range cats {
		out = append(out, fmt.Sprintf("%s: %d", c, r.problems[c]))
	}
	var retried int64
	for _, n := range r.st.retries {
		retried += n
	}
	if retried > 0 && r.st.planned == 0 {
		// Every retry the Observer saw was decided by the orchestrator,
		// which logs it: without the records the deadline check is vacuous.
		out = append(out, fmt.Sprintf("late: %d retries sent but no %q record reached the deadline check", retried, retryMessage))
	}
	hs := &r.heapst
	if hs.max > hs.base+r.cfg.heap {
		out = append(out, fmt.Sprintf("heap: %.1f MiB in use after GC, more than %.1f MiB after warm-up + %d MiB slack",
			mib(hs.max), mib(hs.base), r.cfg.heap>>20))
	}
	if g, ok := r.heapGrowthExceeded(); ok {
		out = append(out, fmt.Sprintf("heap: grew by %.1f MiB (%.1f -> %.1f MiB in use after GC) over the %d operations after warm-up, "+
			"%.0f bytes per operation; allowed %d MiB + %d bytes per operation: memory retained per operation",
			mib(g), mib(hs.base), mib(hs.end), hs.ops, float64(g)/float64(max(hs.ops, 1)), heapGrowthFixed>>20, r.cfg.heapPerOp))
	}
	for _, e := range r.infra {
		out = append(out, "mock cluster: "+e)
	}
	return out
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// heapGrowthExceeded returns how much the heap grew from the baseline to
// the end of the run, and whether that is more than the per-operation
// bound allows.
func (r *report) heapGrowthExceeded() (uint64, bool) {
	hs := &r.heapst
	if r.cfg.heapPerOp == 0 || hs.samples == 0 || hs.end <= hs.base {
		return 0, false
	}
	g := hs.end - hs.base
	return g, g > heapGrowthFixed+r.cfg.heapPerOp*uint64(max(hs.ops, 0))
}

// run performs one chaos run and returns what it found; only setup failures
// driven is what drive returns: the scheduler, how long the workers ran
// and the heap's record.
type driven struct {
	sched        *scheduler
	elapsed      time.Duration
	heapst       heapStats
	heap1, heap2 uint64
}

// drive runs the workers for cfg.duration under a fault schedule (for mc,
// or nil; setup, when not nil, finishes the scheduler), sampling the heap.
// The faults are cleared when it returns.
func (h *harness) drive(cfg config, rng *rand.Rand, workers []*worker, mc *mockcluster.Cluster, setup func(*scheduler)) (d driven) {
	period, warmup := 500*time.Millisecond, cfg.duration/4
	if !cfg.short {
		period, warmup = 5*time.Second, min(30*time.Second, cfg.duration/4)
	}
	heap := startHeap(period, warmup, h.opsDone.Load)
	h.heap = heap
	sched := newScheduler(h, mc, rng.Int63(), cfg.short, cfg.kinds, func(f string, a ...any) {
		if *flagVerbose {
			cfg.logf(f, a...)
		}
	})
	if setup != nil {
		setup(sched)
	}
	sched.prob = cfg.prob
	if cfg.until != nil {
		sched.until = func() bool { return cfg.until(h) }
	}

	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); w.loop(stop) }()
	}
	sched.run(cfg.duration)
	close(stop)
	h.awaitWorkers(&wg, workers)
	d = driven{sched: sched, elapsed: time.Since(start), heapst: heap.close()}
	d.heap1, d.heap2 = heap.halves()
	h.faults.clear()
	return d
}

// hangReport is how long after the workers were told to stop awaitWorkers
// says which operations are still waiting for an answer the hook holds.
// It decides nothing: only the test binary's -timeout fails a run that
// hangs.
const hangReport = 30 * time.Second

// awaitWorkers waits for the workers to stop. A client that waits for an
// answer past its operation's deadline never returns from an operation
// whose answer the hook holds until it has returned (hookFault.hold): the
// run then hangs until the test binary's -timeout, and, hangReport after
// the stop, the operations still waiting for a held answer are printed
// (to stderr: a timeout's panic does not print the test's log).
func (h *harness) awaitWorkers(wg *sync.WaitGroup, workers []*worker) {
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	t := time.NewTimer(hangReport)
	defer t.Stop()
	select {
	case <-stopped:
		return
	case <-t.C:
	}
	var held []string
	for _, w := range workers {
		for _, ks := range w.keys {
			ks.mu.Lock()
			if op := ks.cur; op != nil && op.hold != nil {
				// Only what was set before it was registered, and
				// its attempts (under mu): its owner may yet return.
				held = append(held, fmt.Sprintf("key %s: #%d %s value=%q, %d attempts", ks.name, op.seq, op.kind, op.value, len(op.attempts)))
			}
			ks.mu.Unlock()
		}
	}
	fmt.Fprintf(os.Stderr, "chaos: %v after the workers were told to stop, %d operations still wait for an answer the hook holds until they return: "+
		"the client is not ending them at their deadline (late)\n  %s\n", hangReport, len(held), strings.Join(held, "\n  "))
	<-stopped
}

// report gathers what every configuration reports once its keys are
// settled: the problems, the workers' counts, the schedule's faults and
// the hooks' hits (summary not yet formatted).
func (h *harness) report(cfg config, d driven, workers []*worker) *report {
	r := &report{cfg: cfg, elapsed: d.elapsed, problems: h.problems, details: h.details, batchProblems: h.batchProblems,
		heapst: d.heapst, heap1: d.heap1, heap2: d.heap2, expiredWrites: h.expiredWrites.Load(),
		heldAnswers: h.heldAnswers.Load()}
	for _, w := range workers {
		r.st.add(&w.st)
	}
	d.sched.mu.Lock()
	r.started, r.fired, r.infra = d.sched.started, d.sched.fired, d.sched.infraErr
	d.sched.mu.Unlock()
	for k := range r.hits {
		r.hits[k] = h.faults.hits[k].Load()
	}
	return r
}

// stop the test here.
func run(t *testing.T, cfg config) *report {
	t.Helper()
	if cfg.memcached {
		return runMemcached(t, cfg)
	}
	mc, err := mockcluster.New(mockcluster.Options{Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	b := mc.Bucket(mockcluster.DefaultBucket)
	cid := uint32(0)
	if _, err := b.AddScope("chaos"); err != nil {
		t.Fatal(err)
	}
	if cid, err = b.AddCollection("chaos", "c1"); err != nil {
		t.Fatal(err)
	}
	// The keys exist before the hook does: it reads h.keys unlocked.
	h := &harness{bucket: b, keys: map[string]*keyState{}, problems: map[string]int{}, batchProblems: map[string]int{}, batchShare: cfg.batches,
		cancelShare: cfg.cancels}
	rng := rand.New(rand.NewSource(cfg.seed))
	workers := make([]*worker, cfg.workers)
	for i := range workers {
		w := &worker{h: h, id: i, rng: rand.New(rand.NewSource(rng.Int63()))}
		for j := 0; j < cfg.keys; j++ {
			ks := &keyState{name: fmt.Sprintf("w%d-k%d", i, j), owner: w, ctr: j%4 == 3,
				model: newModel(), byValue: map[string]*opRec{}, byDelta: map[uint64]*opRec{}}
			if j%2 == 0 {
				ks.scope, ks.coll = client.DefaultScope, client.DefaultCollection
			} else {
				ks.scope, ks.coll, ks.cid = "chaos", "c1", cid
			}
			w.keys = append(w.keys, ks)
			h.keys[ks.name] = ks
		}
		workers[i] = w
	}
	ctl := mc.Control(mockcluster.Match{}, 0, h.hook)
	defer ctl.Remove()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := &client.Options{
		Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword,
		Bucket: mockcluster.DefaultBucket, KVTimeout: time.Second, Observer: h, Logger: planLog,
	}
	if cfg.opts != nil {
		cfg.opts(opts)
	}
	h.pooled = opts.ConnectionsPerNode > 1
	connStr := mc.ConnString()
	var rest *restProxies
	if cfg.http {
		rest = &restProxies{}
		defer rest.close()
		for _, n := range mc.Nodes() {
			if err := rest.add(n); err != nil {
				t.Fatal(err)
			}
		}
		connStr = "couchbase://" + rest.seeds() + "?bootstrap_on=http"
	}
	cl, err := client.Connect(ctx, connStr, opts)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = cl.Close()
		}
	}()
	cols := []kvAPI{cl.DefaultCollection(), cl.Scope("chaos").Collection("c1")}
	if cfg.wrap != nil {
		for i := range cols {
			cols[i] = cfg.wrap(cols[i])
		}
	}

	for _, w := range workers {
		for _, ks := range w.keys {
			ks.api = cols[0]
			if ks.coll != client.DefaultCollection {
				ks.api = cols[1]
			}
			ks.gets = ks.api
		}
	}

	var setup func(*scheduler)
	if rest != nil {
		setup = func(s *scheduler) { s.rest = rest }
	}
	d := h.drive(cfg, rng, workers, mc, setup)
	if rest != nil {
		rest.catchUp(h, cl, b, catchUpLimit)
	}

	// The mock applies nothing more once every connection the client
	// made is closed and its serve goroutine has returned: DropConnections
	// makes it so and returns then (an event, where waiting for the mock
	// to read each connection to EOF needed a time limit, which a loaded
	// machine could pass). A request the client wrote and the mock had not
	// read yet is then never applied, as after a close before apply: every
	// check allows that of a request whose operation has returned.
	_ = cl.Close()
	closed = true
	for _, n := range mc.Nodes() {
		n.DropConnections()
	}
	for _, w := range workers {
		for _, ks := range w.keys {
			h.finish(ks)
		}
	}

	r := h.report(cfg, d, workers)
	r.summary = r.format()
	if rest != nil {
		r.summary += rest.summary(mc)
	}
	return r
}

func (r *report) format() string {
	var b strings.Builder
	st := &r.st
	total := 0
	var fk []string
	for _, k := range kindsOf(r.cfg.memcached, r.cfg.http) {
		total += r.started[k]
		fk = append(fk, fmt.Sprintf("%s=%d", k, r.started[k]))
	}
	fmt.Fprintf(&b, "chaos: config=%s seed=%d duration=%v ops=%d faults=%d (%s)",
		r.cfg.name, r.cfg.seed, r.elapsed.Round(100*time.Millisecond), st.total(), total, strings.Join(fk, ", "))
	var inj []string
	for _, k := range kindsOf(r.cfg.memcached, r.cfg.http) {
		if k.perRequest() {
			inj = append(inj, fmt.Sprintf("%s=%d", k, r.hits[k]))
		}
	}
	fmt.Fprintf(&b, " injected={%s}", strings.Join(inj, ", "))
	var rs []string
	for _, reason := range client.AllRetryReasons() {
		if n := st.retries[reason]; n > 0 {
			rs = append(rs, fmt.Sprintf("%s:%d", reason, n))
		}
	}
	fmt.Fprintf(&b, " retries={%s} fwd-map-attempts=%d", strings.Join(rs, ", "), st.fwdAttempts)
	fmt.Fprintf(&b, " ambiguous=%d (mutations applied %d, not applied %d; touch/lock/unlock %d)",
		st.ambiguous, st.ambApplied, st.ambNotApplied, st.ambiguous-st.ambApplied-st.ambNotApplied)
	fmt.Fprintf(&b, " failed={definite:%d, timeout:%d (writes that never reached a node: %d), before-send:%d, canceled:%d} write-attempts-expired-in-flight=%d answers-held-until-returned=%d",
		st.outcomes[outDefinite], st.outcomes[outTimeout], st.timeoutUnsent, st.outcomes[outNotSent], st.outcomes[outCanceled], r.expiredWrites, r.heldAnswers)
	fmt.Fprintf(&b, " lost=%d duplicated=%d resent=%d applied-after-failure=%d not-written-reached=%d",
		st.lost, st.duplicated, st.resent, st.phantom, st.unwrittenSent)
	fmt.Fprintf(&b, " late=%d (of %d retry plans; max over timeout %v)", st.late, st.planned, st.maxOver.Round(time.Millisecond))
	hs := &r.heapst
	fmt.Fprintf(&b, " heap-max=%.1fMiB (after warm-up %.1fMiB, at the end %.1fMiB after %d more operations: %.0f B/op; largest in the first half %.1fMiB, second half %.1fMiB; %d samples)",
		mib(hs.max), mib(hs.base), mib(hs.end), hs.ops, float64(int64(hs.end)-int64(hs.base))/float64(max(hs.ops, 1)),
		mib(r.heap1), mib(r.heap2), hs.samples)
	var bs []string
	for k := bGetMany; k < numBatchKinds; k++ {
		bs = append(bs, fmt.Sprintf("%s:%d/%d", k, st.batches[k], st.batchKeys[k]))
	}
	var bo []string
	for o, n := range st.batchOut {
		bo = append(bo, fmt.Sprintf("%s:%d", outcome(o), n))
	}
	var bp []string
	for c, n := range r.batchProblems {
		bp = append(bp, fmt.Sprintf("%s:%d", c, n))
	}
	sort.Strings(bp)
	var br []string
	for _, reason := range client.AllRetryReasons() {
		if n := st.batchRetries[reason]; n > 0 {
			br = append(br, fmt.Sprintf("%s:%d", reason, n))
		}
	}
	fmt.Fprintf(&b, " batches={%s} (calls/keys) batch-keys={%s} batch-retries={%s} batch-fwd-map-attempts=%d batch-ambiguous=(applied %d, not applied %d) batch-late=%d batch-problems={%s}",
		strings.Join(bs, ", "), strings.Join(bo, ", "), strings.Join(br, ", "), st.batchFwd, st.batchAmb[1], st.batchAmb[0], st.lateBatch, strings.Join(bp, ", "))
	var cm, co []string
	for m := cancelMode(0); m < numCancelModes; m++ {
		cm = append(cm, fmt.Sprintf("%s:%d/%d", m, st.canceled[m], st.cancels[m]))
	}
	for o, n := range st.cancelOut {
		if n > 0 {
			co = append(co, fmt.Sprintf("%s:%d", outcome(o), n))
		}
	}
	fmt.Fprintf(&b, " cancels={%s} (cancelled before returning/drawn) cancelled-outcomes={%s} cancelled-ambiguous=(applied %d, not applied %d)",
		strings.Join(cm, ", "), strings.Join(co, ", "), st.cancelAmb[1], st.cancelAmb[0])
	if r.cfg.memcached {
		fmt.Fprintf(&b, " mutations-with-an-unanswered-request=%d group-gets=(text multi-gets %d, GETQ %d, NOOP %d) resets-with-requests-unanswered=%d",
			st.unknownApplied, r.textGets, r.getq, r.noop, r.unsettledResets)
	}
	if st.unpaired > 0 {
		fmt.Fprintf(&b, " unpaired-attempt-ends=%d", st.unpaired)
	}
	if st.spurious > 0 || st.overflows > 0 {
		fmt.Fprintf(&b, " ambiguous-without-doubt=%d model-overflows=%d", st.spurious, st.overflows)
	}
	return b.String()
}

// outcomeTable says how each kind of operation ended.
func (r *report) outcomeTable() string {
	var b strings.Builder
	b.WriteString("outcomes by operation:")
	for k := opKind(0); k < numOpKinds; k++ {
		fmt.Fprintf(&b, "\n  %-10s", k)
		for o, n := range r.st.byKind[k] {
			fmt.Fprintf(&b, " %s=%d", outcome(o), n)
		}
	}
	return b.String()
}

// parseConfigs returns the configurations TestChaos runs.
func parseConfigs(t *testing.T) []string {
	var names []string
	for _, n := range strings.Split(*flagConfigs, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if clientConfigs[n] == nil {
			t.Fatalf("-chaos.configs: unknown configuration %q (want default, besteffort, pool, memcached, http)", n)
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		t.Fatal("-chaos.configs names no configuration")
	}
	return names
}

// TestChaos: concurrent operations under random faults lose nothing and
// apply nothing twice; see the package doc.
// Short by default (make test); -chaos.duration=10m for the long run.
func TestChaos(t *testing.T) {
	names := parseConfigs(t)
	total, short := *flagDuration, false
	if total == 0 {
		total, short = shortDuration*time.Duration(len(names)), true
	}
	per := total / time.Duration(len(names))
	if dl, ok := t.Deadline(); ok && time.Until(dl) < total+2*time.Minute {
		t.Fatalf("-chaos.duration=%v does not fit in the test binary's timeout (%v left): add -timeout 0",
			total, time.Until(dl).Round(time.Second))
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			workers := *flagWorkers
			if workers <= 0 {
				// Workers wait out timeouts (a stopped node, a held
				// lock): enough of them keep requests flowing meanwhile.
				workers = 16
				if !short {
					workers = 32
				}
			}
			cfg := config{name: name, opts: clientConfigs[name], seed: *flagSeed, duration: per, short: short,
				workers: workers, keys: *flagKeys, kinds: parseFaults(t), heap: uint64(*flagHeap) << 20, heapPerOp: uint64(max(*flagHeapOp, 0)), logf: t.Logf,
				batches: *flagBatches, cancels: *flagCancels}
			cfg.memcached = name == "memcached"
			cfg.http = name == "http"
			cfg.kinds, cfg.allFaults = kindsFor(cfg.kinds, cfg.memcached, cfg.http)
			if cfg.allFaults {
				cfg.until = (*harness).exercised
			}
			cfg.rerun = fmt.Sprintf("go test ./chaos -run 'TestChaos/%s$' -chaos.seed=%d -chaos.configs=%s -chaos.workers=%d -chaos.keys=%d -chaos.faults=%s -chaos.batches=%d -chaos.cancels=%d",
				name, cfg.seed, name, workers, cfg.keys, *flagFaults, cfg.batches, cfg.cancels)
			if !short {
				cfg.rerun += fmt.Sprintf(" -chaos.duration=%v -timeout 0", per)
			}
			r := run(t, cfg)
			t.Log(r.summary)
			if *flagVerbose {
				t.Log(r.outcomeTable())
			}
			checkReport(t, r)
		})
	}
}

// parseFaults returns the fault kinds -chaos.faults names (nil: all).
func parseFaults(t *testing.T) []faultKind {
	switch *flagFaults {
	case "all", "":
		return nil
	case "none":
		return []faultKind{}
	}
	var ks []faultKind
	for _, n := range strings.Split(*flagFaults, ",") {
		i := slices.Index(faultNames[:], strings.TrimSpace(n))
		if i < 0 {
			t.Fatalf("-chaos.faults: unknown fault kind %q", n)
		}
		ks = append(ks, faultKind(i))
	}
	return ks
}

// allKinds returns the fault kinds of the mock cluster.
func allKinds() []faultKind { return kindsOf(false, false) }

// kindsOf returns the fault kinds of the mock cluster, of memcached, or
// of the mock behind REST proxies (http).
func kindsOf(memcached, http bool) []faultKind {
	var ks []faultKind
	for k := faultKind(0); k < numFaultKinds; k++ {
		if memcached && k.onMemcached() || http && k.onHTTP() || !memcached && !http && k.onMock() {
			ks = append(ks, k)
		}
	}
	return ks
}

// kindsFor returns the kinds of ks (from -chaos.faults, nil: all) that
// apply to the run's server, and whether that is all of them.
func kindsFor(ks []faultKind, memcached, http bool) ([]faultKind, bool) {
	all := kindsOf(memcached, http)
	if ks == nil {
		return all, true
	}
	out := []faultKind{}
	for _, k := range ks {
		if slices.Contains(all, k) {
			out = append(out, k)
		}
	}
	return out, len(out) == len(all)
}

// exercised reports whether the run has done what checkReport requires of
// a short run with every fault kind (besides the kinds acting, which the
// scheduler sees to): enough successes, definite failures and timeouts,
// retries for each reason the faults exist to cause, and keys of batches
// retried and ended ambiguous.
func (h *harness) exercised() bool {
	if h.outcomes[outSuccess].Load() < 100 || h.outcomes[outDefinite].Load() == 0 || h.outcomes[outTimeout].Load() == 0 {
		return false
	}
	for _, reason := range exercisedReasons(h.memcached) {
		if h.retried[reason].Load() == 0 {
			return false
		}
	}
	if h.cancelShare > 0 && (h.cancelClean.Load() == 0 || h.cancelAmbiguous.Load() == 0) {
		return false
	}
	if h.batchShare > 0 && h.bothGetPaths != nil && !h.bothGetPaths() {
		return false
	}
	// Retries are seen by the Observer, which the memcached client has
	// not (GetMany reads by groups only without one).
	return h.batchShare <= 0 || ((h.memcached || h.batchRetried.Load() > 0) && h.batchAmbiguous.Load() > 0)
}

// exercisedReasons are the retry reasons a short run with every fault kind
// must have retried for: the statuses the mock's faults answer; none
// against memcached, whose faults end connections (retries for those are
// not required: a read retried after one needs a read in flight at that
// moment).
func exercisedReasons(memcached bool) []client.RetryReason {
	if memcached {
		return nil
	}
	return []client.RetryReason{client.RetryReasonKVNotMyVbucket, client.RetryReasonKVLocked,
		client.RetryReasonKVTemporaryFailure, client.RetryReasonKVErrorMapRetryIndicated}
}

// checkReport fails t on any problem the run found and, in short mode, on
// a run that did not exercise what it claims to check.
func checkReport(t testing.TB, r *report) {
	t.Helper()
	prefix := fmt.Sprintf("chaos seed=%d config=%s (rerun: %s)", r.cfg.seed, r.cfg.name, r.cfg.rerun)
	if f := r.failures(); len(f) > 0 {
		t.Errorf("%s: %s\n  %s", prefix, strings.Join(f, "; "), strings.Join(r.details, "\n  "))
	}
	if !r.cfg.short || !r.cfg.allFaults {
		return
	}
	// Not vacuous: every fault acted, the retries and ambiguity the checks
	// are about happened.
	var missing []string
	for _, k := range r.cfg.kinds {
		if r.fired[k] == 0 {
			missing = append(missing, k.String())
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s: fault kinds that never acted: %s", prefix, strings.Join(missing, ", "))
	}
	st := &r.st
	for _, reason := range exercisedReasons(r.cfg.memcached) {
		if st.retries[reason] == 0 {
			t.Errorf("%s: no retry for %s", prefix, reason)
		}
	}
	if !r.cfg.memcached && slices.Contains(r.cfg.kinds, fkSlow) && r.expiredWrites == 0 {
		t.Errorf("%s: no write's attempt ended at its deadline, written and unanswered: whether such a write is reported ambiguous was not checked", prefix)
	}
	if slices.Contains(r.cfg.kinds, fkSlow) && r.heldAnswers == 0 {
		t.Errorf("%s: no answer was held until its operation returned: whether the client ends an operation at its deadline was not checked", prefix)
	}
	if st.ambApplied == 0 || st.ambNotApplied == 0 {
		t.Errorf("%s: ambiguous outcomes applied %d, not applied %d: both must occur for the check to mean anything",
			prefix, st.ambApplied, st.ambNotApplied)
	}
	if st.outcomes[outSuccess] < 100 || st.outcomes[outDefinite] == 0 || st.outcomes[outTimeout] == 0 {
		t.Errorf("%s: outcomes %v: too few successes, definite failures or timeouts", prefix, st.outcomes)
	}
	for k := bGetMany; k < numBatchKinds && r.cfg.batches > 0; k++ {
		if st.batches[k] == 0 {
			t.Errorf("%s: no %s call", prefix, k)
		}
	}
	var batchRetries int64
	for _, n := range st.batchRetries {
		batchRetries += n
	}
	if r.cfg.batches > 0 && (batchRetries == 0 && !r.cfg.memcached || st.batchOut[outAmbiguous] == 0) {
		t.Errorf("%s: keys of batches retried %d times, %d ended ambiguous: both must occur for the batch checks to mean anything",
			prefix, batchRetries, st.batchOut[outAmbiguous])
	}
	if r.cfg.memcached && r.cfg.batches > 0 && (r.getq == 0 || r.textGets == 0) {
		t.Errorf("%s: %d GETQ and %d text multi-gets reached a proxy: both GetMany paths (binary groups, text multi-gets) must be taken for the batch checks to cover them",
			prefix, r.getq, r.textGets)
	}
	if r.cfg.cancels > 0 && (st.cancelOut[outCanceled] == 0 || st.cancelOut[outAmbiguous] == 0) {
		t.Errorf("%s: cancelled operations ended not written %d times, ambiguous %d times: both must occur for the cancellation checks to mean anything",
			prefix, st.cancelOut[outCanceled], st.cancelOut[outAmbiguous])
	}
	if slices.Contains(r.cfg.kinds, fkRebalance) && st.fwdAttempts == 0 {
		t.Logf("%s: no attempt used the forward map", prefix)
	}
}
