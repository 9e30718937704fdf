package optrace

import (
	"cmp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/internal/hookguard"
	"github.com/kvwire/kvwire/internal/meter"
)

// opMeters makes and keeps the recorders of operation latencies, one per
// operation, scope, collection and outcome, each asked of the Meter once.
// A successful operation of a listed name finds its recorder through its
// collection's Coll (an index, an atomic load), without hashing;
// any other through a map replaced, never changed, when a recorder is
// added (found without a lock). The Meter is never asked under the lock.
// The logging meter keeps one histogram per operation, whatever the
// collection and outcome: its recorders are kept by operation alone, and
// the collections' Colls share one set of recorders of successes
// (shared) and are not kept here, so that a client that goes through many
// collections over its life (made, dropped, others named anew) keeps
// nothing for each. A caller's Meter has its recorders kept up to
// maxRecorders, and its collections' Colls up to maxColls: past either,
// the client starts them anew (Collections made before keep theirs), and
// asks the Meter again for what it needs next, so that a client living
// for weeks among collections made and dropped, or meeting many error
// types, does not keep one for each forever. The recorders start anew at
// most once per maxRecordersResetEvery: with more in use at once than the
// bound, one past it is asked for at each use meanwhile, not kept.
type opMeters struct {
	ob *Observers
	m  atomic.Pointer[map[MeterKey]hookguard.ValueRecorder]
	// colls are the collections' recorders of successes, by
	// "scope.collection" (guarded by mu), for a Collection made again.
	colls map[string]*Coll
	// shared are every collection's recorders of successes with the
	// logging meter (builtin), which do not depend on the collection.
	shared *collRecorders
	mu     sync.Mutex // serialises additions
	// maxRecs and maxColls bound m and colls (0: maxRecorders and
	// maxColls).
	maxRecs, maxColls int
	// recsReset is when m was last started anew, or made (guarded by
	// mu).
	recsReset time.Time
}

const (
	// maxRecorders bounds the recorders of a caller's Meter kept.
	maxRecorders = 4096
	// maxColls bounds the Colls kept by path for a caller's Meter.
	maxColls = 4096
	// maxRecordersResetEvery is the least time between two starts anew
	// of the recorders kept (recorder): with more in use at once than
	// maxRecorders, starting anew at each one past the bound would drop
	// the very ones about to be used again, each then asked for and the
	// map copied to add it back, at nearly every operation.
	maxRecordersResetEvery = time.Minute
)

// MeterKey identifies a recorder (the bucket is the client's): the
// operation's name, its scope and collection ("" when it has none), and
// its error type ("" for a success).
type MeterKey struct{ Op, Scope, Collection, ErrType string }

// Coll is a collection as its operations' observers see it: its names,
// and its recorders of successes, by the index of the operation's name in
// opNames. The client keeps it in its Collection, found once
// (Observers.Coll).
type Coll struct {
	scope, name string
	ok          *collRecorders
}

// collRecorders are a collection's recorders of successes, by the index of
// the operation's name in opNames, each set once found.
type collRecorders [len(opNames)]atomic.Pointer[hookguard.ValueRecorder]

func (m *opMeters) init(ob *Observers) {
	m.ob = ob
	empty := map[MeterKey]hookguard.ValueRecorder{}
	m.m.Store(&empty)
	m.colls = map[string]*Coll{}
	m.shared = &collRecorders{}
	if ob.cfg.Clock != nil {
		m.recsReset = ob.cfg.Clock.Now()
	}
}

