package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// startProgress shows a line per tick, rewritten in place on a terminal
// and one per tick elsewhere, ends a rewritten line when stopped, and
// shows nothing with --json. The test fires the ticks.
func TestProgressLineEveryTick(t *testing.T) {
	for _, tty := range []bool{true, false} {
		ts := newTickers()
		var stderr syncBuffer
		inv := &invocation{env: &env_{stderr: &stderr, newTicker: ts.newTicker,
			terminal: func(io.Writer) bool { return tty }}}
		n := 0
		stop := inv.startProgress(nil, func(now time.Time) string {
			n++
			return fmt.Sprintf("line %d at %s", n, now.Format("15:04:05"))
		})
		require.Equal(t, progressEvery, <-ts.periods)
		assert.LessOrEqual(t, progressEvery, time.Second, "at least a line a second")
		tk := <-ts.made
		t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
		require.True(t, tk.tick(t0))
		require.True(t, tk.tick(t0.Add(time.Second)))
		stop()
		if tty {
			assert.Equal(t, "\r\033[Kline 1 at 10:00:00\r\033[Kline 2 at 10:00:01\n", stderr.String())
		} else {
			assert.Equal(t, "line 1 at 10:00:00\nline 2 at 10:00:01\n", stderr.String())
		}
		assert.False(t, tk.tick(t0), "stopped: no tick is taken")
	}

	ts := newTickers()
	var stderr syncBuffer
	inv := &invocation{env: &env_{stderr: &stderr, newTicker: ts.newTicker}, g: globals{json: true}}
	inv.startProgress(nil, func(time.Time) string { return "never" })()
	assert.Empty(t, ts.made, "no ticker with --json")
	assert.Empty(t, stderr.String())
}

// A server killed in the middle of a run: the operations that failed
// count as errors by kind, with their own latency, never as throughput or
// in the percentiles.
func TestBenchAgainstAKilledServerCountsOnlySuccesses(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	const ops, killAfter = 400, 250
	var served atomic.Int64
	killed := make(chan struct{})
	var once sync.Once
	h := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet, memdx.OpSet}}, 0,
		func(*mockcluster.Request) (mockcluster.Action, bool) {
			if served.Add(1) == killAfter {
				once.Do(func() { close(killed) })
			}
			return mockcluster.Action{}, false
		})
	defer h.Remove()
	bg := startKvcli(context.Background(), []string{"bench", "--ops", fmt.Sprint(ops), "--concurrency", "4",
		"--keys", "50", "--preload=false", "-t", "50ms", "--json"}, env)
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("the mock never served the requests the kill waits for")
	}
	for _, n := range mc.Nodes() {
		n.Stop()
	}
	code := <-bg.done
	assert.Equal(t, exitError, code, "some operations failed: %s", bg.stderr.String())
	var s benchSummary
	requireOneJSONDocument(t, bg.stdout.String(), &s)

	assert.Greater(t, s.Errors, uint64(0))
	assert.Equal(t, uint64(ops), s.Ops+s.Errors, "every operation succeeded or failed, once")
	assert.LessOrEqual(t, s.Ops, uint64(served.Load()), "only requests the server answered succeeded")
	assert.Equal(t, s.Ops, s.Gets+s.Sets)
	assert.Equal(t, s.Ops, s.LatencyUS.Count, "the percentiles are the successes'")
	require.NotNil(t, s.ErrorLatencyUS)
	assert.Equal(t, s.Errors, s.ErrorLatencyUS.Count, "the failures' latency is apart")
	assert.InEpsilon(t, float64(s.Ops)/s.ElapsedS, s.OpsPerSec, 1e-9, "ops/s is the successes' rate")
	var byKind uint64
	for _, n := range s.ErrorsByKind {
		byKind += n
	}
	assert.Equal(t, s.Errors, byKind, "errors by kind: %v", s.ErrorsByKind)
	assert.NotEmpty(t, s.FirstError)
}

// scan shows its progress on stderr when that is a terminal and stdout
// (where the documents go) is not.
func TestScanShowsProgressWhenItsOutputIsNotTheTerminal(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	b := mc.Bucket(mockcluster.DefaultBucket)
	for i := range 50 {
		_, err := b.Set(client.DefaultScope, client.DefaultCollection, fmt.Sprintf("k%02d", i), []byte("v"), 0, 0)
		require.NoError(t, err)
	}
	// The scan's second batch is held until the test interrupts it.
	held := make(chan struct{})
	var continues atomic.Int32
	hold := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanContinue}}, 0,
		func(*mockcluster.Request) (mockcluster.Action, bool) {
			if continues.Add(1) == 2 {
				close(held)
				return mockcluster.Action{Delay: time.Hour}, true
			}
			return mockcluster.Action{}, false
		})
	defer hold.Remove()
	ts := newTickers()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bg := startKvcliWith(ctx, []string{"scan", "--keys-only", "-t", "1m"}, env, func(e *env_) {
		e.newTicker = ts.newTicker
		e.terminal = func(w io.Writer) bool { return w == e.stderr }
	})
	<-held
	tk := <-ts.made
	require.True(t, tk.tick(time.Now().Add(time.Second)))
	waitFor(t, 20*time.Second, "scan's progress line", func() bool {
		return strings.Contains(bg.stderr.String(), "\r\033[Kkvcli scan: ")
	})
	assert.Regexp(t, `kvcli scan: \d+ documents \(\d+/s\)`, bg.stderr.String())
	got := strings.Count(bg.stdout.String(), "\n")
	assert.Contains(t, bg.stderr.String(), fmt.Sprintf("kvcli scan: %d documents", got))
	cancel()
	assert.Equal(t, exitInterrupted, <-bg.done)

	// Both on the terminal, or with --json: no progress line.
	for _, args := range [][]string{{"scan", "--keys-only"}, {"scan", "--json"}} {
		ts := newTickers()
		var e *env_
		bg := startKvcliWith(context.Background(), args, env, func(x *env_) {
			e = x
			x.newTicker = ts.newTicker
			x.terminal = func(w io.Writer) bool { return w == e.stderr || (args[1] != "--json" && w == e.stdout) }
		})
		hold.Remove()
		require.Equal(t, exitOK, <-bg.done, bg.stderr.String())
		assert.Empty(t, ts.made, "%v", args)
		if args[1] == "--json" {
			var v any
			require.NoError(t, json.Unmarshal([]byte(bg.stdout.String()), &v))
		}
	}
}
