package meter

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The rank of a percentile is ceil(p% of the count), exactly: 99.9% of
// 1000 values is the 999th, not the 1000th (p/100*count in floating point
// is 999.0000000000001 and must not round up to the maximum).
func TestHistogramPercentileRankExact(t *testing.T) {
	var h Histogram
	for range 999 {
		h.RecordValue(1)
	}
	h.RecordValue(100000)
	s := h.drain()
	require.EqualValues(t, 1, s.percentile(99.9), "the 999th of 1000 values")
	require.EqualValues(t, 100000, s.percentile(100))

	var h2 Histogram
	for range 9990 {
		h2.RecordValue(1)
	}
	for range 10 {
		h2.RecordValue(100000)
	}
	s = h2.drain()
	require.EqualValues(t, 1, s.percentile(99.9), "the 9990th of 10000 values")
	require.EqualValues(t, 100000, s.percentile(99.91))
}
