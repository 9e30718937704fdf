package chaos

import (
	"context"
	"errors"
	"math/rand"
	"strconv"
	"strings"
	"time"

	"github.com/kvwire/kvwire/client"
)

// kvAPI is the part of *client.Collection the workers use; the detection
// test wraps it in a client that lies.
type kvAPI interface {
	Get(ctx context.Context, key string, opts *client.GetOptions) (client.GetResult, error)
	Upsert(ctx context.Context, key string, value []byte, opts *client.UpsertOptions) (client.MutationResult, error)
	Insert(ctx context.Context, key string, value []byte, opts *client.InsertOptions) (client.MutationResult, error)
	Replace(ctx context.Context, key string, value []byte, opts *client.ReplaceOptions) (client.MutationResult, error)
	Append(ctx context.Context, key string, value []byte, opts *client.AppendOptions) (client.MutationResult, error)
	Prepend(ctx context.Context, key string, value []byte, opts *client.PrependOptions) (client.MutationResult, error)
	Remove(ctx context.Context, key string, opts *client.RemoveOptions) (client.MutationResult, error)
	Increment(ctx context.Context, key string, opts *client.IncrementOptions) (client.CounterResult, error)
	Decrement(ctx context.Context, key string, opts *client.DecrementOptions) (client.CounterResult, error)
	Touch(ctx context.Context, key string, expiry time.Duration, opts *client.TouchOptions) (client.MutationResult, error)
	GetAndLock(ctx context.Context, key string, lockTime time.Duration, opts *client.GetAndLockOptions) (client.GetResult, error)
	Unlock(ctx context.Context, key string, cas uint64, opts *client.UnlockOptions) error
	GetMany(ctx context.Context, keys []string, opts *client.GetManyOptions) []client.GetManyResult
	UpsertMany(ctx context.Context, items []client.UpsertManyItem, opts *client.UpsertManyOptions) []client.MutateManyResult
	RemoveMany(ctx context.Context, keys []string, opts *client.RemoveManyOptions) []client.MutateManyResult
}

var _ kvAPI = (*client.Collection)(nil)

// stats are one worker's counts (the Observer and the checks write them on
// the worker's goroutine, or at the end after it stopped).
type stats struct {
	ops           [numOpKinds]int64
	byKind        [numOpKinds][len(outcomeNames)]int64
	timeoutUnsent int64 // unambiguous timeouts of tracked operations no request of which reached a node
	outcomes      [len(outcomeNames)]int64
	ambiguous     int64
	ambApplied    int64
	ambNotApplied int64
	lost          int64
	duplicated    int64
	resent        int64
	phantom       int64
	unwrittenSent int64
	hiddenDoubt   int64
	spurious      int64
	unexpected    int64
	late          int64
	maxOver       time.Duration // the largest wall-clock overshoot (reported, not checked)
	planned       int64         // retry records the deadline check saw
	attempts      int64
	fwdAttempts   int64
	retries       [64]int64
	overflows     int64
	// Batches: calls and keys by kind, the keys' outcomes, their ambiguous
	// mutations not applied and applied, and late batches.
	batches   [numBatchKinds]int64
	batchKeys [numBatchKinds]int64
	batchOut  [len(outcomeNames)]int64
	batchAmb  [2]int64
	lateBatch int64
	// Retries by reason and attempts routed by the forward map, of keys of
	// batches.
	batchRetries [64]int64
	batchFwd     int64
	unpaired     int64 // AttemptEnd without its AttemptStart
	// unknownApplied counts mutations with a request whose outcome is
	// unknown (memcached: its answer never reached the proxy).
	unknownApplied int64
	// Cancellation: operations (keys of batches included) under a context
	// the harness cancels, by mode; those whose context was cancelled
	// before the call returned; their outcomes; their ambiguous mutations
	// not applied and applied.
	cancels   [numCancelModes]int64
	canceled  [numCancelModes]int64
	cancelOut [len(outcomeNames)]int64
	cancelAmb [2]int64
}

