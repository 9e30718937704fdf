package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

// The demo's shape. It runs in about two seconds.
const (
	demoNodes        = 3
	demoWorkers      = 8
	demoKeys         = 256
	demoSteps        = 8
	demoStepEvery    = 120 * time.Millisecond
	demoLockHold     = 300 * time.Millisecond
	demoLockWriters  = 4
	demoTmpFails     = 25
	demoTimeout      = 5 * time.Second
	demoLockedKey    = "demo:locked"
	demoPhaseTimeout = 5 * time.Second
)

// demoSummary is what the demo found; --json prints it.
type demoSummary struct {
	Operations       uint64            `json:"operations"`
	Failed           uint64            `json:"failed"`
	Failures         []string          `json:"failures,omitempty"`
	RetriesByReason  map[string]uint64 `json:"retries_by_reason"`
	NMVAnswers       uint64            `json:"not_my_vbucket_answers"`
	NMVRetries       uint64            `json:"not_my_vbucket_retries"`
	NMVToForwardMap  uint64            `json:"not_my_vbucket_retries_by_forward_map"`
	ConfigRevFrom    uint64            `json:"config_rev_from"`
	ConfigRevTo      uint64            `json:"config_rev_to"`
	ConfigRevs       int               `json:"config_revs_seen"`
	VbucketsMoved    int               `json:"vbuckets_moved"`
	RebalanceSteps   int               `json:"rebalance_steps"`
	LockWaiters      int               `json:"lock_waiters"`
	TmpFailsInjected int               `json:"tmpfails_injected"`
	DocumentsChecked int               `json:"documents_checked"`
	WritesApplied    uint64            `json:"writes_applied"`
	WritesAcked      uint64            `json:"writes_acknowledged"`
	DataOK           bool              `json:"data_ok"`
	Showed           []string          `json:"showed"`
	Missing          []string          `json:"did_not_show,omitempty"`
	ElapsedS         float64           `json:"elapsed_s"`
	OK               bool              `json:"ok"`
}

// The demo's injected fault: SET answered with ETMPFAIL. mockcluster's
// fields have the codec's types, which kvcli does not use; kv_engine's
// numbers are assignable to them as untyped constants.
const (
	opSet         = 0x01 // SET
	statusTmpFail = 0x86 // ETMPFAIL
)

func isSet(r *mockcluster.Request) bool { return r.OpCode == opSet }

// demoObserver counts attempts for the summary and, with -v, prints every
// attempt that failed or was a retry.
type demoObserver struct {
	trace *tracer // nil without -v

	retries    [64]atomic.Uint64
	nmvAnswers atomic.Uint64
	nmvForward atomic.Uint64

	mu   sync.Mutex
	revs map[uint64]bool
}

func (o *demoObserver) AttemptStart(a client.AttemptInfo) {
	if a.Retry {
		if int(a.RetryReason) < len(o.retries) {
			o.retries[a.RetryReason].Add(1)
		}
		if a.RetryReason == client.RetryReasonKVNotMyVbucket && a.ForwardMap {
			o.nmvForward.Add(1)
		}
	}
	o.mu.Lock()
	o.revs[a.ConfigRev] = true
	o.mu.Unlock()
}

func (o *demoObserver) AttemptEnd(a client.AttemptInfo, err error) {
	if a.Status == client.StatusNotMyVbucket {
		o.nmvAnswers.Add(1)
	}
	if o.trace != nil && (a.Retry || a.Status != 0 || err != nil) {
		o.trace.AttemptEnd(a, err)
	}
}

// demo is one run of the demo.
type demo struct {
	inv    *invocation
	out    io.Writer
	mc     *mockcluster.Cluster
	bucket *mockcluster.Bucket
	c      *client.Client
	col    *client.Collection
	obs    *demoObserver
	keys   []string

	// The workload: its workers, and each worker's last write per key.
	workers sync.WaitGroup
	stop    atomic.Bool
	last    []map[string]string
	// bad holds the data checks that failed.
	bad []string

	ops      atomic.Uint64
	acked    atomic.Uint64 // successful writes
	failures atomic.Uint64
	failMu   sync.Mutex
	failList []string
}

func (d *demo) record(op, key string, err error) {
	d.ops.Add(1)
	if err == nil {
		return
	}
	d.failures.Add(1)
	d.failMu.Lock()
	if len(d.failList) < 5 {
		d.failList = append(d.failList, fmt.Sprintf("%s %q: %v", op, key, err))
	}
	d.failMu.Unlock()
}

