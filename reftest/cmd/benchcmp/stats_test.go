package main

import (
	"math"
	"os"
	"testing"
	"time"
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
		h.add(10 * time.Microsecond)
	}
	for i := 1; i <= 10; i++ {
		other.add(time.Millisecond)
	}
	h.merge(&other)
	if h.n != 100 {
		t.Fatalf("n = %d after merging, want 100", h.n)
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

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(tc.in); got != tc.want {
			t.Fatalf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Fatalf("median reordered its input: %v", tc.in)
			}
		}
	}
}

func TestCPUOfSelf(t *testing.T) {
	// /proc/<pid>/stat parsing: this process has used some CPU, and no
	// more than getrusage says plus a tick of rounding.
	for cpuSelf() < 50*time.Millisecond { // burn some CPU, whatever the load
	}
	d, ok := cpuOf(os.Getpid())
	if !ok {
		t.Skip("no /proc/<pid>/stat on this system")
	}
	self := cpuSelf()
	if d <= 0 || d > self+clockTick {
		t.Fatalf("cpuOf(self) = %v, getrusage says %v", d, self)
	}
	if _, ok := cpuOf(0); ok {
		t.Fatal("cpuOf(0) reported a figure")
	}
}
