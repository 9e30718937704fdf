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

// A call that reads several copies (GetAnyReplica, GetAllReplicas, their
// LookupIn forms) is one operation to the slow-operation report, as it is
// to the tracer and the meter: one entry named as its outer span
// (get_any_replica, ...), with the call's total and the winning (or last)
// copy's dispatch, opaque and connection, not one get / get_replica entry
// per copy read, each counted in total_count as an operation of its own
// and none named as the call the caller made. So too when nothing but the
// report observes. The threshold is 1 ns: every operation is over it.
func TestSlowOperationReportSeesAReplicaCallAsOne(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
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
			col := c.DefaultCollection()
			ctx := context.Background()
			_, err := col.Upsert(ctx, "r", []byte(`{"a":1}`), nil)
			require.NoError(t, err)
			require.NoError(t, c.Close()) // the report logs the upsert
			logs.next(t, ThresholdReportMessage)

			c = connect(t, mc, &Options{Logger: logger, LoggingMeter: tc.meter,
				ThresholdLogging: ThresholdLoggingOptions{KVThreshold: time.Nanosecond, Interval: time.Hour, SampleSize: 100}})
			col = c.DefaultCollection()
			_, err = col.GetAnyReplica(ctx, "r", nil)
			require.NoError(t, err)
			all, err := col.GetAllReplicas(ctx, "r", nil)
			require.NoError(t, err)
			require.Len(t, all, 2, "the active copy and the replica")
			_, err = col.GetAnyReplica(ctx, "missing", nil)
			require.ErrorIs(t, err, ErrDocumentNotFound)
			require.NoError(t, c.Close())

			rep := logs.next(t, ThresholdReportMessage)
			count := map[string]int{}
			for _, e := range rep.KV.TopRequests {
				name := fmt.Sprint(e["operation_name"])
				count[name]++
				total, last, sum := us(e, "total_duration_us"), us(e, "last_dispatch_duration_us"), us(e, "total_dispatch_duration_us")
				assert.Greater(t, last, time.Duration(0), "%v", e)
				assert.Equal(t, sum, last, "one copy's read, sent once: %v", e)
				assert.GreaterOrEqual(t, total, sum, "%v", e)
				assert.Regexp(t, `^0x[0-9a-f]+$`, e["operation_id"])
				assert.Regexp(t, localID, e["last_local_id"])
				assert.Regexp(t, `^127\.0\.0\.1:\d+$`, e["last_remote_socket"])
			}
			assert.Equal(t, map[string]int{"get_any_replica": 2, "get_all_replicas": 1}, count, "the report's operations")
			assert.EqualValues(t, 3, rep.KV.TotalCount)
		})
	}
}
