package main

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/client"
)

// stepClock is a fake client.Clock for one worker: a timer's Reset is the
// worker's sleep, so it moves the clock on by d, records d and fires.
type stepClock struct {
	now   time.Time
	waits []time.Duration
}

func (c *stepClock) Now() time.Time { return c.now }
func (c *stepClock) NewTimer(time.Duration) client.Timer {
	return &stepTimer{c: c, ch: make(chan time.Time, 1)}
}

type stepTimer struct {
	c  *stepClock
	ch chan time.Time
}

func (t *stepTimer) C() <-chan time.Time { return t.ch }
func (t *stepTimer) Reset(d time.Duration) {
	t.c.waits = append(t.c.waits, d)
	t.c.now = t.c.now.Add(d)
	t.ch <- t.c.now
}
func (t *stepTimer) Stop() bool {
	select {
	case <-t.ch:
		return true
	default:
		return false
	}
}

// paceRun runs n operations through a pacer at rate on a stepClock, the
// operation i taking cost(i), and returns the clock, each operation's
// start (from the pacer's start) and the lateness counts.
func paceRun(t *testing.T, rate float64, n int, cost func(i int) time.Duration) (*stepClock, []time.Duration, *lateness) {
	t.Helper()
	c := &stepClock{now: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)}
	p := &pacer{clock: c, start: c.now, rate: rate}
	timer := c.NewTimer(time.Hour)
	l := lateness{lastSlot: -1}
	starts := make([]time.Duration, n)
	for i := range n {
		late, ok := p.wait(timer, int64(i), nil)
		require.True(t, ok)
		l.note(int64(i), late, 1)
		starts[i] = c.now.Sub(p.start)
		c.now = c.now.Add(cost(i))
	}
	return c, starts, &l
}

func TestPacerStartsOperationsOnTheirScheduledTimes(t *testing.T) {
	// 1000 ops/s: one every millisecond; an operation takes 300µs, so
	// the worker sleeps 700µs before each but the first.
	c, starts, l := paceRun(t, 1000, 100, func(int) time.Duration { return 300 * time.Microsecond })
	for i, s := range starts {
		assert.Equal(t, time.Duration(i)*time.Millisecond, s, "operation %d", i)
	}
	require.Len(t, c.waits, 99)
	for _, w := range c.waits {
		assert.Equal(t, 700*time.Microsecond, w)
	}
	assert.Zero(t, l.late.Load())
	assert.Zero(t, l.maxLate)
	assert.Zero(t, finalLag([]*lateness{l}))
	assert.True(t, keptUp(finalLag([]*lateness{l}), starts[99]))

	// A rate that does not divide a second: operation i at i/3 s.
	_, starts, _ = paceRun(t, 3, 4, func(int) time.Duration { return 0 })
	assert.Equal(t, []time.Duration{0, 333333333, 666666666, time.Second}, starts)
}

func TestPacerCountsOperationsStartedBehindSchedule(t *testing.T) {
	// Operations of 2.5ms at 1000 ops/s: the worker never sleeps and
	// operation i starts 1.5ms*i late.
	c, starts, l := paceRun(t, 1000, 100, func(int) time.Duration { return 2500 * time.Microsecond })
	assert.Empty(t, c.waits, "a worker behind schedule never sleeps")
	assert.Equal(t, 99*2500*time.Microsecond, starts[99])
	assert.Equal(t, uint64(99), l.late.Load(), "every operation but the first starts over 1ms late")
	assert.Equal(t, 99*1500*time.Microsecond, l.maxLate)
	assert.Equal(t, 99*1500*time.Microsecond, finalLag([]*lateness{l}))
	// 250ms of run, ending 148.5ms behind.
	assert.False(t, keptUp(finalLag([]*lateness{l}), 250*time.Millisecond))
}

func TestPacerCatchesUpAfterAStall(t *testing.T) {
	// 100µs operations at 1000 ops/s, but operation 10 takes 20ms. The
	// schedule stays fixed: operations 11 onwards run back to back, each
	// 0.9ms less late than the one before, until they are on schedule
	// again, and from then on each starts exactly on its millisecond.
	c, starts, l := paceRun(t, 1000, 100, func(i int) time.Duration {
		if i == 10 {
			return 20 * time.Millisecond
		}
		return 100 * time.Microsecond
	})
	// Operation k (11 <= k <= 32) starts at 30ms + 0.1ms*(k-11), which
	// is 19ms - 0.9ms*(k-11) late: over 1ms for k = 11..30.
	assert.Equal(t, uint64(20), l.late.Load())
	assert.Equal(t, 19*time.Millisecond, l.maxLate)
	for k := 33; k < 100; k++ {
		assert.Equal(t, time.Duration(k)*time.Millisecond, starts[k], "operation %d back on schedule", k)
	}
	// 10 sleeps before the stall, none during the catch-up, then one
	// per operation from 33 (the first on-time start after it) to 99.
	assert.Len(t, c.waits, 10+67)
	assert.Zero(t, finalLag([]*lateness{l}), "the run ended on schedule")
	assert.True(t, keptUp(0, 99*time.Millisecond), "a stall caught up with is keeping up")
}