func (d *demo) step(format string, args ...any) {
	if !d.inv.g.json {
		fmt.Fprintf(d.out, format+"\n", args...)
	}
}

func cmdDemo(ctx context.Context, inv *invocation, args []string) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&inv.g.json, "json", inv.g.json, "print the summary as one JSON object")
	fs.BoolVar(&inv.g.verbose, "v", inv.g.verbose, "print every attempt that failed or was a retry (on stderr)")
	if _, code, ok := inv.parse(fs, args, 0, 0); !ok {
		return code
	}
	start := time.Now()
	d := &demo{inv: inv, out: inv.env.stdout}
	sum, err := d.run(ctx)
	if err != nil {
		fmt.Fprintf(inv.diag(), "kvcli demo: %s\n", inv.redact(err.Error()))
		code, kind := exitError, kindOther
		if ctx.Err() != nil {
			code, kind = exitInterrupted, kindInterrupted
		}
		if inv.g.json {
			inv.printJSON(&jsonResult{Op: "demo", Error: &jsonError{Kind: kind, Message: inv.redactLine(err.Error()), Exit: code}})
		}
		return code
	}
	sum.ElapsedS = time.Since(start).Seconds()
	if inv.g.json {
		inv.printJSON(sum)
	} else {
		d.printSummary(sum)
	}
	if !sum.OK {
		return exitError
	}
	return exitOK
}

// run is the demo, step by step: each step below says what it shows. It
// returns what the demo found, or why it could not run.
func (d *demo) run(ctx context.Context) (*demoSummary, error) {
	if err := d.start(ctx); err != nil {
		return nil, err
	}
	defer d.mc.Close()
	defer d.c.Close()
	d.introduce()
	// Operations survive Ctrl-C; the phases stop early instead.
	opCtx := context.WithoutCancel(ctx)
	sum := &demoSummary{ConfigRevFrom: d.seed(opCtx)}
	d.startWorkers(opCtx)
	if err := d.rebalanceThroughFaults(ctx, opCtx, sum); err != nil {
		d.stopWorkers()
		return nil, err
	}
	d.stopWorkers()
	d.checkData(sum)
	d.tally(sum)
	d.judge(sum)
	return sum, nil
}

