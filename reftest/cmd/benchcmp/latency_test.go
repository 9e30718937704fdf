package main

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
	"unsafe"
)

func TestHistBucketsRoundTrip(t *testing.T) {
	// Every value lands in a bucket whose midpoint is within 0.8% of it,
	// and bucket indexes grow with the value.
	prev := -1
	for v := uint64(0); v < 1<<36; v = v*17/16 + 1 {
		i := histIndex(v)
		if i < prev {
			t.Fatalf("index of %d is %d, below the previous value's %d", v, i, prev)
		}
		prev = i
		got := histValue(i)
		if diff := math.Abs(float64(got) - float64(v)); diff > 0.008*float64(v)+1 {
			t.Fatalf("value %d: bucket %d midpoint %d, off by %.2f%%", v, i, got, 100*diff/float64(v))
		}
	}
	if i := histIndex(math.MaxUint64); i != histBuckets-1 {
		t.Fatalf("the largest value goes to bucket %d, want the last (%d)", i, histBuckets-1)
	}
}

func TestHistQuantiles(t *testing.T) {
	var h, other hist
	for i := 1; i <= 90; i++ {
		h.addN(10*time.Microsecond, 1)
	}
	for i := 1; i <= 10; i++ {
		other.addN(time.Millisecond, 1)
	}
	h.merge(&other)
	if h.count() != 100 {
		t.Fatalf("n = %d after merging, want 100", h.count())
	}
	near := func(got, want time.Duration) bool {
		return math.Abs(float64(got-want)) <= 0.008*float64(want)
	}
	if p := h.quantile(0.5); !near(p, 10*time.Microsecond) {
		t.Fatalf("p50 = %v, want 10µs", p)
	}
	if p := h.quantile(0.90); !near(p, 10*time.Microsecond) {
		t.Fatalf("p90 = %v, want 10µs (90 of 100 values)", p)
	}
	if p := h.quantile(0.91); !near(p, time.Millisecond) {
		t.Fatalf("p91 = %v, want 1ms", p)
	}
	h.addN(5*time.Second, 900)
	if p := h.quantile(0.5); !near(p, 5*time.Second) {
		t.Fatalf("p50 after 900 slow ops = %v, want 5s", p)
	}
	var empty hist
	if p := empty.quantile(0.99); p != 0 {
		t.Fatalf("empty histogram p99 = %v, want 0", p)
	}
}

func TestRecorderTimesEveryOperationWithSample1(t *testing.T) {
	r := newRecorder(1, 1)
	for i := range 100 {
		if k := r.begin(1); k != 1 {
			t.Fatalf("op %d: %d timed, want 1", i, k)
		}
	}
	if k := r.begin(64); k != 64 {
		t.Fatalf("a window of 64: %d timed, want 64", k)
	}
}

func TestRecorderTimesNothingWithSample0(t *testing.T) {
	r := newRecorder(0, 1)
	for i := range 1000 {
		if k := r.begin(256); k != 0 {
			t.Fatalf("call %d: %d timed, want none", i, k)
		}
		r.end(0)
	}
	if r.latencies().count() != 0 {
		t.Fatalf("%d latencies recorded, want none", r.latencies().count())
	}
}

func TestRecorderTimesOneInSampleWhateverTheCallSize(t *testing.T) {
	// The same seed times the same number of operations whether a loop
	// asks one operation at a time, a window of 16 or a batch of 256: a
	// raw window and a client's single operations are sampled alike.
	const n, every = 1 << 20, 16
	count := func(window int) int {
		r := newRecorder(every, 7)
		total := 0
		for range n / window {
			k := r.begin(window)
			total += k
		}
		return total
	}
	one := count(1)
	if want := n / every; math.Abs(float64(one-want)) > 0.02*float64(want) {
		t.Fatalf("%d of %d operations timed, want about %d (one in %d)", one, n, want, every)
	}
	for _, w := range []int{16, 256} {
		if got := count(w); got != one {
			t.Fatalf("windows of %d: %d operations timed, one at a time %d", w, got, one)
		}
	}
}

