package conn

import (
	"math/rand/v2"
	"testing"
)

// The slot table finds every call it holds by opaque, through collisions
// (a call whose slot an older one holds), growth and removals in any
// order, and yields each exactly once: checked against a map.
func TestSlotTableAgreesWithAMap(t *testing.T) {
	var s slotTable
	s.init()
	want := map[uint32]*call{}
	rng := rand.New(rand.NewPCG(1, 2))
	next := uint32(1)
	// Calls that stay while the opaques go round the ring several times,
	// so that later calls collide with them.
	for range 10 {
		cl := &call{opaque: next}
		next++
		s.put(cl)
		want[cl.opaque] = cl
	}
	check := func(step int) {
		t.Helper()
		if s.n != len(want) {
			t.Fatalf("step %d: %d calls in the table, want %d", step, s.n, len(want))
		}
		for o, cl := range want {
			if got, ok := s.get(o); !ok || got != cl {
				t.Fatalf("step %d: get(%d) = %p, %v; want %p", step, o, got, ok, cl)
			}
		}
		seen := map[uint32]bool{}
		for cl := range s.all() {
			if seen[cl.opaque] || want[cl.opaque] != cl {
				t.Fatalf("step %d: all yielded opaque %d twice or not in the table", step, cl.opaque)
			}
			seen[cl.opaque] = true
		}
		if len(seen) != len(want) {
			t.Fatalf("step %d: all yielded %d calls, want %d", step, len(seen), len(want))
		}
	}
	live := []*call{}
	spilled := false
	for step := range 60000 {
		// Grow to a few thousand in flight (the table grows past
		// minSlots), churn at that size while the opaques go round the
		// ring several times, then shrink, a random call ending each time.
		put := len(live) == 0
		switch {
		case step < 10000:
			put = put || rng.IntN(3) != 0
		case step < 50000:
			put = put || rng.IntN(2) == 0
		default:
			put = put || rng.IntN(3) == 0
		}
		if put {
			cl := &call{opaque: next}
			next++
			s.put(cl)
			want[cl.opaque] = cl
			live = append(live, cl)
		} else {
			i := rng.IntN(len(live))
			cl := live[i]
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			s.del(cl)
			delete(want, cl.opaque)
			if _, ok := s.get(cl.opaque); ok {
				t.Fatalf("step %d: opaque %d still found after del", step, cl.opaque)
			}
		}
		spilled = spilled || len(s.spill) > 0
		if step%1000 == 0 {
			check(step)
		}
	}
	check(-1)
	if !spilled {
		t.Fatalf("no call spilled: the test does not exercise collisions")
	}
	if _, ok := s.get(next + 12345); ok {
		t.Fatalf("found an opaque never put")
	}
}

// A call whose slot an older call holds spills, and is still found after
// the table grows and again after the older call leaves.
func TestSlotTableSpillsAndGrows(t *testing.T) {
	var s slotTable
	s.init()
	old, late := &call{opaque: 1}, &call{opaque: 1 + minSlots}
	s.put(old)
	s.put(late)
	if len(s.spill) != 1 {
		t.Fatalf("%d calls spilled, want 1 (the second for slot 1)", len(s.spill))
	}
	for o := uint32(2); len(s.slots) == minSlots; o++ {
		s.put(&call{opaque: o})
	}
	if got, ok := s.get(late.opaque); !ok || got != late {
		t.Fatalf("after growing to %d slots: get(%d) = %p, %v", len(s.slots), late.opaque, got, ok)
	}
	s.del(old)
	if got, ok := s.get(late.opaque); !ok || got != late {
		t.Fatalf("after the older call left: get(%d) = %p, %v", late.opaque, got, ok)
	}
	if _, ok := s.get(old.opaque); ok {
		t.Fatalf("the call that left is still found")
	}
}
