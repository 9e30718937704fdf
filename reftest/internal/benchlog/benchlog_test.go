package benchlog

import (
	"errors"
	"strings"
	"testing"
)

func TestParseReadsWhatLineWrites(t *testing.T) {
	f := Figures{OpsPerSec: 198156, P50: 74.5, CPUPerOp: 4.19, AllocsPerOp: 1, WritesPerOp: 0.088, ReadsPerOp: 0.153, MutexWaitPerOp: 5.01}
	id, got, ok, err := Parse(Line(1, 1, "memcached/get-32B/16/kvwire", f))
	if err != nil || !ok || id != "memcached/get-32B/16/kvwire" || got != f {
		t.Fatalf("Parse(Line(%+v)) = %q %+v, ok %v, err %v", f, id, got, ok, err)
	}
	// Unknown figures are logged as -1 (and as p50 -1.0 with no latency).
	u := Figures{OpsPerSec: 10, P50: -1, CPUPerOp: 2, WritesPerOp: -1, ReadsPerOp: -1, MutexWaitPerOp: -1}
	if _, got, ok, err := Parse(Line(2, 5, "mock/get-32B/1/raw", u)); err != nil || !ok || got != u {
		t.Fatalf("a line with unknown figures: %+v, ok %v, err %v; want %+v", got, ok, err, u)
	}
}

func TestParseReadsAnOlderBuildsLine(t *testing.T) {
	// Before the mutex wait was logged, the line ended at reads/op.
	line := "round 1/1 memcached/get-32B/16/kvwire                  198156 ops/s  p50    74.5µs  cpu   4.19µs/op   1.00 allocs/op  0.088 writes/op 0.153 reads/op"
	id, f, ok, err := Parse(line)
	want := Figures{OpsPerSec: 198156, P50: 74.5, CPUPerOp: 4.19, AllocsPerOp: 1, WritesPerOp: 0.088, ReadsPerOp: 0.153, MutexWaitPerOp: -1}
	if err != nil || !ok || id != "memcached/get-32B/16/kvwire" || f != want {
		t.Fatalf("Parse(%q) = %q %+v, ok %v, err %v; want %+v", line, id, f, ok, err, want)
	}
}

func TestParseReportsAFailedMeasurementAndSkipsOtherLines(t *testing.T) {
	if _, _, _, err := Parse(Failed(3, 5, "mock/get-32B/16/gocbcore", errors.New("timeout"))); err == nil || !strings.Contains(err.Error(), "mock/get-32B/16/gocbcore failed: timeout") {
		t.Fatalf("a failed measurement: err %v", err)
	}
	if _, _, ok, err := Parse("benchcmp: 42 measurements per round"); ok || err != nil {
		t.Fatalf("another line: ok %v, err %v", ok, err)
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
		if got := Median(tc.in); got != tc.want {
			t.Fatalf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Fatalf("Median reordered its input: %v", tc.in)
			}
		}
	}
}
