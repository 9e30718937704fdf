package main

import (
	"os"
	"testing"
	"time"
)

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
