package main

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"time"
)

// Latency recording, the same for every loop (clients, raw loops, batches).
//
// A loop does not time every operation: timing one costs two clock reads
// and a histogram update, which the clients paid per operation while a raw
// loop paid it per window (the package doc has the figures). Instead each
// measuring goroutine times the operations it draws at random, one in
// -sample on average (gaps uniform in [1, 2·sample−1], from a seed that
// depends only on the goroutine's index, so every client's goroutine g
// times the same operation numbers). A timed operation is timed by two
// reads of the monotonic clock around the call that carries it (a client's
// one operation, a raw loop's window, a batch) and its latency goes into the
// goroutine's histogram; an untimed one costs a decrement and a compare.
// Which operations are timed does not depend on their latency, so the
// quantiles are those of all operations, from fewer values.

// defaultSample is -sample's default: at 16 the recording is about 1% of
// kvwire's CPU at 256 goroutines (package doc), and a 300 ms quick-mode
// interval at one goroutine still times a few hundred operations for its
// p50.
const defaultSample = 16

// recorder is one measuring goroutine's latency record: it picks the
// operations to time and keeps their latencies. Each goroutine owns one; they
// are preallocated and merged after the interval, so recording allocates
// nothing. What an operation touches sits in a 128-byte object of its own
// (two cache lines: Go's 128-byte size class is aligned, so no false
// sharing with other goroutines' recorders): the counter every operation
// decrements, and a buffer of the last latencies, which go to the
// histogram (35 KB, out of the cache when 256 goroutines take turns) 16 at
// a time: written one by one, each missed the cache and the TLB (0.9–1.3%
// of the process against 0.1–0.4% buffered, in two A/B pairs of profiles of
// mock/get-32B/256/kvwire).
type recorder struct {
	left  int // operations until the next timed one, this one included
	every int // mean gap between timed operations; 0: none is timed
	seed  uint64
	rng   rand.PCG
	t0    time.Duration // when the timed call began
	h     *hist
	n     int        // latencies in buf
	buf   [16]uint32 // ns, not yet in h
}

func newRecorder(every int, seed uint64) *recorder {
	r := &recorder{every: every, seed: seed, h: new(hist)}
	r.reset()
	return r
}

// reset starts a new interval: an empty histogram, and the gaps of the
// recorder's seed from their start.
func (r *recorder) reset() {
	r.h.reset()
	r.n = 0
	r.rng.Seed(r.seed, r.seed^0x9e3779b97f4a7c15)
	r.left = math.MaxInt
	if r.every > 0 {
		r.left = r.gap()
	}
}

// gap is the number of operations from one timed operation to the next.
func (r *recorder) gap() int {
	if r.every <= 1 {
		return 1
	}
	return 1 + int(r.rng.Uint64()%uint64(2*r.every-1))
}

// begin is called before a call that carries the next n operations and
// returns how many of them are timed (mostly 0); end is called after it
// with that count.
func (r *recorder) begin(n int) int {
	if r.left -= n; r.left > 0 {
		return 0
	}
	return r.start()
}

// start counts the timed operations that begin passed (left ≤ 0), draws
// the gap to the next one and reads the clock. It and stop stay out of
// line, so that begin and end are inlined into every loop.
//
//go:noinline
func (r *recorder) start() (k int) {
	for r.left <= 0 {
		k++
		r.left += r.gap()
	}
	r.t0 = monotonic()
	return k
}

// end records the call begin started: each of its k timed operations took
// the call's time.
func (r *recorder) end(k int) {
	if k > 0 {
		r.stop(k)
	}
}

//go:noinline
func (r *recorder) stop(k int) {
	d := monotonic() - r.t0
	if k > 1 || d < 0 || d > math.MaxUint32 {
		// A window or a batch (at most one per call of many operations),
		// or a latency beyond 4 s: straight to the histogram.
		r.h.addN(d, k)
		return
	}
	r.buf[r.n] = uint32(d)
	if r.n++; r.n == len(r.buf) {
		r.flush()
	}
}

// flush moves the buffered latencies to the histogram.
func (r *recorder) flush() {
	for _, v := range r.buf[:r.n] {
		r.h.addN(time.Duration(v), 1)
	}
	r.n = 0
}

// latencies returns every latency recorded since reset.
func (r *recorder) latencies() *hist {
	r.flush()
	return r.h
}

// epoch is the origin of monotonic.
var epoch = time.Now()

// monotonic reads the monotonic clock: one clock read (time.Now reads the
// wall clock too).
func monotonic() time.Duration { return time.Since(epoch) }

// hist is a log-linear latency histogram in nanoseconds: exact below 256 ns,
// then 128 buckets per power of two, so a recorded value is off by less than
// 0.8%. A recorder holds one (no sharing, no atomics). Recording touches
// one bucket and nothing else (no running total: count sums the buckets).
type hist struct {
	counts [histBuckets]uint64
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits
	// Values up to 2^40 ns (18 minutes) have a bucket; longer ones are
	// counted in the last.
	histBuckets = (40-histSubBits)*histSub + 2*histSub
)

func histIndex(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	s := bits.Len64(v) - histSubBits - 1
	i := s*histSub + int(v>>uint(s))
	if i >= histBuckets {
		return histBuckets - 1
	}
	return i
}

// histValue is the midpoint of bucket i.
func histValue(i int) uint64 {
	if i < 2*histSub {
		return uint64(i)
	}
	s := i/histSub - 1
	m := uint64(i - s*histSub)
	return m<<uint(s) + (uint64(1)<<uint(s))/2
}

// addN records n operations that each took d.
func (h *hist) addN(d time.Duration, n int) {
	if d < 0 {
		d = 0
	}
	h.counts[histIndex(uint64(d))] += uint64(n)
}

// count is the number of values recorded.
func (h *hist) count() uint64 {
	var n uint64
	for _, c := range h.counts {
		n += c
	}
	return n
}

func (h *hist) reset() { *h = hist{} }

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// quantile returns the q-quantile (0 < q <= 1): the smallest recorded
// value with at least q of the values at or below it.
func (h *hist) quantile(q float64) time.Duration {
	n := h.count()
	if n == 0 {
		return 0
	}
	rank := uint64(q * float64(n))
	if float64(rank) < q*float64(n) {
		rank++
	}
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(histValue(i))
		}
	}
	return time.Duration(histValue(histBuckets - 1))
}
