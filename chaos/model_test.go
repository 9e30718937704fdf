package chaos

import (
	"errors"
	"slices"
	"strconv"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
)

// opKind is an operation the workers run.
type opKind uint8

const (
	opGet opKind = iota
	opUpsert
	opInsert
	opReplace
	opRemove
	opAppend
	opPrepend
	opIncr
	opDecr
	opTouch
	opLock
	opUnlock
	numOpKinds
)

var opNames = [numOpKinds]string{"Get", "Upsert", "Insert", "Replace", "Remove", "Append",
	"Prepend", "Increment", "Decrement", "Touch", "GetAndLock", "Unlock"}

func (k opKind) String() string { return opNames[k] }

// counted reports whether the mock counts an applied k in MutationCount.
func (k opKind) counted() bool {
	switch k {
	case opUpsert, opInsert, opReplace, opRemove, opAppend, opPrepend, opIncr, opDecr:
		return true
	}
	return false
}

// idempotent is RFC 0049's list, for the kinds the workers run.
func (k opKind) idempotent() bool { return k == opGet }

// kindOf maps a request's opcode to the operation kind that sends it, and
// reports false for opcodes the hook does not track (reads).
func kindOf(op memdx.OpCode) (opKind, bool) {
	switch op {
	case memdx.OpSet:
		return opUpsert, true
	case memdx.OpAdd:
		return opInsert, true
	case memdx.OpReplace:
		return opReplace, true
	case memdx.OpDelete:
		return opRemove, true
	case memdx.OpAppend:
		return opAppend, true
	case memdx.OpPrepend:
		return opPrepend, true
	case memdx.OpIncrement:
		return opIncr, true
	case memdx.OpDecrement:
		return opDecr, true
	case memdx.OpTouch:
		return opTouch, true
	case memdx.OpGetLocked:
		return opLock, true
	case memdx.OpUnlockKey:
		return opUnlock, true
	}
	return 0, false
}

// lockedCas is the CAS a plain GET of a locked document returns.
const lockedCas = ^uint64(0)

// docState is one state a document may be in. cas 0 means unknown (the
// state was left by an ambiguous operation whose CAS the client never saw).
type docState struct {
	exists bool
	value  string
	cas    uint64
	// pend has bit i set when the model's pending[i] has been applied
	// in this state (so it does not apply again).
	pend uint32
}

// canSucceed reports whether op can succeed on a document in state s.
// Locks are not modelled: a write without the lock's CAS fails LOCKED, a
// definite failure that leaves the state alone, so ignoring them only makes
// the model accept more, never reject a correct run.
func (op *opRec) canSucceed(s docState) bool {
	casOK := op.cas == 0 || s.cas == 0 || s.cas == op.cas
	switch op.kind {
	case opGet, opTouch, opLock, opUnlock:
		return s.exists
	case opUpsert:
		return op.cas == 0 || (s.exists && casOK)
	case opInsert:
		return !s.exists
	case opReplace, opRemove, opAppend, opPrepend:
		return s.exists && casOK
	case opIncr, opDecr:
		if !s.exists {
			return true
		}
		_, err := strconv.ParseUint(s.value, 10, 64)
		return err == nil
	}
	return false
}

// next is the state op leaves when applied to s, with the CAS unknown
// (except Get and Unlock, which leave the CAS alone).
func (op *opRec) next(s docState) docState {
	switch op.kind {
	case opUpsert, opInsert, opReplace:
		return docState{exists: true, value: op.value}
	case opRemove:
		return docState{}
	case opAppend:
		return docState{exists: true, value: s.value + op.value}
	case opPrepend:
		return docState{exists: true, value: op.value + s.value}
	case opIncr, opDecr:
		if !s.exists {
			return docState{exists: true, value: strconv.FormatUint(op.initial, 10)}
		}
		cur, _ := strconv.ParseUint(s.value, 10, 64)
		switch {
		case op.kind == opIncr:
			cur += op.delta
		case op.delta > cur:
			cur = 0
		default:
			cur -= op.delta
		}
		return docState{exists: true, value: strconv.FormatUint(cur, 10)}
	case opTouch, opLock:
		return docState{exists: true, value: s.value}
	}
	return s // Get, Unlock
}

// maxStates bounds a model; past it the model gives up on the key until a
// read or an overwrite tells it the state again (counted as an overflow).
const maxStates = 64

// model is the set of states a key's document may be in, given everything
// the client reported about it. It starts with the document absent.
type model struct {
	states   []docState
	overflow bool
	// pending are writes in doubt whose request may still reach the node
	// after a later operation's (ConnectionsPerNode > 1: a read-back on
	// another connection of the node can overtake it). Until settled, any
	// of them may apply, once, between any two observations; nil: a free
	// slot. A state's pend says which have applied in it.
	pending []*opRec
}

// maxPending bounds pending (the bits of docState.pend).
const maxPending = 32

func newModel() model { return model{states: []docState{{}}} }

func addState(set []docState, s docState) []docState {
	for _, x := range set {
		if x == s {
			return set
		}
	}
	return append(set, s)
}

// knownCas returns the document's CAS when the model is sure of it.
func (m *model) knownCas() (uint64, bool) {
	if m.overflow || len(m.states) != 1 || !m.states[0].exists || m.states[0].cas == 0 {
		return 0, false
	}
	return m.states[0].cas, true
}

