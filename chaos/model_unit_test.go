package chaos

import (
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
)

func okOp(k opKind, value string, cas, resCas uint64) *opRec {
	return &opRec{kind: k, value: value, cas: cas, resCas: resCas, outcome: outSuccess}
}

// A success is exact: the stored document must be its value with its CAS.
func TestModelSuccessIsExact(t *testing.T) {
	m := newModel()
	if bad := m.succeeded(okOp(opUpsert, "a", 0, 10)); bad != "" {
		t.Fatal(bad)
	}
	if bad := m.succeeded(okOp(opReplace, "b", 10, 11)); bad != "" {
		t.Fatal(bad)
	}
	if !m.allows(true, "b", 11) {
		t.Error("the acknowledged state is refused")
	}
	for _, c := range []struct {
		exists bool
		value  string
		cas    uint64
	}{{true, "a", 10}, {true, "b", 12}, {false, "", 0}} {
		if m.allows(c.exists, c.value, c.cas) {
			t.Errorf("lost write accepted: %+v", c)
		}
	}
	if cas, ok := m.knownCas(); !ok || cas != 11 {
		t.Errorf("knownCas = %d, %v", cas, ok)
	}
}

// An ambiguous write leaves two states (CAS unknown for the applied one);
// a read decides between them.
func TestModelAmbiguousBranchesAndReadCollapses(t *testing.T) {
	m := newModel()
	m.succeeded(okOp(opUpsert, "a", 0, 10))
	m.ambiguous(&opRec{kind: opAppend, value: "|x"})
	if !m.allows(true, "a", 10) || !m.allows(true, "a|x", 99) {
		t.Fatalf("ambiguous states refused: %s", m.describe())
	}
	if m.allows(true, "a|x|x", 99) {
		t.Error("an ambiguous append applied twice is accepted")
	}
	if _, ok := m.knownCas(); ok {
		t.Error("knownCas with two states")
	}
	get := &opRec{kind: opGet, resValue: "a|x", resCas: 12, outcome: outSuccess}
	if bad := m.succeeded(get); bad != "" {
		t.Fatal(bad)
	}
	if m.allows(true, "a", 10) || !m.allows(true, "a|x", 12) {
		t.Errorf("the read did not collapse the states: %s", m.describe())
	}
	// A read of a value no operation left is a lost (or invented) write.
	if bad := m.succeeded(&opRec{kind: opGet, resValue: "a", resCas: 10}); bad == "" {
		t.Error("a read of a superseded value was accepted")
	}
}

// A counter applied twice shows in the value the client is given.
func TestModelCounter(t *testing.T) {
	m := newModel()
	inc := func(delta, res uint64) string {
		return m.succeeded(&opRec{kind: opIncr, delta: delta, initial: 100, resCount: res, resCas: delta})
	}
	if bad := inc(1, 100); bad != "" { // created with the initial value
		t.Fatal(bad)
	}
	if bad := inc(2, 102); bad != "" {
		t.Fatal(bad)
	}
	if bad := inc(3, 108); bad == "" { // 102 + 3 applied twice
		t.Error("a duplicated increment was accepted")
	}
}

// Failures narrow the states: NOT_FOUND means absent, EXISTS present, a
// CAS mismatch a different CAS; a failure no state explains is reported.
func TestModelFailuresNarrow(t *testing.T) {
	notFound := &client.KeyValueError{Err: client.ErrDocumentNotFound}
	exists := &client.KeyValueError{Err: client.ErrDocumentExists}
	mismatch := &client.KeyValueError{Err: client.ErrCasMismatch}

	m := newModel()
	m.succeeded(okOp(opUpsert, "a", 0, 10))
	m.ambiguous(&opRec{kind: opRemove})
	if bad := m.failed(&opRec{kind: opReplace}, notFound); bad != "" {
		t.Fatal(bad)
	}
	if m.allows(true, "a", 10) || !m.allows(false, "", 0) {
		t.Errorf("NOT_FOUND did not narrow to absent: %s", m.describe())
	}
	if bad := m.failed(&opRec{kind: opInsert}, exists); bad == "" {
		t.Error("Insert refused as existing, though the document is known absent, was accepted")
	}

	m = newModel()
	m.succeeded(okOp(opUpsert, "a", 0, 10))
	if bad := m.failed(&opRec{kind: opReplace, cas: 10}, mismatch); bad == "" {
		t.Error("a CAS mismatch with the document's known CAS was accepted")
	}
	if bad := m.failed(&opRec{kind: opReplace, cas: 9}, mismatch); bad != "" {
		t.Errorf("a CAS mismatch with a stale CAS refused: %s", bad)
	}
}

// Locks: GetAndLock gives the document a new CAS, Unlock keeps it, and a
// read of a locked document (CAS all ones) does not change what is known.
func TestModelLocks(t *testing.T) {
	m := newModel()
	m.succeeded(okOp(opUpsert, "a", 0, 10))
	if bad := m.succeeded(&opRec{kind: opLock, resValue: "a", resCas: 20}); bad != "" {
		t.Fatal(bad)
	}
	if bad := m.succeeded(&opRec{kind: opGet, resValue: "a", resCas: lockedCas}); bad != "" {
		t.Fatal(bad)
	}
	if bad := m.succeeded(&opRec{kind: opUnlock, cas: 20}); bad != "" {
		t.Fatal(bad)
	}
	if !m.allows(true, "a", 20) || m.allows(true, "a", 10) {
		t.Errorf("after lock and unlock: %s", m.describe())
	}
}

