package main

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// nopWorker is a client that does nothing but count its operations.
type nopWorker struct{ ops *atomic.Int64 }

func (w nopWorker) get(int) error    { w.ops.Add(1); return nil }
func (w nopWorker) upsert(int) error { w.ops.Add(1); return nil }

func TestClientJobAllocatesNothingInTheInterval(t *testing.T) {
	// The harness's allocations (goroutines, closures, the timer) happen
	// before the gate opens, so that allocs/op is the client's alone.
	const conc = 64
	var done atomic.Int64
	ks := newKeyset("k", 100, 1, 1)
	j := &clientJob{conc: conc, mix: mixAlternate, ks: ks, newWorker: func() worker { return nopWorker{&done} }}
	if err := j.prepare(); err != nil {
		t.Fatal(err)
	}
	recs := make([]*recorder, conc)
	for i := range recs {
		recs[i] = newRecorder(1, uint64(i+1))
	}
	var ms0, ms1 runtime.MemStats
	// The interval ends once the goroutines have done conc*100
	// operations, not after a time that a loaded machine may spend
	// elsewhere: the stopper, started before the gate opens, yields
	// until then. The gate's own timer is set past the test's end.
	g := newGate(time.Hour, func() { runtime.ReadMemStats(&ms0) })
	go func() {
		for done.Load() < conc*100 {
			runtime.Gosched()
		}
		g.stop.Store(true)
	}()
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