func TestKeptUpIsTheFinalLagAgainstTheRunTime(t *testing.T) {
	// Workers' latest operations: the one with the latest slot tells.
	a := &lateness{lastSlot: 7, lastLate: 3 * time.Millisecond}
	b := &lateness{lastSlot: 9, lastLate: 500 * time.Microsecond}
	idle := &lateness{lastSlot: -1}
	assert.Equal(t, 500*time.Microsecond, finalLag([]*lateness{a, b, idle}))
	assert.Equal(t, time.Duration(0), finalLag([]*lateness{idle}))
	assert.True(t, keptUp(time.Millisecond, time.Millisecond), "1ms behind is on time")
	assert.True(t, keptUp(101*time.Millisecond, 10*time.Second), "1ms + 1% of 10s")
	assert.False(t, keptUp(102*time.Millisecond, 10*time.Second))
	assert.False(t, keptUp(2*time.Millisecond, 50*time.Millisecond))
}

func TestPacerWaitEndsWhenStopped(t *testing.T) {
	// Operation 1 of a run at one per 1000s: a real timer that would
	// sleep for 1000s, and a stop already closed.
	p := &pacer{clock: realClock{}, start: time.Now(), rate: 0.001}
	timer := p.clock.NewTimer(time.Hour)
	timer.Stop()
	stop := make(chan struct{})
	close(stop)
	_, ok := p.wait(timer, 1, stop)
	assert.False(t, ok)
	assert.False(t, timer.Stop(), "the timer was stopped")
}

// zipfP is the probability of key k of n under a zipfian exponent s with
// math/rand/v2's Zipf (v = 1): (1+k)^-s normalised.
func zipfP(k, n int, s float64) float64 {
	var sum float64
	for i := range n {
		sum += math.Pow(float64(1+i), -s)
	}
	return math.Pow(float64(1+k), -s) / sum
}

func TestKeyChooserZipfianFollowsItsExponent(t *testing.T) {
	const n, draws = 1000, 200000
	for _, s := range []float64{benchDefaultZipfS, 1.5, 3} {
		next := keyChooser(keyDistZipfian, s, n, rand.New(rand.NewPCG(1, 1)))
		counts := make([]int, n)
		for range draws {
			k := next()
			require.True(t, k >= 0 && k < n, "key %d out of range", k)
			counts[k]++
		}
		// Each key's frequency is within 5 standard deviations of its
		// probability (a fixed seed: this is deterministic).
		for _, k := range []int{0, 1, 2, 9, 99, 999} {
			p := zipfP(k, n, s)
			sigma := math.Sqrt(p * (1 - p) / draws)
			assert.InDelta(t, p, float64(counts[k])/draws, 5*sigma+1e-9, "s=%v key %d", s, k)
		}
		// Chi-square against the expected counts, over keys whose expected
		// count is at least 5 (the rest pooled): 999 degrees of freedom at
		// most, so well under 999 + 6*sqrt(2*999).
		var chi2, restObs, restExp float64
		for k := range n {
			e := zipfP(k, n, s) * draws
			if e < 5 {
				restObs += float64(counts[k])
				restExp += e
				continue
			}
			chi2 += (float64(counts[k]) - e) * (float64(counts[k]) - e) / e
		}
		if restExp > 0 {
			chi2 += (restObs - restExp) * (restObs - restExp) / restExp
		}
		assert.Less(t, chi2, 999+6*math.Sqrt(2*999), "s=%v", s)
	}
	// The default exponent is skewed: the hottest 1% of 1000 keys take
	// 40% of the draws (exactly 0.4001), where a uniform choice gives
	// them 1%.
	for dist, want := range map[string][2]float64{keyDistZipfian: {0.38, 0.42}, keyDistUniform: {0.008, 0.012}} {
		next := keyChooser(dist, benchDefaultZipfS, n, rand.New(rand.NewPCG(7, 7)))
		hot := 0
		for range draws {
			if next() < n/100 {
				hot++
			}
		}
		share := float64(hot) / draws
		assert.True(t, share > want[0] && share < want[1], "%s: the first 1%% of the keys drew %.3f", dist, share)
	}
	// With bench's default of 10000 keys, the hottest 1% take 54%
	// (exactly 0.5421), the figure README.md gives.
	next := keyChooser(keyDistZipfian, benchDefaultZipfS, 10000, rand.New(rand.NewPCG(7, 7)))
	hot := 0
	for range draws {
		if next() < 100 {
			hot++
		}
	}
	share := float64(hot) / draws
	assert.True(t, share > 0.53 && share < 0.555, "the first 1%% of 10000 keys drew %.3f", share)
}

