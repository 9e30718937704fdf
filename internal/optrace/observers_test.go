package optrace

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/internal/logreport"
	"github.com/kvwire/kvwire/internal/meter"
	"github.com/kvwire/kvwire/internal/opreport"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/require"
)

// RecordN counts n operations in the logging meter, as n Begin/End pairs
// would; MeterOnly holds while no tracer is set and the slow-operation
// report would not keep the operations.
func TestRecordNInTheLoggingMeter(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	logger, _ := logcapture.New()
	lm := meter.NewLogging(logreport.Config{Interval: time.Hour, Clock: clock, Logger: logger})
	defer lm.Close()
	var ob Observers
	ob.Init(Config{Clock: clock, Service: "kv", LoggingMeter: lm,
		Threshold: &opreport.Threshold{KV: 500 * time.Millisecond}})
	require.True(t, ob.MeterOnly(500*time.Millisecond))
	require.False(t, ob.MeterOnly(501*time.Millisecond), "the slow-operation report keeps it")

	ob.RecordN(nil, "Get", memdx.OpGet, 1500*time.Microsecond, 256)
	for range 2 {
		var tr Trace
		ob.Begin(t.Context(), &tr, NameOf("Get", memdx.OpGet), nil, nil, logcapture.Epoch, time.Second)
		ob.End(&tr, nil, nil, 0, logcapture.Epoch.Add(1500*time.Microsecond))
	}
	var rep struct {
		Operations map[string]map[string]struct {
			TotalCount    int            `json:"total_count"`
			PercentilesUs map[string]int `json:"percentiles_us"`
		} `json:"operations"`
	}
	require.NoError(t, json.Unmarshal(lm.Report(), &rep))
	g := rep.Operations["kv"]["get"]
	require.Equal(t, 258, g.TotalCount)
	require.Equal(t, 1500, g.PercentilesUs["100.0"], "%v", g.PercentilesUs)
}
