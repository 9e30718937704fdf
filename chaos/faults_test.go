package chaos

import (
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// faultKind is a kind of fault the scheduler injects.
type faultKind int

const (
	fkCloseBefore faultKind = iota // connections closed before the request runs
	fkCloseAfter                   // ... after it ran, its answer dropped
	fkRestart                      // a node stopped, then restarted
	fkRebalance                    // a node added or removed by a stepped rebalance with a forward map
	fkNMV                          // NOT_MY_VBUCKET answers (with the current config)
	fkLocked                       // LOCKED answers
	fkTmpfail                      // TMPFAIL answers
	fkSlow                         // answers delayed, some beyond the operation's timeout
	fkErrmap                       // statuses only the error map explains (retry, and not)
	fkDrop                         // every connection of a node, or of the cluster, dropped at once
	fkBlackhole                    // memcached, http: a proxy passes nothing on, either way, for a while
	fkStreamEnd                    // http: the REST proxies' connections reset (config streams end)
	numFaultKinds
)

var faultNames = [numFaultKinds]string{"close-before", "close-after", "restart", "rebalance",
	"nmv-storm", "locked", "tmpfail", "slow", "errmap", "drop", "blackhole", "stream-end"}

func (k faultKind) String() string { return faultNames[k] }

func (k faultKind) topology() bool { return k == fkRestart || k == fkRebalance }

func (k faultKind) perRequest() bool {
	return !k.topology() && k != fkDrop && k != fkBlackhole && k != fkStreamEnd
}

// onMock, onHTTP and onMemcached report whether k applies to the mock
// cluster, to the mock with its REST ports behind fault proxies
// (http_test.go) and to a memcached behind fault proxies
// (memcached_test.go): vbuckets, locks, TMPFAIL answers and error maps are
// the mock's; a memcached server is closed on, stopped (refusing
// connections), slowed, dropped or black-holed by its proxy; the REST
// proxies black-hole and end config streams.
func (k faultKind) onMock() bool { return k != fkBlackhole && k != fkStreamEnd }

func (k faultKind) onHTTP() bool { return k.onMock() || k == fkBlackhole || k == fkStreamEnd }

func (k faultKind) onMemcached() bool {
	switch k {
	case fkCloseBefore, fkCloseAfter, fkRestart, fkSlow, fkDrop, fkBlackhole:
		return true
	}
	return false
}

// opClass selects the requests a per-request fault applies to.
type opClass uint8

const (
	classAll      opClass = iota // every request for a chaos key
	classMutation                // mutations (what close-after-apply makes ambiguous)
	classLockable                // what a server answers LOCKED for: mutations, TOUCH, GET_LOCKED
)

func (c opClass) has(op memdx.OpCode) bool {
	switch c {
	case classMutation:
		k, ok := kindOf(op)
		return ok && k.counted()
	case classLockable:
		_, ok := kindOf(op)
		return ok && op != memdx.OpUnlockKey
	}
	return true
}

// hookFault is a per-request fault while it is active.
type hookFault struct {
	kind     faultKind
	nodes    []int // empty: every node
	class    opClass
	prob     float64
	rng      *rand.Rand // guarded by faultSet.mu
	minDelay time.Duration
	maxDelay time.Duration
	// hold (fkSlow; guarded by faultSet.mu): the answer of a request of a
	// running operation is held until that operation has returned
	// (harness.hook on the mock, the proxies' onResponse on memcached),
	// rather than for a drawn delay: a client that waits for an answer
	// past its deadline then never returns, and the run hangs instead of
	// passing. For a request no running operation sent (or, on memcached,
	// whose operation had returned when the answer came) the delay
	// applies.
	hold bool
	hits int // guarded by faultSet.mu
}

func (f *hookFault) action() mockcluster.Action {
	switch f.kind {
	case fkCloseBefore:
		return mockcluster.Action{Close: mockcluster.CloseBeforeApply}
	case fkCloseAfter:
		return mockcluster.Action{Close: mockcluster.CloseAfterApply}
	case fkNMV:
		return mockcluster.Action{Status: memdx.StatusNotMyVbucket}
	case fkLocked:
		return mockcluster.Action{Status: memdx.StatusLocked}
	case fkTmpfail:
		return mockcluster.Action{Status: memdx.StatusTmpFail}
	case fkErrmap:
		if f.rng.Intn(8) == 0 {
			return mockcluster.Action{Status: mockcluster.StatusTestNoRetry}
		}
		return mockcluster.Action{Status: mockcluster.StatusTestRetry}
	case fkSlow:
		d := f.minDelay + time.Duration(f.rng.Int63n(int64(f.maxDelay-f.minDelay)+1))
		return mockcluster.Action{Delay: d}
	}
	return mockcluster.Action{}
}

// faultSet holds the active per-request faults; the hook asks it.
type faultSet struct {
	mu     sync.Mutex
	active []*hookFault
	hits   [numFaultKinds]atomic.Int64
}

// decideHold returns the action of the first active fault that applies
// to r, its kind and whether one hit, and whether the answer is to be held
// until the request's operation has returned (hookFault.hold).
func (fs *faultSet) decideHold(r *mockcluster.Request) (act mockcluster.Action, kind faultKind, hit, hold bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, f := range fs.active {
		if len(f.nodes) > 0 && !slices.Contains(f.nodes, r.Node) {
			continue
		}
		if !f.class.has(r.OpCode) || f.rng.Float64() >= f.prob {
			continue
		}
		f.hits++
		return f.action(), f.kind, true, f.hold
	}
	return mockcluster.Action{}, 0, false, false
}

func (fs *faultSet) count(k faultKind) { fs.hits[k].Add(1) }

func (fs *faultSet) add(f *hookFault) {
	fs.mu.Lock()
	fs.active = append(fs.active, f)
	fs.mu.Unlock()
}

func (fs *faultSet) remove(f *hookFault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.active = slices.DeleteFunc(fs.active, func(x *hookFault) bool { return x == f })
}

func (f *hookFault) hitCount(fs *faultSet) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return f.hits
}

