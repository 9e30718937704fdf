package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/optrace"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// An operation without a collection (a ping) and a client without a
// bucket (memcached://) have no scope, collection or bucket: their metric
// attributes leave them out, as their spans do (optrace's startOperation),
// rather than carrying empty label values.
func TestMetricAttributesLeaveOutWhatDoesNotApply(t *testing.T) {
	m := &countingMeter{}
	ob := newObservers(&Options{Meter: m, ThresholdLogging: ThresholdLoggingOptions{Disabled: true},
		OrphanReporting: OrphanReportingOptions{Disabled: true}}, retry.NewFakeClock(reportEpoch), retry.NewFakeClock(reportEpoch), "")
	defer ob.close()
	var tr opTrace
	ob.begin(context.Background(), &tr, optrace.NameOf("Ping", memdx.OpNoop), nil, nil, reportEpoch, time.Second)
	ob.end(&tr, nil, nil, 0, reportEpoch.Add(time.Millisecond))
	require.Len(t, m.asked, 1)
	require.Equal(t, map[string]string{AttributeSystemName: "couchbase", AttributeService: "kv", AttributeOperationName: "ping"},
		m.asked[0])
}
