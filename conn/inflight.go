package conn

import (
	"iter"
	"sync/atomic"
	"time"
)

// inflight is a connection's table of requests in flight: every call from
// the moment it is queued until it ends, live or a tombstone, found by
// opaque; the opaques handed out; and the lists and counts that the
// lifecycle's rules read: MaxPending (active), MaxAbandoned (tombs and
// the tombstone list), the quiet calls a NOOP settles, the groups of quiet
// gets whose gets' opaques are not in the table, the deadline list the
// monitor sweeps, and WritesInFlight. It is guarded by Conn.mu; the
// transitions in request.go are what change it.
type inflight struct {
	// byOpaque holds the calls in flight, tombstones included, by opaque
	// (a group of gets by its NOOP's): a ring of slots (slots.go). Only
	// get, put, del, has, size and all touch it.
	byOpaque slotTable
	active   int // calls in the table that are not tombstones (MaxPending)
	tombs    int // tombstones in the table (MaxAbandoned)
	writes   int // calls in the table, tombstones too, that may change data (readOnly false)
	promised int // calls in the table, tombstones too, with an answerBy (the health check's)
	// unpromised, when not nil, is closed once promised falls to 0 or the
	// table closes (BarrierFreed); nil while no one waits for that.
	unpromised chan struct{}
	// evictedWrite is the stream offset of the end of the last write whose
	// tombstone was evicted (MaxAbandoned), until a response to a request
	// sent after it shows the server has processed it; 0: none.
	evictedWrite uint64
	// evictedBound is the latest answerBy of a tombstone evicted
	// (MaxAbandoned): the server may hold that request until then, and a
	// probe would wait behind it (latestBound); zero: none.
	evictedBound time.Time
	evicted      atomic.Uint64 // tombstones evicted past MaxAbandoned (Stats.Forgotten)
	// holdKick is the monitor's, set while a probe due is held for the
	// bounds of requests in flight (probeOrHold), nil otherwise: a call
	// with an answerBy that leaves the table kicks it, so that the hold
	// ends once none of them is pending.
	holdKick chan struct{}
	opaque   uint32 // the last opaque handed out
	wrapped  bool   // opaque has wrapped: check for one still in use
	// reserveProbes counts the table lookups made to find free opaques
	// after the wrap (reserve), so that tests can bound that work.
	reserveProbes int
	// groupProbes counts the groups groupOf compared past lastGroup, for
	// the same reason.
	groupProbes int
	// groups are the groups of quiet gets (StartGets) in the table, live
	// or abandoned: their gets' opaques are not in byOpaque. lastGroup is
	// the one groupOf found last (a group's answers come one after
	// another), nil once it leaves groups.
	groups    []*call
	lastGroup *call
	// quiet lists the quiet calls (Start with a quiet opcode) in stream
	// order, until answered or settled by a NOOP's answer.
	quiet callList
	// deadlines lists the live calls that have a deadline, earliest first.
	// Requests usually share one timeout, so a new one goes at the tail
	// and a finished one is unlinked: O(1) either way (a shorter timeout
	// walks back from the tail to its place).
	deadlines callList
	// tombstones lists the abandoned calls, oldest first.
	tombstones callList
}

func (t *inflight) init() {
	t.byOpaque.init()
	t.quiet.slot = onQuiet
	t.deadlines.slot = onDeadlines
	t.tombstones.slot = onTombs
}

// get returns the call in flight (or tombstone) with opaque.
func (t *inflight) get(opaque uint32) (*call, bool) {
	return t.byOpaque.get(opaque)
}

// has reports whether a call in the table has opaque (a group's gets'
// opaques are not looked up here: see lastUsed).
func (t *inflight) has(opaque uint32) bool {
	_, ok := t.byOpaque.get(opaque)
	return ok
}

func (t *inflight) put(cl *call) { t.byOpaque.put(cl) }

func (t *inflight) del(cl *call) { t.byOpaque.del(cl) }

// size is the number of calls in the table, tombstones included.
func (t *inflight) size() int { return t.byOpaque.n }

// all yields every call in the table; the loop may take the call it was
// given out of the table.
func (t *inflight) all() iter.Seq[*call] {
	return t.byOpaque.all()
}

// close empties the table for good (teardown): nothing is added after.
func (t *inflight) close() {
	t.evictedWrite = 0
	t.evictedBound = time.Time{}
	t.notePromisedNone()
}

// notePromisedNone closes unpromised, when a caller waits on it: no call
// with an answerBy is left, or the table closed.
func (t *inflight) notePromisedNone() {
	if t.unpromised != nil {
		close(t.unpromised)
		t.unpromised = nil
	}
}