// The deadline rule blames a retry whose wait, counted from the latest time
// the operation's goroutine is known to have run, reaches the latest the
// deadline can be; stalls before or between the events never do.
func TestDeadlinePlan(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name string
		run  func(op *retryPlan)
		late bool
	}{
		{"waits ending before the deadline", func(op *retryPlan) {
			op.planEvent(at(0))
			op.planEvent(at(10))
			op.planRetry(at(11), ms(100))
			op.planEvent(at(120))
			op.planEvent(at(130))
			op.planRetry(at(131), ms(360))
		}, false},
		{"a wait planned past the deadline", func(op *retryPlan) {
			op.planEvent(at(0))
			op.planEvent(at(300))
			op.planRetry(at(301), ms(250))
		}, true},
		{"a wait ending exactly at the deadline", func(op *retryPlan) {
			op.planEvent(at(0))
			op.planEvent(at(400))
			op.planRetry(at(400), ms(100))
		}, true},
		{"a wait planned past the deadline with no attempt before it", func(op *retryPlan) {
			op.planRetry(at(5), ms(200))
			op.planRetry(at(320), ms(100))
			op.planRetry(at(330), ms(200)) // decided after 320: ends after 520
		}, true},
		{"a wait woken early by a config: the next decision may come sooner", func(op *retryPlan) {
			op.planRetry(at(5), ms(400))
			op.planRetry(at(50), ms(400))
		}, false},
		{"a stall before the first event moves the deadline's bound", func(op *retryPlan) {
			op.planEvent(at(300)) // the deadline was read at most here
			op.planEvent(at(500))
			op.planRetry(at(900), ms(250)) // stalled 400 ms after the attempt
		}, false},
		{"a stall after the decision is not the client's", func(op *retryPlan) {
			op.planEvent(at(0))
			op.planEvent(at(100))
			op.planRetry(at(450), ms(100)) // the record came late, the decision did not
		}, false},
	} {
		op := &retryPlan{start: t0, timeout: 500 * time.Millisecond}
		tc.run(op)
		if op.overrunSeen != tc.late {
			t.Errorf("%s: late=%v (overrun %v after a wait of %v), want %v", tc.name, op.overrunSeen, op.overrun, op.overrunDelay, tc.late)
		}
	}
}

// A write in doubt whose request may still be on its way (pool: the read
// went on another connection of the node) is not settled by a read that
// saw the old state: it may apply after it, once, until it is settled.
func TestModelReadOvertakesWriteInDoubt(t *testing.T) {
	m := newModel()
	m.succeeded(okOp(opUpsert, "a", 0, 10))
	w := &opRec{kind: opAppend, value: "|x"}
	m.inDoubt(w)
	if bad := m.succeeded(&opRec{kind: opGet, resValue: "a", resCas: 10, outcome: outSuccess}); bad != "" {
		t.Fatal(bad)
	}
	// The write applied after the read, then another write succeeded.
	if bad := m.succeeded(okOp(opAppend, "|y", 0, 12)); bad != "" {
		t.Fatal(bad)
	}
	if !m.allows(true, "a|x|y", 12) || !m.allows(true, "a|y", 12) || !m.allows(true, "a|y|x", 99) {
		t.Fatalf("a write in doubt applied after an overtaking read is refused: %s", m.describe())
	}
	if m.allows(true, "a|x|y|x", 99) || m.allows(true, "a|x|x|y", 12) {
		t.Errorf("a write in doubt applied twice is accepted: %s", m.describe())
	}
	// Settled (its request reached the node and was counted): a read
	// now decides, and the write no longer applies after it.
	m.settle(func(op *opRec) bool { return op == w })
	if bad := m.succeeded(&opRec{kind: opGet, resValue: "a|y", resCas: 12, outcome: outSuccess}); bad != "" {
		t.Fatal(bad)
	}
	if m.allows(true, "a|y|x", 99) || !m.allows(true, "a|y", 12) {
		t.Errorf("a settled write still applies after a read: %s", m.describe())
	}
	// A failure that overtook it (not found) does not settle it either.
	m = newModel()
	m.inDoubt(&opRec{kind: opUpsert, value: "b"})
	if bad := m.failed(&opRec{kind: opGet}, client.ErrDocumentNotFound); bad != "" {
		t.Fatal(bad)
	}
	if bad := m.failed(&opRec{kind: opInsert, value: "c"}, client.ErrDocumentExists); bad != "" {
		t.Errorf("the write in doubt applied after the overtaking read is refused: %s", bad)
	}
}

// A short run waits for its faults to act in operations, not in time: a
// loaded machine that makes few operations a second is waited for as long
// as it takes to make actedOps; a client stuck for good (no operation ends
// for actedLimit) ends the wait.
func TestActedWaitCountsOperations(t *testing.T) {
	h := &harness{}
	var now time.Time
	clock := func() time.Time { return now }
	w := startActedWait(h, clock)
	for i := 0; i < 100; i++ { // ten minutes, an operation every 6 s
		now = now.Add(6 * time.Second)
		h.opsDone.Add(1)
		if w.over() {
			t.Fatalf("gave up after %v and %d operations: a slow machine, not a stuck client", now.Sub(time.Time{}), h.opsDone.Load())
		}
	}
	h.opsDone.Add(actedOps)
	if !w.over() {
		t.Fatal("still waiting after actedLimit and actedOps operations")
	}

	h2 := &harness{}
	now = time.Time{}
	w = startActedWait(h2, clock)
	now = now.Add(actedLimit - time.Millisecond)
	if w.over() {
		t.Fatal("gave up before actedLimit")
	}
	now = now.Add(time.Millisecond)
	if !w.over() {
		t.Fatal("still waiting after actedLimit without an operation ending")
	}
}