// start starts the mock cluster and connects to it. Push notifications
// are off and polling rare: the client learns about every step of the
// rebalance from NOT_MY_VBUCKET answers, as it would from a server before
// 7.1, so the demo shows them.
func (d *demo) start(ctx context.Context) error {
	mc, err := mockcluster.New(mockcluster.Options{
		Nodes:                     demoNodes,
		NoClusterMapNotifications: true,
	})
	if err != nil {
		return fmt.Errorf("starting the mock cluster: %w", err)
	}
	d.obs = &demoObserver{revs: map[uint64]bool{}}
	if d.inv.g.verbose {
		d.obs.trace = newTracer(d.inv.diag(), d.inv.redact)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := client.Connect(cctx, mc.ConnString()+"/"+mockcluster.DefaultBucket, &client.Options{
		Username:           mockcluster.DefaultUser,
		Password:           mockcluster.DefaultPassword,
		KVTimeout:          demoTimeout,
		ConfigPollInterval: time.Hour,
		Observer:           d.obs,
		ClientName:         "kvcli-demo",
	})
	if err != nil {
		mc.Close()
		return fmt.Errorf("connecting to the mock cluster: %w", err)
	}
	d.mc, d.c, d.col = mc, c, c.DefaultCollection()
	d.bucket = mc.Bucket(mockcluster.DefaultBucket)
	return nil
}

// introduce says what runs where.
func (d *demo) introduce() {
	d.step("kvcli demo: the kvwire client against a mock Couchbase cluster in this process\n")
	d.step("cluster   %d nodes, bucket %q (%d vbuckets, %d replica); push notifications off,",
		demoNodes, d.bucket.Name(), d.bucket.NumVbuckets(), d.bucket.NumReplicas())
	d.step("          so new configs reach the client in NOT_MY_VBUCKET answers")
	d.step("workload  %d workers, half gets, half sets, over %d keys; %v timeout per operation\n",
		demoWorkers, demoKeys, demoTimeout)
}

// seed writes every key once (step 1) and returns the config revision the
// client started from.
func (d *demo) seed(opCtx context.Context) uint64 {
	d.keys = make([]string, demoKeys)
	for i := range d.keys {
		d.keys[i] = fmt.Sprintf("demo:%03d", i)
	}
	for _, k := range append(slices.Clone(d.keys), demoLockedKey) {
		_, err := d.col.Upsert(opCtx, k, []byte("seed"), nil)
		d.record("Upsert", k, err)
		if err == nil {
			d.acked.Add(1)
		}
	}
	rev := d.c.ConfigVersion().Rev
	d.step("1. seeded %d documents (config rev %d)", demoKeys+1, rev)
	return rev
}

// startWorkers starts the workload that runs through every step. Worker w
// owns the keys i%demoWorkers == w for its writes (so the last value of
// every key is known) and reads any key.
func (d *demo) startWorkers(opCtx context.Context) {
	d.last = make([]map[string]string, demoWorkers)
	for w := range demoWorkers {
		d.last[w] = map[string]string{}
		d.workers.Add(1)
		go func() {
			defer d.workers.Done()
			d.worker(opCtx, w, d.last[w], &d.stop)
		}()
	}
}

func (d *demo) stopWorkers() {
	d.stop.Store(true)
	d.workers.Wait()
}

// rebalanceThroughFaults moves the cluster onto a new node in steps
// (step 2: the config carries vBucketMapForward, so NOT_MY_VBUCKET
// retries go straight to the new owner), holding a lock on a key that
// writers wait for (step 3) and answering sets with TMPFAIL (step 4)
// between them, then finishes the rebalance (step 5).
func (d *demo) rebalanceThroughFaults(ctx, opCtx context.Context, sum *demoSummary) error {
	if _, err := d.mc.AddNode(); err != nil {
		return fmt.Errorf("adding a node: %w", err)
	}
	rb, err := d.mc.StartRebalance(mockcluster.RebalanceOptions{})
	if err != nil {
		return fmt.Errorf("starting the rebalance: %w", err)
	}
	r := &demoRebalance{rb: rb, sum: sum, perStep: (rb.Remaining() + demoSteps - 1) / demoSteps}
	d.step("2. rebalance onto %d nodes: the config now carries vBucketMapForward; %d vbuckets move in %d steps",
		demoNodes+1, rb.Remaining(), demoSteps)
	if err := r.steps(ctx, 3); err != nil {
		return err
	}
	waiters, err := d.lockPhase(ctx, opCtx)
	if err != nil {
		return err
	}
	sum.LockWaiters = waiters
	d.step("3. locked %q for %v: %d writers retried on LOCKED and wrote once it was released",
		demoLockedKey, demoLockHold, waiters)
	if err := r.steps(ctx, 3); err != nil {
		return err
	}
	if sum.TmpFailsInjected, err = d.tmpFailPhase(ctx); err != nil {
		return err
	}
	d.step("4. the cluster answered %d sets with TMPFAIL: each was retried and written", sum.TmpFailsInjected)
	if err := r.steps(ctx, demoSteps-6); err != nil {
		return err
	}
	if err := r.finish(); err != nil {
		return err
	}
	// Let the workers meet the final config (no forward map) before they
	// stop.
	if err := sleepCtx(ctx, demoStepEvery); err != nil {
		return err
	}
	d.step("5. rebalance finished: %d vbuckets moved in %d steps; the config has no forward map again",
		sum.VbucketsMoved, sum.RebalanceSteps)
	return nil
}

// demoRebalance moves a rebalance's vbuckets a step at a time, counting
// the steps and the vbuckets moved into the summary.
type demoRebalance struct {
	rb      *mockcluster.Rebalance
	sum     *demoSummary
	perStep int
}

// steps moves n steps, demoStepEvery apart.
func (r *demoRebalance) steps(ctx context.Context, n int) error {
	for range n {
		if err := sleepCtx(ctx, demoStepEvery); err != nil {
			return err
		}
		moved, err := r.rb.Step(r.perStep)
		if err != nil {
			return fmt.Errorf("rebalance step: %w", err)
		}
		if moved > 0 {
			r.sum.RebalanceSteps++
			r.sum.VbucketsMoved += moved
		}
	}
	return nil
}

// finish moves what is left and ends the rebalance.
func (r *demoRebalance) finish() error {
	remaining := r.rb.Remaining()
	if err := r.rb.Finish(); err != nil {
		return fmt.Errorf("finishing the rebalance: %w", err)
	}
	if remaining > 0 {
		r.sum.RebalanceSteps++
		r.sum.VbucketsMoved += remaining
	}
	return nil
}

// tmpFailPhase makes the cluster answer demoTmpFails sets with TMPFAIL,
// which the client retries, and returns how many it answered so.
func (d *demo) tmpFailPhase(ctx context.Context) (int, error) {
	h := d.mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{Func: isSet, Bucket: mockcluster.DefaultBucket},
		Action: mockcluster.Action{Status: statusTmpFail},
		Times:  demoTmpFails,
	})
	select {
	case <-h.Done():
	case <-time.After(demoPhaseTimeout):
		h.Remove()
	case <-ctx.Done():
		h.Remove()
		return 0, ctx.Err()
	}
	return h.Hits(), nil
}

