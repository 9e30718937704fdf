package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kvwire/kvwire/client"
)

// batchKind is the batch call an operation is one key of.
type batchKind uint8

const (
	bNone batchKind = iota
	bGetMany
	bUpsertMany
	bRemoveMany
	numBatchKinds
)

var batchNames = [numBatchKinds]string{"single", "GetMany", "UpsertMany", "RemoveMany"}

func (k batchKind) String() string { return batchNames[k] }

// Batches. Each key of a batch call is an operation of its own (an opRec
// of kind Get, Upsert or Remove) and is checked exactly as a single
// operation of that kind: registered as its key's running operation for
// the hook and the Observer, its outcome applied to the key's model, its
// requests attributed and verified (applied once when acknowledged, not
// at all after a non-ambiguous failure, never sent again after an attempt
// without a definite answer), and an ambiguous one read afterwards. The
// keys of a batch are the worker's own and in one collection, so no other
// goroutine touches them meanwhile; they share the batch's retry plan,
// whose deadline they share too (timing_test.go).

// batchOp runs one batch call on some of the worker's keys and returns the
// keys it operated on.
func (w *worker) batchOp() []*keyState {
	r := w.rng.Intn(100)
	switch {
	case r < 45:
		kss := w.pickKeys(false)
		if len(kss) > 0 && w.rng.Intn(6) == 0 {
			// A key given twice is read twice, each with its own result.
			kss = append(kss, kss[w.rng.Intn(len(kss))])
		}
		w.getMany(kss)
		return kss
	case r < 80:
		// Documents only: a counter's value must stay a number.
		kss := w.pickKeys(true)
		w.upsertMany(kss)
		return kss
	default:
		kss := w.pickKeys(false)
		w.removeMany(kss)
		return kss
	}
}

// pickKeys returns 1 to 4 distinct keys of the worker in one collection
// (counters too unless docsOnly), in random order.
func (w *worker) pickKeys(docsOnly bool) []*keyState {
	api := w.keys[w.rng.Intn(len(w.keys))].api
	n := 1 + w.rng.Intn(4)
	var out []*keyState
	for _, i := range w.rng.Perm(len(w.keys)) {
		ks := w.keys[i]
		if ks.api != api || (docsOnly && ks.ctr) {
			continue
		}
		out = append(out, ks)
		if len(out) == n {
			break
		}
	}
	return out
}

// execBatch runs one batch call: registers an operation per key, calls the
// client, and takes each key's outcome as exec takes a single operation's.
// call returns one error per key, in order. Keys with an ambiguous outcome
// are read afterwards (in one GetMany).
func (w *worker) execBatch(bk batchKind, kss []*keyState, ops []*opRec, call func(ctx context.Context) []error) {
	if len(kss) == 0 {
		return
	}
	timeout := timeouts[w.rng.Intn(len(timeouts))]
	names := make([]string, len(kss))
	for i, ks := range kss {
		names[i] = ks.name
	}
	plan := &retryPlan{timeout: timeout, batch: fmt.Sprintf("%s of [%s]", bk, strings.Join(names, " "))}
	cc := w.drawCancel(timeout)
	ctx := cc.arm(context.WithValue(context.Background(), opCtxKey{}, plan))
	for i, ks := range kss {
		op := ops[i]
		op.plan, op.batch, op.timeout, op.cc = plan, bk, timeout, cc
		w.register(ks, op)
	}
	w.st.batches[bk]++
	w.st.batchKeys[bk] += int64(len(kss))
	start := time.Now()
	plan.start = start
	for _, op := range ops {
		op.start = start
	}
	cc.start()
	errs := call(ctx)
	cc.done(ctx)
	end := time.Now()
	var doubt []*keyState
	for i, ks := range kss {
		ops[i].end = end
		if w.conclude(ks, ops[i], errs[i]) && !containsKey(doubt, ks) {
			doubt = append(doubt, ks)
		}
	}
	if len(doubt) > 0 {
		w.getMany(doubt) // what an application would do: find out
	}
}

func containsKey(kss []*keyState, ks *keyState) bool {
	for _, x := range kss {
		if x == ks {
			return true
		}
	}
	return false
}

// errBatchResult stands for the result of a key the batch call did not
// return, or returned under another key: never an error the chaos causes,
// so the key fails as an unexpected error.
type errBatchResult struct{ msg string }