func (fs *faultSet) clear() {
	fs.mu.Lock()
	fs.active = nil
	fs.mu.Unlock()
}

// episode is one fault, fully drawn from the seed before it starts.
type episode struct {
	kind faultKind
	dur  time.Duration // how long a per-request fault stays, or a node stays down
	pick int           // chooses a node among those present when it starts
	all  bool          // every node rather than one
	hf   *hookFault
	step int           // rebalance: vbuckets per step
	gap  time.Duration // rebalance: between steps
}

func (e *episode) String() string {
	switch e.kind {
	case fkRestart:
		return fmt.Sprintf("down %v", e.dur)
	case fkRebalance:
		return fmt.Sprintf("steps of %d every %v", e.step, e.gap)
	case fkDrop:
		return fmt.Sprintf("all=%v", e.all)
	}
	f := e.hf
	s := fmt.Sprintf("nodes=%v class=%d p=%.2f for %v, %d hits", f.nodes, f.class, f.prob, e.dur, f.hits)
	if f.kind == fkSlow {
		s += fmt.Sprintf(", delays %v..%v", f.minDelay, f.maxDelay)
		if f.hold {
			s += " (on the mock: held until the operation returned)"
		}
	}
	return s
}

// scheduler fires faults from the seed until the run's time is up.
type scheduler struct {
	h       *harness
	mc      *mockcluster.Cluster
	rng     *rand.Rand
	short   bool
	kinds   []faultKind
	maxConc int
	prob    float64     // when > 0, every per-request fault's probability
	until   func() bool // short runs: what must hold before they end (config.until)
	logf    func(string, ...any)

	mcb   *mcBackend    // memcached: the proxies the episodes act through (mc is nil)
	rest  *restProxies  // http: the REST ports' proxies (blackhole, stream-end; nodes added)
	slots chan struct{} // one per concurrent episode
	topo  chan struct{} // one topology change at a time
	wg    sync.WaitGroup

	mu       sync.Mutex
	started  [numFaultKinds]int
	fired    [numFaultKinds]int // episodes that acted on something
	infraErr []string           // mock API failures: the harness's problem, not the client's
}

func newScheduler(h *harness, mc *mockcluster.Cluster, seed int64, short bool, kinds []faultKind, logf func(string, ...any)) *scheduler {
	if kinds == nil {
		kinds = allKinds()
	}
	s := &scheduler{h: h, mc: mc, rng: rand.New(rand.NewSource(seed)), short: short, kinds: kinds,
		maxConc: 3, logf: logf, topo: make(chan struct{}, 1)}
	s.slots = make(chan struct{}, s.maxConc)
	return s
}