func TestKeyChooserUniformIsUniform(t *testing.T) {
	const n, draws = 1000, 200000
	next := keyChooser(keyDistUniform, 0, n, rand.New(rand.NewPCG(1, 1)))
	counts := make([]int, n)
	for range draws {
		counts[next()]++
	}
	e := float64(draws) / n
	var chi2 float64
	for _, c := range counts {
		chi2 += (float64(c) - e) * (float64(c) - e) / e
	}
	assert.Less(t, chi2, 999+6*math.Sqrt(2*999))
}

func TestKeyChooserRepeatsWithTheSameSeed(t *testing.T) {
	for _, dist := range []string{keyDistUniform, keyDistZipfian} {
		a := keyChooser(dist, 1.2, 500, rand.New(rand.NewPCG(42, 3)))
		b := keyChooser(dist, 1.2, 500, rand.New(rand.NewPCG(42, 3)))
		c := keyChooser(dist, 1.2, 500, rand.New(rand.NewPCG(43, 3)))
		same, differ := true, false
		for range 1000 {
			x, y, z := a(), b(), c()
			same = same && x == y
			differ = differ || x != z
		}
		assert.True(t, same, "%s: same seed, same keys", dist)
		assert.True(t, differ, "%s: another seed, other keys", dist)
	}
	// One key: always key 0, whatever the distribution.
	one := keyChooser(keyDistZipfian, 1.01, 1, rand.New(rand.NewPCG(1, 1)))
	for range 10 {
		assert.Equal(t, 0, one())
	}
}

func TestParseValueSize(t *testing.T) {
	for in, want := range map[string][2]int{
		"0": {0, 0}, "32": {32, 32}, "64-4096": {64, 4096}, "7-7": {7, 7}, " 1 - 2 ": {1, 2},
		"20971520": {20 << 20, 20 << 20},
	} {
		lo, hi, err := parseValueSize(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, [2]int{lo, hi}, in)
	}
	for in, msg := range map[string]string{
		"":           `--value-size "": want BYTES or MIN-MAX`,
		"abc":        `--value-size "abc": want BYTES or MIN-MAX`,
		"-5":         `--value-size "-5": want BYTES or MIN-MAX`,
		"5-":         `--value-size "5-": want BYTES or MIN-MAX`,
		"1-2-3":      `--value-size "1-2-3": want BYTES or MIN-MAX`,
		"+5":         `--value-size "+5": want BYTES or MIN-MAX`,
		"1k":         `--value-size "1k": want BYTES or MIN-MAX`,
		"100-10":     "--value-size 100-10: MIN 100 is more than MAX 10",
		"20971521":   "--value-size 20971521: want 0 to 20 MiB (20971520 bytes)",
		"0-20971521": "--value-size 0-20971521: want 0 to 20 MiB",
	} {
		_, _, err := parseValueSize(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), msg, in)
	}
}

func TestValueSizesStayInRange(t *testing.T) {
	next := valueSizes(10, 13, rand.New(rand.NewPCG(1, 1)))
	seen := map[int]int{}
	for range 4000 {
		seen[next()]++
	}
	assert.Len(t, seen, 4, "every size from 10 to 13, nothing else: %v", seen)
	for size, c := range seen {
		assert.True(t, size >= 10 && size <= 13, "size %d", size)
		assert.InDelta(t, 1000, c, 150, "size %d drawn uniformly", size)
	}
	fixed := valueSizes(5, 5, nil)
	assert.Equal(t, 5, fixed())
}

func TestParseDurability(t *testing.T) {
	for in, want := range map[string]client.DurabilityLevel{
		"none": client.DurabilityNone, "majority": client.DurabilityMajority,
		"majorityAndPersistActive": client.DurabilityMajorityAndPersistOnMaster,
		"persistToMajority":        client.DurabilityPersistToMajority,
		"MAJORITY":                 client.DurabilityMajority, "persisttomajority": client.DurabilityPersistToMajority,
	} {
		l, err := parseDurability(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, l, in)
	}
	_, err := parseDurability("all")
	assert.EqualError(t, err, `--durability "all": want one of none, majority, majorityAndPersistActive, persistToMajority`)
}
