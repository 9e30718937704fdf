package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/conn"
)

// liar is a client that breaks each promise the chaos test checks, so that
// TestChaosDetects can show every check fails when its promise is broken.
type liar struct {
	kvAPI
	gets, getManys atomic.Int64
}

// mutate runs a write the way a careless client would: an ambiguous write
// is sent again as if it had never left (applied twice, sent again after
// no answer), and a failure the server answered with a status that is not
// retried is reported as a success (a write acknowledged, never applied).
func mutate[R any](call func() (R, error), fake R) (R, error) {
	r, err := call()
	switch {
	case errors.Is(err, client.ErrAmbiguous):
		return call()
	case errors.Is(err, client.ErrServerFailure):
		return fake, nil
	}
	return r, err
}

var fakeResult = client.MutationResult{Cas: 0x11e}

func (l *liar) Upsert(ctx context.Context, key string, value []byte, opts *client.UpsertOptions) (client.MutationResult, error) {
	return mutate(func() (client.MutationResult, error) { return l.kvAPI.Upsert(ctx, key, value, opts) }, fakeResult)
}

func (l *liar) Replace(ctx context.Context, key string, value []byte, opts *client.ReplaceOptions) (client.MutationResult, error) {
	return mutate(func() (client.MutationResult, error) { return l.kvAPI.Replace(ctx, key, value, opts) }, fakeResult)
}

func (l *liar) Append(ctx context.Context, key string, value []byte, opts *client.AppendOptions) (client.MutationResult, error) {
	return mutate(func() (client.MutationResult, error) { return l.kvAPI.Append(ctx, key, value, opts) }, fakeResult)
}

// Insert acknowledges an Insert the server refused because the document
// exists (a write acknowledged, never applied): memcached answers that
// status, where no injected one is (TestChaosDetectsOnMemcached).
func (l *liar) Insert(ctx context.Context, key string, value []byte, opts *client.InsertOptions) (client.MutationResult, error) {
	r, err := l.kvAPI.Insert(ctx, key, value, opts)
	if errors.Is(err, client.ErrDocumentExists) {
		return fakeResult, nil
	}
	return r, err
}

// Prepend reports an ambiguous write as an unambiguous timeout (not
// applied), as a client that lost track of a written request would.
func (l *liar) Prepend(ctx context.Context, key string, value []byte, opts *client.PrependOptions) (client.MutationResult, error) {
	r, err := l.kvAPI.Prepend(ctx, key, value, opts)
	var kv *client.KeyValueError
	if errors.Is(err, client.ErrAmbiguous) && errors.As(err, &kv) {
		return r, &client.KeyValueError{Op: kv.Op, Key: kv.Key, Err: client.ErrTimeout}
	}
	return r, err
}

func (l *liar) Increment(ctx context.Context, key string, opts *client.IncrementOptions) (client.CounterResult, error) {
	return mutate(func() (client.CounterResult, error) { return l.kvAPI.Increment(ctx, key, opts) },
		client.CounterResult{MutationResult: fakeResult, Value: 1})
}

// Get now and then (the first, then every tenth: a short run on a loaded
// machine makes few) retries once more after a backoff as long as its
// timeout, past its deadline, as a client that does not cap its waits by the
// deadline would; it records the retry as the orchestrator does (the
// deadline check reads those records).
func (l *liar) Get(ctx context.Context, key string, opts *client.GetOptions) (client.GetResult, error) {
	r, err := l.kvAPI.Get(ctx, key, opts)
	if l.gets.Add(1)%10 == 1 {
		planLog.LogAttrs(ctx, slog.LevelDebug, retryMessage, slog.Duration("delay", opts.Timeout))
		time.Sleep(opts.Timeout)
		return l.kvAPI.Get(ctx, key, opts)
	}
	return r, err
}

// UpsertMany lies as Upsert does, key by key: the items whose write was
// ambiguous are sent again in a second UpsertMany, and those refused with a
// status that is not retried are reported written.
func (l *liar) UpsertMany(ctx context.Context, items []client.UpsertManyItem, opts *client.UpsertManyOptions) []client.MutateManyResult {
	res := l.kvAPI.UpsertMany(ctx, items, opts)
	var again []client.UpsertManyItem
	var at []int
	for i := range res {
		switch {
		case errors.Is(res[i].Err, client.ErrAmbiguous):
			again, at = append(again, items[i]), append(at, i)
		case errors.Is(res[i].Err, client.ErrServerFailure):
			res[i].MutationResult, res[i].Err = fakeResult, nil
		}
	}
	if len(again) > 0 {
		for j, r := range l.kvAPI.UpsertMany(ctx, again, opts) {
			res[at[j]] = r
		}
	}
	return res
}