func (s *scheduler) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rng.Int63n(int64(hi-lo)+1))
}

// draw decides everything about an episode of kind k.
func (s *scheduler) draw(k faultKind) *episode {
	e := &episode{kind: k, pick: s.rng.Intn(1 << 20), all: s.rng.Intn(3) == 0}
	if s.short {
		// Every kind must act within a few seconds: more often on every
		// node, and rebalances of a few big steps.
		e.all = s.rng.Intn(3) != 0
		e.dur = s.between(150*time.Millisecond, 400*time.Millisecond)
	} else {
		e.dur = s.between(200*time.Millisecond, 3*time.Second)
	}
	switch k {
	case fkRestart:
		if s.short {
			e.dur = s.between(100*time.Millisecond, 500*time.Millisecond)
		}
	case fkRebalance:
		if s.short {
			e.step = 64 + s.rng.Intn(192)
			e.gap = s.between(5*time.Millisecond, 25*time.Millisecond)
		} else {
			e.step = 16 + s.rng.Intn(112)
			e.gap = s.between(5*time.Millisecond, 50*time.Millisecond)
		}
	case fkDrop, fkBlackhole, fkStreamEnd:
	default:
		f := &hookFault{kind: k, rng: rand.New(rand.NewSource(s.rng.Int63()))}
		if !e.all {
			f.nodes = []int{-1} // filled in when the episode starts
		}
		switch k {
		case fkCloseBefore, fkCloseAfter:
			f.class = classMutation
			if s.rng.Intn(3) == 0 {
				f.class = classAll
			}
			f.prob = 0.03 + 0.09*s.rng.Float64()
		case fkNMV:
			f.prob = 0.3 + 0.5*s.rng.Float64()
		case fkLocked:
			f.class = classLockable
			f.prob = 0.2 + 0.4*s.rng.Float64()
		case fkTmpfail:
			f.prob = 0.2 + 0.4*s.rng.Float64()
		case fkErrmap:
			f.prob = 0.2 + 0.3*s.rng.Float64()
		case fkSlow:
			f.prob = 0.05 + 0.25*s.rng.Float64()
			if s.rng.Intn(3) == 0 {
				// Held until the operation has given up on it (its
				// deadline, or a cancel): the request was applied, its
				// answer comes too late. The delays are memcached's,
				// and the mock's for a request no running operation
				// sent.
				f.hold = true
				f.minDelay, f.maxDelay = 600*time.Millisecond, 1500*time.Millisecond
			} else {
				f.minDelay, f.maxDelay = 5*time.Millisecond, 150*time.Millisecond
			}
		}
		if s.prob > 0 {
			f.prob = s.prob
		}
		e.hf = f
	}
	return e
}

// allFired reports whether every kind has acted at least once, and
// (with both close kinds in the run) writes were cut off both before and
// after they were applied, and the slow faults did what slowDone says.
func (s *scheduler) allFired() bool {
	if slices.Contains(s.kinds, fkCloseBefore) && s.h.doubtNotApplied.Load() == 0 ||
		slices.Contains(s.kinds, fkCloseAfter) && s.h.doubtApplied.Load() == 0 ||
		slices.Contains(s.kinds, fkSlow) && !s.slowDone() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.kinds {
		if s.fired[k] == 0 {
			return false
		}
	}
	return true
}

// complete reports whether a short run has done all it must: every kind
// acted, and until holds.
func (s *scheduler) complete() bool {
	return s.allFired() && (s.until == nil || s.until())
}

// run fires episodes until d has passed; in short mode it goes on until
// every kind has acted at least once and until holds, so the short run is
// never vacuous, however slowly a busy machine runs it (actedWait past d
// only stops a run that will never get there; it then fails on what is
// missing). Kinds come in shuffled rounds, so each appears once per round.
func (s *scheduler) run(d time.Duration) {
	start := time.Now()
	var round []faultKind
	var past *actedWait
	for {
		el := time.Since(start)
		if el >= d {
			if !s.short || s.complete() {
				break
			}
			if past == nil {
				past = s.newActedWait()
			}
			if past.over() {
				break
			}
		}
		if len(s.kinds) == 0 { // no faults: just the workload
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if len(round) == 0 {
			round = slices.Clone(s.kinds)
			s.rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		k := round[0]
		round = round[1:]
		e := s.draw(k)
		gap := s.between(20*time.Millisecond, 120*time.Millisecond)
		if !s.short {
			gap = s.between(50*time.Millisecond, time.Second)
		}
		if k.topology() {
			s.topo <- struct{}{}
		}
		s.slots <- struct{}{}
		s.mu.Lock()
		s.started[k]++
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.slots }()
			if k.topology() {
				defer func() { <-s.topo }()
			}
			acted := s.runEpisode(e)
			s.logf("chaos: %v %s episode: %s, acted=%v", time.Since(start).Round(time.Millisecond), k, e, acted)
			if acted {
				s.mu.Lock()
				s.fired[k]++
				s.mu.Unlock()
			}
		}()
		time.Sleep(gap)
	}
	s.wg.Wait()
}

