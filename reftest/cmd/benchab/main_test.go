package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/reftest/internal/benchlog"
)

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

func TestCompareLeavesOutRoundsWhereAFigureIsUnknown(t *testing.T) {
	// A round that timed no operation logs p50 -1 (unknown): the old
	// build's p50 is the median of the rounds that have one.
	mk := func(name string, p50s ...float64) *build {
		b := &build{name: name, samples: map[string][]sample{}}
		for r, p := range p50s {
			b.samples["m"] = append(b.samples["m"], sample{round: r, Figures: benchlog.Figures{
				OpsPerSec: 1, P50: p, CPUPerOp: 1, MutexWaitPerOp: p}})
		}
		return b
	}
	cs := compare(mk("old", -1, 40, 50, -1), mk("new", 40, 40, 40, 40))
	if len(cs) != 1 || cs[0].oldP50 != 45 || cs[0].oldWait != 45 {
		t.Fatalf("compare: %+v, want old p50 and wait 45 (the median of the rounds that have them)", cs)
	}
}