// length returns the longest value the document may have.
func (m *model) length() int {
	n := 0
	for _, s := range m.states {
		n = max(n, len(s.value))
	}
	return n
}

// succeeded applies an operation the client reported successful. It
// returns a description of the problem when no state allows the result.
func (m *model) succeeded(op *opRec) string {
	m.expand()
	if m.overflow {
		switch op.kind {
		case opGet, opLock:
			m.overflow = false
			cas := op.resCas
			if cas == lockedCas {
				cas = 0
			}
			m.states = []docState{{exists: true, value: op.resValue, cas: cas}}
		case opUpsert, opInsert, opReplace, opRemove:
			if op.cas == 0 {
				m.overflow = false
				n := op.next(docState{})
				n.cas = op.resCas
				m.states = []docState{n}
			}
		}
		return ""
	}
	var out []docState
	for _, s := range m.states {
		if !op.canSucceed(s) {
			continue
		}
		n := op.next(s)
		n.pend = s.pend
		switch op.kind {
		case opGet:
			if s.value != op.resValue {
				continue
			}
			if op.resCas != lockedCas {
				if s.cas != 0 && s.cas != op.resCas {
					continue
				}
				n.cas = op.resCas
			}
		case opLock:
			if s.value != op.resValue {
				continue
			}
			n.cas = op.resCas
		case opUnlock:
		case opIncr, opDecr:
			if n.value != strconv.FormatUint(op.resCount, 10) {
				continue
			}
			n.cas = op.resCas
		default:
			n.cas = op.resCas
		}
		out = addState(out, n)
	}
	if len(out) == 0 {
		return "no state the client could know of allows this success"
	}
	m.states = out
	return ""
}

// failed applies a failure that was not ambiguous: nothing changed, and
// what the server said narrows the states.
func (m *model) failed(op *opRec, err error) string {
	m.expand()
	if m.overflow {
		return ""
	}
	keep := func(s docState) bool { return true }
	switch {
	case errors.Is(err, client.ErrDocumentNotFound):
		keep = func(s docState) bool { return !s.exists }
	case errors.Is(err, client.ErrDocumentExists) && op.kind == opInsert:
		keep = func(s docState) bool { return s.exists }
	case errors.Is(err, client.ErrCasMismatch) && op.kind != opUnlock && op.cas != 0:
		keep = func(s docState) bool { return s.exists && (s.cas == 0 || s.cas != op.cas) }
	}
	var out []docState
	for _, s := range m.states {
		if keep(s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return "no state the client could know of explains this failure"
	}
	m.states = out
	return ""
}

// ambiguous applies an operation that may or may not have been applied.
func (m *model) ambiguous(op *opRec) {
	m.expand()
	if m.overflow {
		return
	}
	out := append([]docState(nil), m.states...)
	for _, s := range m.states {
		if op.canSucceed(s) {
			n := op.next(s)
			n.pend = s.pend
			out = addState(out, n)
		}
	}
	if len(out) > maxStates {
		m.overflow, m.states = true, nil
		return
	}
	m.states = out
}

// allows reports whether the stored document (exists, value, cas) is one of
// the states.
func (m *model) allows(exists bool, value string, cas uint64) bool {
	m.expand()
	if m.overflow {
		return true
	}
	for _, s := range m.states {
		if s.exists != exists {
			continue
		}
		if !exists || (s.value == value && (s.cas == 0 || s.cas == cas)) {
			return true
		}
	}
	return false
}

// inDoubt applies an operation that may or may not have been applied and
// whose request may still reach the node after later operations' (see
// pending): it stays pending until settle says it can no longer apply.
// Past maxPending it is taken as ambiguous (settled at once).
func (m *model) inDoubt(op *opRec) {
	i := slices.Index(m.pending, nil)
	if i < 0 && len(m.pending) < maxPending {
		i = len(m.pending)
		m.pending = append(m.pending, nil)
	}
	if i < 0 {
		m.ambiguous(op)
		return
	}
	m.expand()
	m.pending[i] = op
	m.expand()
}

// settle ends the doubt of the pending writes done reports can no longer
// reach the node: the states keep whether each applied, but a write
// settled unapplied no longer applies after later operations.
func (m *model) settle(done func(op *opRec) bool) {
	m.expand() // may have applied before now
	for i, op := range m.pending {
		if op == nil || !done(op) {
			continue
		}
		m.pending[i] = nil
		var out []docState
		for _, s := range m.states {
			s.pend &^= 1 << i
			out = addState(out, s)
		}
		if !m.overflow {
			m.states = out
		}
	}
	for len(m.pending) > 0 && m.pending[len(m.pending)-1] == nil {
		m.pending = m.pending[:len(m.pending)-1]
	}
}

// expand adds the states the pending writes leave when they apply (each
// at most once, in any order) to the states.
func (m *model) expand() {
	if m.overflow || len(m.pending) == 0 {
		return
	}
	for i := 0; i < len(m.states); i++ { // including the states added
		s := m.states[i]
		for j, p := range m.pending {
			if p == nil || s.pend&(1<<j) != 0 || !p.canSucceed(s) {
				continue
			}
			n := p.next(s)
			n.pend = s.pend | 1<<j
			m.states = addState(m.states, n)
			if len(m.states) > maxStates {
				m.overflow, m.states = true, nil
				return
			}
		}
	}
}
