package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// outcome classifies what the client reported for an operation.
type outcome uint8

const (
	outSuccess   outcome = iota
	outDefinite          // the server answered a final status: not applied
	outTimeout           // an unambiguous timeout: not applied
	outNotSent           // failed before any request could apply: not applied
	outAmbiguous         // may have been applied
	outCanceled          // the caller's context was cancelled, no attempt in doubt: not applied
	numOutcomes
)

var outcomeNames = [...]string{"success", "definite failure", "unambiguous timeout", "failed before sending", "ambiguous", "canceled"}

func (o outcome) String() string { return outcomeNames[o] }

func classify(err error) outcome {
	if err == nil {
		return outSuccess
	}
	if errors.Is(err, client.ErrAmbiguous) {
		return outAmbiguous
	}
	if errors.Is(err, client.ErrRequestCanceled) {
		return outCanceled
	}
	if errors.Is(err, client.ErrTimeout) {
		return outTimeout
	}
	var kv *client.KeyValueError
	if errors.As(err, &kv) && kv.Status != 0 {
		return outDefinite
	}
	return outNotSent
}

// expectedErr reports whether err is one the chaos can legitimately cause.
// Anything else (an invalid argument, a counter that is not a number, a
// closed client...) is a failure of the test. (ErrRequestCanceled is
// expected only of an operation the harness cancelled: conclude checks.)
func expectedErr(err error) bool {
	var kv *client.KeyValueError
	if !errors.As(err, &kv) {
		return false
	}
	switch {
	case errors.Is(err, client.ErrTimeout), errors.Is(err, client.ErrAmbiguous),
		errors.Is(err, client.ErrDocumentNotFound), errors.Is(err, client.ErrDocumentExists),
		errors.Is(err, client.ErrCasMismatch), errors.Is(err, client.ErrDocumentLocked),
		errors.Is(err, client.ErrDocumentNotLocked), errors.Is(err, client.ErrTemporaryFailure),
		errors.Is(err, client.ErrRequestCanceled):
		return true
	case errors.Is(err, client.ErrServerFailure):
		return kv.Status == client.Status(mockcluster.StatusTestNoRetry) // injected: a status not retried
	}
	return false
}

// actKind is what the hook did to a request.
type actKind uint8

const (
	actNone        actKind = iota // the node handled it
	actStatus                     // answered a status without running it
	actCloseBefore                // closed the connection instead of running it
	actCloseAfter                 // ran it, dropped the answer and closed
	actDelay                      // ran it, answer held back
)

var actNames = [...]string{"none", "status", "close-before-apply", "close-after-apply", "delay"}

// receipt is one request of an operation as the hook saw it.
type receipt struct {
	node    int
	act     actKind
	status  memdx.Status // actStatus: the status answered
	delay   time.Duration
	applied int  // mutations the mock applied for it (MutationCount delta)
	known   bool // applied is known (a later request of the key, or the end, came)
	stale   bool // attributed by kind, not by value (the key's operation had moved on)
	held    bool // actDelay: held until its operation had returned (hookFault.hold)
	// answered: (memcached) the proxy relayed the server's answer to the
	// client.
	answered bool
}

// attempt is one attempt of an operation as the client's Observer saw it.
type attempt struct {
	id     uint64 // the Observer's OperationID and Attempt
	n      int
	start  time.Duration // after the operation started
	took   time.Duration
	node   string
	retry  bool
	reason client.RetryReason
	fwd    bool
	// end: 0 still running, 1 answered (status), 2 written without an
	// answer, 3 not written, 4 other error.
	end    uint8
	status client.Status
}

const (
	endRunning uint8 = iota
	endAnswered
	endWritten
	endNotWritten
	endOther
)

