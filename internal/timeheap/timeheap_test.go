package timeheap

import (
	"math/rand"
	"slices"
	"testing"
	"time"
)

// Entries pushed in any order pop earliest first.
func TestPopsInOrder(t *testing.T) {
	base := time.Now()
	r := rand.New(rand.NewSource(1))
	var h Heap
	var want []time.Time
	for i := range 200 {
		at := base.Add(time.Duration(r.Intn(50)) * time.Millisecond)
		want = append(want, at)
		h.Push(Entry{At: at, I: int32(i)})
	}
	slices.SortFunc(want, func(a, b time.Time) int { return a.Compare(b) })
	for i, w := range want {
		if e := h.Pop(); !e.At.Equal(w) {
			t.Fatalf("pop %d: %v, want %v", i, e.At.Sub(base), w.Sub(base))
		}
	}
	if len(h) != 0 {
		t.Fatalf("%d left", len(h))
	}
}
