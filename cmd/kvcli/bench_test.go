package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
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
	// The deadline's timer starts after the clock does: the run lasts at
	// least --duration (and ends, or runKV would not return).
	assert.GreaterOrEqual(t, s.ElapsedS, 1.0)
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
	assert.Contains(t, r.stdout, "failed operations are not in ops, ops/s or latency\n")
	assert.Contains(t, r.stdout, "ops        95 (", "the 95 that succeeded")
	assert.Contains(t, r.stdout, "\nfailed     min ")
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

// TestBenchInterruptPreload: a long preload shows how far it got on every
// tick of its ticker (every second; the test fires the ticks), on stderr
// rewritten in place on a terminal, and nothing with --json. Ctrl-C while
// preloading is the normal way to stop too: a summary that says how far
// the preload got, and exit 0.
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
		ts := newTickers()
		bg := startKvcliWith(ctx, args, env, func(e *env_) {
			e.newTicker = ts.newTicker
			e.terminal = func(w io.Writer) bool { return w == e.stderr }
		})
		done, stdout, stderr := bg.done, &bg.stdout, &bg.stderr
		waitFor(t, 20*time.Second, "the preload under way", func() bool {
			return b.MutationCount("_default", "_default", prefix+"00000001") > 0
		})
		if !jsonOut {
			assert.Equal(t, progressEvery, <-ts.periods)
			assert.LessOrEqual(t, progressEvery, time.Second, "at least a line a second")
			tk := <-ts.made
			now := time.Now()
			for i := 1; i <= 2; i++ {
				require.True(t, tk.tick(now.Add(time.Duration(i)*time.Second)))
				waitFor(t, 20*time.Second, "a progress line", func() bool {
					return strings.Count(stderr.String(), "\r\033[Kkvcli bench: preloading: ") == i
				})
			}
			assert.Regexp(t, `\r\x1b\[Kkvcli bench: preloading: [1-9]\d* of 100 keys \(\d+ keys/s\)\r\x1b\[Kkvcli bench: preloading: [1-9]\d* of 100 keys`, stderr.String())
		}
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
			assert.Empty(t, ts.made, "--json: no progress")
			assert.NotContains(t, stderr.String(), "preloading:")
			var sum benchSummary
			requireOneJSONDocument(t, stdout.String(), &sum)
			assert.Equal(t, "interrupted_preloading", sum.Stopped)
			assert.GreaterOrEqual(t, sum.Preloaded, int64(1))
			assert.Less(t, sum.Preloaded, int64(100))
			assert.Zero(t, sum.Ops)
		} else {
			assert.Regexp(t, `time       0s \(interrupted while preloading: \d+ of 100 keys set; no operations ran\)`, stdout.String())
			assert.Contains(t, stderr.String(), " keys/s)\n", "the rewritten line is ended before what follows")
		}
	}
}

