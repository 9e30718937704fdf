package conn

import "iter"

// Sizes of the in-flight table's slots (slotTable): it starts small and
// doubles while more than half its slots would be in use, up to
// maxSlots (a connection's live requests and tombstones are bounded by
// MaxPending + MaxAbandoned, 8192 by default).
const (
	minSlots = 256
	maxSlots = 1 << 16
)

// slotTable finds the calls in flight by opaque. Opaques are handed out in
// sequence, so the calls in flight at once take consecutive slots of a
// ring indexed by opaque: a lookup is an index and a compare. A call whose
// slot an older call still holds (a tombstone left behind while the
// opaques went once round the ring) goes to spill, a map, which a lookup
// reads only when it is not empty. Guarded by Conn.mu.
type slotTable struct {
	slots []*call
	mask  uint32
	spill map[uint32]*call
	n     int
}

func (s *slotTable) init() { s.resize(minSlots) }

func (s *slotTable) resize(size int) {
	old, spill := s.slots, s.spill
	s.slots, s.mask, s.spill = make([]*call, size), uint32(size-1), nil
	for _, cl := range old {
		if cl != nil {
			s.place(cl)
		}
	}
	for _, cl := range spill {
		s.place(cl)
	}
}

func (s *slotTable) place(cl *call) {
	if i := cl.opaque & s.mask; s.slots[i] == nil {
		s.slots[i] = cl
		return
	}
	if s.spill == nil {
		s.spill = make(map[uint32]*call)
	}
	s.spill[cl.opaque] = cl
}

func (s *slotTable) get(opaque uint32) (*call, bool) {
	if cl := s.slots[opaque&s.mask]; cl != nil && cl.opaque == opaque {
		return cl, true
	}
	if len(s.spill) == 0 {
		return nil, false
	}
	cl, ok := s.spill[opaque]
	return cl, ok
}

func (s *slotTable) put(cl *call) {
	s.place(cl)
	s.n++
	if s.n > len(s.slots)/2 && len(s.slots) < maxSlots {
		s.resize(2 * len(s.slots))
	}
}

func (s *slotTable) del(cl *call) {
	if i := cl.opaque & s.mask; s.slots[i] == cl {
		s.slots[i] = nil
	} else {
		delete(s.spill, cl.opaque)
	}
	s.n--
}

func (s *slotTable) all() iter.Seq[*call] {
	return func(yield func(*call) bool) {
		for _, cl := range s.slots {
			if cl != nil && !yield(cl) {
				return
			}
		}
		for _, cl := range s.spill {
			if !yield(cl) {
				return
			}
		}
	}
}
