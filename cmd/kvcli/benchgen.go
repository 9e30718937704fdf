package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/client"
)

// This file holds the shape of bench's load: when operations start
// (--rate), which keys they use (--key-dist) and how large the values
// they set are (--value-size).

// benchMaxValue is the largest --value-size: the server's item size limit.
const benchMaxValue = 20 << 20

// parseValueSize reads --value-size: BYTES, or MIN-MAX for sizes drawn
// uniformly from MIN to MAX, both included.
func parseValueSize(s string) (lo, hi int, err error) {
	bad := func() (int, int, error) {
		return 0, 0, fmt.Errorf("--value-size %q: want BYTES or MIN-MAX (e.g. 100 or 64-4096)", s)
	}
	a, b, isRange := strings.Cut(s, "-")
	lo, err = strconv.Atoi(strings.TrimSpace(a))
	if err != nil || strings.HasPrefix(strings.TrimSpace(a), "+") {
		return bad()
	}
	hi = lo
	if isRange {
		if hi, err = strconv.Atoi(strings.TrimSpace(b)); err != nil || strings.HasPrefix(strings.TrimSpace(b), "+") {
			return bad()
		}
	}
	switch {
	case lo > hi:
		return 0, 0, fmt.Errorf("--value-size %s: MIN %d is more than MAX %d", s, lo, hi)
	case hi > benchMaxValue:
		return 0, 0, fmt.Errorf("--value-size %s: want 0 to 20 MiB (%d bytes)", s, benchMaxValue)
	}
	return lo, hi, nil
}

// valueSizes returns the chooser of value sizes: uniform over [lo, hi].
func valueSizes(lo, hi int, rng *rand.Rand) func() int {
	if lo == hi {
		return func() int { return lo }
	}
	return func() int { return lo + rng.IntN(hi-lo+1) }
}

// Key distributions.
const (
	keyDistUniform = "uniform"
	keyDistZipfian = "zipfian"
)

// benchDefaultZipfS is --zipf-s's default: close to YCSB's 0.99, and more
// than 1 as math/rand/v2's Zipf requires.
const benchDefaultZipfS = 1.01

// keyChooser returns the chooser of key numbers in [0, n): uniform, or
// zipfian where number k is drawn with probability proportional to
// (1+k)^-s (k = 0 is the hottest key). The draws come from rng only, so a
// seed repeats them.
func keyChooser(dist string, s float64, n int, rng *rand.Rand) func() int {
	if dist == keyDistZipfian && n > 1 {
		z := rand.NewZipf(rng, s, 1, uint64(n-1))
		return func() int { return int(z.Uint64()) }
	}
	return func() int { return rng.IntN(n) }
}

// parseDurability reads --durability: a level by the name Couchbase gives
// it (client.DurabilityLevel's String), in any case.
func parseDurability(s string) (client.DurabilityLevel, error) {
	levels := []client.DurabilityLevel{client.DurabilityNone, client.DurabilityMajority,
		client.DurabilityMajorityAndPersistOnMaster, client.DurabilityPersistToMajority}
	names := make([]string, len(levels))
	for i, l := range levels {
		if strings.EqualFold(s, l.String()) {
			return l, nil
		}
		names[i] = l.String()
	}
	return 0, fmt.Errorf("--durability %q: want one of %s", s, strings.Join(names, ", "))
}

// benchLateAfter is how far behind its scheduled time an operation may
// start before it counts as late: more than a timer's usual wake-up delay
// on a busy machine, far less than a client that cannot keep up falls
// behind.
const benchLateAfter = time.Millisecond

// pacer spaces bench's operations for --rate: operation i (counted over
// all workers) is scheduled at start + i/rate, and a worker that claims it
// waits on a timer until then. The schedule is fixed: a worker that claims
// an operation whose time has passed starts it at once, so after a stall
// the workers catch up and the run keeps the rate on average; how late
// operations started is counted so that the summary can say when the
// client could not keep up.
type pacer struct {
	clock client.Clock
	start time.Time
	rate  float64 // operations per second, > 0
}

// at is operation i's scheduled start.
func (p *pacer) at(i int64) time.Time {
	return p.start.Add(time.Duration(float64(i) * float64(time.Second) / p.rate))
}

// wait blocks on t until operation i's scheduled time, or until stop is
// closed (ok false). late is how far behind schedule it is when wait
// returns, 0 when on time.
func (p *pacer) wait(t client.Timer, i int64, stop <-chan struct{}) (late time.Duration, ok bool) {
	at := p.at(i)
	if d := at.Sub(p.clock.Now()); d > 0 {
		t.Reset(d)
		select {
		case <-t.C():
		case <-stop:
			t.Stop()
			return 0, false
		}
	}
	return max(p.clock.Now().Sub(at), 0), true
}

// lateness counts one worker's operations started behind schedule: late is
// read by the progress line, the rest only after the worker ended.
type lateness struct {
	late    atomic.Uint64
	maxLate time.Duration
	// lastSlot is the schedule slot of the worker's latest operation (-1:
	// none), and lastLate how late it started.
	lastSlot int64
	lastLate time.Duration
}

func newLateness() lateness { return lateness{lastSlot: -1} }

// note records that the n operations from slot started d behind schedule.
func (l *lateness) note(slot int64, d time.Duration, n int64) {
	if d > benchLateAfter {
		l.late.Add(uint64(n))
	}
	l.maxLate = max(l.maxLate, d)
	if slot > l.lastSlot {
		l.lastSlot, l.lastLate = slot, d
	}
}

// finalLag is how far behind schedule the run's last operation (the
// latest slot any worker started) started.
func finalLag(ls []*lateness) time.Duration {
	last, lag := int64(-1), time.Duration(0)
	for _, l := range ls {
		if l.lastSlot > last {
			last, lag = l.lastSlot, l.lastLate
		}
	}
	return lag
}

// keptUp says whether a paced run kept its rate: it ended no further
// behind schedule than 1% of its time (plus benchLateAfter). A stall the
// workers caught up with is kept up; a client short of the rate ends
// behind by the operations it could not start, (1 - achieved/target) of
// the time.
func keptUp(finalLag, elapsed time.Duration) bool {
	return finalLag <= benchLateAfter+elapsed/100
}

// realClock is the wall clock as a client.Clock.
type realClock struct{}

func (realClock) Now() time.Time                        { return time.Now() }
func (realClock) NewTimer(d time.Duration) client.Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop() bool            { return r.t.Stop() }

// validRate says whether r is a --rate: finite and not negative.
func validRate(r float64) bool { return r >= 0 && !math.IsInf(r, 0) }