func TestRecorderSamplesBothHalvesOfAnAlternatingMix(t *testing.T) {
	// Gaps are random: a loop alternating Get and Upsert has both timed
	// about equally (a fixed gap of 16 would time only Gets).
	r := newRecorder(16, 3)
	var even, odd int
	for i := range 1 << 20 {
		if k := r.begin(1); k > 0 {
			if i%2 == 0 {
				even++
			} else {
				odd++
			}
		}
	}
	if lo, hi := min(even, odd), max(even, odd); float64(lo) < 0.95*float64(hi) {
		t.Fatalf("timed %d even and %d odd operations, want about as many", even, odd)
	}
}

func TestRecordersOfOneSeedTimeTheSameOperations(t *testing.T) {
	// Goroutine g of every client has a recorder of seed g+1, reset
	// before each interval: each interval times the same operations.
	r := newRecorder(16, 5)
	seq := func(r *recorder) []int {
		var timed []int
		for i := range 10000 {
			if k := r.begin(1); k > 0 {
				timed = append(timed, i)
			}
		}
		return timed
	}
	first := seq(r)
	r.end(r.begin(1))
	r.reset()
	if r.latencies().count() != 0 {
		t.Fatalf("reset left %d latencies", r.latencies().count())
	}
	if again := seq(r); !slices.Equal(again, first) {
		t.Fatalf("after reset the timed operations are %v..., before %v...", again[:5], first[:5])
	}
	if other := seq(newRecorder(16, 5)); !slices.Equal(other, first) {
		t.Fatalf("another recorder of the same seed times %v..., this one %v...", other[:5], first[:5])
	}
	if other := seq(newRecorder(16, 6)); slices.Equal(other, first) {
		t.Fatal("recorders of seeds 5 and 6 time the same operations")
	}
}

func TestRecorderRecordsTheCallsTimeForEachTimedOperation(t *testing.T) {
	r := newRecorder(1, 1)
	k := r.begin(8)
	r.t0 -= time.Millisecond // a call that took 1 ms (and a bit)
	r.end(k)
	if r.latencies().count() != 8 {
		t.Fatalf("%d latencies recorded for a window of 8 timed operations, want 8", r.latencies().count())
	}
	if p := r.latencies().quantile(0.5); p < time.Millisecond || p > 2*time.Millisecond {
		t.Fatalf("recorded %v for a 1 ms call", p)
	}
}

func TestRecorderKeepsEveryLatencyItBuffers(t *testing.T) {
	r := newRecorder(1, 1)
	for range 40 { // two buffers' worth and a part of a third
		r.end(r.begin(1))
	}
	if n := r.latencies().count(); n != 40 {
		t.Fatalf("%d latencies recorded for 40 timed operations", n)
	}
	r.reset()
	if n := r.latencies().count(); n != 0 {
		t.Fatalf("%d latencies after reset", n)
	}
}

func TestRecorderIsTwoCacheLines(t *testing.T) {
	// Its size class (128) is aligned: no line shared with another
	// goroutine's recorder.
	if n := unsafe.Sizeof(recorder{}); n != 128 {
		t.Fatalf("a recorder is %d bytes, want 128", n)
	}
}

// BenchmarkRecorder is the harness's cost per operation of its latency
// record, at -sample N, for 256 goroutines' recorders used in turn (as
// their goroutines would: each one's histogram out of the cache).
func BenchmarkRecorder(b *testing.B) {
	b.Run("no recorder", func(b *testing.B) {
		recs := make([]*recorder, 256)
		for i := range recs {
			recs[i] = newRecorder(0, uint64(i+1))
		}
		n := 0
		for i := 0; b.Loop(); i++ {
			n += recs[i&255].every
		}
		_ = n
	})
	for _, every := range []int{1, 16, 64, 0} {
		b.Run(fmt.Sprintf("sample=%d", every), func(b *testing.B) {
			recs := make([]*recorder, 256)
			for i := range recs {
				recs[i] = newRecorder(every, uint64(i+1))
			}
			for i := 0; b.Loop(); i++ {
				r := recs[i&255]
				r.end(r.begin(1))
			}
		})
	}
}
