package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"
)

// Deadlines. What the client promises about an operation's deadline is a
// plan: it sends a retry only after a wait that ends before the deadline,
// and a wait that would reach the deadline ends the operation there instead
// (retry.Orchestrator.Wait). How late the operation then returns is how
// late the machine runs the goroutines involved, which nothing in the test
// bounds: on a busy 2-core machine one thread can be descheduled for
// hundreds of milliseconds while the other runs on, so a goroutine sampling
// its own wake-ups does not measure the delays of the operation's
// goroutines. The check is therefore on the plan, from times read on the
// operation's own goroutine; the wall-clock overshoot is only reported
// (the summary's "max over timeout").
//
// The orchestrator logs every retry at Debug with its delay; the harness's
// Logger (planLog) sees those records on the operation's goroutine, through
// the context the worker passes (it carries the opRec). For a retry with
// delay D:
//   - the decision's clock reading is no earlier than the last thing the
//     operation's goroutine did before it: the end of its last attempt
//     (Observer), the previous retry's record, or the operation's start (not
//     the end of the previous retry's wait: a new config can end a wait
//     early, retry.Orchestrator.WaitOrWake);
//   - the operation's deadline is no later than its first event (its first
//     attempt or retry record, both after the client read the clock for the
//     deadline) plus its timeout.
//
// When the first bound plus D reaches the second, the client planned a wait
// that ends at or after its deadline and then retried: the bug this check
// guards (a backoff slept past the deadline). A stall anywhere only moves
// the bounds apart, so a busy machine can hide the bug from one retry but
// never produce it.

// retryMessage is the message of the orchestrator's Debug record of a retry.
const retryMessage = "retrying operation"

// opCtxKey is the context key under which the worker passes the running
// operation's retry plan to the client (and so to planLog).
type opCtxKey struct{}

func withOp(ctx context.Context, op *opRec) context.Context {
	return context.WithValue(ctx, opCtxKey{}, op.plan)
}

// retryPlan is what the deadline rule follows of one call to the client:
// a single operation, or a batch, whose keys share the batch's goroutine
// and its deadline (every key's counts from the batch's start, with the
// batch's timeout), so that the rule holds for the batch as a whole: a
// retry of any of its keys is decided no earlier than the last thing the
// batch's goroutine did for any key.
type retryPlan struct {
	start   time.Time
	timeout time.Duration
	batch   string // the batch's description; "" for a single operation

	firstEv      time.Time // its first attempt or retry record
	floor        time.Time // its goroutine ran at least until then
	retries      int       // retry records seen
	overrunSeen  bool      // a retry's wait was planned past the deadline
	overrun      time.Duration
	overrunDelay time.Duration
	planErr      string
	checked      bool // checkDeadline has taken it (a batch's is shared by its keys)
}

// planLog is the client's Logger: it follows the retry plans of the chaos
// operations and discards everything else.
var planLog = slog.New(planHandler{})

type planHandler struct{}

func (planHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	_, ok := ctx.Value(opCtxKey{}).(*retryPlan)
	return ok
}

func (planHandler) Handle(ctx context.Context, r slog.Record) error {
	op, _ := ctx.Value(opCtxKey{}).(*retryPlan)
	if op == nil || r.Message != retryMessage {
		return nil
	}
	var delay time.Duration
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "delay" && a.Value.Kind() == slog.KindDuration {
			delay, found = a.Value.Duration(), true
			return false
		}
		return true
	})
	if !found {
		op.planErr = fmt.Sprintf("a %q record without a duration \"delay\": %v", retryMessage, r)
		return nil
	}
	op.planRetry(r.Time, delay)
	return nil
}

func (h planHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h planHandler) WithGroup(string) slog.Handler      { return h }

// A retryPlan is touched only on the operation's goroutine (the Observer
// and the Logger run there; a batch's run on the goroutine that called it)
// and, after it ended, by its owner: that same goroutine.