func (s *stats) add(o *stats) {
	for i := range s.ops {
		s.ops[i] += o.ops[i]
	}
	for i := range s.outcomes {
		s.outcomes[i] += o.outcomes[i]
	}
	for i := range s.byKind {
		for j := range s.byKind[i] {
			s.byKind[i][j] += o.byKind[i][j]
		}
	}
	s.timeoutUnsent += o.timeoutUnsent
	for i := range s.retries {
		s.retries[i] += o.retries[i]
	}
	s.ambiguous += o.ambiguous
	s.ambApplied += o.ambApplied
	s.ambNotApplied += o.ambNotApplied
	s.lost += o.lost
	s.duplicated += o.duplicated
	s.resent += o.resent
	s.phantom += o.phantom
	s.unwrittenSent += o.unwrittenSent
	s.hiddenDoubt += o.hiddenDoubt
	s.spurious += o.spurious
	s.unexpected += o.unexpected
	s.late += o.late
	s.maxOver = max(s.maxOver, o.maxOver)
	s.planned += o.planned
	s.attempts += o.attempts
	s.fwdAttempts += o.fwdAttempts
	s.overflows += o.overflows
	for i := range s.batches {
		s.batches[i] += o.batches[i]
		s.batchKeys[i] += o.batchKeys[i]
	}
	for i := range s.batchOut {
		s.batchOut[i] += o.batchOut[i]
	}
	s.batchAmb[0] += o.batchAmb[0]
	s.batchAmb[1] += o.batchAmb[1]
	s.lateBatch += o.lateBatch
	for i := range s.batchRetries {
		s.batchRetries[i] += o.batchRetries[i]
	}
	s.batchFwd += o.batchFwd
	s.unpaired += o.unpaired
	s.unknownApplied += o.unknownApplied
	for i := range s.cancels {
		s.cancels[i] += o.cancels[i]
		s.canceled[i] += o.canceled[i]
	}
	for i := range s.cancelOut {
		s.cancelOut[i] += o.cancelOut[i]
	}
	s.cancelAmb[0] += o.cancelAmb[0]
	s.cancelAmb[1] += o.cancelAmb[1]
}

func (s *stats) total() int64 {
	var n int64
	for _, x := range s.ops {
		n += x
	}
	return n
}

// worker owns a set of keys and runs operations on them, one at a time.
type worker struct {
	h    *harness
	id   int
	rng  *rand.Rand
	keys []*keyState
	st   stats
}

// timeouts are the per-operation timeouts: short, so that slow answers and
// stopped nodes end operations by timeout, ambiguous or not.
var timeouts = [...]time.Duration{500 * time.Millisecond, 750 * time.Millisecond, time.Second}

const (
	lockTime      = time.Second // GetAndLock: the shortest the protocol allows
	lockedTimeout = 300 * time.Millisecond
	maxDocLen     = 2048 // Append becomes Upsert past this
)

func (w *worker) loop(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		if w.rng.Intn(100) < w.h.batchShare {
			for _, ks := range w.batchOp() {
				w.h.settleQueue(ks, false)
			}
			continue
		}
		ks := w.keys[w.rng.Intn(len(w.keys))]
		if ks.ctr {
			w.counterOp(ks)
		} else {
			w.docOp(ks)
		}
		w.h.settleQueue(ks, false)
	}
}

// defaultBatchShare is the percentage of a worker's steps that are batch
// calls (of 1 to 4 keys: about a third of the keys operated on).
const defaultBatchShare = 15

func (w *worker) newOp(ks *keyState, k opKind) *opRec {
	ks.seq++
	return &opRec{kind: k, seq: ks.seq, timeout: timeouts[w.rng.Intn(len(timeouts))]}
}

// tag is a value no other operation of the run writes.
func tag(ks *keyState, op *opRec) string {
	return ks.name + "#" + strconv.FormatUint(op.seq, 10)
}

func (w *worker) docOp(ks *keyState) {
	r := w.rng.Intn(100)
	switch {
	case r < 20:
		w.get(ks)
	case r < 34:
		w.store(ks, opUpsert, false)
	case r < 41:
		w.store(ks, opInsert, false)
	case r < 49:
		w.store(ks, opReplace, false)
	case r < 57:
		w.store(ks, opReplace, true)
	case r < 62:
		w.remove(ks, false)
	case r < 67:
		w.remove(ks, true)
	case r < 76:
		w.concat(ks, opAppend, false)
	case r < 79:
		w.concat(ks, opAppend, true)
	case r < 83:
		w.concat(ks, opPrepend, false)
	case r < 89:
		w.store(ks, opUpsert, true)
	case r < 95:
		w.touch(ks)
	case w.h.memcached:
		w.get(ks) // memcached has no locks
	default:
		w.lockSequence(ks)
	}
}

