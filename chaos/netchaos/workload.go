package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/client"
)

// store is what the workload needs of a client. clientStore is the real
// one; the tests also use ones that lie, to show the checks can fail.
type store interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Insert(ctx context.Context, key string, value []byte) error
	Append(ctx context.Context, key string, value []byte) error
}

// clientStore runs the operations through kvwire's client with default
// options: each operation's deadline is the client's KVTimeout.
type clientStore struct{ c *client.Collection }

func (s clientStore) Get(ctx context.Context, key string) ([]byte, error) {
	r, err := s.c.Get(ctx, key, nil)
	return r.Value, err
}

func (s clientStore) Insert(ctx context.Context, key string, value []byte) error {
	_, err := s.c.Insert(ctx, key, value, nil)
	return err
}

func (s clientStore) Append(ctx context.Context, key string, value []byte) error {
	_, err := s.c.Append(ctx, key, value, nil)
	return err
}

// phaseSpec is one phase of the run: a fault in place from `from` to `to`
// after the phase starts (none when fault is nil).
type phaseSpec struct {
	name     string
	dur      time.Duration
	fault    *faultSet
	from, to time.Duration
	// recover: measure how long after the fault's removal the workers
	// succeed again (the partition).
	recover bool
}

// config is a run's parameters.
type config struct {
	workers        int
	timeout        time.Duration // every operation's deadline (the client's KVTimeout)
	writeRatio     float64
	writesPerKey   int // a worker moves to a new key after this many writes
	maxOpsPerPhase int
	verifyAttempts int
	recoveryLimit  time.Duration
	seed           uint64
	run            runner
	keyPrefix      string
}

// opStat is one operation as the workload saw it.
type opStat struct {
	worker     int
	write      bool
	outcome    outcome // of a write
	start, end time.Time
	class      string
	// answered: the cluster gave a definite answer (success, not found,
	// exists, not stored), which counts as the network working again.
	answered bool
}

// worker owns its keys: it runs one operation at a time, so the outcome of
// every earlier operation on a key is known when it reads the key.
type worker struct {
	id        int
	rng       *rand.Rand
	seq       int
	keys      []*keyModel
	keyPhase  []int
	cur       *keyModel
	curWrites int
	exists    bool // whether the next write to cur appends (else inserts)
	ops       []opStat
	viol      []violation
	examples  map[string]string
}

