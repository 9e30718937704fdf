package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

func checkSane(t *testing.T, s *benchSummary) {
	t.Helper()
	assert.Greater(t, s.Ops, uint64(0))
	assert.Zero(t, s.Errors, "errors: %v %s", s.ErrorsByKind, s.FirstError)
	assert.Zero(t, s.Misses, "preloaded keys are always found")
	assert.Equal(t, s.Ops, s.Gets+s.Sets)
	assert.Equal(t, s.Ops, s.LatencyUS.Count, "one latency per operation")
	assert.Greater(t, s.OpsPerSec, 0.0)
	l := s.LatencyUS
	assert.True(t, 0 < l.Min && l.Min <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max,
		"ordered percentiles: %+v", l)
	assert.True(t, l.Min <= l.Mean && l.Mean <= l.Max, "%+v", l)
}

func TestBenchDuration(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "bench", "--duration", "1s", "--concurrency", "4", "--keys", "200",
		"--value-size", "100", "--ratio", "0.7", "--json")
	require.Equal(t, exitOK, r.code, r)
	var s benchSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	checkSane(t, &s)
	assert.Equal(t, "duration", s.Stopped)
	assert.InDelta(t, 1.0, s.ElapsedS, 0.9)
	assert.Equal(t, 4, s.Config.Concurrency)
	assert.Equal(t, 1.0, s.Config.DurationS)
	// Roughly 70% gets (thousands of operations; a wide margin).
	assert.InDelta(t, 0.7, float64(s.Gets)/float64(s.Ops), 0.1)
	assert.Contains(t, r.stderr, "preloading 200 keys")

	// The preload and the sets wrote every key with value-size bytes.
	d, ok := mc.Bucket(mockcluster.DefaultBucket).Get("_default", "_default", "kvcli-bench:00000199")
	require.True(t, ok)
	assert.Len(t, d.Value, 100)
}

func TestBenchOps(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "bench", "--ops", "3000", "--concurrency", "8", "--keys", "50", "--value-size", "10")
	require.Equal(t, exitOK, r.code, r)
	for _, s := range []string{"ops        3000 (", "errors     0\n", "retries    0\n", "latency    min ", " p50 ", " p90 ", " p99 ", " p99.9 ", " max ", "(ran --ops)"} {
		assert.Contains(t, r.stdout, s)
	}
	r = runKV(t, env, "", "bench", "--ops", "777", "--json", "--preload=false", "--key-prefix", "fresh:")
	require.Equal(t, exitOK, r.code, r)
	var s benchSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, uint64(777), s.Ops, "exactly --ops operations")
	assert.Zero(t, s.Errors)
	assert.Greater(t, s.Misses, uint64(0), "without preload some gets miss, and a miss is not an error")
	assert.NotContains(t, r.stderr, "preloading")
}

func TestBenchErrorsAndRetries(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	// Retries are counted by reason.
	h := mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{Key: "kvcli-bench:00000000"},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail},
		Times:  3,
	})
	defer h.Remove()
	r := runKV(t, env, "", "bench", "--ops", "400", "--keys", "1", "--concurrency", "2", "--json", "--preload=false")
	require.Equal(t, exitOK, r.code, r)
	var s benchSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, uint64(3), s.Retries, "three TMPFAIL answers, three retries")
	assert.Equal(t, map[string]uint64{"KV_TEMPORARY_FAILURE": 3}, s.RetryReasons)

	// Failed operations are counted by kind, the first one is shown, and
	// the exit status says so.
	h2 := mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{Key: "kvcli-bench:00000000"},
		Action: mockcluster.Action{Status: memdx.StatusTooBig},
		Times:  5,
	})
	defer h2.Remove()
	r = runKV(t, env, "", "bench", "--ops", "100", "--keys", "1", "--concurrency", "2", "--preload=false")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stdout, "errors     5 (invalid_argument 5)\n")
	assert.Contains(t, r.stdout, "first: the value is larger than the server accepts")
	assert.Contains(t, r.stdout, "ops        100 (")
}

func TestBenchInterrupt(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	bg := startKvcli(ctx, []string{"bench", "--duration", "1m", "--concurrency", "4", "--keys", "100"}, env)
	done, stdout, stderr := bg.done, &bg.stdout, &bg.stderr
	// The first progress line proves the run is under way; then Ctrl-C.
	waitFor(t, 20*time.Second, "a progress line", func() bool { return strings.Contains(stderr.String(), "ops/s") })
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, exitOK, code, "stderr: %s", stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("bench did not stop on interrupt")
	}
	assert.Less(t, time.Since(start), 50*time.Second, "stopped well before --duration")
	out := stdout.String()
	assert.Contains(t, out, "(interrupted)")
	assert.Contains(t, out, "errors     0\n", "operations in flight finish; none fails because of the interrupt")
	assert.Contains(t, out, "latency    min ")
}

// TestBenchInterruptPreload: Ctrl-C while preloading is the normal way to
// stop too: a summary that says how far the preload got, and exit 0.
func TestBenchInterruptPreload(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	// Every set answered 200 ms late: with one worker, preloading 100 keys
	// would take 20 s.
	h := mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSet}},
		Action: mockcluster.Action{Delay: 200 * time.Millisecond},
	})
	defer h.Remove()
	b := mc.Bucket(mockcluster.DefaultBucket)
	for _, jsonOut := range []bool{false, true} {
		prefix := fmt.Sprintf("pre-%v:", jsonOut)
		args := []string{"bench", "--duration", "1m", "--concurrency", "1", "--keys", "100", "--key-prefix", prefix}
		if jsonOut {
			args = append(args, "--json")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		bg := startKvcli(ctx, args, env)
		done, stdout, stderr := bg.done, &bg.stdout, &bg.stderr
		waitFor(t, 20*time.Second, "the preload under way", func() bool {
			return b.MutationCount("_default", "_default", prefix+"00000001") > 0
		})
		cancel()
		var code int
		select {
		case code = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("bench did not stop on interrupt during the preload")
		}
		assert.Equal(t, exitOK, code, "stderr: %s", stderr.String())
		assert.Contains(t, stderr.String(), "kvcli bench: interrupted while preloading (")
		if jsonOut {
			var sum benchSummary
			require.NoError(t, json.Unmarshal([]byte(stdout.String()), &sum), stdout.String())
			assert.Equal(t, "interrupted_preloading", sum.Stopped)
			assert.GreaterOrEqual(t, sum.Preloaded, int64(1))
			assert.Less(t, sum.Preloaded, int64(100))
			assert.Zero(t, sum.Ops)
		} else {
			assert.Regexp(t, `time       0s \(interrupted while preloading: \d+ of 100 keys set; no operations ran\)`, stdout.String())
		}
	}
}