func (w *worker) counterOp(ks *keyState) {
	r := w.rng.Intn(100)
	switch {
	case r < 60:
		w.counter(ks, opIncr)
	case r < 75:
		w.counter(ks, opDecr)
	case r < 90:
		w.get(ks)
	default:
		w.remove(ks, false)
	}
}

// casFor returns a CAS for a conditional write: the one the model knows
// (reading first when it does not), now and then a wrong one.
func (w *worker) casFor(ks *keyState) uint64 {
	cas, ok := ks.model.knownCas()
	if !ok {
		w.get(ks)
		cas, ok = ks.model.knownCas()
	}
	if !ok || w.rng.Intn(10) == 0 {
		return 0x5eed // not a CAS the mock hands out (they are clock-based)
	}
	return cas
}

// exec runs one operation: registers it where the hook and the Observer
// find it, calls the client, and applies the outcome to the model.
func (w *worker) exec(ks *keyState, op *opRec, call func(ctx context.Context) error) {
	op.plan = &retryPlan{timeout: op.timeout}
	op.cc = w.drawCancel(op.timeout)
	ctx := op.cc.arm(withOp(context.Background(), op))
	w.register(ks, op)
	op.start = time.Now()
	op.plan.start = op.start
	op.cc.start()
	err := call(ctx)
	op.cc.done(ctx)
	op.end = time.Now()
	if w.conclude(ks, op, err) {
		w.get(ks) // what an application would do: find out
	}
}

// register makes op the key's running operation, where the hook and the
// Observer find it.
func (w *worker) register(ks *keyState, op *opRec) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.cur = op
	switch op.kind {
	case opIncr, opDecr:
		ks.byDelta[op.delta] = op
	default:
		if op.value != "" {
			ks.byValue[op.value] = op
		}
	}
}

// conclude takes the outcome of op, which has ended with err: counts it,
// checks it against the model and queues it for verification. It reports
// whether the key should be read to find out what an ambiguous outcome
// did.
func (w *worker) conclude(ks *keyState, op *opRec, err error) bool {
	ks.mu.Lock()
	ks.cur = nil
	ks.lastOf[op.kind] = op
	inDoubt := op.inDoubt
	if op.hold != nil {
		close(op.hold) // the answers held until it returned
	}
	ks.mu.Unlock()

	w.st.ops[op.kind]++
	w.h.opsDone.Add(1)
	op.err = err
	op.outcome = classify(err)
	w.st.outcomes[op.outcome]++
	w.h.outcomes[op.outcome].Add(1)
	w.st.byKind[op.kind][op.outcome]++
	if op.batch != bNone {
		w.st.batchOut[op.outcome]++
		if op.outcome == outAmbiguous {
			w.h.batchAmbiguous.Add(1)
		}
	}
	if op.kind.counted() {
		switch op.outcome {
		case outSuccess:
			ks.nSucc++
		case outAmbiguous:
			ks.nAmb++
		}
	}
	if err != nil && !expectedErr(err) && !(w.h.memcached && errors.Is(err, client.ErrNoNodeAvailable)) {
		w.st.unexpected++
		w.h.problemOp(op, "unexpected-error", "key %s: %s", ks.name, ks.describe(op))
	}
	if op.cc != nil {
		w.st.cancels[op.cc.mode]++
		if op.cc.canceled {
			w.st.canceled[op.cc.mode]++
			w.st.cancelOut[op.outcome]++
			switch op.outcome {
			case outCanceled:
				w.h.cancelClean.Add(1)
			case outAmbiguous:
				w.h.cancelAmbiguous.Add(1)
			}
		}
	}
	if errors.Is(err, client.ErrRequestCanceled) && (op.cc == nil || !op.cc.canceled) {
		w.st.unexpected++
		w.h.problemOp(op, "unexpected-error", "key %s: cancelled, but nobody cancelled its context: %s", ks.name, ks.describe(op))
	}
	if op.outcome == outAmbiguous && op.kind.idempotent() {
		w.h.problemOp(op, "ambiguous-read", "key %s: a read reported ambiguous: %s", ks.name, ks.describe(op))
	}
	w.settlePending(ks, op)
	var bad string
	switch op.outcome {
	case outSuccess:
		bad = ks.model.succeeded(op)
	case outAmbiguous:
		if w.h.pooled && inDoubt {
			// Written, unanswered: the read-back (another connection
			// of the node) may overtake it.
			ks.model.inDoubt(op)
		} else {
			ks.model.ambiguous(op)
		}
		if ks.model.overflow {
			w.st.overflows++
		}
	default:
		bad = ks.model.failed(op, err)
	}
	if bad != "" {
		what := "inconsistent"
		if op.outcome == outSuccess && (op.kind == opGet || op.kind == opLock) {
			what = "lost" // a read showed a state no acknowledged write leaves
			w.st.lost++
		}
		w.h.problemOp(op, what, "key %s: %s; before it the document was one of %s; recent operations:%s\n    %s",
			ks.name, bad, ks.model.describe(), ks.history(), ks.describe(op))
		// Start over from what the next read or overwrite says, rather
		// than report the same divergence at every later operation.
		ks.model.overflow, ks.model.states = true, nil
	}
	ks.queue = append(ks.queue, op)
	if w.h.memcached && errors.Is(err, client.ErrNoNodeAvailable) {
		// A memcached server that refuses connections fails its keys at
		// once (restart): back off as an application would, rather than
		// run thousands of operations a second that fail unsent.
		time.Sleep(5 * time.Millisecond)
	}
	return op.outcome == outAmbiguous && op.kind != opUnlock
}

