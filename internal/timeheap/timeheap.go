// Package timeheap is a binary min-heap of waits by the time they end: a
// batch's retry waits, one timer for all of them. It allocates nothing
// but its slice's growth.
package timeheap

import "time"

// Entry is one wait: when it ends, and whose it is (the caller's index and
// generation: an entry whose generation is no longer its owner's is stale,
// and the caller skips it).
type Entry struct {
	At  time.Time
	I   int32
	Gen uint32
}

// Heap is a min-heap of entries by At; the earliest is h[0].
type Heap []Entry

// Push adds e.
func (h *Heap) Push(e Entry) {
	*h = append(*h, e)
	s := *h
	for j := len(s) - 1; j > 0; {
		p := (j - 1) / 2
		if !s[j].At.Before(s[p].At) {
			break
		}
		s[j], s[p] = s[p], s[j]
		j = p
	}
}

// Pop removes and returns the earliest entry; h must not be empty.
func (h *Heap) Pop() Entry {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for j := 0; ; {
		l, r, m := 2*j+1, 2*j+2, j
		if l < len(s) && s[l].At.Before(s[m].At) {
			m = l
		}
		if r < len(s) && s[r].At.Before(s[m].At) {
			m = r
		}
		if m == j {
			break
		}
		s[j], s[m] = s[m], s[j]
		j = m
	}
	*h = s
	return top
}