func TestBenchRefusesBadFlagsBeforeConnecting(t *testing.T) {
	closed := "couchbase://" + closedAddr(t) + "/default"
	cases := []struct {
		connStr string
		args    []string
		want    string
	}{
		{closed, []string{"--rate", "-1"}, "--rate -1: want 0 (as fast as possible) or a positive number"},
		{closed, []string{"--rate", "NaN"}, "--rate NaN: want 0"},
		{closed, []string{"--rate", "+Inf"}, "--rate +Inf: want 0"},
		{closed, []string{"--rate", "fast"}, `--rate "fast": want a number, such as 0.5`},
		{closed, []string{"--value-size", "abc"}, `--value-size "abc": want BYTES or MIN-MAX (e.g. 100 or 64-4096)`},
		{closed, []string{"--value-size", "4096-64"}, "--value-size 4096-64: MIN 4096 is more than MAX 64"},
		{closed, []string{"--value-size", "-1"}, `--value-size "-1": want BYTES or MIN-MAX`},
		{closed, []string{"--value-size", "1-30000000"}, "--value-size 1-30000000: want 0 to 20 MiB"},
		{closed, []string{"--key-dist", "gaussian"}, `--key-dist "gaussian": want uniform or zipfian`},
		{closed, []string{"--key-dist", "zipfian", "--zipf-s", "1"}, "--zipf-s 1: want a finite number more than 1"},
		{closed, []string{"--key-dist", "zipfian", "--zipf-s", "0.99"}, "--zipf-s 0.99: want a finite number more than 1"},
		{closed, []string{"--key-dist", "zipfian", "--zipf-s", "Inf"}, "--zipf-s +Inf: want a finite number more than 1"},
		{closed, []string{"--zipf-s", "1.5"}, "--zipf-s is the zipfian exponent: give it with --key-dist zipfian"},
		{closed, []string{"--durability", "all"}, `--durability "all": want one of none, majority, majorityAndPersistActive, persistToMajority`},
		{"memcached://" + closedAddr(t), []string{"--durability", "majority"},
			"--durability majority: memcached:// has no durable writes (durability is Couchbase Server's); drop --durability"},
		{"memcacheds://" + closedAddr(t), []string{"--durability", "persistToMajority"}, "memcacheds:// has no durable writes"},
	}
	for _, c := range cases {
		args := append([]string{"bench", "--ops", "10"}, c.args...)
		r := runKV(t, map[string]string{envConnStr: c.connStr}, "", args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", args, r)
		assert.Contains(t, r.stderr, c.want, "%v", args)
		assert.NotContains(t, r.stderr, "nothing is listening", "%v: refused before connecting", args)
		assert.Empty(t, r.stdout, "%v", args)
	}
	// --durability none is no durability, and fine on memcached:// (which
	// is then dialled: nothing listens there).
	r := runKV(t, map[string]string{envConnStr: "memcached://" + closedAddr(t)}, "", "bench", "--ops", "1", "--durability", "none")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "nothing is listening")
}

// TestBenchRateSpacesOperations: operation i of a paced run starts no
// earlier than i/rate after the start, so 120 operations at 400 ops/s
// take at least 119/400 s; unpaced, the mock runs them in a few ms.
func TestBenchRateSpacesOperations(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "bench", "--rate", "400", "--ops", "120", "--concurrency", "4", "--keys", "20", "--json")
	require.Equal(t, exitOK, r.code, r)
	var s benchSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	checkSane(t, &s)
	assert.Equal(t, uint64(120), s.Ops)
	assert.Equal(t, 400.0, s.Config.Rate)
	assert.GreaterOrEqual(t, s.ElapsedS, 119.0/400, "the last operation waits for its time")
	require.NotNil(t, s.Rate)
	assert.Equal(t, 400.0, s.Rate.TargetOpsPerSec)
	assert.LessOrEqual(t, s.Rate.FinalLagUS, s.Rate.MaxLateUS)
	require.NotNil(t, s.LatencyFromScheduleUS)
	assert.Equal(t, uint64(120), s.LatencyFromScheduleUS.Count)

	// The human summary names the target and the achieved rate, and the
	// progress line counts late operations.
	r = runKV(t, env, "", "bench", "--rate", "2000", "--ops", "50", "--keys", "20")
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, ", --rate 2000 ops/s\n")
	assert.Regexp(t, `rate       target 2000 ops/s, achieved \d+ ops/s; \d+ operations started over 1ms late \(at most .+\), the last .+ late\n`, r.stdout)

	// Without --rate there is no rate report.
	r = runKV(t, env, "", "bench", "--ops", "50", "--keys", "20", "--json")
	require.Equal(t, exitOK, r.code, r)
	assert.NotContains(t, r.stdout, `"rate":{`)
	assert.NotContains(t, r.stdout, `latency_from_schedule_us`)
	assert.Contains(t, r.stdout, `"rate":0`)
}

