package main

import (
	"os"
	"testing"
	"time"
)

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
