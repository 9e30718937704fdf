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
	healed := l.net.heal.Load()
	if !l.net.cut.Load() && (healed == nil || time.Since(*healed) >= l.down) {
		return nil
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

// runHarness runs the phases and the final read-back, with the deadline
// margin measured on this machine (startLateness), and returns the
// violations by check.
func runHarness(t *testing.T, cfg config, st store, specs ...phaseSpec) (map[string]int, []*phaseResult) {
	t.Helper()
	return runHarnessWith(t, cfg, st, startLateness(), specs...)
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

// runHarnessWith is runHarness with the deadline margin of lat, which it
// closes.
func runHarnessWith(t *testing.T, cfg config, st store, lat *lateness, specs ...phaseSpec) (map[string]int, []*phaseResult) {
	t.Helper()
	defer lat.close()
	// Every run writes keys of its own in the shared mock cluster.
	cfg.keyPrefix = fmt.Sprintf("t%d-", time.Now().UnixNano())
	h := newHarness(cfg, st, lat)
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
// no acknowledged write. The deadline check keeps the measured margin but
// allows at least the client's whole KVTimeout past the deadline: the
// measured margin is a wall-clock rule (lateness.go) that a correct client
// overshoots when the machine stalls the operation's goroutines and not
// the sampler's, and on this fault-free in-process cluster only a client
// that does not end an operation at its deadline (or a process stalled
// for as long as a KVTimeout) ends one more than a KVTimeout past it. How
// the check catches a client ending 500 ms late is
// TestHarnessDetectsALyingClient's, on a margin that does not depend on
// the machine.
func TestHarnessPassesACorrectClient(t *testing.T) {
	c := connectMock(t)
	net := &fakeNet{}
	loss := lossFault(testTopo, 0.05)
	cfg := testConfig(net.run)
	cfg.maxOpsPerPhase = 200
	lat := startLateness()
	lat.floor = cfg.timeout // the client's KVTimeout: connectMock's default
	counts, results := runHarnessWith(t, cfg, clientStore{c.DefaultCollection()}, lat,
		phaseSpec{name: "baseline", dur: time.Minute},
		phaseSpec{name: "loss", dur: time.Minute, fault: &loss, to: 300 * time.Millisecond})
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
// heals. A worker recovers, after its last failure, within one failing
// operation (failWait) and one successful one, which a correct client
// ends within its KVTimeout: so down 100 ms passes a limit of 100 ms plus
// failWait plus a KVTimeout, and a down 500 ms longer than that limit
// fails it. The limit is a real-time bound that only a client that does
// not end an operation at its deadline (or a process stalled for as long
// as a KVTimeout) exceeds with the short down; no operation can succeed
// before down has passed, so the long down fails it whatever the load.
func TestHarnessMeasuresRecoveryFromAPartition(t *testing.T) {
	c := connectMock(t)
	const shortDown = 100 * time.Millisecond
	limit := shortDown + failWait + client.DefaultKVTimeout // connectMock's client
	const healAt = 400 * time.Millisecond
	for _, down := range []time.Duration{shortDown, limit + 500*time.Millisecond} {
		net := &fakeNet{}
		cfg := testConfig(net.run)
		cfg.recoveryLimit = limit
		p := partitionFault(testTopo)
		// The phase runs on past the heal for the limit or down, and
		// half a second more: long enough for the short down's workers
		// to recover within the limit, and for the long down's to
		// recover after it (its failure is then the measured
		// recovery's, not the phase's end).
		counts, results := runHarness(t, cfg, &liar{store: clientStore{c.DefaultCollection()}, net: net, down: down},
			phaseSpec{name: "partition", dur: healAt + max(down, limit) + 500*time.Millisecond, fault: &p, from: 100 * time.Millisecond, to: healAt, recover: true})
		pr := results[0]
		if pr.heal.IsZero() || pr.classes["get no-node-available"]+pr.classes["write no-node-available"] == 0 {
			t.Fatalf("down %v: the partition did not act: heal %v, results %v", down, pr.heal, pr.classes)
		}
		failedRecovery := counts[checkRecovery] > 0
		if failedRecovery != (down > cfg.recoveryLimit) {
			t.Fatalf("down %v: recovery %v (recovered %v), check failed %v (limit %v)", down, pr.recovery, pr.recovered, failedRecovery, cfg.recoveryLimit)
		}
		// No operation succeeds before down has passed since fakeNet
		// removed the rule, a moment before the harness took pr.heal.
		if healed := net.heal.Load(); pr.recovered && pr.recovery+pr.heal.Sub(*healed) < down {
			t.Fatalf("down %v: recovery measured %v from the harness's heal, %v from the rule's removal", down, pr.recovery, pr.recovery+pr.heal.Sub(*healed))
		}
	}
}