// TestBenchRateSaysWhenTheClientCannotKeepUp: one worker whose every
// operation takes at least 20ms cannot do 1000 ops/s; the summary says so.
func TestBenchRateSaysWhenTheClientCannotKeepUp(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	h := mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet, memdx.OpSet}},
		Action: mockcluster.Action{Delay: 20 * time.Millisecond},
	})
	defer h.Remove()
	args := []string{"bench", "--rate", "1000", "--ops", "10", "--concurrency", "1", "--keys", "5", "--preload=false"}
	r := runKV(t, env, "", append(args, "--json")...)
	require.Equal(t, exitOK, r.code, r)
	var s benchSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	require.NotNil(t, s.Rate)
	assert.False(t, s.Rate.KeptUp)
	// Operations 1 to 9 start at least 19ms*i behind their times;
	// operation 0, due at the start, only as late as the machine's load
	// makes it.
	assert.True(t, s.Rate.LateOps == 9 || s.Rate.LateOps == 10, "late operations: %d", s.Rate.LateOps)
	assert.GreaterOrEqual(t, s.Rate.MaxLateUS, 9*19e3)
	assert.GreaterOrEqual(t, s.Rate.FinalLagUS, 9*19e3, "the last operation was the latest")
	// Operation 9 was due at 9ms and ended at least 200ms after the start:
	// counted from its scheduled time its latency is at least 191ms, where
	// its own service time is some 20ms.
	require.NotNil(t, s.LatencyFromScheduleUS)
	assert.Equal(t, uint64(10), s.LatencyFromScheduleUS.Count)
	assert.GreaterOrEqual(t, s.LatencyFromScheduleUS.Max, 191e3)
	assert.Less(t, s.LatencyUS.Max, s.LatencyFromScheduleUS.Max)

	r = runKV(t, env, "", args...)
	require.Equal(t, exitOK, r.code, r)
	assert.Regexp(t, `\nscheduled  min .+ \(mean .+, from each operation's scheduled time\)\n`, r.stdout)
	assert.Regexp(t, `the client could not keep up with --rate \(it ended .+ behind schedule\): raise --concurrency \(each worker runs one operation at a time\) or lower --rate\n`, r.stdout)
}

func TestBenchValueSizeRange(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "bench", "--value-size", "10-20", "--ratio", "0", "--ops", "400", "--keys", "50",
		"--concurrency", "2", "--key-prefix", "vs:", "--json")
	require.Equal(t, exitOK, r.code, r)
	var s benchSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	checkSane(t, &s)
	assert.Equal(t, 10, s.Config.ValueSizeMin)
	assert.Equal(t, 20, s.Config.ValueSizeMax)
	assert.Equal(t, uint64(400), s.Sets)
	assert.True(t, s.SetBytes >= 10*400 && s.SetBytes <= 20*400, "set_bytes %d", s.SetBytes)
	assert.NotEqual(t, uint64(10*400), s.SetBytes, "not every value has the least size")
	assert.NotEqual(t, uint64(20*400), s.SetBytes, "nor the largest")
	assert.Contains(t, r.stderr, "preloading 50 keys (10-20-byte values)")
	// Every document the preload and the sets wrote has 10 to 20 bytes.
	b := mc.Bucket(mockcluster.DefaultBucket)
	sizes := map[int]bool{}
	for i := range 50 {
		d, ok := b.Get("_default", "_default", fmt.Sprintf("vs:%08d", i))
		require.True(t, ok, i)
		assert.True(t, len(d.Value) >= 10 && len(d.Value) <= 20, "key %d: %d bytes", i, len(d.Value))
		sizes[len(d.Value)] = true
	}
	assert.Greater(t, len(sizes), 5, "sizes drawn from the range: %v", sizes)

	r = runKV(t, env, "", "bench", "--value-size", "64-4096", "--ops", "20", "--keys", "5")
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "64-4096-byte values, 5 keys (uniform)\n")
}

