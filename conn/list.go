package conn

// linkSlot names a list a call can be on. A call carries one pair of links
// per slot (call.links), so it can be on every list at once, and each list
// knows its members from their links alone.
type linkSlot uint8

const (
	// onWire: the writer's calls whose bytes the socket has not all
	// accepted, in stream order.
	onWire linkSlot = iota
	// onDeadlines: the table's live calls that have a deadline, earliest
	// first.
	onDeadlines
	// onTombs: the table's tombstones, oldest first.
	onTombs
	// onQuiet: the table's quiet calls (Start with a quiet opcode), in
	// stream order, until answered or settled.
	onQuiet
	numLinkSlots
)

// link is a call's place in one list.
type link struct{ prev, next *call }

// callList is an intrusive doubly linked list of calls: the links are in
// the calls (call.links[slot]), so linking and unlinking cost O(1) and
// allocate nothing. Calls are the only elements of these lists, so the list
// is not parameterised on its element type. Its zero value with its slot
// set is an empty list. A callList is guarded by whatever guards its owner
// (Conn.mu).
type callList struct {
	head, tail *call
	slot       linkSlot
}

// next returns the call after cl, nil at the end.
func (l *callList) next(cl *call) *call { return cl.links[l.slot].next }

// prev returns the call before cl, nil at the front.
func (l *callList) prev(cl *call) *call { return cl.links[l.slot].prev }

// contains reports whether cl is on the list.
func (l *callList) contains(cl *call) bool { return cl.links[l.slot].prev != nil || l.head == cl }

// The methods that link and unlink read l.slot once: the stores through
// the links would otherwise make the compiler load it again after each.

// pushBack links cl, which is on no list of l's slot, at the end.
func (l *callList) pushBack(cl *call) {
	s, tail := l.slot, l.tail
	cl.links[s] = link{prev: tail}
	if tail == nil {
		l.head = cl
	} else {
		tail.links[s].next = cl
	}
	l.tail = cl
}

// insertAfter links cl just after at, or at the front when at is nil.
func (l *callList) insertAfter(at, cl *call) {
	s := l.slot
	var next *call
	if at == nil {
		next = l.head
		l.head = cl
	} else {
		next = at.links[s].next
		at.links[s].next = cl
	}
	cl.links[s] = link{prev: at, next: next}
	if next == nil {
		l.tail = cl
	} else {
		next.links[s].prev = cl
	}
}

// remove unlinks cl, which must be on the list.
func (l *callList) remove(cl *call) {
	s := l.slot
	prev, next := cl.links[s].prev, cl.links[s].next
	if prev == nil {
		l.head = next
	} else {
		prev.links[s].next = next
	}
	if next == nil {
		l.tail = prev
	} else {
		next.links[s].prev = prev
	}
	cl.links[s] = link{}
}

// removeIfPresent unlinks cl if it is on the list.
func (l *callList) removeIfPresent(cl *call) {
	if l.contains(cl) {
		l.remove(cl)
	}
}
