package main

import (
	"runtime"
	"testing"
	"time"
)

// nopWorker is a client that does nothing.
type nopWorker struct{}

func (nopWorker) get(int) error    { return nil }
func (nopWorker) upsert(int) error { return nil }

func TestClientJobAllocatesNothingInTheInterval(t *testing.T) {
	// The harness's allocations (goroutines, closures, the timer) happen
	// before the gate opens, so that allocs/op is the client's alone.
	const conc = 64
	ks := newKeyset("k", 100, 1, 1)
	j := &clientJob{conc: conc, mix: mixAlternate, ks: ks, newWorker: func() worker { return nopWorker{} }}
	if err := j.prepare(); err != nil {
		t.Fatal(err)
	}
	recs := make([]*recorder, conc)
	for i := range recs {
		recs[i] = newRecorder(1, uint64(i+1))
	}
	var ms0, ms1 runtime.MemStats
	g := newGate(20*time.Millisecond, func() { runtime.ReadMemStats(&ms0) })
	ops, err := j.run(g, recs)
	runtime.ReadMemStats(&ms1)
	g.end()
	if err != nil || ops == 0 {
		t.Fatalf("run: %d ops, %v", ops, err)
	}
	// A stray allocation or two of the runtime's own (the timer's
	// goroutine) may fall inside; one per goroutine would be the harness's.
	if n := ms1.Mallocs - ms0.Mallocs; n >= conc/2 {
		t.Fatalf("%d allocations inside the interval (%d goroutines, %d ops)", n, conc, ops)
	}
}