// TestBenchZipfianKeys: with one worker and a seed the run is repeatable;
// the sets per key follow (1+k)^-s within 5 standard deviations, where a
// uniform run spreads them evenly.
func TestBenchZipfianKeys(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	b := mc.Bucket(mockcluster.DefaultBucket)
	const keys, ops = 100, 3000
	count := func(prefix string, k int) uint64 {
		return b.MutationCount("_default", "_default", fmt.Sprintf("%s%08d", prefix, k))
	}
	for _, s := range []float64{1.01, 2} {
		prefix := fmt.Sprintf("zipf-%v:", s)
		r := runKV(t, env, "", "bench", "--key-dist", "zipfian", "--zipf-s", fmt.Sprint(s), "--ratio", "0",
			"--preload=false", "--concurrency", "1", "--ops", fmt.Sprint(ops), "--keys", fmt.Sprint(keys),
			"--key-prefix", prefix, "--seed", "3", "--json")
		require.Equal(t, exitOK, r.code, r)
		var sum benchSummary
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &sum), r.stdout)
		assert.Equal(t, "zipfian", sum.Config.KeyDist)
		assert.Equal(t, s, sum.Config.ZipfS)
		var total uint64
		for k := range keys {
			total += count(prefix, k)
		}
		require.Equal(t, uint64(ops), total)
		for _, k := range []int{0, 1, 5, 50} {
			p := zipfP(k, keys, s)
			sigma := math.Sqrt(ops * p * (1 - p))
			assert.InDelta(t, ops*p, float64(count(prefix, k)), 5*sigma+1, "s=%v key %d", s, k)
		}
	}
	r := runKV(t, env, "", "bench", "--ratio", "0", "--preload=false", "--concurrency", "1",
		"--ops", fmt.Sprint(ops), "--keys", fmt.Sprint(keys), "--key-prefix", "unif:", "--json")
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, `"key_dist":"uniform"`)
	assert.NotContains(t, r.stdout, `"zipf_s"`)
	assert.InDelta(t, ops/keys, float64(count("unif:", 0)), 5*math.Sqrt(ops/keys), "uniform: key 0 is not hot")

	r = runKV(t, env, "", "bench", "--key-dist", "zipfian", "--ops", "20", "--keys", "5")
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "5 keys (zipfian s=1.01)\n")
}

// TestBenchDurability: the sets carry the durability level (seen in the
// requests the mock receives) and the gets and the preload none; a
// cluster that cannot meet it fails the sets.
func TestBenchDurability(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	var durable, plain atomic.Int64
	var levels sync.Map
	h := mc.AddFault(mockcluster.Fault{
		Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSet}, Key: "", Func: func(r *mockcluster.Request) bool {
			found := false
			_ = memdx.FrameInfos(r.Packet.FramingExtras, func(id uint16, data []byte) error {
				if id == uint16(memdx.FrameDurability) {
					if l, _, err := memdx.DecodeDurabilityFrame(data); err == nil {
						levels.Store(l, true)
					}
					found = true
				}
				return nil
			})
			if found {
				durable.Add(1)
			} else {
				plain.Add(1)
			}
			return false // observe only
		}},
	})
	defer h.Remove()
	r := runKV(t, env, "", "bench", "--durability", "majority", "--ratio", "0", "--ops", "60", "--keys", "10", "--json")
	require.Equal(t, exitOK, r.code, r)
	var s benchSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	checkSane(t, &s)
	assert.Equal(t, "majority", s.Config.Durability)
	assert.Equal(t, int64(60), durable.Load(), "every set of the run is durable")
	assert.Equal(t, int64(10), plain.Load(), "the preload's sets are not")
	var got []memdx.DurabilityLevel
	levels.Range(func(k, _ any) bool { got = append(got, k.(memdx.DurabilityLevel)); return true })
	assert.Equal(t, []memdx.DurabilityLevel{memdx.DurabilityMajority}, got)

	r = runKV(t, env, "", "bench", "--durability", "PersistToMajority", "--ops", "20", "--keys", "5")
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "5 keys (uniform), durability persistToMajority\n")

	r = runKV(t, env, "", "bench", "--ops", "20", "--keys", "5", "--json")
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, `"durability":"none"`)

	// One node and one replica: no majority of two nodes, so every
	// durable set fails with DURABILITY_IMPOSSIBLE; plain sets succeed.
	_, env1 := newMock(t, mockcluster.Options{Nodes: 1})
	r = runKV(t, env1, "", "bench", "--durability", "majority", "--ratio", "0", "--ops", "30", "--keys", "5", "--json")
	assert.Equal(t, exitError, r.code, r)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	assert.Equal(t, uint64(30), s.Errors)
	assert.NotEmpty(t, s.FirstError)
	r = runKV(t, env1, "", "bench", "--ratio", "0", "--ops", "30", "--keys", "5")
	assert.Equal(t, exitOK, r.code, r)
}

func TestBenchHelpListsTheLoadShapeFlags(t *testing.T) {
	for _, args := range [][]string{{"bench", "-h"}, {"help", "bench"}} {
		r := runKV(t, nil, "", args...)
		require.Equal(t, exitOK, r.code, r)
		for _, f := range []string{"--rate", "--value-size", "--key-dist", "--zipf-s", "--durability"} {
			assert.Contains(t, r.stdout, "\n  "+f+" ", "%v lists %s", args, f)
		}
		assert.Contains(t, r.stdout, "MIN-MAX")
	}
}