// settlePending settles the model's pending writes that cannot apply after
// obs, the operation being concluded: those whose every request reached
// the node and was counted (a later request of the key saw the count), and
// those that ended settleAge before obs started (no request of theirs can
// arrive after that).
func (w *worker) settlePending(ks *keyState, obs *opRec) {
	if len(ks.model.pending) == 0 {
		return
	}
	cutoff := obs.start.Add(-settleAge)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.model.settle(func(op *opRec) bool {
		if op.end.Before(cutoff) {
			return true
		}
		sent := 0
		for _, a := range op.attempts {
			if a.end == endAnswered || a.end == endWritten {
				sent++
			}
		}
		if len(op.receipts) < sent {
			return false
		}
		for _, r := range op.receipts {
			if !r.known {
				return false
			}
		}
		return true
	})
}

func (w *worker) get(ks *keyState) {
	op := w.newOp(ks, opGet)
	w.exec(ks, op, func(ctx context.Context) error {
		r, err := ks.api.Get(ctx, ks.name, &client.GetOptions{Timeout: op.timeout})
		op.resValue, op.resCas = w.h.value(ks, r.Value), r.Cas
		return err
	})
}

func (w *worker) store(ks *keyState, k opKind, withCas bool) {
	if withCas {
		cas := w.casFor(ks)
		op := w.newOp(ks, k)
		op.cas = cas
		w.doStore(ks, op)
		return
	}
	w.doStore(ks, w.newOp(ks, k))
}

func (w *worker) doStore(ks *keyState, op *opRec) {
	op.value = tag(ks, op)
	if op.kind == opUpsert && w.rng.Intn(6) == 0 {
		// Long and repetitive: sent snappy-compressed.
		op.value += ":" + strings.Repeat("z", 96)
	}
	w.exec(ks, op, func(ctx context.Context) error {
		var r client.MutationResult
		var err error
		switch op.kind {
		case opInsert:
			r, err = ks.api.Insert(ctx, ks.name, []byte(op.value), &client.InsertOptions{Timeout: op.timeout})
		case opReplace:
			r, err = ks.api.Replace(ctx, ks.name, []byte(op.value), &client.ReplaceOptions{Timeout: op.timeout, Cas: op.cas})
		default:
			r, err = ks.api.Upsert(ctx, ks.name, []byte(op.value), &client.UpsertOptions{Timeout: op.timeout, Cas: op.cas})
		}
		op.resCas = r.Cas
		return err
	})
}

func (w *worker) remove(ks *keyState, withCas bool) {
	var cas uint64
	if withCas {
		cas = w.casFor(ks)
	}
	op := w.newOp(ks, opRemove)
	op.cas = cas
	w.exec(ks, op, func(ctx context.Context) error {
		r, err := ks.api.Remove(ctx, ks.name, &client.RemoveOptions{Timeout: op.timeout, Cas: op.cas})
		op.resCas = r.Cas
		return err
	})
}

