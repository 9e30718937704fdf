package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// A scan is one operation to the slow-operation report, as it is to the
// tracer and the meter: one "scan" entry over its whole run (its total,
// its requests' dispatch times summed, the last one's opaque and
// connection), not an entry per RANGE_SCAN_CREATE / _CONTINUE / _CANCEL
// named after requests that no span and no metric shows, each counted
// in total_count as an operation of its own. So too when nothing but the
// report observes (no tracer, the meter off). The threshold is 1 ns:
// every operation is over it.
func TestSlowOperationReportSeesAScanAsOne(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1, Buckets: []mockcluster.BucketOptions{
		{Name: mockcluster.DefaultBucket, NumVbuckets: 4, NumReplicas: mockcluster.NoReplicas}}})
	for i := range 12 {
		_, err := mc.Bucket(mockcluster.DefaultBucket).Set("_default", "_default", fmt.Sprintf("t%02d", i), []byte(`{"n":1}`), CommonFlagsJSON, 0)
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		name  string
		meter LoggingMeterOptions
	}{
		{"logging meter on", LoggingMeterOptions{}},
		{"report alone", LoggingMeterOptions{Disabled: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger, logs := newReportLog()
			c := connect(t, mc, &Options{Logger: logger, LoggingMeter: tc.meter,
				ThresholdLogging: ThresholdLoggingOptions{KVThreshold: time.Nanosecond, Interval: time.Hour, SampleSize: 100}})
			res, err := c.DefaultCollection().Scan(context.Background(), PrefixScan{Prefix: "t"}, &ScanOptions{BatchItemLimit: 2})
			require.NoError(t, err)
			n := 0
			for _, err := range res.All() {
				require.NoError(t, err)
				n++
			}
			require.Equal(t, 12, n)
			require.NoError(t, c.Close()) // the report logs what it holds

			rep := logs.next(t, ThresholdReportMessage)
			var names []string
			for _, e := range rep.KV.TopRequests {
				names = append(names, fmt.Sprint(e["operation_name"]))
			}
			require.Equal(t, []string{"scan"}, names, "the report's operations")
			assert.EqualValues(t, 1, rep.KV.TotalCount)
			e := rep.KV.TopRequests[0]
			total, last, all := us(e, "total_duration_us"), us(e, "last_dispatch_duration_us"), us(e, "total_dispatch_duration_us")
			assert.Greater(t, last, time.Duration(0), "%v", e)
			assert.GreaterOrEqual(t, all, last, "%v", e)
			assert.GreaterOrEqual(t, total, all, "%v", e)
			assert.Regexp(t, `^0x[0-9a-f]+$`, e["operation_id"])
			assert.Regexp(t, localID, e["last_local_id"])
			assert.Regexp(t, `^127\.0\.0\.1:\d+$`, e["last_remote_socket"])
		})
	}
}