func (s *scheduler) infra(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.logf("chaos: mock cluster: %s", msg)
	s.mu.Lock()
	s.infraErr = append(s.infraErr, msg)
	s.mu.Unlock()
}

// dataNodes returns the ids of the bucket's servers that are running.
func (s *scheduler) dataNodes() []*mockcluster.Node {
	var out []*mockcluster.Node
	for _, n := range s.mc.Nodes() {
		if n.Running() && slices.Contains(s.h.bucket.Servers(), n.ID()) {
			out = append(out, n)
		}
	}
	return out
}

// runEpisode runs one fault to its end and reports whether it acted.
func (s *scheduler) runEpisode(e *episode) bool {
	if s.mcb != nil {
		return s.mcb.episode(s, e)
	}
	if s.rest != nil && (e.kind == fkBlackhole || e.kind == fkStreamEnd) {
		return s.rest.episode(s, e)
	}
	switch e.kind {
	case fkRestart:
		return s.restart(e)
	case fkRebalance:
		return s.rebalance(e)
	case fkDrop:
		nodes := s.dataNodes()
		if e.all || len(nodes) == 0 {
			s.mc.DropConnections()
		} else {
			nodes[e.pick%len(nodes)].DropConnections()
		}
		return true
	}
	f := e.hf
	if len(f.nodes) > 0 {
		nodes := s.dataNodes()
		if len(nodes) == 0 {
			return false
		}
		f.nodes[0] = nodes[e.pick%len(nodes)].ID()
	}
	s.h.faults.add(f)
	time.Sleep(e.dur)
	if s.short {
		s.untilActed(f)
	}
	s.h.faults.remove(f)
	return f.hitCount(&s.h.faults) > 0
}

// actedWait bounds how long a short run's fault (or the run, past its
// length) waits for what the run needs to happen: only a client that
// stopped sending requests, or a fault that never acts on them, reaches it
// (the run then fails on what is missing). Whether a fault acts depends on
// how many operations meet it, not on how long they take: the bound is in
// operations (actedOps, with at least actedLimit gone by), so a loaded
// machine, which makes fewer a second, is given the time to make as many.
// A client stuck for good (no operation ends for actedLimit: every
// operation ends by its timeout, a second, or a cancel, so that is no
// loaded machine's pace) ends the wait too, so that the run reports what
// is missing, and awaitWorkers what hangs, rather than waiting for the test
// binary's -timeout.
type actedWait struct {
	h        *harness
	now      func() time.Time // time.Now; a test's fake clock
	start    time.Time
	ops0     int64
	lastOps  int64
	lastMove time.Time
}

const (
	actedLimit = time.Minute
	// actedOps is about a minute of a short run's operations on a quiet
	// 2-core machine.
	actedOps = 50000
)

func (s *scheduler) newActedWait() *actedWait {
	return startActedWait(s.h, time.Now)
}

func startActedWait(h *harness, clock func() time.Time) *actedWait {
	now, ops := clock(), h.opsDone.Load()
	return &actedWait{h: h, now: clock, start: now, ops0: ops, lastOps: ops, lastMove: now}
}

// over reports whether the wait should end: actedOps operations and
// actedLimit, or actedLimit without an operation ending.
func (a *actedWait) over() bool {
	now, ops := a.now(), a.h.opsDone.Load()
	if ops != a.lastOps {
		a.lastOps, a.lastMove = ops, now
	}
	if now.Sub(a.lastMove) >= actedLimit {
		return true
	}
	return now.Sub(a.start) >= actedLimit && ops-a.ops0 >= actedOps
}

