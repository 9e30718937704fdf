package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRoundReadsBenchcmpsLogLine(t *testing.T) {
	// As benchcmp's run logs it (its format string, with figures).
	line := fmt.Sprintf("round %d/%d %-40s %10.0f ops/s  p50 %7.1fµs  cpu %6.2fµs/op  %5.2f allocs/op  %5.3f writes/op %5.3f reads/op",
		1, 1, "memcached/get-32B/16/kvwire", 198156.0, 74.5, 4.19, 1.0, 0.088, 0.153)
	id, s, ok, err := parseRound(line)
	if err != nil || !ok {
		t.Fatalf("parseRound(%q) = ok %v, err %v", line, ok, err)
	}
	want := sample{ops: 198156, p50: 74.5, cpu: 4.19, allocs: 1, writes: 0.088, reads: 0.153, mutexWait: -1}
	if id != "memcached/get-32B/16/kvwire" || s != want {
		t.Fatalf("parseRound = %q %+v, want %+v", id, s, want)
	}
	// Since s10 the line ends with the mutex wait.
	if _, s, ok, err := parseRound(line + "   5.01µs mutex wait/op"); err != nil || !ok || s.mutexWait != 5.01 {
		t.Fatalf("a line with the mutex wait: ok %v, err %v, %+v", ok, err, s)
	}
	// Unknown figures are logged as -1 (and as p50 -1.0 with no latency).
	if _, s, ok, _ := parseRound("round 2/5 mock/get-32B/1/raw 10 ops/s  p50    -1.0µs  cpu   2.00µs/op   0.00 allocs/op  -1.000 writes/op -1.000 reads/op"); !ok || s.writes != -1 || s.p50 != -1 {
		t.Fatalf("a line with unknown figures: ok %v, %+v", ok, s)
	}
	if _, _, _, err := parseRound("round 3/5 mock/get-32B/16/gocbcore       FAILED: timeout"); err == nil || !strings.Contains(err.Error(), "mock/get-32B/16/gocbcore failed: timeout") {
		t.Fatalf("a failed measurement: err %v", err)
	}
	if _, _, ok, err := parseRound("benchcmp: 42 measurements per round"); ok || err != nil {
		t.Fatalf("another line: ok %v, err %v", ok, err)
	}
}

// fakeBenchcmp writes a script that logs, as benchcmp does, one
// measurement of kvwire at the given ops/s and CPU per op and one of a
// control, and appends its arguments and the call's order to calls.
func fakeBenchcmp(t *testing.T, dir, name string, ops, cpu float64, calls string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	script := fmt.Sprintf(`#!/bin/sh
echo "%s $*" >> %s
echo "benchcmp: 2 measurements per round" >&2
echo "round 1/1 mock/get-32B/16/kvwire      %.0f ops/s  p50    10.0µs  cpu %6.2fµs/op   1.00 allocs/op  0.200 writes/op 0.400 reads/op" >&2
echo "round 1/1 mock/get-32B/16/gocbcore    1000 ops/s  p50    20.0µs  cpu  10.00µs/op  37.00 allocs/op  1.000 writes/op 0.500 reads/op" >&2
`, name, calls, ops, cpu)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunInterleavesTheBuildsAndComparesByRound(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	old := fakeBenchcmp(t, dir, "old", 1000, 5, calls)
	next := fakeBenchcmp(t, dir, "new", 1100, 4, calls)
	var out bytes.Buffer
	if err := run(&out, old, next, 3, []string{"-only", "^mock/"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []string{
		"old -only ^mock/ -rounds 1", "new -only ^mock/ -rounds 1",
		"new -only ^mock/ -rounds 1", "old -only ^mock/ -rounds 1",
		"old -only ^mock/ -rounds 1", "new -only ^mock/ -rounds 1",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("calls:\n%s\nwant (the first build alternating):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	rows := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "mock/") {
			rows[f[0]] = l
		}
	}
	for id, want := range map[string][]string{
		// rounds, ops old/new, ratio, CPU old/new, ratio, cheaper.
		"mock/get-32B/16/kvwire":   {"3", "1000", "1100", "1.100", "5.00", "4.00", "0.800", "3 of 3"},
		"mock/get-32B/16/gocbcore": {"3", "1000", "1000", "1.000", "10.00", "10.00", "1.000", "0 of 3"},
	} {
		row := rows[id]
		for _, w := range want {
			if !strings.Contains(row, " "+w+" ") {
				t.Errorf("%s: row %q has no %q", id, row, w)
			}
		}
	}
}

func TestRunStopsOnAFailedMeasurement(t *testing.T) {
	dir := t.TempDir()
	old := fakeBenchcmp(t, dir, "old", 1000, 5, filepath.Join(dir, "calls"))
	bad := filepath.Join(dir, "bad")
	script := "#!/bin/sh\necho 'round 1/1 mock/get-32B/16/kvwire   FAILED: conn refused' >&2\n"
	if err := os.WriteFile(bad, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	err := run(&bytes.Buffer{}, old, bad, 2, nil)
	if err == nil || !strings.Contains(err.Error(), "new build") || !strings.Contains(err.Error(), "conn refused") {
		t.Fatalf("run with a failing build: %v", err)
	}
}
