package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reports' and the meter's settings: RFC 0067's defaults when nothing
// is said; the connection string's options (the names the C++ core and
// gocbcore read) win over Options; out of range is refused, naming the
// option.
func TestObservabilityOptions(t *testing.T) {
	for _, tc := range []struct {
		connStr   string
		opts      Options
		threshold ThresholdLoggingOptions
		orphans   OrphanReportingOptions
		meter     LoggingMeterOptions
	}{
		{"couchbase://h/b", Options{},
			ThresholdLoggingOptions{Interval: 10 * time.Second, KVThreshold: 500 * time.Millisecond, SampleSize: 10},
			OrphanReportingOptions{Interval: 10 * time.Second, SampleSize: 10},
			LoggingMeterOptions{Interval: 10 * time.Minute}},
		{"couchbase://h/b?enable_tracing=false&orphaned_response_logging=false&enable_metrics=false", Options{},
			ThresholdLoggingOptions{Disabled: true, Interval: 10 * time.Second, KVThreshold: 500 * time.Millisecond, SampleSize: 10},
			OrphanReportingOptions{Disabled: true, Interval: 10 * time.Second, SampleSize: 10},
			LoggingMeterOptions{Disabled: true, Interval: 10 * time.Minute}},
		{"couchbase://h/b?tracing_threshold_kv=100ms&tracing_threshold_queue_flush_interval=1m&tracing_threshold_queue_size=3" +
			"&tracing_orphaned_queue_flush_interval=30000&tracing_orphaned_queue_size=1024&metrics_emit_interval=10ms",
			Options{ThresholdLogging: ThresholdLoggingOptions{KVThreshold: time.Second, SampleSize: 7}, LoggingMeter: LoggingMeterOptions{Interval: time.Hour}},
			ThresholdLoggingOptions{Interval: time.Minute, KVThreshold: 100 * time.Millisecond, SampleSize: 3},
			OrphanReportingOptions{Interval: 30 * time.Second, SampleSize: 1024},
			LoggingMeterOptions{Interval: 10 * time.Millisecond}},
		{"memcached://h?enable_tracing=true",
			Options{ThresholdLogging: ThresholdLoggingOptions{Disabled: true, Interval: time.Second}, OrphanReporting: OrphanReportingOptions{SampleSize: 1}},
			ThresholdLoggingOptions{Interval: time.Second, KVThreshold: 500 * time.Millisecond, SampleSize: 10},
			OrphanReportingOptions{Interval: 10 * time.Second, SampleSize: 1},
			LoggingMeterOptions{Interval: 10 * time.Minute}},
	} {
		cs, err := ParseConnStr(tc.connStr)
		require.NoError(t, err, tc.connStr)
		o, err := tc.opts.resolved(cs)
		require.NoError(t, err, tc.connStr)
		assert.Equal(t, tc.threshold, o.ThresholdLogging, tc.connStr)
		assert.Equal(t, tc.orphans, o.OrphanReporting, tc.connStr)
		assert.Equal(t, tc.meter, o.LoggingMeter, tc.connStr)
	}

	for input, want := range map[string]string{
		"tracing_threshold_kv=0":                     "positive",
		"tracing_threshold_kv=soon":                  "not a duration",
		"tracing_threshold_queue_flush_interval=1ms": "at least 10ms",
		"tracing_orphaned_queue_flush_interval=0":    "at least 10ms",
		"metrics_emit_interval=-1s":                  "negative",
		"tracing_threshold_queue_size=0":             "1..1024",
		"tracing_orphaned_queue_size=1025":           "1..1024",
		"enable_tracing=maybe":                       "bool",
		"orphaned_response_logging=2":                "bool",
		"enable_metrics=":                            `"enable_metrics" has no value`,
	} {
		cs, err := ParseConnStr("couchbase://h/b?" + input)
		if err == nil {
			_, err = Options{}.resolved(cs)
		}
		require.Error(t, err, input)
		assert.ErrorIs(t, err, ErrInvalidArgument, input)
		assert.Contains(t, err.Error(), want, input)
	}
	for field, o := range map[string]Options{
		"ThresholdLogging.KVThreshold": {ThresholdLogging: ThresholdLoggingOptions{KVThreshold: -1}},
		"ThresholdLogging.Interval":    {ThresholdLogging: ThresholdLoggingOptions{Interval: time.Millisecond}},
		"OrphanReporting.Interval":     {OrphanReporting: OrphanReportingOptions{Interval: -time.Second}},
		"LoggingMeter.Interval":        {LoggingMeter: LoggingMeterOptions{Interval: 9 * time.Millisecond}},
		"ThresholdLogging.SampleSize":  {ThresholdLogging: ThresholdLoggingOptions{SampleSize: 1025}},
		"OrphanReporting.SampleSize":   {OrphanReporting: OrphanReportingOptions{SampleSize: -1}},
	} {
		cs, _ := ParseConnStr("couchbase://h/b")
		_, err := o.resolved(cs)
		require.Error(t, err, field)
		assert.ErrorIs(t, err, ErrInvalidArgument, field)
		assert.Contains(t, err.Error(), "Options."+field, field)
	}
}