// checkData shows that no write was lost or applied twice: every key
// holds its owner's last acknowledged write, and the cluster applied
// exactly as many writes as the client acknowledged.
func (d *demo) checkData(sum *demoSummary) {
	sum.DataOK = true
	for i, k := range d.keys {
		want, ok := d.last[i%demoWorkers][k]
		if !ok {
			want = "seed"
		}
		doc, found := d.bucket.Get(client.DefaultScope, client.DefaultCollection, k)
		if !found || string(doc.Value) != want {
			sum.DataOK = false
			if len(d.bad) < 3 {
				d.bad = append(d.bad, fmt.Sprintf("%s holds %q, want %q", k, doc.Value, want))
			}
		}
		sum.WritesApplied += d.bucket.MutationCount(client.DefaultScope, client.DefaultCollection, k)
	}
	sum.WritesApplied += d.bucket.MutationCount(client.DefaultScope, client.DefaultCollection, demoLockedKey)
	sum.WritesAcked = d.acked.Load()
	sum.DocumentsChecked = len(d.keys)
	if sum.WritesApplied != sum.WritesAcked {
		sum.DataOK = false
		d.bad = append(d.bad, fmt.Sprintf("the cluster applied %d writes, the client acknowledged %d", sum.WritesApplied, sum.WritesAcked))
	}
}

// tally fills the summary's counts: operations, failures, retries by
// reason, NOT_MY_VBUCKET answers and the configs routed with.
func (d *demo) tally(sum *demoSummary) {
	sum.Operations = d.ops.Load()
	sum.Failed = d.failures.Load()
	sum.Failures = append(d.failList, d.bad...)
	sum.RetriesByReason = map[string]uint64{}
	for i := range d.obs.retries {
		if n := d.obs.retries[i].Load(); n > 0 {
			sum.RetriesByReason[client.RetryReason(i).String()] = n
		}
	}
	sum.NMVAnswers = d.obs.nmvAnswers.Load()
	sum.NMVRetries = d.obs.retries[client.RetryReasonKVNotMyVbucket].Load()
	sum.NMVToForwardMap = d.obs.nmvForward.Load()
	d.obs.mu.Lock()
	sum.ConfigRevs = len(d.obs.revs)
	d.obs.mu.Unlock()
	sum.ConfigRevTo = d.c.ConfigVersion().Rev
}

// judge says what the demo set out to show and whether it did.
func (d *demo) judge(sum *demoSummary) {
	check := func(ok bool, what string) {
		if ok {
			sum.Showed = append(sum.Showed, what)
		} else {
			sum.Missing = append(sum.Missing, what)
		}
	}
	check(sum.NMVToForwardMap > 0, "NOT_MY_VBUCKET retries routed by the forward map")
	check(d.obs.retries[client.RetryReasonKVLocked].Load() > 0 && sum.LockWaiters == demoLockWriters, "writers waiting on LOCKED until the unlock")
	check(d.obs.retries[client.RetryReasonKVTemporaryFailure].Load() >= uint64(sum.TmpFailsInjected) && sum.TmpFailsInjected == demoTmpFails, "TMPFAIL answers retried")
	sum.OK = sum.Failed == 0 && sum.DataOK && len(sum.Missing) == 0
}