// Coll returns the collection scope.name (path is "scope.name"), made the
// first time; with the logging meter, made each time (the caller keeps it),
// with the recorders every collection shares.
func (ob *Observers) Coll(scope, name, path string) *Coll {
	m := &ob.meters
	if ob.builtin {
		return &Coll{scope: scope, name: name, ok: m.shared}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cm := m.colls[path]
	if cm == nil {
		if len(m.colls) >= cmp.Or(m.maxColls, maxColls) {
			clear(m.colls)
		}
		cm = &Coll{scope: scope, name: name, ok: &collRecorders{}}
		m.colls[path] = cm
	}
	return cm
}

// recorder returns k's recorder, asking the Meter for it the first time.
// The Meter is the caller's code and may block: it is asked without the
// lock, so that it holds only the operation asking (two operations that
// need the same new recorder at once may both ask; the first answer is
// kept).
func (m *opMeters) recorder(k MeterKey) hookguard.ValueRecorder {
	if m.ob.builtin {
		// The logging meter's histogram is the operation's.
		k = MeterKey{Op: k.Op}
	}
	if r, ok := (*m.m.Load())[k]; ok {
		return r
	}
	var r hookguard.ValueRecorder
	if m.ob.builtin {
		r = m.ob.cfg.LoggingMeter.Histogram(m.ob.cfg.Service, k.Op)
	} else {
		r = m.ob.cfg.Recorder(k)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.m.Load()
	if kept, ok := old[k]; ok {
		return kept
	}
	var next map[MeterKey]hookguard.ValueRecorder
	if len(old) >= cmp.Or(m.maxRecs, maxRecorders) {
		now := m.ob.cfg.Clock.Now()
		if now.Sub(m.recsReset) < maxRecordersResetEvery {
			// More in use at once than the bound: r serves this
			// operation, not kept, rather than dropping those kept
			// (each about to be asked for again, the map copied to
			// add it back).
			return r
		}
		// Start anew: a recorder dropped is asked again when needed.
		m.recsReset = now
		next = map[MeterKey]hookguard.ValueRecorder{}
	} else {
		next = make(map[MeterKey]hookguard.ValueRecorder, len(old)+1)
		for kk, v := range old {
			next[kk] = v
		}
	}
	next[k] = r
	m.m.Store(&next)
	return r
}

// succeeded returns the recorder of cm's successful operations of
// opNames[op].
func (m *opMeters) succeeded(cm *Coll, op int) hookguard.ValueRecorder {
	if p := cm.ok[op].Load(); p != nil {
		return *p
	}
	r := m.recorder(MeterKey{Op: opNames[op], Scope: cm.scope, Collection: cm.name})
	cm.ok[op].Store(&r)
	return r
}

// record records an operation's latency in microseconds: name (opNames[op]
// when listed) on the collection of cm (nil: none), with errType ("" for a
// success).
func (m *opMeters) record(cm *Coll, name string, op int, errType string, d time.Duration) {
	r, v := m.resolve(cm, name, op, errType, d)
	if m.ob.builtin {
		r.RecordValue(v)
		return
	}
	m.ob.cfg.Guard.RecordValue(r, v)
}

// recordN records n successful operations alike, each of latency d, as n
// calls of record would: the logging meter's histogram counts them in one
// step, a caller's Meter is called n times.
func (m *opMeters) recordN(cm *Coll, name string, op int, d time.Duration, n int) {
	r, v := m.resolve(cm, name, op, "", d)
	if m.ob.builtin {
		// The logging meter's recorders are its histograms (recorder).
		r.(*meter.Histogram).RecordValues(v, uint64(n))
		return
	}
	for range n {
		m.ob.cfg.Guard.RecordValue(r, v)
	}
}

// resolve returns the recorder of record's arguments, and d in
// microseconds, the value it records.
func (m *opMeters) resolve(cm *Coll, name string, op int, errType string, d time.Duration) (hookguard.ValueRecorder, uint64) {
	var r hookguard.ValueRecorder
	if cm != nil && op != opUnlisted && errType == "" {
		r = m.succeeded(cm, op)
	} else {
		k := MeterKey{Op: name, ErrType: errType}
		if cm != nil {
			k.Scope, k.Collection = cm.scope, cm.name
		}
		r = m.recorder(k)
	}
	return r, uint64(max(d, 0) / time.Microsecond)
}
