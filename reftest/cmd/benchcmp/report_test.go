package main

import (
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reportOf builds the report of a run whose cells hold one sample per
// client, as given: figures[backend/workload/goroutines/client].
func reportOf(t *testing.T, figures map[string]sample) *report {
	t.Helper()
	rounds := map[string][]sample{}
	for id, s := range figures {
		rounds[id] = []sample{s}
	}
	return reportOfRounds(t, rounds)
}

// reportOfRounds builds the report of a run whose cells hold the samples
// given, one a round: rounds[backend/workload/goroutines/client].
func reportOfRounds(t *testing.T, rounds map[string][]sample) *report {
	t.Helper()
	return reportOfFailures(t, rounds, nil)
}

// reportOfFailures is reportOfRounds for a run in which the clients in
// failed failed with that error after the samples given (none: in the
// first round).
func reportOfFailures(t *testing.T, rounds map[string][]sample, failed map[string]error) *report {
	t.Helper()
	for id := range failed {
		if _, ok := rounds[id]; !ok {
			rounds[id] = nil
		}
	}
	cfg := &config{concs: []int{1, 16, 256}, bestConns: 4, bestWindow: 64}
	cells := map[string]*cell{}
	var order []*cell
	for id, ss := range rounds {
		parts := strings.Split(id, "/")
		if len(parts) != 4 {
			t.Fatalf("id %q: want backend/workload/goroutines/client", id)
		}
		key := strings.Join(parts[:3], "/")
		c := cells[key]
		if c == nil {
			conc, err := strconv.Atoi(parts[2])
			if err != nil {
				t.Fatalf("id %q: %v", id, err)
			}
			c = &cell{backend: parts[0], wl: &workload{name: parts[1]}, conc: conc,
				samples: map[string][]sample{}, failed: map[string]error{}}
			cells[key] = c
			order = append(order, c)
		}
		c.variants = append(c.variants, &variant{id: parts[3], name: parts[3]})
		c.samples[parts[3]] = append(c.samples[parts[3]], ss...)
		if err := failed[id]; err != nil {
			c.failed[parts[3]] = err
		}
	}
	return buildReport(cfg, &env{}, order)
}

// wantTarget is a target row as a test expects it: the row whose text
// starts with prefix, and its required, measured and result columns.
type wantTarget struct{ prefix, required, measured, result string }

func wantTargets(t *testing.T, r *report, want []wantTarget) {
	t.Helper()
	for _, w := range want {
		row := targetRow(t, r, w.prefix)
		if row[1] != w.required || row[2] != w.measured || row[3] != w.result {
			t.Errorf("%s: %v, want required %s, measured %s, %s", w.prefix, row[1:], w.required, w.measured, w.result)
		}
	}
}

// targetRow finds the target row whose text starts with prefix.
func targetRow(t *testing.T, r *report, prefix string) []string {
	t.Helper()
	for _, row := range r.targetRows() {
		if strings.HasPrefix(row[0], prefix) {
			return row
		}
	}
	t.Fatalf("no target row %q in %v", prefix, r.targetRows())
	return nil
}

func TestReportJudgesTheWireTargets(t *testing.T) {
	r := reportOf(t, map[string]sample{
		"memcached/get-32B/256/kvwire":    {opsPerSec: 600},
		"memcached/get-32B/256/raw":       {opsPerSec: 900},
		"memcached/get-32B/256/raw-best":  {opsPerSec: 1000},
		"memcached/get-32B/16/kvwire":     {opsPerSec: 79},
		"memcached/get-32B/16/raw":        {opsPerSec: 100},
		"memcached/get-32B/16/gomemcache": {opsPerSec: 40},
		"memcached/get-32B/1/kvwire":      {opsPerSec: 1, p50: 52.4},
		"memcached/get-32B/1/raw":         {opsPerSec: 1, p50: 50},
	})
	wantTargets(t, r, []wantTarget{
		{"memcached get-32B, 256 goroutines: kvwire ops/s ÷ best raw loop (here 4 conns × 64)", "≥ 0.60", "0.60", "PASS"},
		{"memcached get-32B, 16 goroutines: kvwire ops/s ÷ raw 1 conn × 16 window", "≥ 0.80", "0.79", "MISS"},
		{"  same, kvwire ÷ gomemcache", "—", "1.98", "context"},
		{"memcached get-32B, 1 goroutine: kvwire p50 ÷ raw round trip p50", "≤ 1.05", "1.05", "PASS"},
		{"memcached get-1KiB, 16 goroutines", "≥ 0.80", "n/a", "not run"},
	})
}

func TestReportJudgesAllocationsAsShownAtTheWorstConcurrency(t *testing.T) {
	r := reportOf(t, map[string]sample{
		"mock/get-32B/1/kvwire":       {opsPerSec: 1, allocsPerOp: 1},
		"mock/get-32B/256/kvwire":     {opsPerSec: 1, allocsPerOp: 1.004}, // shown as 1.00
		"mock/get-1KiB/16/kvwire":     {opsPerSec: 1, allocsPerOp: 1.006}, // shown as 1.01
		"mock/upsert-1KiB/1/kvwire":   {opsPerSec: 1, allocsPerOp: 0},
		"mock/upsert-1KiB/256/kvwire": {opsPerSec: 1, allocsPerOp: 0.02},
	})
	wantTargets(t, r, []wantTarget{
		{"mock get-32B: kvwire allocs/op", "≤ 1.00", "1.00", "PASS"},
		{"mock get-1KiB: kvwire allocs/op", "≤ 1.00", "1.01", "MISS"},
		{"mock upsert-1KiB: kvwire allocs/op", "≤ 0.00", "0.02", "MISS"},
	})
}

func TestReportCountsTheRoundsEachTargetPasses(t *testing.T) {
	// Medians pass (kvwire 0.60 of the best raw loop, CPU 0.50 of
	// gocbcore's) while single rounds do not; a client that failed after
	// its second round counts two rounds.
	r := reportOfRounds(t, map[string][]sample{
		"memcached/get-32B/256/kvwire":   {{opsPerSec: 500}, {opsPerSec: 600}, {opsPerSec: 700}},
		"memcached/get-32B/256/raw":      {{opsPerSec: 100}, {opsPerSec: 100}, {opsPerSec: 100}},
		"memcached/get-32B/256/raw-best": {{opsPerSec: 1000}, {opsPerSec: 1000}, {opsPerSec: 1000}},
		"mock/get-32B/16/kvwire":         {{opsPerSec: 1, cpuPerOp: 4}, {opsPerSec: 1, cpuPerOp: 6}, {opsPerSec: 1, cpuPerOp: 5}},
		"mock/get-32B/16/gocbcore":       {{opsPerSec: 1, cpuPerOp: 10}, {opsPerSec: 1, cpuPerOp: 10}},
		"mock/get-1KiB/1/kvwire":         {{opsPerSec: 1, allocsPerOp: 1}, {opsPerSec: 1, allocsPerOp: 1.2}},
		"mock/get-1KiB/16/kvwire":        {{opsPerSec: 1, allocsPerOp: 1.1}, {opsPerSec: 1, allocsPerOp: 1}},
	})
	for _, w := range []struct{ prefix, result, passing string }{
		{"memcached get-32B, 256 goroutines: kvwire ops/s ÷ best raw loop", "PASS", "2 of 3"},
		{"  same, ÷ raw loop on kvwire's connections", "context", "—"},
		{"mock get-32B, 16 goroutines: kvwire ÷ gocbcore client CPU/op", "PASS", "1 of 2"},
		{"mock get-32B, 16 goroutines: kvwire ÷ gocbcore ops/s", "MISS", "0 of 2"},
		// The most of each round: 1.1 and 1.2.
		{"mock get-1KiB: kvwire allocs/op", "MISS", "0 of 2"},
	} {
		row := targetRow(t, r, w.prefix)
		if row[3] != w.result || row[4] != w.passing {
			t.Errorf("%s: %s, rounds passing %s; want %s, %s", w.prefix, row[3], row[4], w.result, w.passing)
		}
	}
}

func TestReportShowsNoLatencyWhenNoneWasTimed(t *testing.T) {
	r := reportOf(t, map[string]sample{
		"memcached/get-32B/1/kvwire": {opsPerSec: 1, p50: -1, p99: -1},
		"memcached/get-32B/1/raw":    {opsPerSec: 1, p50: -1, p99: -1},
	})
	for _, row := range r.rows {
		if row[7] != "n/a" || row[8] != "n/a" {
			t.Fatalf("row %v shows latency %s/%s, want n/a", row[:4], row[7], row[8])
		}
	}
	row := targetRow(t, r, "memcached get-32B, 1 goroutine: kvwire p50")
	if row[2] != "n/a" {
		t.Fatalf("p50 target measured %s with no latency recorded", row[2])
	}
}

func TestProfilingRunMeasuresTheProfiledCellsOnly(t *testing.T) {
	ids := func(cfg *config) []string {
		var out []string
		for _, c := range plan(cfg, &clients{cfg: cfg}, nil, nil) {
			for _, v := range c.variants {
				out = append(out, c.id(v))
			}
		}
		return out
	}
	cfg := &config{memcached: "127.0.0.1:1", mock: "couchbase://127.0.0.1/default", concs: []int{1, 16, 256},
		bestConns: 4, bestWindow: 64, batch: 256, profile: regexp.MustCompile(`/get-32B/(1|256)/kvwire$`)}
	got := ids(cfg)
	want := []string{
		"memcached/get-32B/1/kvwire", "memcached/get-32B/1/kvwire-ctx", "memcached/get-32B/1/kvwire-opctx",
		"memcached/get-32B/1/gomemcache", "memcached/get-32B/1/raw",
		"memcached/get-32B/256/kvwire", "memcached/get-32B/256/kvwire-4c", "memcached/get-32B/256/gomemcache",
		"memcached/get-32B/256/raw", "memcached/get-32B/256/raw-best",
		"mock/get-32B/1/kvwire", "mock/get-32B/1/kvwire-ctx", "mock/get-32B/1/kvwire-opctx", "mock/get-32B/1/gocbcore",
		"mock/get-32B/256/kvwire", "mock/get-32B/256/gocbcore",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("a run profiling %s measures\n%v\nwant\n%v", cfg.profile, got, want)
	}
	// With -only, -only alone chooses what is measured.
	cfg.only = regexp.MustCompile(`^mock/upsert-1KiB/16/`)
	if got := ids(cfg); !slices.Equal(got, []string{"mock/upsert-1KiB/16/kvwire", "mock/upsert-1KiB/16/gocbcore"}) {
		t.Fatalf("with -only, a profiling run measures %v", got)
	}
}

func TestReportPassesNoTargetWhoseClientFailed(t *testing.T) {
	// A client that failed (an error, a miss, a value of the wrong
	// length) in a round is measured no more: its figures are those of
	// the rounds before, which pass here. A target over it must say it
	// failed, not PASS on those rounds, nor "not run" when it failed in
	// the first.
	timeout := errors.New("key kvb:s:000017: timeout")
	r := reportOfFailures(t, map[string][]sample{
		"memcached/get-32B/256/kvwire":   {{opsPerSec: 900}, {opsPerSec: 900}},
		"memcached/get-32B/256/raw":      {{opsPerSec: 1000}, {opsPerSec: 1000}, {opsPerSec: 1000}},
		"memcached/get-32B/256/raw-best": {{opsPerSec: 1000}, {opsPerSec: 1000}, {opsPerSec: 1000}},
		"memcached/get-32B/16/raw":       {{opsPerSec: 100}, {opsPerSec: 100}, {opsPerSec: 100}},
		"memcached/get-1KiB/256/kvwire":  {{opsPerSec: 900}, {opsPerSec: 900}, {opsPerSec: 900}},
		"memcached/get-1KiB/256/raw":     {{opsPerSec: 1000}, {opsPerSec: 1000}, {opsPerSec: 1000}},
		// The best raw loop failed after a round: the best is unknown.
		"memcached/get-1KiB/256/raw-best": {{opsPerSec: 2000}},
		"mock/get-32B/1/kvwire":           {{opsPerSec: 1, cpuPerOp: 1, allocsPerOp: 1}, {opsPerSec: 1, cpuPerOp: 1, allocsPerOp: 1}},
		"mock/get-32B/1/gocbcore":         {{opsPerSec: 1, cpuPerOp: 10}, {opsPerSec: 1, cpuPerOp: 10}},
		"mock/get-32B/16/kvwire":          {{opsPerSec: 1, cpuPerOp: 1, allocsPerOp: 1}},
		"mock/get-32B/16/gocbcore":        {{opsPerSec: 1, cpuPerOp: 10}, {opsPerSec: 1, cpuPerOp: 10}},
	}, map[string]error{
		"memcached/get-32B/256/kvwire":    timeout,
		"memcached/get-32B/16/kvwire":     timeout, // in the first round
		"memcached/get-1KiB/256/raw-best": timeout,
		"mock/get-32B/16/kvwire":          timeout,
		"mock/get-32B/256/kvwire":         timeout, // both in the first round
		"mock/get-32B/256/gocbcore":       timeout,
	})
	wantTargets(t, r, []wantTarget{
		{"memcached get-32B, 256 goroutines: kvwire ops/s ÷ best raw loop", "≥ 0.60", "0.90", "FAILED"},
		{"memcached get-32B, 16 goroutines: kvwire ops/s ÷ raw 1 conn × 16 window", "≥ 0.80", "n/a", "FAILED"},
		{"memcached get-1KiB, 256 goroutines: kvwire ops/s ÷ best raw loop", "≥ 0.60", "0.45", "FAILED"},
		{"mock get-32B, 16 goroutines: kvwire ÷ gocbcore client CPU/op", "≤ 0.50", "0.10", "FAILED"},
		{"mock get-32B, 256 goroutines: kvwire ÷ gocbcore client CPU/op", "≤ 0.50", "n/a", "FAILED"},
		// The most of its rows, one of which failed.
		{"mock get-32B: kvwire allocs/op", "≤ 1.00", "1.00", "FAILED"},
		// Its clients did not fail.
		{"mock get-32B, 1 goroutine: kvwire ÷ gocbcore client CPU/op", "≤ 0.50", "0.10", "PASS"},
	})
}

func TestReportNamesTheGetsOfKvwiresBinaryMultiGet(t *testing.T) {
	// kvwire's GetMany with binary_multiget sends a GETKQ per key (its
	// answers carry the key, which the client checks: client/batch.go),
	// not the raw batch's GETQ: the report must not say it sends GETQ.
	cfg := &config{concs: []int{1}, bestConns: 4, bestWindow: 64, batch: 256}
	r := buildReport(cfg, &env{}, nil)
	targetRow(t, r, "  kvwire GetMany with binary_multiget (256 GETKQ + NOOP) ÷ the raw batch")
	notes := strings.Join(r.notes, "\n")
	for _, want := range []string{
		"with binary_multiget (MemcachedOptions.BinaryMultiGet) as GETKQ per key and a NOOP",
		"sends a quiet get (GETQ) per key and a NOOP: the requests of kvwire's binary path but for the key in each answer",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("the batch note does not say %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "as GETQ per key") {
		t.Errorf("the batch note says kvwire's binary multi-get sends GETQ")
	}
}

func TestReportSaysWhatMutexWaitCounts(t *testing.T) {
	// /sync/mutex/wait/total:seconds sums the time blocked on a
	// sync.Mutex or sync.RWMutex and the time spent waiting for the
	// runtime's own locks (runtime/metrics' description; Go's
	// totalMutexWaitTimeNanos): the raw loops, which take no mutex, show
	// some. The note must not say it is a sync.Mutex's alone.
	r := buildReport(&config{concs: []int{1}, bestConns: 4, bestWindow: 64}, &env{}, nil)
	for _, n := range r.notes {
		if strings.HasPrefix(n, "mutex wait:") {
			for _, want := range []string{"sync.RWMutex", "the runtime's own locks"} {
				if !strings.Contains(n, want) {
					t.Errorf("the mutex wait note does not name %q: %s", want, n)
				}
			}
			return
		}
	}
	t.Fatal("no mutex wait note")
}

// fakeJob is a job whose run lets the gate open and returns ops, or err.
type fakeJob struct {
	ops int64
	err error
}

func (fakeJob) prepare() error { return nil }
func (fakeJob) close()         {}
func (j fakeJob) run(g *gate, _ []*recorder) (int64, error) {
	g.open(0)
	return j.ops, j.err
}

func TestAFailedProfileKeepsTheRunsReport(t *testing.T) {
	// The profiled intervals come after every round: one that fails (a
	// timeout, say) must not throw away the rounds' report (run returned
	// its error, writing none), only say that it failed.
	cfg := &config{profile: regexp.MustCompile(`/kvwire$`), profileDir: t.TempDir(), profileDuration: time.Millisecond}
	var cells []*cell
	for _, j := range []fakeJob{{err: errors.New("key k: timeout")}, {ops: 1}} {
		c := &cell{backend: "mock", wl: &workload{name: "get-32B"}, conc: 1 + len(cells),
			samples: map[string][]sample{}, jobs: map[string]job{}, failed: map[string]error{}}
		c.variants = []*variant{{id: "kvwire", name: "kvwire", job: func() (job, error) { return j, nil }}}
		cells = append(cells, c)
	}
	e := &env{}
	profileAll(cfg, e, cells, []*recorder{newRecorder(1, 1)})
	if len(e.profiles) != 2 {
		t.Fatalf("%d profiles, want 2", len(e.profiles))
	}
	notes := strings.Join(buildReport(&config{}, e, nil).notes, "\n")
	for _, want := range []string{"mock/get-32B/1/kvwire: FAILED: key k: timeout", "mock/get-32B/2/kvwire: " + cfg.profileDir} {
		if !strings.Contains(notes, want) {
			t.Errorf("the profiles' note does not say %q:\n%s", want, notes)
		}
	}
}

func TestMediansLeaveOutRoundsWhereAFigureIsUnknown(t *testing.T) {
	// A round can time no operation (a large -sample, a short interval):
	// its p50 is unknown (-1), not a latency to average with the others.
	fg := medians([]sample{
		{opsPerSec: 1, p50: -1, p99: -1, srvPerOp: -1, readsPerOp: -1, writesPerOp: -1, mutexWaitPerOp: -1},
		{opsPerSec: 1, p50: 40, p99: 80, srvPerOp: 2, readsPerOp: 1, writesPerOp: 1, mutexWaitPerOp: 0},
		{opsPerSec: 1, p50: 50, p99: 100, srvPerOp: 4, readsPerOp: 3, writesPerOp: 2, mutexWaitPerOp: 1},
		{opsPerSec: 1, p50: -1, p99: -1, srvPerOp: -1, readsPerOp: -1, writesPerOp: -1, mutexWaitPerOp: -1},
	})
	got := []float64{fg.p50, fg.p99, fg.srv, fg.reads, fg.writes, fg.mutexWait}
	if want := []float64{45, 90, 3, 2, 1.5, 0.5}; !slices.Equal(got, want) {
		t.Fatalf("p50, p99, server CPU, reads, writes, mutex wait: %v, want %v (the medians of the rounds that have them)", got, want)
	}
	fg = medians([]sample{{opsPerSec: 1, p50: -1}, {opsPerSec: 2, p50: -1}})
	if fg.p50 != -1 {
		t.Fatalf("p50 %v from rounds that timed nothing, want -1 (unknown)", fg.p50)
	}
}