// GetMany lies as Get does: now and then the whole batch is read again
// after a backoff as long as its timeout.
func (l *liar) GetMany(ctx context.Context, keys []string, opts *client.GetManyOptions) []client.GetManyResult {
	res := l.kvAPI.GetMany(ctx, keys, opts)
	if l.getManys.Add(1)%10 == 1 {
		planLog.LogAttrs(ctx, slog.LevelDebug, retryMessage, slog.Duration("delay", opts.Timeout))
		time.Sleep(opts.Timeout)
		return l.kvAPI.GetMany(ctx, keys, opts)
	}
	return res
}

// unwrittenObserver is the Observer of a client whose connections report
// every other request written without an answer as never written (as if
// the write had failed before any byte left): the hook saw those requests.
type unwrittenObserver struct {
	client.Observer
	n atomic.Int64
}

func (o *unwrittenObserver) AttemptEnd(info client.AttemptInfo, err error) {
	var re *conn.RequestError
	if errors.As(err, &re) && re.Written && o.n.Add(1)%2 == 0 {
		lie := *re
		lie.Written = false
		err = &lie
	}
	o.Observer.AttemptEnd(info, err)
}

// The checks are not vacuous: against a client that retries ambiguous
// writes, acknowledges writes that failed and retries past deadlines, a short
// run reports lost, duplicated, re-sent and late operations, naming the seed,
// among single operations and among the keys of batches alike.
func TestChaosDetects(t *testing.T) {
	cfg := config{name: "liar", seed: *flagSeed, duration: 1500 * time.Millisecond, short: true,
		workers: 6, keys: 8, kinds: []faultKind{fkCloseAfter, fkErrmap}, prob: 0.3, heap: 1 << 30, logf: t.Logf, batches: 50,
		wrap: func(k kvAPI) kvAPI { return &liar{kvAPI: k} },
		opts: func(o *client.Options) { o.Observer = &unwrittenObserver{Observer: o.Observer} },
		// Half the steps are batches (batches: 50), so that a lie of
		// each kind in a batch comes about as soon as in a single
		// operation: with the default share the run took 1 to 2 s
		// longer. Until every lie was caught: how many operations a busy machine
		// gets through in 1.5 s must not decide whether one of each kind
		// happened (a lie is checked when its operation settles, 5 s on).
		until: func(h *harness) bool {
			return h.caught(detectedLies...) && h.caughtInBatches(detectedLies...) && h.caught(singleLies...)
		}}
	cfg.rerun = "go test ./chaos -run TestChaosDetects"
	r := run(t, cfg)
	t.Log(r.summary)
	st := &r.st
	for name, n := range map[string]int64{"lost": st.lost, "duplicated": st.duplicated, "resent": st.resent, "late": st.late} {
		if n == 0 {
			t.Errorf("the lying client's %s operations went unnoticed: %s", name, r.summary)
		}
	}
	requireCaught(t, r, detectedLies)
	requireCaughtSingle(t, r, singleLies)
	if st.lateBatch == 0 {
		t.Errorf("the lying client's late batches went unnoticed: %s", r.summary)
	}
	ft := &fakeT{}
	checkReport(ft, r)
	if !strings.Contains(ft.msg, "seed=") || !strings.Contains(ft.msg, "rerun:") {
		t.Errorf("the failure message does not say how to reproduce: %q", ft.msg)
	}
}

// detectedLies are the problem categories the liar's lies (and its
// Observer's) must raise, in single operations and in batches.
var detectedLies = []string{"lost", "duplicated", "resent", "late", "not-written-reached"}

// singleLies are those it must raise in single operations (its batch calls
// do not tell them).
var singleLies = []string{"applied-after-failure", "unreported-ambiguity"}

// requireCaughtSingle fails t unless every category was recorded.
func requireCaughtSingle(t *testing.T, r *report, lies []string) {
	t.Helper()
	for _, cat := range lies {
		if r.problems[cat] == 0 {
			t.Errorf("no %q problem recorded; problems: %v", cat, r.problems)
		}
	}
}

// caught reports whether a problem of every category was recorded.
func (h *harness) caught(categories ...string) bool {
	h.pmu.Lock()
	defer h.pmu.Unlock()
	for _, c := range categories {
		if h.problems[c] == 0 {
			return false
		}
	}
	return true
}

// caughtInBatches reports whether a problem of every category was recorded
// for a key of a batch.
func (h *harness) caughtInBatches(categories ...string) bool {
	h.pmu.Lock()
	defer h.pmu.Unlock()
	for _, c := range categories {
		if h.batchProblems[c] == 0 {
			return false
		}
	}
	return true
}

// fakeT records what checkReport would report.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper()                           {}
func (f *fakeT) Errorf(format string, args ...any) { f.msg += fmt.Sprintf(format, args...) + "\n" }
func (f *fakeT) Logf(format string, args ...any)   {}

// leaky is a client that retains 16 KiB per operation, as a client with a
// leak per request would (a response buffer kept in a map, say).
type leaky struct {
	kvAPI
	mu   sync.Mutex
	kept [][]byte
}