func (e *errBatchResult) Error() string { return e.msg }

// checkBatch checks that a batch call returned one result per key, in
// order, and returns the errors, one per key.
func (w *worker) checkBatch(bk batchKind, names []string, n int, key func(int) string, err func(int) error) []error {
	errs := make([]error, len(names))
	if n != len(names) {
		w.h.problem("batch-results", "%s of %d keys returned %d results", bk, len(names), n)
	}
	for i := range names {
		switch {
		case i >= n:
			errs[i] = &errBatchResult{fmt.Sprintf("%s returned no result for key %d (%s)", bk, i, names[i])}
		case key(i) != names[i]:
			w.h.problem("batch-results", "%s: result %d is for key %q, want %q", bk, i, key(i), names[i])
			errs[i] = &errBatchResult{fmt.Sprintf("%s returned result %d for key %q", bk, i, key(i))}
		default:
			errs[i] = err(i)
		}
	}
	return errs
}

// getMany reads the keys (a key may be given more than once) in one
// GetMany.
func (w *worker) getMany(kss []*keyState) {
	if len(kss) == 0 {
		return
	}
	ops := make([]*opRec, len(kss))
	names := make([]string, len(kss))
	for i, ks := range kss {
		ops[i] = w.newOp(ks, opGet)
		names[i] = ks.name
	}
	w.execBatch(bGetMany, kss, ops, func(ctx context.Context) []error {
		res := kss[0].gets.GetMany(ctx, names, &client.GetManyOptions{Timeout: ops[0].timeout})
		for i := range ops {
			if i < len(res) {
				ops[i].resValue, ops[i].resCas = w.h.value(kss[i], res[i].Value), res[i].Cas
			}
		}
		return w.checkBatch(bGetMany, names, len(res), func(i int) string { return res[i].Key }, func(i int) error { return res[i].Err })
	})
}

// upsertMany writes a unique value to each key in one UpsertMany.
func (w *worker) upsertMany(kss []*keyState) {
	if len(kss) == 0 {
		return
	}
	ops := make([]*opRec, len(kss))
	names := make([]string, len(kss))
	items := make([]client.UpsertManyItem, len(kss))
	for i, ks := range kss {
		op := w.newOp(ks, opUpsert)
		op.value = tag(ks, op)
		if w.rng.Intn(6) == 0 {
			op.value += ":" + strings.Repeat("z", 96) // sent snappy-compressed
		}
		ops[i], names[i] = op, ks.name
		items[i] = client.UpsertManyItem{Key: ks.name, Value: []byte(op.value)}
	}
	w.execBatch(bUpsertMany, kss, ops, func(ctx context.Context) []error {
		res := kss[0].api.UpsertMany(ctx, items, &client.UpsertManyOptions{Timeout: ops[0].timeout})
		return mutateManyErrs(w, bUpsertMany, names, ops, res)
	})
}

// removeMany removes the keys in one RemoveMany.
func (w *worker) removeMany(kss []*keyState) {
	if len(kss) == 0 {
		return
	}
	ops := make([]*opRec, len(kss))
	names := make([]string, len(kss))
	for i, ks := range kss {
		ops[i], names[i] = w.newOp(ks, opRemove), ks.name
	}
	w.execBatch(bRemoveMany, kss, ops, func(ctx context.Context) []error {
		res := kss[0].api.RemoveMany(ctx, names, &client.RemoveManyOptions{Timeout: ops[0].timeout})
		return mutateManyErrs(w, bRemoveMany, names, ops, res)
	})
}

func mutateManyErrs(w *worker, bk batchKind, names []string, ops []*opRec, res []client.MutateManyResult) []error {
	for i := range ops {
		if i < len(res) {
			ops[i].resCas = res[i].Cas
		}
	}
	return w.checkBatch(bk, names, len(res), func(i int) string { return res[i].Key }, func(i int) error { return res[i].Err })
}

// problemOp records a failed check of op; one of a batch's key is also
// counted among the batch problems.
func (h *harness) problemOp(op *opRec, category, format string, args ...any) {
	if op.batch != bNone {
		h.pmu.Lock()
		h.batchProblems[category]++
		h.pmu.Unlock()
	}
	h.problem(category, format, args...)
}