// opRec is one operation of a worker: what was asked, what the client said,
// and (under the key's mu) what the Observer and the hook saw.
type opRec struct {
	kind     opKind
	seq      uint64
	value    string // Upsert/Insert/Replace: the value; Append/Prepend: the piece
	cas      uint64 // CAS given (Unlock: the lock's)
	delta    uint64
	initial  uint64
	timeout  time.Duration
	start    time.Time
	end      time.Time
	outcome  outcome
	err      error
	resCas   uint64
	resValue string
	resCount uint64

	// Guarded by the key's mu.
	attempts  []attempt
	receipts  []receipt
	applied   int
	inDoubt   bool // an attempt ended written without an answer
	retriedIn bool // an attempt started after that
	// sentUnanswered: (memcached) a request of it reached a proxy while
	// an earlier one had reached it and its answer had not been relayed:
	// sent again without an answer (the proxies' view of retriedIn).
	sentUnanswered bool

	// The retry plan (timing_test.go), on the operation's goroutine only:
	// the operation's own, or its batch's.
	plan *retryPlan
	// batch is the batch call the operation is one key of (bNone: a
	// single operation).
	batch batchKind
	// cc cancels the operation's context (nil: nobody does); a batch's
	// keys share their call's.
	cc *canceller
	// hold, under the key's mu, releases the answers the hook holds
	// until the operation has returned (nil: none held); conclude closes
	// it.
	hold chan struct{}
}

// holdUntilReturned returns the channel that releases the answers held
// until op has returned. mu is held and op is the key's running operation.
func (op *opRec) holdUntilReturned() <-chan struct{} {
	if op.hold == nil {
		op.hold = make(chan struct{})
	}
	return op.hold
}

func (op *opRec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s", op.seq, op.kind)
	if op.batch != bNone {
		fmt.Fprintf(&b, " (a key of %s)", op.plan.batch)
	}
	if op.value != "" {
		fmt.Fprintf(&b, " value=%q", op.value)
	}
	if op.cas != 0 {
		fmt.Fprintf(&b, " cas=%#x", op.cas)
	}
	if op.kind == opIncr || op.kind == opDecr {
		fmt.Fprintf(&b, " delta=%d initial=%d", op.delta, op.initial)
	}
	fmt.Fprintf(&b, " timeout=%v took=%v: %s", op.timeout, op.end.Sub(op.start).Round(time.Millisecond), op.outcome)
	switch {
	case op.err != nil:
		fmt.Fprintf(&b, " (%v)", op.err)
	case op.kind == opGet || op.kind == opLock:
		fmt.Fprintf(&b, " (value=%q cas=%#x)", op.resValue, op.resCas)
	case op.kind == opIncr || op.kind == opDecr:
		fmt.Fprintf(&b, " (value=%d cas=%#x)", op.resCount, op.resCas)
	default:
		fmt.Fprintf(&b, " (cas=%#x)", op.resCas)
	}
	for i, a := range op.attempts {
		fmt.Fprintf(&b, "\n      attempt %d at +%v for %v node=%s", i, a.start.Round(time.Millisecond), a.took.Round(time.Millisecond), a.node)
		if a.retry {
			fmt.Fprintf(&b, " retry(%s)", a.reason)
		}
		if a.fwd {
			b.WriteString(" fwd-map")
		}
		switch a.end {
		case endAnswered:
			fmt.Fprintf(&b, " answered %s", a.status)
		case endWritten:
			b.WriteString(" written, no answer")
		case endNotWritten:
			b.WriteString(" not written")
		case endOther:
			b.WriteString(" other error")
		}
	}
	for i, r := range op.receipts {
		fmt.Fprintf(&b, "\n      request %d reached node %d: hook %s", i, r.node, actNames[r.act])
		if r.act == actStatus {
			fmt.Fprintf(&b, " %s", r.status)
		}
		if r.act == actDelay && r.held {
			b.WriteString(" (held until the operation returned)")
		} else if r.act == actDelay {
			fmt.Fprintf(&b, " %v", r.delay)
		}
		if r.known {
			fmt.Fprintf(&b, ", applied %d", r.applied)
		} else {
			b.WriteString(", applied ?")
		}
		if r.stale {
			b.WriteString(" (attributed by kind)")
		}
	}
	return b.String()
}

// keyState is one document key: owned by one worker, seen by the hook and
// the Observer.
type keyState struct {
	name  string
	scope string
	coll  string
	cid   uint32
	ctr   bool // a counter key
	owner *worker
	api   kvAPI
	gets  kvAPI // for GetMany: api, or (memcached) a client without an Observer

	// Owner only.
	model model
	seq   uint64
	// Counted mutations the client reported successful and ambiguous: the
	// key's MutationCount must end between nSucc and nSucc+nAmb.
	nSucc, nAmb uint64
	queue       []*opRec // finished operations not verified yet, oldest first

	mu      sync.Mutex
	cur     *opRec // the operation running now
	byValue map[string]*opRec
	byDelta map[uint64]*opRec
	lastOf  [numOpKinds]*opRec
	// The last tracked request: its operation and receipt index, and the
	// key's mutation count when the hook saw it.
	lastOp  *opRec
	lastIdx int
	lastMC  uint64
	hasLast bool
	// The document as the applied requests leave it, replayed in the order
	// the hook saw them.
	replay docState
}

