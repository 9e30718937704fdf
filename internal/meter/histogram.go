package meter

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// Histogram is a lock-free latency histogram: buckets of a sixteenth of
// a power of two up to 2^40 microseconds (12 days; longer values count in
// the last bucket), and the exact maximum.
type Histogram struct {
	buckets [histBuckets]atomic.Uint64
	max     atomic.Uint64
}

const (
	histSubBits = 4 // 16 buckets per power of two
	histSub     = 1 << histSubBits
	histMaxBit  = 39 // the highest power of two with buckets of its own
	histBuckets = (histMaxBit-histSubBits+1)*histSub + histSub
)

// histBucket is the bucket of v: v itself below 2^4 (16), then 16 buckets for
// each power of two.
func histBucket(v uint64) int {
	if v < histSub {
		return int(v)
	}
	msb := bits.Len64(v) - 1
	if msb > histMaxBit {
		return histBuckets - 1
	}
	shift := msb - histSubBits
	return (shift+1)*histSub + int((v>>shift)&(histSub-1))
}

// histLower is the smallest value of bucket i.
func histLower(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	return uint64(histSub+i%histSub) << (i/histSub - 1)
}

// histUpper is the largest value of bucket i.
func histUpper(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	return histLower(i) + 1<<(i/histSub-1) - 1
}

// RecordValue records one value, in microseconds. It is the hot path (an
// operation's latency, called through an interface): its body is its own,
// and raiseMax is inlined in it, so that it calls nothing.
func (h *Histogram) RecordValue(v uint64) {
	h.buckets[histBucket(v)].Add(1)
	h.raiseMax(v)
}

// RecordValues records n values alike, v microseconds each, as n calls of
// RecordValue would.
func (h *Histogram) RecordValues(v, n uint64) {
	if n == 0 {
		return
	}
	h.buckets[histBucket(v)].Add(n)
	h.raiseMax(v)
}

// raiseMax makes v the maximum unless a larger one is there.
func (h *Histogram) raiseMax(v uint64) {
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// histSnapshot is what a histogram held at a drain.
type histSnapshot struct {
	counts [histBuckets]uint64
	count  uint64
	max    uint64
}

// drain takes the histogram's values and empties it. A value recorded
// during the drain is counted in this snapshot or the next, never both;
// its maximum may land in the other one, so a snapshot's maximum is at
// least the bottom of its highest bucket.
func (h *Histogram) drain() *histSnapshot {
	s := &histSnapshot{}
	top := -1
	for i := range h.buckets {
		n := h.buckets[i].Swap(0)
		s.counts[i] = n
		s.count += n
		if n > 0 {
			top = i
		}
	}
	s.max = h.max.Swap(0)
	if top >= 0 {
		s.max = max(s.max, histLower(top))
	}
	return s
}

// percentile is the p-th percentile: the top of the bucket that holds the
// value of rank ceil(p% of the count), capped at the maximum.
func (s *histSnapshot) percentile(p float64) uint64 {
	if s.count == 0 {
		return 0
	}
	// In integers, p in thousandths of a percent: p/100*count in floating
	// point is not exact (99.9% of 1000 is 999.0000000000001), and its
	// ceiling would take the next rank, the maximum.
	milli := uint64(math.Round(min(max(p, 0), 100) * 1000))
	rank := (milli*s.count + 100000 - 1) / 100000
	rank = max(rank, 1)
	var seen uint64
	for i, n := range s.counts {
		seen += n
		if seen >= rank {
			return min(histUpper(i), s.max)
		}
	}
	return s.max
}