func (l *leaky) leak() {
	l.mu.Lock()
	l.kept = append(l.kept, make([]byte, 16<<10))
	l.mu.Unlock()
}

func (l *leaky) Get(ctx context.Context, key string, opts *client.GetOptions) (client.GetResult, error) {
	l.leak()
	return l.kvAPI.Get(ctx, key, opts)
}

func (l *leaky) Upsert(ctx context.Context, key string, value []byte, opts *client.UpsertOptions) (client.MutationResult, error) {
	l.leak()
	return l.kvAPI.Upsert(ctx, key, value, opts)
}

func (l *leaky) Insert(ctx context.Context, key string, value []byte, opts *client.InsertOptions) (client.MutationResult, error) {
	l.leak()
	return l.kvAPI.Insert(ctx, key, value, opts)
}

func (l *leaky) Replace(ctx context.Context, key string, value []byte, opts *client.ReplaceOptions) (client.MutationResult, error) {
	l.leak()
	return l.kvAPI.Replace(ctx, key, value, opts)
}

func (l *leaky) Append(ctx context.Context, key string, value []byte, opts *client.AppendOptions) (client.MutationResult, error) {
	l.leak()
	return l.kvAPI.Append(ctx, key, value, opts)
}

func (l *leaky) Prepend(ctx context.Context, key string, value []byte, opts *client.PrependOptions) (client.MutationResult, error) {
	l.leak()
	return l.kvAPI.Prepend(ctx, key, value, opts)
}

func (l *leaky) Remove(ctx context.Context, key string, opts *client.RemoveOptions) (client.MutationResult, error) {
	l.leak()
	return l.kvAPI.Remove(ctx, key, opts)
}

func (l *leaky) Increment(ctx context.Context, key string, opts *client.IncrementOptions) (client.CounterResult, error) {
	l.leak()
	return l.kvAPI.Increment(ctx, key, opts)
}

func (l *leaky) Decrement(ctx context.Context, key string, opts *client.DecrementOptions) (client.CounterResult, error) {
	l.leak()
	return l.kvAPI.Decrement(ctx, key, opts)
}

func (l *leaky) Touch(ctx context.Context, key string, expiry time.Duration, opts *client.TouchOptions) (client.MutationResult, error) {
	l.leak()
	return l.kvAPI.Touch(ctx, key, expiry, opts)
}

func (l *leaky) GetAndLock(ctx context.Context, key string, lockTime time.Duration, opts *client.GetAndLockOptions) (client.GetResult, error) {
	l.leak()
	return l.kvAPI.GetAndLock(ctx, key, lockTime, opts)
}

func (l *leaky) Unlock(ctx context.Context, key string, cas uint64, opts *client.UnlockOptions) error {
	l.leak()
	return l.kvAPI.Unlock(ctx, key, cas, opts)
}

// leakOps is how many operations TestChaosDetectsLeak does after its heap
// baseline, at least.
const leakOps = 500

// The memory check is not vacuous: a client retaining 16 KiB per operation
// fails a short run's per-operation bound on the heap's growth (the
// absolute slack alone would need thousands more operations to notice).
func TestChaosDetectsLeak(t *testing.T) {
	cfg := config{name: "leaky", seed: *flagSeed, duration: 1500 * time.Millisecond, short: true,
		workers: 4, keys: 8, kinds: []faultKind{}, heap: 1 << 30, heapPerOp: defaultHeapPerOp, logf: t.Logf, batches: defaultBatchShare,
		wrap: func(k kvAPI) kvAPI { return &leaky{kvAPI: k} },
		// Until enough operations followed the baseline for the leak to
		// exceed the fixed allowance several times over (16 KiB minus the
		// 2 KiB allowed, times leakOps, against 2 MiB): a busy machine
		// gets through fewer in 1.5 s.
		until: func(h *harness) bool { return h.heap.opsSinceBaseline() >= leakOps }}
	cfg.rerun = "go test ./chaos -run TestChaosDetectsLeak"
	r := run(t, cfg)
	t.Log(r.summary)
	if _, exceeded := r.heapGrowthExceeded(); !exceeded {
		t.Fatalf("a client retaining 16 KiB per operation went unnoticed: %s", r.summary)
	}
	if f := strings.Join(r.failures(), "; "); !strings.Contains(f, "per operation") {
		t.Errorf("the failures do not report the heap's growth per operation: %q", f)
	}
}

// requireCaught fails t unless every category of lies was recorded as a
// problem, both for a single operation and for a key of a batch.
func requireCaught(t *testing.T, r *report, lies []string) {
	t.Helper()
	for _, cat := range lies {
		if r.problems[cat] == 0 {
			t.Errorf("no %q problem recorded; problems: %v", cat, r.problems)
		}
		if r.batchProblems[cat] == 0 {
			t.Errorf("no %q problem recorded for a key of a batch; batch problems: %v", cat, r.batchProblems)
		}
	}
}