// worker runs gets and sets until stop.
func (d *demo) worker(ctx context.Context, w int, last map[string]string, stop *atomic.Bool) {
	rng := rand.New(rand.NewPCG(uint64(w), 42))
	seq := 0
	for !stop.Load() {
		if rng.IntN(2) == 0 {
			k := d.keys[rng.IntN(len(d.keys))]
			_, err := d.col.Get(ctx, k, nil)
			d.record("Get", k, err)
			continue
		}
		// A key this worker owns.
		i := rng.IntN(len(d.keys)/demoWorkers)*demoWorkers + w
		k := d.keys[i]
		seq++
		v := fmt.Sprintf("worker %d write %d", w, seq)
		_, err := d.col.Upsert(ctx, k, []byte(v), nil)
		d.record("Upsert", k, err)
		if err == nil {
			last[k] = v
			d.acked.Add(1)
		}
	}
}

// lockPhase locks demoLockedKey, starts writers that must wait for the
// lock, releases it after demoLockHold and waits for the writers. It
// returns how many writers succeeded.
func (d *demo) lockPhase(ctx, opCtx context.Context) (int, error) {
	g, err := d.col.GetAndLock(opCtx, demoLockedKey, 10*time.Second, nil)
	d.record("GetAndLock", demoLockedKey, err)
	if err != nil {
		return 0, fmt.Errorf("locking %q: %w", demoLockedKey, err)
	}
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := range demoLockWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := d.col.Upsert(opCtx, demoLockedKey, []byte(fmt.Sprintf("lock writer %d", i)), nil)
			d.record("Upsert", demoLockedKey, err)
			if err == nil {
				ok.Add(1)
				d.acked.Add(1)
			}
		}()
	}
	holdErr := sleepCtx(ctx, demoLockHold)
	err = d.col.Unlock(opCtx, demoLockedKey, g.Cas, nil)
	d.record("Unlock", demoLockedKey, err)
	wg.Wait()
	if holdErr != nil {
		return 0, holdErr
	}
	if err != nil {
		return 0, fmt.Errorf("unlocking %q: %w", demoLockedKey, err)
	}
	return int(ok.Load()), nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return errors.New("interrupted")
	}
}

func (d *demo) printSummary(s *demoSummary) {
	w := d.out
	fmt.Fprintf(w, "\nsummary (%.1fs)\n", s.ElapsedS)
	fmt.Fprintf(w, "  operations  %d run, %d failed\n", s.Operations, s.Failed)
	label := "  retries    "
	if len(s.RetriesByReason) == 0 {
		fmt.Fprintf(w, "%s none\n", label)
	}
	for _, r := range client.AllRetryReasons() { // table order
		n, ok := s.RetriesByReason[r.String()]
		if !ok {
			continue
		}
		line := fmt.Sprintf("%s %-21s %5d", label, r, n)
		switch r {
		case client.RetryReasonKVNotMyVbucket:
			line += fmt.Sprintf("  %d straight to the new owner by the forward map", s.NMVToForwardMap)
			if rest := s.NMVRetries - s.NMVToForwardMap; rest > 0 {
				line += fmt.Sprintf(", %d by the final config's map (no forward map left)", rest)
			}
		case client.RetryReasonKVLocked:
			line += fmt.Sprintf("  %d writers waited for the lock", s.LockWaiters)
		case client.RetryReasonKVTemporaryFailure:
			line += fmt.Sprintf("  %d TMPFAIL answers injected", s.TmpFailsInjected)
		}
		fmt.Fprintln(w, line)
		label = "             "
	}
	fmt.Fprintf(w, "  configs     rev %d -> rev %d (%d revisions routed with)\n",
		s.ConfigRevFrom, s.ConfigRevTo, s.ConfigRevs)
	if s.DataOK {
		fmt.Fprintf(w, "  data        %d documents hold their last write; %d writes acknowledged, %d applied: none lost, none twice\n",
			s.DocumentsChecked+1, s.WritesAcked, s.WritesApplied)
	} else {
		fmt.Fprintf(w, "  data        MISMATCH: %d writes acknowledged, %d applied\n", s.WritesAcked, s.WritesApplied)
	}
	for _, f := range s.Failures {
		fmt.Fprintf(w, "  failure     %s\n", f)
	}
	for _, m := range s.Missing {
		fmt.Fprintf(w, "  not shown   %s\n", m)
	}
	if s.OK {
		fmt.Fprintf(w, "\nOK: every operation succeeded through the rebalance, the lock and the TMPFAILs.\n")
	} else {
		fmt.Fprintf(w, "\nFAILED: see above.\n")
	}
}
