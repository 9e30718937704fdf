package main

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHistBuckets(t *testing.T) {
	// Every value falls in the bucket whose range holds it, and buckets
	// are ordered like their values.
	prev := -1
	for _, v := range []uint64{0, 1, 127, 128, 255, 256, 257, 511, 512, 1000, 1 << 20, 1<<20 + 12345, 1 << 40, math.MaxUint64 >> 1, math.MaxUint64} {
		i := histIndex(v)
		require.Less(t, i, histBuckets, "v=%d", v)
		low, width := histRange(i)
		assert.LessOrEqual(t, low, v, "v=%d", v)
		assert.Less(t, v-low, width, "v=%d", v)
		if v >= 256 {
			assert.LessOrEqual(t, float64(width)/float64(low), 1.0/128, "relative width at v=%d", v)
		}
		assert.GreaterOrEqual(t, i, prev, "v=%d: buckets are ordered like values", v)
		prev = i
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		v := rng.Uint64() >> rng.IntN(64)
		low, width := histRange(histIndex(v))
		require.True(t, low <= v && v-low < width, "v=%d low=%d width=%d", v, low, width)
	}
}

func TestHistPercentiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dists := map[string]func() time.Duration{
		"uniform 0-1ms":    func() time.Duration { return time.Duration(rng.Int64N(int64(time.Millisecond))) },
		"lognormal ~200µs": func() time.Duration { return time.Duration(math.Exp(rng.NormFloat64()*0.8) * 200e3) },
		"bimodal with tail": func() time.Duration {
			if rng.IntN(1000) == 0 {
				return time.Duration(50e6 + rng.Int64N(50e6))
			}
			return time.Duration(100e3 + rng.Int64N(20e3))
		},
		"tiny": func() time.Duration { return time.Duration(rng.IntN(300)) },
	}
	for name, gen := range dists {
		var h histogram
		var parts [4]histogram
		samples := make([]time.Duration, 200000)
		for i := range samples {
			samples[i] = gen()
			h.record(samples[i])
			parts[i%4].record(samples[i])
		}
		var merged histogram
		for i := range parts {
			merged.merge(&parts[i])
		}
		assert.Equal(t, h, merged, "%s: merging per-worker histograms gives the same histogram", name)
		sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
		for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
			exact := samples[int(math.Ceil(q*float64(len(samples))))-1]
			got := h.percentile(q)
			diff := math.Abs(float64(got - exact))
			assert.LessOrEqual(t, diff, float64(exact)/256+1, "%s p%v: got %v, exact %v", name, q*100, got, exact)
		}
		assert.Equal(t, samples[len(samples)-1], h.percentile(1), "%s: max is exact", name)
		assert.Equal(t, samples[0], time.Duration(h.min), "%s: min is exact", name)
		var sum time.Duration
		for _, s := range samples {
			sum += s
		}
		assert.Equal(t, sum/time.Duration(len(samples)), h.mean(), name)
	}
	var empty histogram
	assert.Zero(t, empty.percentile(0.5))
	assert.Zero(t, empty.mean())
}