// TestBenchRateStopsWaitingWorkersAtTheDeadline: at 1 op/s four workers
// wait for the operations due at 0s, 1s, 2s and 3s; the 1s deadline ends
// the waits of those due later, which never run.
func TestBenchRateStopsWaitingWorkersAtTheDeadline(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "bench", "--rate", "1", "--duration", "1s", "--concurrency", "4", "--keys", "5", "--json")
	require.Equal(t, exitOK, r.code, r)
	var s benchSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	assert.Equal(t, "duration", s.Stopped)
	assert.True(t, s.Ops >= 1 && s.Ops <= 2, "the operations due at 0s and (racing the deadline) 1s: %d", s.Ops)
	assert.GreaterOrEqual(t, s.ElapsedS, 1.0)
}

// The progress line's ops/s counts the operations that succeeded in the
// interval; errors are beside them, with their own rate.
func TestBenchProgressLineCountsSuccessesAndLateOperations(t *testing.T) {
	start := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	p := &benchProgress{start: start}
	assert.Equal(t, "[  1.0s]      1000 ops/s  ops 1000  errors 1 (1/s)  retries 2  late 17",
		p.line(start.Add(time.Second), benchTotals{ok: 1000, errs: 1, retries: 2, late: 17, paced: true}))
	assert.Equal(t, "[  2.0s]      2000 ops/s  ops 3000  errors 1 (0/s)  retries 2",
		p.line(start.Add(2*time.Second), benchTotals{ok: 3000, errs: 1, retries: 2}))
	// A dead server: errors pile up, throughput does not.
	assert.Equal(t, "[  2.5s]         0 ops/s  ops 3000  errors 50001 (100000/s)  retries 2",
		p.line(start.Add(2500*time.Millisecond), benchTotals{ok: 3000, errs: 50001, retries: 2}))
}

// TestBenchBatch: with --batch N each call carries N operations (the last
// of an --ops run fewer); a key's miss or error is its own.
func TestBenchBatch(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	for _, c := range []struct{ ops, batch, calls int }{{1000, 10, 100}, {25, 10, 3}, {7, 100, 1}} {
		r := runKV(t, env, "", "bench", "--batch", fmt.Sprint(c.batch), "--ops", fmt.Sprint(c.ops), "--concurrency", "4",
			"--keys", "100", "--value-size", "5-50", "--json")
		require.Equal(t, exitOK, r.code, r)
		var s benchSummary
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
		assert.Equal(t, c.batch, s.Config.Batch)
		assert.Equal(t, uint64(c.ops), s.Ops, "%+v", c)
		assert.Equal(t, uint64(c.calls), s.Calls, "%+v", c)
		assert.Equal(t, s.Calls, s.LatencyUS.Count, "one latency per call")
		assert.Equal(t, s.Ops, s.Gets+s.Sets)
		assert.Zero(t, s.Errors, "%v %s", s.ErrorsByKind, s.FirstError)
		assert.Zero(t, s.Misses)
		assert.True(t, s.SetBytes >= 5*s.Sets && s.SetBytes <= 50*s.Sets, "set_bytes %d for %d sets", s.SetBytes, s.Sets)
	}

	// Without a preload every get misses, and a miss is not an error.
	r := runKV(t, env, "", "bench", "--batch", "8", "--ops", "64", "--ratio", "1", "--preload=false", "--key-prefix", "nope:", "--json")
	require.Equal(t, exitOK, r.code, r)
	var s benchSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	assert.Equal(t, uint64(64), s.Misses)
	assert.Zero(t, s.Errors)
	assert.Equal(t, uint64(8), s.Calls)

	// A key's failure fails that key only: five TOOBIG answers for key 0
	// are five errors among 200 sets, and the exit status says so.
	h := mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{Key: "kvcli-bench:00000000", OpCodes: []memdx.OpCode{memdx.OpSet}},
		Action: mockcluster.Action{Status: memdx.StatusTooBig},
		Times:  5,
	})
	defer h.Remove()
	r = runKV(t, env, "", "bench", "--batch", "10", "--ops", "200", "--ratio", "0", "--keys", "2", "--preload=false")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stdout, "ops        195 (")
	assert.Contains(t, r.stdout, "0 gets (0 misses), 195 sets, in 20 batches (GetMany, UpsertMany) of up to 10\n")
	assert.Contains(t, r.stdout, "errors     5 (invalid_argument 5)\n")
	assert.Contains(t, r.stdout, "(mean ")
	assert.Contains(t, r.stdout, ", per batch)\n")
	assert.Contains(t, r.stdout, "2 keys (uniform), --batch 10\n")
}

