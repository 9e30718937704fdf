package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

// The harness end to end on loopback, against the in-process mock cluster
// through the real client: a correct run must pass every check, and a
// client that lies in each of the ways the checks look for must fail the
// matching check. iptables is replaced by fakeNet, which records the rules
// and lets a store act out the partition they make.

func connectMock(t *testing.T) *client.Client {
	t.Helper()
	mc, err := mockcluster.New(mockcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, mc.ConnString()+"/default", &client.Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// fakeNet stands in for ip netns exec iptables: it keeps the rules added,
// answers iptables-save with a counter of 1 for each, and reports whether a
// partition (a DROP without statistic) is in place.
type fakeNet struct {
	mu    sync.Mutex
	rules map[string]string // "ns table" + rule -> the saved line
	cut   atomic.Bool
	heal  atomic.Pointer[time.Time] // the last partition removal
	clk   *vclock                   // the time of heal; nil: the system's
}

func (f *fakeNet) run(_ context.Context, argv []string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rules == nil {
		f.rules = map[string]string{}
	}
	cmd := strings.Join(argv, " ")
	switch {
	case strings.Contains(cmd, " iptables-save "):
		var b strings.Builder
		for _, line := range f.rules {
			b.WriteString(line + "\n")
		}
		return []byte(b.String()), nil
	case strings.Contains(cmd, " /proc/net/snmp"):
		return nil, nil
	}
	for i, a := range argv {
		if a != "-A" && a != "-D" {
			continue
		}
		id := strings.Join(argv[:i], " ") + " " + strings.Join(argv[i+1:], " ")
		partition := !strings.Contains(cmd, "statistic") && strings.Contains(cmd, "-j DROP")
		if a == "-A" {
			f.rules[id] = "[1:100] -A " + strings.Join(argv[i+1:], " ")
			if partition {
				f.cut.Store(true)
			}
		} else {
			if _, ok := f.rules[id]; !ok {
				return nil, fmt.Errorf("iptables: no such rule: %s", cmd)
			}
			delete(f.rules, id)
			if partition {
				f.cut.Store(false)
				now := time.Now()
				if f.clk != nil {
					now = f.clk.Now()
				}
				f.heal.Store(&now)
			}
		}
		return nil, nil
	}
	return nil, fmt.Errorf("fakeNet: unexpected command %q", cmd)
}

// liar wraps the real client's store and misbehaves on the every-th Append.
type liar struct {
	store
	every int
	n     atomic.Int64
	lies  atomic.Int64 // how many Appends lied
	lie   func(ctx context.Context, s store, key string, value []byte) error
	net   *fakeNet
	// down: after a partition heals, operations keep failing this long.
	down time.Duration
	// clk, when set, is the time of down and failWait (else the system's).
	clk *vclock
}

func (l *liar) Append(ctx context.Context, key string, value []byte) error {
	if l.lie != nil && l.n.Add(1)%int64(l.every) == 0 {
		l.lies.Add(1)
		return l.lie(ctx, l.store, key, value)
	}
	if err := l.partitioned(ctx); err != nil {
		return err
	}
	return l.store.Append(ctx, key, value)
}

func (l *liar) Insert(ctx context.Context, key string, value []byte) error {
	if err := l.partitioned(ctx); err != nil {
		return err
	}
	return l.store.Insert(ctx, key, value)
}

func (l *liar) Get(ctx context.Context, key string) ([]byte, error) {
	if err := l.partitioned(ctx); err != nil {
		return nil, err
	}
	return l.store.Get(ctx, key)
}

// failWait is how long an operation the fake partition fails takes, as
// an unreachable node would take some time.
const failWait = 10 * time.Millisecond

// partitioned fails an operation (after failWait) while the fake
// partition is in place or less than down after it healed.
func (l *liar) partitioned(ctx context.Context) error {
	if l.net == nil {
		return nil
	}
	now := time.Now()
	if l.clk != nil {
		now = l.clk.Now()
	}
	healed := l.net.heal.Load()
	if !l.net.cut.Load() && (healed == nil || now.Sub(*healed) >= l.down) {
		return nil
	}
	if l.clk != nil {
		l.clk.advance(failWait)
		return fmt.Errorf("fake partition: %w", client.ErrNoNodeAvailable)
	}
	t := time.NewTimer(failWait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return fmt.Errorf("fake partition: %w", client.ErrNoNodeAvailable)
}

func testConfig(run runner) config {
	return config{workers: 4, timeout: client.DefaultKVTimeout, writeRatio: 0.5, writesPerKey: 20,
		maxOpsPerPhase: 20000, verifyAttempts: 3, recoveryLimit: 2 * time.Second, seed: 7, run: run}
}

// stillLateness is a lateness that saw no wake-up late: the deadline
// margin is baseMargin whatever the machine's load, so whether an
// operation is flagged depends only on how far past its deadline it ended.
// (How the margin grows with measured lateness is
// TestLatenessMarginCoversTheSlowestWakeUpAroundADeadline's.)
func stillLateness() *lateness {
	l := &lateness{stop: make(chan struct{}), done: make(chan struct{})}
	close(l.done)
	return l
}

// runHarnessWith runs the phases and the final read-back with the
// deadline margin of lat, which it closes, and returns the violations by
// check.
func runHarnessWith(t *testing.T, cfg config, st store, lat *lateness, specs ...phaseSpec) (map[string]int, []*phaseResult) {
	t.Helper()
	return runHarnessOn(t, cfg, st, lat, realClock{}, specs...)
}

// runHarnessOn is runHarnessWith on the harness clock clk.
func runHarnessOn(t *testing.T, cfg config, st store, lat *lateness, clk clock, specs ...phaseSpec) (map[string]int, []*phaseResult) {
	t.Helper()
	defer lat.close()
	// Every run writes keys of its own in the shared mock cluster.
	cfg.keyPrefix = fmt.Sprintf("t%d-", time.Now().UnixNano())
	h := newHarness(cfg, st, lat)
	h.clk = clk
	ctx := context.Background()
	var results []*phaseResult
	for i, spec := range specs {
		results = append(results, h.runPhase(ctx, i, spec, testTopo))
	}
	_, final := h.verify(ctx, func(int) bool { return true })
	s := summarize(results, final, nil)
	for _, pr := range results {
		for _, v := range pr.violations {
			t.Logf("phase %s: %s", pr.spec.name, v)
		}
	}
	return s.counts, results
}

// Each phase runs a fixed number of operations (its duration is only a
// cap), so that a loaded machine cannot leave a phase with no operation or
// no acknowledged write. The phases run on a virtual clock on which each
// operation takes opStep, so the fault's schedule (in place for the loss
// phase's first 100 operations' time) and every time the checks read are
// the same on any machine: the test shows that the checks of what the
// cluster holds (lost, applied twice, unreported, ...) pass a correct
// client, and the deadline check then sees no operation past its
// deadline. Whether a correct client ends its operations at their deadline
// in real time is the real run's measurement (lateness.go), a wall-clock
// rule a test cannot hold on a loaded machine; how the check catches a
// client ending 500 ms late is TestHarnessDetectsALyingClient's.
func TestHarnessPassesACorrectClient(t *testing.T) {
	c := connectMock(t)
	clk := newVClock()
	net := &fakeNet{clk: clk}
	loss := lossFault(testTopo, 0.05)
	cfg := testConfig(net.run)
	cfg.maxOpsPerPhase = 200
	counts, results := runHarnessOn(t, cfg, timed{clientStore{c.DefaultCollection()}, clk}, stillLateness(), clk,
		phaseSpec{name: "baseline", dur: time.Minute},
		phaseSpec{name: "loss", dur: time.Minute, fault: &loss, to: 100 * time.Millisecond})
	if len(counts) != 0 {
		t.Fatalf("violations on a correct run: %v", counts)
	}
	for _, pr := range results {
		if ran := len(pr.ops); ran != cfg.maxOpsPerPhase {
			t.Fatalf("phase %s ran %d of its %d operations in %v", pr.spec.name, ran, cfg.maxOpsPerPhase, pr.wall)
		}
		if pr.writes[acked] == 0 || pr.classes["get ok"] == 0 || pr.verified == 0 {
			t.Fatalf("phase %s tested nothing: writes %v, results %v, %d keys read back", pr.spec.name, pr.writes, pr.classes, pr.verified)
		}
		if pr.spec.fault != nil && (pr.faultStart != pr.start || pr.heal != pr.start.Add(pr.spec.to)) {
			t.Fatalf("phase %s: the fault was in place from +%v to +%v, not from +0 to +%v", pr.spec.name,
				pr.faultStart.Sub(pr.start), pr.heal.Sub(pr.start), pr.spec.to)
		}
	}
	if len(net.rules) != 0 {
		t.Fatalf("rules left in place after the phase: %v", net.rules)
	}
}

// Each lying client runs a phase of a fixed number of operations (the
// phase's duration is only a cap), so that it lies the same number of
// times however loaded the machine is.
func TestHarnessDetectsALyingClient(t *testing.T) {
	c := connectMock(t)
	real := clientStore{c.DefaultCollection()}
	cases := []struct {
		name    string
		lie     func(ctx context.Context, s store, key string, value []byte) error
		timeout time.Duration
		want    string
	}{
		{"applies a write twice", func(ctx context.Context, s store, key string, value []byte) error {
			_ = s.Append(ctx, key, value)
			return s.Append(ctx, key, value)
		}, 0, checkTwice},
		{"acknowledges a write it never sent", func(context.Context, store, string, []byte) error {
			return nil
		}, 0, checkLost},
		{"says not applied of a write it applied", func(ctx context.Context, s store, key string, value []byte) error {
			if err := s.Append(ctx, key, value); err != nil {
				return err
			}
			return fmt.Errorf("lie: %w", client.ErrTemporaryFailure)
		}, 0, checkUnreported},
		// Checked against the margin of a machine that never stalls
		// (stillLateness): on the measured one, a loaded machine's
		// stalls during the lie's sleep widen the margin past the 500 ms
		// the lie overshoots by, and excuse it.
		{"ends past its deadline", func(ctx context.Context, s store, key string, value []byte) error {
			time.Sleep(700 * time.Millisecond) // the lie: 500 ms past a 200 ms deadline
			return s.Append(ctx, key, value)
		}, 200 * time.Millisecond, checkDeadline},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(nil)
			// 200 operations: about 90 Appends, so 3 lies.
			cfg.maxOpsPerPhase = 200
			var lat *lateness
			if tc.timeout > 0 {
				cfg.timeout = tc.timeout
				lat = stillLateness()
			} else {
				lat = startLateness()
			}
			l := &liar{store: real, every: 25, lie: tc.lie}
			counts, results := runHarnessWith(t, cfg, l, lat,
				phaseSpec{name: "baseline", dur: time.Minute})
			if ran := len(results[0].ops); ran != cfg.maxOpsPerPhase || l.lies.Load() == 0 {
				t.Fatalf("the phase ran %d of its %d operations in %v, %d of them lies", ran, cfg.maxOpsPerPhase, results[0].wall, l.lies.Load())
			}
			t.Logf("%d operations in %v, %d lies; violations %v", len(results[0].ops), results[0].wall, l.lies.Load(), counts)
			if counts[tc.want] == 0 {
				t.Fatalf("a client that %s passed %q (violations %v)", tc.name, tc.want, counts)
			}
			if tc.want == checkDeadline && int64(counts[tc.want]) < l.lies.Load() {
				t.Fatalf("%d of the %d operations that ended 500 ms past their deadline were flagged", counts[tc.want], l.lies.Load())
			}
			for k := range counts {
				if k != tc.want && k != checkForeign {
					t.Errorf("a client that %s also failed %q", tc.name, k)
				}
			}
		})
	}
}

// TestHarnessMeasuresRecoveryFromAPartition acts a partition out through
// fakeNet: operations fail while it is in place and for `down` after it
// heals, each failure taking failWait. It runs on a virtual clock, one
// worker, each answered operation taking opStep: after the heal the
// worker's failures go on until down has passed, and the first operation
// that starts after that succeeds, so its recovery is at least down and
// less than down + failWait + opStep, whatever the machine's speed. A down
// of 100 ms therefore passes a limit of 100 ms + failWait + opStep, and a
// down 500 ms longer than the limit fails it. (How recovery() takes the
// worst of several workers is check_test.go's.)
func TestHarnessMeasuresRecoveryFromAPartition(t *testing.T) {
	c := connectMock(t)
	const shortDown = 100 * time.Millisecond
	limit := shortDown + failWait + opStep
	const healAt = 400 * time.Millisecond
	for _, down := range []time.Duration{shortDown, limit + 500*time.Millisecond} {
		clk := newVClock()
		net := &fakeNet{clk: clk}
		cfg := testConfig(net.run)
		cfg.workers = 1
		cfg.recoveryLimit = limit
		p := partitionFault(testTopo)
		// The phase runs on past the heal for the limit or down, and
		// half a second more: the worker recovers within it in either case.
		counts, results := runHarnessOn(t, cfg, &liar{store: timed{clientStore{c.DefaultCollection()}, clk}, net: net, down: down, clk: clk},
			stillLateness(), clk,
			phaseSpec{name: "partition", dur: healAt + max(down, limit) + 500*time.Millisecond, fault: &p, from: 100 * time.Millisecond, to: healAt, recover: true})
		pr := results[0]
		if pr.heal != pr.start.Add(healAt) || pr.classes["get no-node-available"]+pr.classes["write no-node-available"] == 0 {
			t.Fatalf("down %v: the partition did not act: heal at +%v, results %v", down, pr.heal.Sub(pr.start), pr.classes)
		}
		if !pr.recovered || pr.recovery < down || pr.recovery >= down+failWait+opStep {
			t.Fatalf("down %v: recovery %v (recovered %v), want from %v to %v", down, pr.recovery, pr.recovered, down, down+failWait+opStep)
		}
		failedRecovery := counts[checkRecovery] > 0
		if failedRecovery != (down > cfg.recoveryLimit) {
			t.Fatalf("down %v: recovery %v, check failed %v (limit %v; violations %v)", down, pr.recovery, failedRecovery, cfg.recoveryLimit, counts)
		}
		if delete(counts, checkRecovery); len(counts) != 0 {
			t.Fatalf("down %v: violations other than recovery's: %v", down, counts)
		}
	}
}