// clock is the harness's time: when operations start and end, the
// phases' schedule and the fault's times. The run uses the system's
// (realClock); the harness's own tests use a virtual one that moves only
// by what their stores say each operation took, so that what the checks
// measure there does not depend on the machine's speed.
type clock interface {
	Now() time.Time
	// sleepUntil waits until t; false when ctx ended first.
	sleepUntil(ctx context.Context, t time.Time) bool
	// hold says the phase's schedule is about to sleep on the clock, and
	// settle that it is done acting on its last wake: a virtual clock does
	// not move from a hold, nor from a wake, until the schedule sleeps
	// again or settles.
	hold()
	settle()
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) sleepUntil(ctx context.Context, at time.Time) bool {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (realClock) hold()   {}
func (realClock) settle() {}

// harness runs the phases and checks them.
type harness struct {
	cfg     config
	st      store
	lat     *lateness
	clk     clock
	workers []*worker
}

func newHarness(cfg config, st store, lat *lateness) *harness {
	h := &harness{cfg: cfg, st: st, lat: lat, clk: realClock{}}
	for i := range cfg.workers {
		h.workers = append(h.workers, &worker{id: i, rng: rand.New(rand.NewPCG(cfg.seed, uint64(i))), examples: map[string]string{}})
	}
	return h
}

// phaseResult is what one phase measured.
type phaseResult struct {
	spec        phaseSpec
	capped      bool // a worker stopped at its share of maxOpsPerPhase
	interrupted bool // the run was stopped during the phase
	start       time.Time
	wall        time.Duration
	ops         []opStat
	classes     map[string]int // "get ok", "write ambiguous-timeout", ...
	examples    map[string]string
	writes      map[outcome]int
	maxOver     time.Duration
	maxLate     time.Duration // worst scheduler lateness around a deadline
	faultStart  time.Time
	heal        time.Time
	recovery    time.Duration
	firstOK     time.Duration
	recovered   bool
	matched     []uint64
	tcpCli      tcpStats
	tcpSrv      tcpStats
	verified    int
	violations  []violation
	faultErrors []error
	topo        netTopo
}

func (w *worker) note(class string, err error) {
	if err != nil && w.examples[class] == "" {
		w.examples[class] = err.Error()
	}
}

// step runs one operation: a write (Insert of a new key, else Append) or a
// read of the current key, which is checked against the key's model.
func (w *worker) step(ctx context.Context, h *harness, phase int) {
	if w.cur == nil || w.curWrites >= h.cfg.writesPerKey {
		w.cur = newKeyModel(fmt.Sprintf("%sp%d-w%d-k%d", h.cfg.keyPrefix, phase, w.id, len(w.keys)))
		w.keys = append(w.keys, w.cur)
		w.keyPhase = append(w.keyPhase, phase)
		w.curWrites, w.exists = 0, false
	}
	m := w.cur
	if w.curWrites == 0 || w.rng.Float64() < h.cfg.writeRatio {
		w.seq++
		w.curWrites++
		token := fmt.Sprintf("w%d.%d;", w.id, w.seq)
		insert := !w.exists
		start := h.clk.Now()
		var err error
		if insert {
			err = h.st.Insert(ctx, m.key, []byte(token))
		} else {
			err = h.st.Append(ctx, m.key, []byte(token))
		}
		end := h.clk.Now()
		class, amb := classify(err)
		w.note(class, err)
		if s := ambiguityMismatch(err); s != "" {
			w.viol = append(w.viol, violation{checkUnreported, m.key, s})
		}
		switch {
		case err == nil:
			m.record(token, acked, class)
			w.exists = true
		case amb:
			m.record(token, ambiguous, class)
		default:
			m.record(token, failed, class)
			if insert && class == "exists" {
				w.exists = true // an earlier ambiguous Insert was applied
			}
			if !insert && (class == "not-found" || class == "not-stored") {
				w.exists = false
			}
		}
		answered := err == nil || class == "exists" || class == "not-found" || class == "not-stored"
		w.ops = append(w.ops, opStat{w.id, true, m.writes[len(m.writes)-1].outcome, start, end, class, answered})
		return
	}
	start := h.clk.Now()
	v, err := h.st.Get(ctx, m.key)
	end := h.clk.Now()
	class, _ := classify(err)
	w.note(class, err)
	switch class {
	case "ok":
		w.viol = append(w.viol, m.checkRead(true, v)...)
	case "not-found":
		w.viol = append(w.viol, m.checkRead(false, nil)...)
	}
	w.ops = append(w.ops, opStat{w.id, false, 0, start, end, class, class == "ok" || class == "not-found"})
}

// runPhase runs spec's workload and fault schedule, then checks deadlines,
// recovery and the phase's keys.
func (h *harness) runPhase(ctx context.Context, idx int, spec phaseSpec, topo netTopo) *phaseResult {
	pr := &phaseResult{spec: spec, classes: map[string]int{}, examples: map[string]string{}, writes: map[outcome]int{}, topo: topo}
	pr.start = h.clk.Now()
	deadline := pr.start.Add(spec.dur)
	var cliBefore, srvBefore tcpStats
	if spec.fault != nil {
		var err error
		if cliBefore, err = readTCPStats(ctx, h.cfg.run, topo.cliNS); err != nil {
			pr.faultErrors = append(pr.faultErrors, err)
		}
		if srvBefore, err = readTCPStats(ctx, h.cfg.run, topo.srvNS); err != nil {
			pr.faultErrors = append(pr.faultErrors, err)
		}
	}
	if spec.fault != nil {
		h.clk.hold() // until schedule sleeps
	}
	perWorker := max(1, h.cfg.maxOpsPerPhase/len(h.workers))
	marks := make([]int, len(h.workers))
	var capped atomic.Bool
	var wg sync.WaitGroup
	for i, w := range h.workers {
		marks[i] = len(w.ops)
		w.cur = nil // every phase writes keys of its own
		wg.Go(func() {
			for range perWorker {
				if ctx.Err() != nil || !h.clk.Now().Before(deadline) {
					return
				}
				w.step(ctx, h, idx)
			}
			if h.clk.Now().Before(deadline) {
				capped.Store(true)
			}
		})
	}
	if spec.fault != nil {
		h.schedule(ctx, pr, spec, topo)
	}
	wg.Wait()
	pr.wall = h.clk.Now().Sub(pr.start)
	pr.capped = capped.Load()
	pr.interrupted = ctx.Err() != nil
	if spec.fault != nil {
		if c, err := readTCPStats(ctx, h.cfg.run, topo.cliNS); err == nil {
			pr.tcpCli = c.sub(cliBefore)
		}
		if s, err := readTCPStats(ctx, h.cfg.run, topo.srvNS); err == nil {
			pr.tcpSrv = s.sub(srvBefore)
		}
	}
	for i, w := range h.workers {
		pr.ops = append(pr.ops, w.ops[marks[i]:]...)
		w.ops = w.ops[:0]
		for c, e := range w.examples {
			if pr.examples[c] == "" {
				pr.examples[c] = e
			}
		}
		w.examples = map[string]string{}
		pr.violations = append(pr.violations, w.viol...)
		w.viol = nil
	}
	h.account(pr)
	v, viol := h.verify(ctx, func(phase int) bool { return phase == idx })
	pr.verified = v
	pr.violations = append(pr.violations, viol...)
	return pr
}

// schedule puts the fault in place from spec.from to spec.to, reading the
// rules' counters just before removing them.
func (h *harness) schedule(ctx context.Context, pr *phaseResult, spec phaseSpec, topo netTopo) {
	defer h.clk.settle()
	wait := func(at time.Duration) bool { return h.clk.sleepUntil(ctx, pr.start.Add(at)) }
	// Rules are removed even after an interrupt: a context that is no
	// longer canceled runs the commands.
	bg := context.WithoutCancel(ctx)
	if !wait(spec.from) {
		return
	}
	if err := spec.fault.apply(bg, h.cfg.run); err != nil {
		pr.faultErrors = append(pr.faultErrors, err)
		return
	}
	pr.faultStart = h.clk.Now()
	wait(spec.to)
	m, err := spec.fault.matched(bg, h.cfg.run)
	if err != nil {
		pr.faultErrors = append(pr.faultErrors, err)
	}
	pr.matched = m
	if err := spec.fault.remove(bg, h.cfg.run); err != nil {
		pr.faultErrors = append(pr.faultErrors, err)
	}
	pr.heal = h.clk.Now()
}

// account counts the phase's operations and checks their deadlines and,
// for a partition, the recovery.
func (h *harness) account(pr *phaseResult) {
	for _, o := range pr.ops {
		kind := "get"
		if o.write {
			kind = "write"
		}
		pr.classes[kind+" "+o.class]++
		if o.write {
			pr.writes[o.outcome]++
		}
		dl := o.start.Add(h.cfg.timeout)
		over := o.end.Sub(dl)
		pr.maxOver = max(pr.maxOver, over)
		if over <= 0 {
			continue
		}
		pr.maxLate = max(pr.maxLate, h.lat.worst(dl.Add(-latLead), o.end))
		if m := h.lat.margin(dl, o.end); over > m {
			pr.violations = append(pr.violations, violation{checkDeadline, "",
				fmt.Sprintf("phase %s: a %s started at +%v ended %v past its %v deadline (%s); allowed %v",
					pr.spec.name, kind, o.start.Sub(pr.start).Round(time.Millisecond), over.Round(time.Millisecond), h.cfg.timeout, o.class, m.Round(time.Millisecond))})
		}
	}
	if pr.interrupted {
		return // a phase cut short says nothing about recovery or coverage
	}
	if len(pr.ops) == 0 {
		pr.violations = append(pr.violations, violation{checkVacuous, "", fmt.Sprintf("phase %s ran no operation", pr.spec.name)})
	}
	if pr.spec.fault != nil {
		var n uint64
		for _, c := range pr.matched {
			n += c
		}
		if len(pr.faultErrors) > 0 || n == 0 {
			pr.violations = append(pr.violations, violation{checkVacuous, "", fmt.Sprintf("phase %s: its iptables rules matched %d packets (errors: %v)", pr.spec.name, n, pr.faultErrors)})
		}
	}
	if pr.spec.recover && !pr.heal.IsZero() {
		spans := make([]span, 0, len(pr.ops))
		for _, o := range pr.ops {
			spans = append(spans, span{o.worker, o.start, o.end, o.answered})
		}
		pr.recovery, pr.firstOK, pr.recovered = recovery(spans, len(h.workers), pr.heal)
		after := pr.start.Add(pr.spec.dur).Sub(pr.heal).Round(time.Millisecond)
		switch {
		case !pr.recovered:
			pr.violations = append(pr.violations, violation{checkRecovery, "", fmt.Sprintf("phase %s: some worker had no success after its last failure in the %v that the phase ran after the heal", pr.spec.name, after)})
		case pr.recovery > h.cfg.recoveryLimit:
			pr.violations = append(pr.violations, violation{checkRecovery, "", fmt.Sprintf("phase %s: the last worker succeeded again (with no failure after) %v after the heal, over %v", pr.spec.name, pr.recovery.Round(time.Millisecond), h.cfg.recoveryLimit)})
		}
	}
}

// verify reads back every key whose phase sel selects (with no fault in
// place) and checks it against its model. A read that fails is tried again,
// verifyAttempts times in all.
func (h *harness) verify(ctx context.Context, sel func(phase int) bool) (int, []violation) {
	var mu sync.Mutex
	var out []violation
	verified := 0
	var wg sync.WaitGroup
	for _, w := range h.workers {
		wg.Go(func() {
			var viol []violation
			n := 0
			for i, m := range w.keys {
				if !sel(w.keyPhase[i]) {
					continue
				}
				var last string
				done := false
				for range h.cfg.verifyAttempts {
					if ctx.Err() != nil {
						break
					}
					v, err := h.st.Get(ctx, m.key)
					class, _ := classify(err)
					if class == "ok" || class == "not-found" {
						viol = append(viol, m.checkRead(class == "ok", v)...)
						done = true
						break
					}
					last = fmt.Sprintf("%s: %v", class, err)
				}
				if done {
					n++
				} else if ctx.Err() == nil { // an interrupted run reads nothing back
					viol = append(viol, violation{checkUnverified, m.key, fmt.Sprintf("%d reads failed, the last with %s", h.cfg.verifyAttempts, last)})
				}
			}
			mu.Lock()
			out = append(out, viol...)
			verified += n
			mu.Unlock()
		})
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return verified, out
}

// classLine renders counts by class, largest first.
func classLine(m map[string]int) string {
	type kv struct {
		k string
		v int
	}
	var s []kv
	for k, v := range m {
		s = append(s, kv{k, v})
	}
	sort.Slice(s, func(i, j int) bool {
		if s[i].v != s[j].v {
			return s[i].v > s[j].v
		}
		return s[i].k < s[j].k
	})
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = fmt.Sprintf("%s %d", e.k, e.v)
	}
	return strings.Join(parts, ", ")
}