func TestBenchBatchWithRateAndDurability(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	var durable atomic.Int64
	h := mc.AddFault(mockcluster.Fault{
		Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSet}, Func: func(r *mockcluster.Request) bool {
			_ = memdx.FrameInfos(r.Packet.FramingExtras, func(id uint16, data []byte) error {
				if id == uint16(memdx.FrameDurability) {
					durable.Add(1)
				}
				return nil
			})
			return false // observe only
		}},
	})
	defer h.Remove()
	// Batch i (of 10 operations) starts at 10*i/400 s: the last of 12 at
	// 110/400 s.
	r := runKV(t, env, "", "bench", "--batch", "10", "--rate", "400", "--ops", "120", "--ratio", "0",
		"--durability", "majority", "--keys", "30", "--json")
	require.Equal(t, exitOK, r.code, r)
	var s benchSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	assert.Equal(t, uint64(12), s.Calls)
	assert.GreaterOrEqual(t, s.ElapsedS, 110.0/400)
	require.NotNil(t, s.Rate)
	require.NotNil(t, s.LatencyFromScheduleUS)
	assert.Equal(t, uint64(12), s.LatencyFromScheduleUS.Count, "one per batch")
	assert.Equal(t, int64(120), durable.Load(), "every set of every batch is durable")

	// A cluster that cannot meet the level fails every key of every batch.
	_, env1 := newMock(t, mockcluster.Options{Nodes: 1})
	r = runKV(t, env1, "", "bench", "--batch", "10", "--durability", "majority", "--ratio", "0", "--ops", "30", "--keys", "5", "--json")
	assert.Equal(t, exitError, r.code, r)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	assert.Equal(t, uint64(30), s.Errors)
}

func TestBenchBatchRefusesBadSizes(t *testing.T) {
	closed := map[string]string{envConnStr: "couchbase://" + closedAddr(t) + "/default"}
	for _, n := range []string{"0", "-3", "10001"} {
		r := runKV(t, closed, "", "bench", "--batch", n)
		assert.Equal(t, exitUsage, r.code, r)
		assert.Contains(t, r.stderr, "--batch "+n+": want 1 to 10000 keys per call")
		assert.NotContains(t, r.stderr, "nothing is listening")
	}
	r := runKV(t, nil, "", "bench", "-h")
	assert.Contains(t, r.stdout, "\n  --batch N ")
}

// --keys has an upper bound (benchMaxKeys): bench builds a table of every
// key name before it runs, so a huge count was a crash out of memory (or
// makeslice's panic); it is a usage error, before connecting.
func TestBenchRefusesTooManyKeys(t *testing.T) {
	closed := map[string]string{envConnStr: "couchbase://" + closedAddr(t) + "/default"}
	for _, n := range []string{"10000001", "0x7fffffffffffffff", "100000000000"} {
		r := runKV(t, closed, "", "bench", "--ops", "1", "--keys", n)
		assert.Equal(t, exitUsage, r.code, "--keys %s: %s", n, r)
		assert.Contains(t, r.stderr, "--keys ", "--keys %s", n)
		assert.Contains(t, r.stderr, "want 1 to 10000000", "--keys %s", n)
		assert.NotContains(t, r.stderr, "nothing is listening", "--keys %s: refused before connecting", n)
	}
}