func (w *worker) concat(ks *keyState, k opKind, withCas bool) {
	if ks.model.length() > maxDocLen {
		w.store(ks, opUpsert, false)
		return
	}
	var cas uint64
	if withCas {
		cas = w.casFor(ks)
	}
	op := w.newOp(ks, k)
	op.cas = cas
	op.value = "|" + tag(ks, op)
	w.exec(ks, op, func(ctx context.Context) error {
		var r client.MutationResult
		var err error
		if k == opPrepend {
			r, err = ks.api.Prepend(ctx, ks.name, []byte(op.value), &client.PrependOptions{Timeout: op.timeout, Cas: op.cas})
		} else {
			r, err = ks.api.Append(ctx, ks.name, []byte(op.value), &client.AppendOptions{Timeout: op.timeout, Cas: op.cas})
		}
		op.resCas = r.Cas
		return err
	})
}

func (w *worker) counter(ks *keyState, k opKind) {
	op := w.newOp(ks, k)
	op.delta = op.seq // unique per key: the hook tells the requests apart by it
	op.initial = 1000 + op.seq
	w.exec(ks, op, func(ctx context.Context) error {
		init := op.initial
		var r client.CounterResult
		var err error
		if k == opDecr {
			r, err = ks.api.Decrement(ctx, ks.name, &client.DecrementOptions{Timeout: op.timeout, Delta: op.delta, Initial: &init})
		} else {
			r, err = ks.api.Increment(ctx, ks.name, &client.IncrementOptions{Timeout: op.timeout, Delta: op.delta, Initial: &init})
		}
		op.resCas, op.resCount = r.Cas, r.Value
		return err
	})
}

func (w *worker) touch(ks *keyState) {
	op := w.newOp(ks, opTouch)
	w.exec(ks, op, func(ctx context.Context) error {
		r, err := ks.api.Touch(ctx, ks.name, time.Hour, &client.TouchOptions{Timeout: op.timeout})
		op.resCas = r.Cas
		return err
	})
}

// lockSequence takes a real lock and, while holding it, may try a write
// without its CAS (LOCKED, retried until the short timeout: never
// applied), then releases it with Unlock or with a write carrying its CAS.
func (w *worker) lockSequence(ks *keyState) {
	lk := w.newOp(ks, opLock)
	w.exec(ks, lk, func(ctx context.Context) error {
		r, err := ks.api.GetAndLock(ctx, ks.name, lockTime, &client.GetAndLockOptions{Timeout: lk.timeout})
		lk.resValue, lk.resCas = string(r.Value), r.Cas
		return err
	})
	if lk.outcome != outSuccess {
		return
	}
	if w.rng.Intn(3) == 0 {
		op := w.newOp(ks, opUpsert)
		op.timeout = lockedTimeout
		w.doStore(ks, op)
	}
	switch w.rng.Intn(5) {
	case 0, 1:
		op := w.newOp(ks, opUnlock)
		op.cas = lk.resCas
		w.exec(ks, op, func(ctx context.Context) error {
			return ks.api.Unlock(ctx, ks.name, op.cas, &client.UnlockOptions{Timeout: op.timeout})
		})
	case 2, 3:
		op := w.newOp(ks, opReplace)
		op.cas = lk.resCas
		w.doStore(ks, op)
	default:
		op := w.newOp(ks, opRemove)
		op.cas = lk.resCas
		w.exec(ks, op, func(ctx context.Context) error {
			r, err := ks.api.Remove(ctx, ks.name, &client.RemoveOptions{Timeout: op.timeout, Cas: op.cas})
			op.resCas = r.Cas
			return err
		})
	}
}

// clientConfigs are the client configurations TestChaos can run, each a
// change to the default options (KVTimeout 1 s and the Observer are always
// set).
var clientConfigs = map[string]func(o *client.Options){
	// default: client.DefaultRetryStrategy, one connection per node.
	"default": func(*client.Options) {},
	// besteffort: client.BestEffort, which also waits out refused logins.
	"besteffort": func(o *client.Options) { o.RetryStrategy = client.BestEffort(nil) },
	// pool: three connections per node (round robin) and RFC 0005's fixed
	// 100 ms NOT_MY_VBUCKET wait.
	"pool": func(o *client.Options) {
		o.ConnectionsPerNode = 3
		o.NMVRetryInterval = 100 * time.Millisecond
	},
	// memcached: memcached:// to two memcached servers behind fault
	// proxies (memcached_test.go), GetMany by groups.
	"memcached": func(*client.Options) {},
	// http: bootstrap_on=http, the configs fetched and streamed through
	// fault proxies in front of the nodes' REST ports (http_test.go).
	"http": func(*client.Options) {},
}
