package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
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
	inv  *invocation
	out  io.Writer
	mc   *mockcluster.Cluster
	c    *client.Client
	col  *client.Collection
	obs  *demoObserver
	keys []string

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
		if ctx.Err() != nil {
			return exitInterrupted
		}
		return exitError
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

func (d *demo) run(ctx context.Context) (*demoSummary, error) {
	// Push notifications off and polling rare: the client learns about
	// every step of the rebalance from NOT_MY_VBUCKET answers, as it would
	// from a server before 7.1, so the demo shows them.
	mc, err := mockcluster.New(mockcluster.Options{
		Nodes:                     demoNodes,
		NoClusterMapNotifications: true,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the mock cluster: %w", err)
	}
	defer mc.Close()
	d.mc = mc
	d.obs = &demoObserver{revs: map[uint64]bool{}}
	if d.inv.g.verbose {
		d.obs.trace = newTracer(d.inv.diag(), d.inv.redact)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := client.Connect(cctx, mc.ConnString()+"/"+mockcluster.DefaultBucket, &client.Options{
		Username:           mockcluster.DefaultUser,
		Password:           mockcluster.DefaultPassword,
		KVTimeout:          demoTimeout,
		ConfigPollInterval: time.Hour,
		Observer:           d.obs,
		ClientName:         "kvcli-demo",
	})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("connecting to the mock cluster: %w", err)
	}
	defer c.Close()
	d.c, d.col = c, c.DefaultCollection()
	bucket := mc.Bucket(mockcluster.DefaultBucket)

	d.step("kvcli demo: the kvwire client against a mock Couchbase cluster in this process\n")
	d.step("cluster   %d nodes, bucket %q (%d vbuckets, %d replica); push notifications off,",
		demoNodes, bucket.Name(), bucket.NumVbuckets(), bucket.NumReplicas())
	d.step("          so new configs reach the client in NOT_MY_VBUCKET answers")
	d.step("workload  %d workers, half gets, half sets, over %d keys; %v timeout per operation\n",
		demoWorkers, demoKeys, demoTimeout)

	// Operations survive Ctrl-C; the phases stop early instead.
	opCtx := context.WithoutCancel(ctx)

	// 1. Seed.
	d.keys = make([]string, demoKeys)
	for i := range d.keys {
		d.keys[i] = fmt.Sprintf("demo:%03d", i)
		_, err := d.col.Upsert(opCtx, d.keys[i], []byte("seed"), nil)
		d.record("Upsert", d.keys[i], err)
		if err == nil {
			d.acked.Add(1)
		}
	}
	_, err = d.col.Upsert(opCtx, demoLockedKey, []byte("seed"), nil)
	d.record("Upsert", demoLockedKey, err)
	if err == nil {
		d.acked.Add(1)
	}
	revFrom := c.ConfigVersion().Rev
	d.step("1. seeded %d documents (config rev %d)", demoKeys+1, revFrom)

	// Workers: each owns the keys i%demoWorkers == w for its writes (so the
	// last value of every key is known) and reads any key.
	var stop atomic.Bool
	var wg sync.WaitGroup
	last := make([]map[string]string, demoWorkers)
	for w := range demoWorkers {
		last[w] = map[string]string{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.worker(opCtx, w, last[w], &stop)
		}()
	}
	stopWorkers := func() {
		stop.Store(true)
		wg.Wait()
	}

	sum := &demoSummary{}
	fail := func(err error) (*demoSummary, error) {
		stopWorkers()
		return nil, err
	}

	// 2. Rebalance onto a new node, in steps, with the lock and the
	// TMPFAIL phases in between.
	if _, err := mc.AddNode(); err != nil {
		return fail(fmt.Errorf("adding a node: %w", err))
	}
	rb, err := mc.StartRebalance(mockcluster.RebalanceOptions{})
	if err != nil {
		return fail(fmt.Errorf("starting the rebalance: %w", err))
	}
	toMove := rb.Remaining()
	perStep := (toMove + demoSteps - 1) / demoSteps
	d.step("2. rebalance onto %d nodes: the config now carries vBucketMapForward; %d vbuckets move in %d steps",
		demoNodes+1, toMove, demoSteps)
	steps := 0
	doSteps := func(n int) error {
		for range n {
			if err := sleepCtx(ctx, demoStepEvery); err != nil {
				return err
			}
			moved, err := rb.Step(perStep)
			if err != nil {
				return fmt.Errorf("rebalance step: %w", err)
			}
			if moved > 0 {
				steps++
				sum.VbucketsMoved += moved
			}
		}
		return nil
	}
	if err := doSteps(3); err != nil {
		return fail(err)
	}

	// 3. Hold a lock while writers wait for it.
	waiters, err := d.lockPhase(ctx, opCtx)
	if err != nil {
		return fail(err)
	}
	sum.LockWaiters = waiters
	d.step("3. locked %q for %v: %d writers retried on LOCKED and wrote once it was released",
		demoLockedKey, demoLockHold, waiters)

	if err := doSteps(3); err != nil {
		return fail(err)
	}

	// 4. Temporary failures.
	h := mc.AddFault(mockcluster.Fault{
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
		return fail(ctx.Err())
	}
	sum.TmpFailsInjected = h.Hits()
	d.step("4. the cluster answered %d sets with TMPFAIL: each was retried and written", sum.TmpFailsInjected)

	if err := doSteps(demoSteps - 6); err != nil {
		return fail(err)
	}
	remaining := rb.Remaining()
	if err := rb.Finish(); err != nil {
		return fail(fmt.Errorf("finishing the rebalance: %w", err))
	}
	if remaining > 0 {
		steps++
		sum.VbucketsMoved += remaining
	}
	sum.RebalanceSteps = steps
	// Let the workers meet the final config (no forward map) before
	// stopping them.
	if err := sleepCtx(ctx, demoStepEvery); err != nil {
		return fail(err)
	}
	stopWorkers()
	d.step("5. rebalance finished: %d vbuckets moved in %d steps; the config has no forward map again", sum.VbucketsMoved, steps)

	// Check the data: every key holds its owner's last write, and the
	// cluster applied exactly as many writes as were acknowledged.
	sum.DataOK = true
	var bad []string
	for i, k := range d.keys {
		want, ok := last[i%demoWorkers][k]
		if !ok {
			want = "seed"
		}
		doc, found := bucket.Get(client.DefaultScope, client.DefaultCollection, k)
		if !found || string(doc.Value) != want {
			sum.DataOK = false
			if len(bad) < 3 {
				bad = append(bad, fmt.Sprintf("%s holds %q, want %q", k, doc.Value, want))
			}
		}
		sum.WritesApplied += bucket.MutationCount(client.DefaultScope, client.DefaultCollection, k)
	}
	sum.WritesApplied += bucket.MutationCount(client.DefaultScope, client.DefaultCollection, demoLockedKey)
	sum.WritesAcked = d.acked.Load()
	sum.DocumentsChecked = len(d.keys)
	if sum.WritesApplied != sum.WritesAcked {
		sum.DataOK = false
		bad = append(bad, fmt.Sprintf("the cluster applied %d writes, the client acknowledged %d", sum.WritesApplied, sum.WritesAcked))
	}

	sum.Operations = d.ops.Load()
	sum.Failed = d.failures.Load()
	sum.Failures = append(d.failList, bad...)
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
	var revs []uint64
	for r := range d.obs.revs {
		revs = append(revs, r)
	}
	d.obs.mu.Unlock()
	sort.Slice(revs, func(i, j int) bool { return revs[i] < revs[j] })
	sum.ConfigRevs = len(revs)
	sum.ConfigRevFrom = revFrom
	sum.ConfigRevTo = c.ConfigVersion().Rev

	// What the demo set out to show, and whether it did.
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
	return sum, nil
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