// The bound is on the table's memory, not only the count: a long
// --key-prefix makes each name longer, so fewer keys fit (a 200-byte
// prefix with 10 million keys asked for some 2 GB).
func TestBenchRefusesAKeyTableTooLarge(t *testing.T) {
	closed := map[string]string{envConnStr: "couchbase://" + closedAddr(t) + "/default"}
	long := strings.Repeat("p", 200)
	r := runKV(t, closed, "", "bench", "--ops", "1", "--keys", "10000000", "--key-prefix", long)
	assert.Equal(t, exitUsage, r.code, r)
	assert.Contains(t, r.stderr, "--keys 10000000 with a 200-byte --key-prefix", r)
	assert.NotContains(t, r.stderr, "nothing is listening", "refused before connecting")
	r = runKV(t, closed, "", "bench", "--ops", "1", "--keys", "1000000", "--key-prefix", long)
	assert.NotContains(t, r.stderr, "--key-prefix", "a million such keys fit: %s", r)
}

// bench's other whole-number flags read as --keys and --seed do, decimal
// or 0x hex: "010" is ten, not Go's octal eight, and 0o, 0b and
// underscores are refused.
func TestBenchCountsAreDecimalOrHex(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "bench", "--ops", "010", "--concurrency", "010", "--batch", "010", "--keys", "20",
		"--preload=false", "--json")
	require.Equal(t, exitOK, r.code, r)
	var s benchSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	assert.Equal(t, int64(10), s.Config.Ops, "--ops 010")
	assert.Equal(t, 10, s.Config.Concurrency, "--concurrency 010")
	assert.Equal(t, 10, s.Config.Batch, "--batch 010")
	r = runKV(t, env, "", "bench", "--ops", "0x10", "--concurrency", "0x2", "--batch", "0X3", "--keys", "20",
		"--preload=false", "--json")
	require.Equal(t, exitOK, r.code, r)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	assert.Equal(t, int64(16), s.Config.Ops, "--ops 0x10")
	assert.Equal(t, 2, s.Config.Concurrency, "--concurrency 0x2")
	assert.Equal(t, 3, s.Config.Batch, "--batch 0X3")

	closed := map[string]string{envConnStr: "couchbase://" + closedAddr(t) + "/default"}
	for _, bad := range [][]string{{"--ops", "0o10"}, {"--ops", "1_000"}, {"--concurrency", "0b11"},
		{"--batch", "0o2"}, {"--ops", "99999999999999999999"}} {
		r := runKV(t, closed, "", append([]string{"bench"}, bad...)...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", bad, r)
		assert.Contains(t, r.stderr, bad[0]+" ", "%v", bad)
		assert.NotContains(t, r.stderr, "nothing is listening", "%v: refused before connecting", bad)
	}
}

// After Ctrl-C bench finishes the operations in flight, which against a
// server that does not answer takes until their timeout: its progress
// line says so (and that a second Ctrl-C stops at once) instead of
// ticking on as if nothing had been asked.
func TestBenchInterruptSaysItWaitsForOperationsInFlight(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{Nodes: 1})
	release := make(chan struct{})
	hold := mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet, memdx.OpSet}},
		Action: mockcluster.Action{Hold: release},
	})
	defer hold.Remove()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := newTickers()
	bg := startKvcliWith(ctx, []string{"bench", "--preload=false", "--concurrency", "1", "--ops", "100", "-t", "5m"}, env, func(e *env_) {
		e.newTicker = ts.newTicker
	})
	tk := <-ts.made
	waitFor(t, 20*time.Second, "an operation held by the server", func() bool { return hold.Hits() > 0 })
	require.True(t, tk.tick(time.Now()))
	waitFor(t, 20*time.Second, "a progress line", func() bool { return strings.Count(bg.stderr.String(), "ops/s") == 1 })
	assert.NotContains(t, bg.stderr.String(), "interrupted")

	cancel() // Ctrl-C
	require.True(t, tk.tick(time.Now().Add(time.Second)))
	waitFor(t, 20*time.Second, "a second progress line", func() bool { return strings.Count(bg.stderr.String(), "ops/s") == 2 })
	assert.Contains(t, bg.stderr.String(), "  interrupted: finishing the operations in flight (each ends within -t 5m0s); Ctrl-C again stops at once\n")

	close(release)
	select {
	case code := <-bg.done:
		assert.Equal(t, exitOK, code, "stderr: %s", bg.stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("bench did not end once the answers came")
	}
	assert.Contains(t, bg.stdout.String(), "(interrupted)")
}