// untilActed keeps a short run's per-request fault active past its drawn
// duration until its kind has done what the run needs of it: acted at least
// once and, for the close kinds, cut off a write that was then applied
// (close-after) or not (close-before); for slow, on the mock, held an
// answer until its operation returned and seen a write expire in flight
// (slowDone; the fault holds answers from then on, if it did not). How
// many requests reach a node in a
// few hundred milliseconds depends on how busy the machine is; the short
// run must not. Past its duration the fault applies to every node, so a
// node stopped or removed meanwhile cannot keep it waiting.
func (s *scheduler) untilActed(f *hookFault) {
	s.h.faults.mu.Lock()
	f.nodes = nil
	if f.kind == fkSlow && !f.hold {
		// A short run must see an answer held until its operation
		// returned and (on the mock) a write expire in flight
		// (kindDone): only those show whether the client ends an
		// operation at its deadline, and reports the write ambiguous.
		f.hold = true
		f.minDelay, f.maxDelay = 600*time.Millisecond, 1500*time.Millisecond
	}
	s.h.faults.mu.Unlock()
	wait := s.newActedWait()
	for !s.kindDone(f) && !wait.over() {
		time.Sleep(5 * time.Millisecond)
	}
}

// slowDone reports whether the slow faults have done what a short run
// needs of them: an answer was held until its operation had returned and,
// on the mock, a write's attempt ended at its deadline, written and
// unanswered (the Observer's count; memcached runs without an Observer).
func (s *scheduler) slowDone() bool {
	return s.h.heldAnswers.Load() > 0 && (s.mcb != nil || s.h.expiredWrites.Load() > 0)
}

// kindDone reports whether f, or an earlier episode of its kind, has acted
// as the short run requires.
func (s *scheduler) kindDone(f *hookFault) bool {
	switch f.kind {
	case fkCloseBefore:
		if s.h.doubtNotApplied.Load() == 0 {
			return false
		}
	case fkCloseAfter:
		if s.h.doubtApplied.Load() == 0 {
			return false
		}
	case fkSlow:
		if !s.slowDone() {
			return false
		}
	}
	if f.hitCount(&s.h.faults) > 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired[f.kind] > 0
}

func (s *scheduler) restart(e *episode) bool {
	nodes := s.dataNodes()
	if len(nodes) == 0 {
		return false
	}
	n := nodes[e.pick%len(nodes)]
	n.Stop()
	time.Sleep(e.dur)
	// Restart fails only when another socket took the node's port while it
	// was down; give the OS a moment, then retire the node instead.
	for i := 0; ; i++ {
		err := n.Restart()
		if err == nil {
			return true
		}
		if i == 50 {
			s.infra("node %d could not restart (%v): failing it over and removing it", n.ID(), err)
			if err := s.mc.Failover(n.ID()); err != nil {
				s.infra("failover of node %d: %v", n.ID(), err)
			}
			if err := s.mc.RemoveNode(n.ID()); err != nil {
				s.infra("removing node %d: %v", n.ID(), err)
			}
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rebalance grows the cluster from 3 data nodes to 4, or shrinks it back,
// moving vbuckets a step at a time while every config carries the forward
// map.
func (s *scheduler) rebalance(e *episode) bool {
	members := s.dataNodes()
	var target []int
	var drop *mockcluster.Node
	if len(members) <= 3 {
		n, err := s.mc.AddNode()
		if err != nil {
			s.infra("adding a node: %v", err)
			return false
		}
		if s.rest != nil {
			if err := s.rest.add(n); err != nil {
				s.infra("a REST proxy for node %d: %v", n.ID(), err)
			}
		}
	} else {
		drop = members[e.pick%len(members)]
		for _, n := range members {
			if n != drop {
				target = append(target, n.ID())
			}
		}
	}
	reb, err := s.mc.StartRebalance(mockcluster.RebalanceOptions{Nodes: target})
	if err != nil {
		s.infra("starting a rebalance: %v", err)
		return false
	}
	for reb.Remaining() > 0 {
		if _, err := reb.Step(e.step); err != nil {
			s.infra("rebalance step: %v", err)
			break
		}
		time.Sleep(e.gap)
	}
	if err := reb.Finish(); err != nil {
		s.infra("finishing a rebalance: %v", err)
		return false
	}
	if drop != nil {
		if err := s.mc.RemoveNode(drop.ID()); err != nil {
			s.infra("removing node %d after the rebalance: %v", drop.ID(), err)
		}
	}
	return true
}