// add registers cl, just queued, as live.
func (t *inflight) add(cl *call) {
	t.put(cl)
	if !readOnly(cl.op) {
		t.writes++
	}
	t.active++
	if !cl.answerBy.IsZero() {
		t.promised++
	}
	switch cl.kind {
	case kindQuiet:
		t.quiet.pushBack(cl)
	case kindGroup:
		t.groups = append(t.groups, cl)
	}
	if !cl.deadline.IsZero() {
		t.addDeadline(cl)
	}
}

// remove takes cl, live or a tombstone, out of the table and off its
// lists.
func (t *inflight) remove(cl *call) {
	t.del(cl)
	if !readOnly(cl.op) {
		t.writes--
	}
	if !cl.answerBy.IsZero() {
		// Only a call with a bound (a synchronous write, a range
		// scan's continue) comes here: an ordinary one pays nothing.
		if t.promised--; t.promised == 0 {
			t.notePromisedNone()
		}
		if t.holdKick != nil {
			select {
			case t.holdKick <- struct{}{}:
			default: // one is already asked for
			}
		}
	}
	switch cl.kind {
	case kindQuiet:
		t.quiet.removeIfPresent(cl)
	case kindGroup:
		t.unlinkGroup(cl)
	}
	if cl.state == reqAbandoned {
		t.tombstones.remove(cl)
		t.tombs--
		return
	}
	t.deadlines.removeIfPresent(cl)
	t.active--
}

// bury makes live cl a tombstone: off the deadline list, at the tail of the
// tombstone list.
func (t *inflight) bury(cl *call) {
	t.deadlines.removeIfPresent(cl)
	t.active--
	t.tombs++
	t.tombstones.pushBack(cl)
}

// addDeadline links cl into the deadline list at its place: at the tail
// when its deadline is the latest, which it nearly always is.
func (t *inflight) addDeadline(cl *call) {
	at := t.deadlines.tail
	for at != nil && at.deadline.After(cl.deadline) {
		at = t.deadlines.prev(at)
	}
	t.deadlines.insertAfter(at, cl)
}

// nextDeadline returns the earliest deadline of a live call, zero when
// none has one.
func (t *inflight) nextDeadline() time.Time {
	if t.deadlines.head == nil {
		return time.Time{}
	}
	return t.deadlines.head.deadline
}

// writesInFlight is Conn.WritesInFlight.
func (t *inflight) writesInFlight() int {
	if t.evictedWrite != 0 {
		return t.writes + 1
	}
	return t.writes
}

// nextOpaque returns an opaque no request in flight uses (a group's gets
// included). Opaque 0 is never used.
func (t *inflight) nextOpaque() uint32 { return t.reserve(1) }

// reserve returns the first of n consecutive opaques, none 0 and none in
// use. A run that holds an opaque in use is tried again from just past the
// highest one it holds, so that finding a run costs a pass over it per
// obstacle, not per opaque.
func (t *inflight) reserve(n uint32) uint32 {
	for {
		base := t.opaque + 1
		last := base + n - 1
		if base == 0 || last < base {
			t.opaque = 0 // the run would hold 0 or wrap: start again from 1
			t.wrapped = true
			continue
		}
		if !t.wrapped {
			t.opaque = last
			return base
		}
		used, ok := t.lastUsed(base, last)
		if !ok {
			t.opaque = last
			return base
		}
		t.opaque = used
	}
}

// lastUsed returns the highest opaque from first to last that a request
// in flight (a group's gets included) uses, if there is one.
func (t *inflight) lastUsed(first, last uint32) (uint32, bool) {
	var used uint32
	found := false
	for _, g := range t.groups {
		if g.gBase <= last && first <= g.gBase+g.gN {
			if o := min(last, g.gBase+g.gN); !found || o > used {
				used, found = o, true
			}
		}
	}
	for o := last; !found || o > used; o-- {
		t.reserveProbes++
		if t.has(o) {
			return o, true
		}
		if o == first {
			break
		}
	}
	return used, found
}

// groupOf returns the group whose gets include opaque, or nil.
func (t *inflight) groupOf(opaque uint32) *call {
	if g := t.lastGroup; g != nil && opaque-g.gBase < g.gN {
		return g
	}
	for _, g := range t.groups {
		t.groupProbes++
		if opaque-g.gBase < g.gN {
			t.lastGroup = g
			return g
		}
	}
	return nil
}

// unlinkGroup takes cl off the group list.
func (t *inflight) unlinkGroup(cl *call) {
	if t.lastGroup == cl {
		t.lastGroup = nil
	}
	for i, g := range t.groups {
		if g == cl {
			last := len(t.groups) - 1
			t.groups[i] = t.groups[last]
			t.groups[last] = nil
			t.groups = t.groups[:last]
			return
		}
	}
}
