package main

import (
	"math"
	"math/bits"
	"time"
)

// histogram records durations in log-linear buckets, as HdrHistogram does
// with two significant digits: values below 256 ns are exact, and above
// that each power of two is split into 128 buckets, so a bucket spans less
// than 1/128 of its values and a reported percentile (the bucket's middle)
// is within 0.4% of the true one. Recording is one array increment; a
// histogram belongs to one goroutine, and histograms merge by adding.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	sum    uint64 // nanoseconds; overflows only after 584 years of latency
	min    uint64
	max    uint64
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits // buckets per power of two
	// The highest index is that of 2^64-1: exponent 56, mantissa 255.
	histBuckets = (64-histSubBits-1)*histSub + 2*histSub
)

// histIndex is the bucket of v.
func histIndex(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	e := bits.Len64(v) - histSubBits - 1 // v>>e is in [128, 256)
	return e*histSub + int(v>>e)
}

// histRange is the lowest value of bucket i and the bucket's width.
func histRange(i int) (low, width uint64) {
	if i < 2*histSub {
		return uint64(i), 1
	}
	e := i/histSub - 1
	m := uint64(i - e*histSub)
	return m << e, 1 << e
}

func (h *histogram) record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	h.counts[histIndex(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += v
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// percentile returns the value below or at which a fraction q (0..1) of
// the recorded values lie: the middle of the bucket holding the
// ceil(q*n)-th smallest value, clamped to [min, max]. q >= 1 gives max.
func (h *histogram) percentile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			low, width := histRange(i)
			v := low + (width-1)/2
			v = max(v, h.min)
			v = min(v, h.max)
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}

func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / h.n)
}