// planEvent notes that the operation's goroutine was running at t: an
// attempt started or ended.
func (op *retryPlan) planEvent(t time.Time) {
	if op.firstEv.IsZero() {
		op.firstEv = t
	}
	if t.After(op.floor) {
		op.floor = t
	}
}

// planRetry applies the rule above to a retry recorded at t with delay d.
func (op *retryPlan) planRetry(t time.Time, d time.Duration) {
	op.retries++
	if op.firstEv.IsZero() {
		op.firstEv = t
	}
	floor := op.floor
	if floor.IsZero() {
		floor = op.start
	}
	if over := floor.Add(d).Sub(op.firstEv.Add(op.timeout)); over >= 0 && (!op.overrunSeen || over > op.overrun) {
		op.overrun, op.overrunDelay, op.overrunSeen = over, d, true
	}
	if t.After(op.floor) {
		op.floor = t
	}
}

// checkDeadline applies the deadline rule to a finished operation and
// records its wall-clock overshoot for the summary. The keys of a batch
// share one plan, checked with the first of them to settle.
func checkDeadline(h *harness, ks *keyState, op *opRec) {
	st := &ks.owner.st
	st.maxOver = max(st.maxOver, op.end.Sub(op.start)-op.timeout)
	p := op.plan
	if p.checked {
		return
	}
	p.checked = true
	st.planned += int64(p.retries)
	what := "key " + ks.name
	if p.batch != "" {
		what = p.batch + ", with key " + ks.name
	}
	if p.planErr != "" {
		h.problemOp(op, "late", "%s: %s: %s", what, p.planErr, op)
	}
	if p.overrunSeen {
		st.late++
		if p.batch != "" {
			st.lateBatch++
		}
		h.problemOp(op, "late", "%s: retried after a wait of %v planned to end at least %v past its %v deadline: %s",
			what, p.overrunDelay, p.overrun.Round(time.Microsecond), p.timeout, op)
	}
}

// heapSampler records the heap in use after a GC, periodically, with the
// number of operations done so far.
type heapSampler struct {
	start  time.Time
	warmup time.Duration
	ops    func() int64
	stop   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	baseline uint64 // the first sample after warm-up
	baseOps  int64  // operations done at the baseline sample
	last     uint64 // the latest sample (the final one after close)
	lastOps  int64
	maxInuse uint64
	samples  int
	series   []uint64 // every sample after warm-up, for the trend
}

func startHeap(period, warmup time.Duration, ops func() int64) *heapSampler {
	s := &heapSampler{start: time.Now(), warmup: warmup, ops: ops, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *heapSampler) sample() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	ops := s.ops()
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.start) < s.warmup {
		return
	}
	if s.samples == 0 {
		s.baseline, s.baseOps = ms.HeapInuse, ops
	}
	s.samples++
	s.last, s.lastOps = ms.HeapInuse, ops
	s.maxInuse = max(s.maxInuse, ms.HeapInuse)
	s.series = append(s.series, ms.HeapInuse)
}

// opsSinceBaseline returns how many operations were done between the
// baseline sample and the latest one (0 before the baseline).
func (s *heapSampler) opsSinceBaseline() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.samples == 0 {
		return 0
	}
	return s.lastOps - s.baseOps
}

// halves returns the largest sample of each half of the run after warm-up:
// a leak shows as the second well above the first.
func (s *heapSampler) halves() (first, second uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.series)
	for i, v := range s.series {
		if i < n/2 {
			first = max(first, v)
		} else {
			second = max(second, v)
		}
	}
	return first, second
}

// heapStats is what the sampler saw after warm-up.
type heapStats struct {
	base, max, end uint64 // the baseline, largest and final heap in use
	ops            int64  // operations done between the baseline and the end
	samples        int
}

// close stops the sampler after a last sample (the workers have stopped)
// and returns what it saw.
func (s *heapSampler) close() heapStats {
	close(s.stop)
	<-s.done
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return heapStats{base: s.baseline, max: s.maxInuse, end: s.last, ops: s.lastOps - s.baseOps, samples: s.samples}
}