// settle accounts the mutation count seen now (at the key's next tracked
// request, or at the end) to the previous request. mu is held.
func (ks *keyState) settle(h *harness, mc uint64) {
	if !ks.hasLast {
		if mc != 0 {
			h.problem("attribution", "key %s: %d mutations before any request was seen", ks.name, mc)
		}
		return
	}
	d := int(mc - ks.lastMC)
	op := ks.lastOp
	if op == nil {
		if d != 0 {
			h.problem("attribution", "key %s: a request no operation claims was applied %d times", ks.name, d)
		}
		return
	}
	r := &op.receipts[ks.lastIdx]
	r.applied, r.known = d, true
	op.applied += d
	if op.kind.counted() {
		switch {
		case r.act == actCloseAfter && d > 0:
			h.doubtApplied.Add(1)
		case r.act == actCloseBefore:
			h.doubtNotApplied.Add(1)
		}
	}
	for i := 0; i < d; i++ {
		ks.replay = op.next(ks.replay)
	}
}

// hook is the cluster's only Control: it injects the per-request faults and
// records every tracked request of a chaos key. It runs on the node's
// connection goroutine under the mock's fault lock, so calls are totally
// ordered, and the node applies the request before the next call for the
// same document, even one for a request on another connection (pooled): the
// count a call reads includes every request for the key seen before and
// nothing of this one.
func (h *harness) hook(r *mockcluster.Request) (mockcluster.Action, bool) {
	ks := h.keys[string(r.Key)]
	if ks == nil || r.CollectionID != ks.cid {
		return mockcluster.Action{}, false
	}
	act, kind, hit, hold := h.faults.decideHold(r)
	if hit {
		h.faults.count(kind)
	}
	k, tracked := kindOf(r.OpCode)
	if !tracked {
		// A read: the key's running operation, if it is one.
		ks.mu.Lock()
		if op := ks.cur; op != nil && op.kind == opGet {
			op.cc.arrived()
			if hold {
				act.Hold = op.holdUntilReturned()
				h.heldAnswers.Add(1)
			}
		}
		ks.mu.Unlock()
		return act, hit
	}
	rc := receipt{node: r.Node}
	switch {
	case !hit:
	case act.Close == mockcluster.CloseBeforeApply:
		rc.act = actCloseBefore
	case act.Close == mockcluster.CloseAfterApply:
		rc.act = actCloseAfter
	case act.Status != memdx.StatusSuccess:
		rc.act, rc.status = actStatus, act.Status
	case act.Delay > 0:
		rc.act, rc.delay = actDelay, act.Delay
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	// The node has not run this request yet: the count now includes
	// everything before it and nothing of it.
	mc := h.bucket.MutationCount(ks.scope, ks.coll, ks.name)
	ks.settle(h, mc)
	op, stale := h.attribute(ks, k, r.Packet, r.Node)
	rc.stale = stale
	if op == nil {
		ks.lastOp, ks.hasLast, ks.lastMC = nil, true, mc
		return act, hit
	}
	if hold && op == ks.cur {
		// Answered once the operation has returned: a client that
		// waits for it past its deadline hangs the run.
		act.Hold, rc.held = op.holdUntilReturned(), true
		h.heldAnswers.Add(1)
	}
	op.receipts = append(op.receipts, rc)
	ks.lastOp, ks.lastIdx, ks.lastMC, ks.hasLast = op, len(op.receipts)-1, mc, true
	op.cc.arrived()
	return act, hit
}

// attribute finds the operation a tracked request of kind k for ks
// belongs to (stale: by kind, the key's operation had moved on), or
// records an attribution problem and returns nil. mu is held.
func (h *harness) attribute(ks *keyState, k opKind, pkt *memdx.Packet, node int) (op *opRec, stale bool) {
	switch k {
	case opUpsert, opInsert, opReplace, opAppend, opPrepend:
		v := pkt.Value
		if pkt.Datatype&memdx.DatatypeSnappy != 0 {
			dv, err := memdx.DecompressSnappy(nil, v, 0)
			if err != nil {
				h.problem("attribution", "key %s: %s with a snappy value that does not inflate: %v", ks.name, pkt.OpCode, err)
			}
			v = dv
		}
		op = ks.byValue[string(v)]
	case opIncr, opDecr:
		if len(pkt.Extras) == 20 {
			op = ks.byDelta[getUint64(pkt.Extras)]
		}
	default:
		// DELETE, TOUCH, GET_LOCKED and UNLOCK carry nothing unique: the
		// key's running operation of that kind, else its last one.
		if ks.cur != nil && ks.cur.kind == k {
			op = ks.cur
		} else if op = ks.lastOf[k]; op != nil {
			stale = true
		}
	}
	if op != nil && op.kind != k {
		h.problem("attribution", "key %s: a %s request carries the value of %s", ks.name, pkt.OpCode, op)
		op = nil
	}
	if op == nil {
		h.problem("attribution", "key %s: a %s request (node %d) that no operation of the run sent", ks.name, pkt.OpCode, node)
	}
	return op, stale
}

// byKind reports whether a request of kind k is attributed to its
// operation by kind (it carries no value or delta naming it).
func byKind(k opKind) bool {
	switch k {
	case opUpsert, opInsert, opReplace, opAppend, opPrepend, opIncr, opDecr:
		return false
	}
	return true
}

func getUint64(b []byte) uint64 {
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// AttemptStart implements client.Observer. It runs on the operation's
// goroutine, which is the key's owner.
func (h *harness) AttemptStart(info client.AttemptInfo) {
	ks := h.keys[info.Key]
	if ks == nil {
		return
	}
	st := &ks.owner.st
	st.attempts++
	if info.Retry {
		st.retries[info.RetryReason]++
		h.retried[info.RetryReason].Add(1)
	}
	if info.ForwardMap {
		st.fwdAttempts++
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	op := ks.cur
	if op == nil {
		return
	}
	if op.batch != bNone {
		if info.Retry {
			st.batchRetries[info.RetryReason]++
			h.batchRetried.Add(1)
		}
		if info.ForwardMap {
			st.batchFwd++
		}
	}
	if op.inDoubt && !op.kind.idempotent() {
		op.retriedIn = true
	}
	op.plan.planEvent(info.Start)
	op.attempts = append(op.attempts, attempt{id: info.OperationID, n: info.Attempt, start: info.Start.Sub(op.start), node: info.Node,
		retry: info.Retry, reason: info.RetryReason, fwd: info.ForwardMap})
}

// AttemptEnd implements client.Observer.
func (h *harness) AttemptEnd(info client.AttemptInfo, err error) {
	ks := h.keys[info.Key]
	if ks == nil {
		return
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	op := ks.cur
	if op == nil {
		return
	}
	// The attempt this ends: the latest one started with its operation id
	// and number and not ended yet (a GetMany reading a key twice runs two
	// operations on it at once).
	var a *attempt
	for i := len(op.attempts) - 1; i >= 0; i-- {
		if x := &op.attempts[i]; x.id == info.OperationID && x.n == info.Attempt && x.end == endRunning {
			a = x
			break
		}
	}
	if a == nil {
		ks.owner.st.unpaired++
		h.problemOp(op, "observer", "key %s: AttemptEnd of operation %d attempt %d (%v, status %s) without its AttemptStart: %s",
			ks.name, info.OperationID, info.Attempt, err, info.Status, op)
		return
	}
	op.plan.planEvent(info.Start.Add(info.Duration))
	a.took = info.Duration
	var re *conn.RequestError
	switch {
	case err == nil:
		a.end, a.status = endAnswered, info.Status
	case errors.As(err, &re) && re.Written:
		a.end = endWritten
		op.inDoubt = true
		if op.kind.counted() && errors.Is(re.Err, context.DeadlineExceeded) {
			h.expiredWrites.Add(1)
		}
	case errors.As(err, &re):
		a.end = endNotWritten
	default:
		a.end = endOther
	}
}

// verify checks one finished operation whose requests all have known
// outcomes. mu is held.
func (h *harness) verify(ks *keyState, op *opRec) {
	st := &ks.owner.st
	known := true
	for _, r := range op.receipts {
		known = known && r.known
	}
	if op.kind.counted() && !known {
		// A request whose outcome nobody saw (memcached behind the proxy:
		// its connection ended before the answer): the model's checks
		// stand, the count's cannot be made.
		st.unknownApplied++
	} else if op.kind.counted() {
		switch op.outcome {
		case outSuccess:
			if op.applied == 0 {
				st.lost++
				h.problemOp(op, "lost", "key %s: acknowledged, never applied: %s", ks.name, op)
			}
		case outAmbiguous:
			if op.applied == 0 {
				st.ambNotApplied++
			} else {
				st.ambApplied++
			}
			if op.batch != bNone {
				st.batchAmb[min(op.applied, 1)]++
			}
			if op.cc != nil && op.cc.canceled {
				st.cancelAmb[min(op.applied, 1)]++
			}
		default:
			if op.applied > 0 {
				st.phantom++
				h.problemOp(op, "applied-after-failure", "key %s: reported %s (not applied) but applied %d times: %s", ks.name, op.outcome, op.applied, op)
			}
		}
		if op.applied > 1 {
			st.duplicated++
			h.problemOp(op, "duplicated", "key %s: applied %d times: %s", ks.name, op.applied, op)
		}
	} else if op.applied != 0 {
		h.problemOp(op, "attribution", "key %s: %d mutations counted for an operation that does not count: %s", ks.name, op.applied, op)
	}
	if op.outcome == outAmbiguous {
		st.ambiguous++
	}
	if op.outcome == outTimeout && len(op.receipts) == 0 && !op.kind.idempotent() {
		st.timeoutUnsent++
	}

	var answered, written int
	for _, a := range op.attempts {
		switch a.end {
		case endAnswered:
			answered++
		case endWritten:
			written++
		}
	}
	exact := true
	for _, r := range op.receipts {
		if r.stale {
			exact = false
		}
	}
	if h.memcached {
		// No Observer (see memcached_test.go): no attempts to compare.
	} else if n := len(op.receipts); n > answered+written {
		st.unwrittenSent++
		h.problemOp(op, "not-written-reached", "key %s: %d requests reached a node but only %d attempts were answered or written: %s", ks.name, n, answered+written, op)
	} else if exact && n < answered && op.kind != opGet {
		h.problemOp(op, "attribution", "key %s: %d attempts answered but the hook saw %d requests: %s", ks.name, answered, n, op)
	}
	// Sent again after a request that got no definite "not applied"?
	resent := op.retriedIn || op.sentUnanswered
	for i := 0; i+1 < len(op.receipts); i++ {
		r := op.receipts[i]
		if r.act == actCloseBefore || r.act == actCloseAfter || r.applied > 0 {
			resent = true
		}
	}
	if resent && !op.kind.idempotent() {
		st.resent++
		h.problemOp(op, "resent", "key %s: a non-idempotent request sent again after an attempt without a definite not-applied answer: %s", ks.name, op)
	}
	if h.memcached && op.kind.counted() {
		// The proxy's view of doubt: a request that reached it and whose
		// answer it never relayed was written and left unanswered.
		for _, r := range op.receipts {
			if r.act != actCloseBefore && !r.answered {
				op.inDoubt = true
			}
		}
	}
	if op.inDoubt && op.outcome != outAmbiguous && op.outcome != outSuccess && !op.kind.idempotent() {
		st.hiddenDoubt++
		h.problemOp(op, "unreported-ambiguity", "key %s: an attempt was written and never answered, yet the error is not ambiguous: %s", ks.name, op)
	}
	if op.outcome == outAmbiguous && !op.inDoubt {
		st.spurious++
	}
}

// settleQueue verifies the key's finished operations that are old enough
// that no request of theirs can still arrive, and whose last request's
// outcome is known. final verifies everything (the run is over and the
// mock has read every request). Owner only.
func (h *harness) settleQueue(ks *keyState, final bool) {
	cutoff := time.Now().Add(-settleAge)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	n := 0
	for _, op := range ks.queue {
		if !final && (op.end.After(cutoff) || (ks.hasLast && ks.lastOp == op)) {
			break
		}
		h.verify(ks, op)
		checkDeadline(h, ks, op)
		switch op.kind {
		case opIncr, opDecr:
			delete(ks.byDelta, op.delta)
		default:
			if op.value != "" {
				delete(ks.byValue, op.value)
			}
		}
		if ks.lastOf[op.kind] == op {
			ks.lastOf[op.kind] = nil
		}
		n++
	}
	clear(ks.queue[:n])
	ks.queue = ks.queue[n:]
	if len(ks.queue) == 0 {
		ks.queue = nil
	}
}

// settleAge is how long after an operation ended a request of it could
// still reach a node: far more than the longest fault delay and timeout.
//
// It is a wall-clock margin, and it stays because the event it stands for
// is not observable: an attempt the Observer saw end written and
// unanswered may have left its request in a socket the mock has not read
// yet, or in one that closed before it was read (never to arrive), and
// neither the Observer (no connection, no byte position) nor the mock
// (which knows its connections' reads, not the client's writes) can tell
// which. What bounds the wait in the mock: it reads each connection
// promptly (unordered execution), except while a barrier (a NOOP probe)
// waits for the answers held before it, each held at most for a slow
// fault's delay (1.5 s) or until its operation returns (its 1 s timeout).
// Past settleAge, an operation is verified, and its pending write (model)
// settled, as if no request of it could still come; a request that came
// later would be reported (attribution, or a read the model does not
// allow): a failure on a machine that stalled the mock's reads for seconds,
// never a bug missed. Operations whose requests all arrived are verified
// at settleAge too, for simplicity (settlePending settles them sooner).
const settleAge = 5 * time.Second

// finish is the end of the run for a key: the mock has handled every
// request it will ever see. It settles the last request, verifies every
// operation and compares the stored document with the model and the replay.
func (h *harness) finish(ks *keyState) {
	doc, exists := h.bucket.Get(ks.scope, ks.coll, ks.name)
	ks.mu.Lock()
	mc := h.bucket.MutationCount(ks.scope, ks.coll, ks.name)
	ks.settle(h, mc)
	ks.hasLast, ks.lastOp = false, nil
	rep := ks.replay
	ks.mu.Unlock()
	hist := ks.history()
	h.settleQueue(ks, true)
	st := &ks.owner.st
	value := string(doc.Value)
	if !ks.model.allows(exists, value, doc.Cas) {
		st.lost++
		h.problem("lost", "key %s: stored document (exists=%v value=%q cas=%#x) is not a state the client's results allow %s; recent operations:%s",
			ks.name, exists, value, doc.Cas, ks.model.describe(), hist)
	}
	if mc < ks.nSucc || mc > ks.nSucc+ks.nAmb {
		h.problem("count", "key %s: %d mutations applied, but the client reported %d successful and %d ambiguous; recent operations:%s",
			ks.name, mc, ks.nSucc, ks.nAmb, hist)
	}
	if rep.exists != exists || rep.value != value {
		h.problem("attribution", "key %s: stored document (exists=%v value=%q) differs from the applied requests replayed (exists=%v value=%q); recent operations:%s",
			ks.name, exists, value, rep.exists, rep.value, hist)
	}
}

// describe describes op, whose receipts the hook may still be adding to.
func (ks *keyState) describe(op *opRec) string {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return op.String()
}

// history describes the key's operations not yet verified (the last
// settleAge of them), for failure messages. Owner only.
func (ks *keyState) history() string {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	var b strings.Builder
	q := ks.queue
	if len(q) > 12 {
		fmt.Fprintf(&b, "\n    ... %d earlier", len(q)-12)
		q = q[len(q)-12:]
	}
	for _, op := range q {
		b.WriteString("\n    ")
		b.WriteString(op.String())
	}
	return b.String()
}

func (m *model) describe() string {
	if m.overflow {
		return "(unknown: too many)"
	}
	var parts []string
	for _, s := range m.states {
		if !s.exists {
			parts = append(parts, "absent")
			continue
		}
		c := "?"
		if s.cas != 0 {
			c = fmt.Sprintf("%#x", s.cas)
		}
		parts = append(parts, fmt.Sprintf("%q cas=%s", s.value, c))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
