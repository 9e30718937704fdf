package optrace

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/internal/logreport"
	"github.com/kvwire/kvwire/internal/meter"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// TestLoggingMeterKeepsNothingPerCollection: a client lives for weeks and
// goes through many collections (made for a tenant or a job, dropped,
// others named anew). The logging meter (the default) keeps one histogram
// per operation: the client keeps nothing per collection or error type
// for it either, however many it met, and every operation is still
// counted in its operation's histogram.
func TestLoggingMeterKeepsNothingPerCollection(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	logger, _ := logcapture.New()
	lm := meter.NewLogging(logreport.Config{Interval: time.Hour, Clock: clock, Logger: logger})
	defer lm.Close()
	var ob Observers
	ob.Init(Config{Clock: clock, Service: "kv", LoggingMeter: lm})

	const n = 1000
	for i := range n {
		name := "c" + strconv.Itoa(i)
		cm := ob.Coll("s", name, "s."+name)
		require.Equal(t, name, cm.name, "the span's collection is the operation's")
		ob.RecordN(cm, "Get", memdx.OpGet, time.Millisecond, 1)
		ob.meters.record(cm, "get", opUnlisted, "DocumentNotFound", time.Millisecond)
		ob.meters.record(cm, "get", opUnlisted, "_OTHER", time.Millisecond)
	}
	require.Zero(t, len(ob.meters.colls), "no Coll kept per collection")
	require.Equal(t, 1, len(*ob.meters.m.Load()), "one recorder, get's")

	var rep struct {
		Operations map[string]map[string]struct {
			TotalCount int `json:"total_count"`
		} `json:"operations"`
	}
	require.NoError(t, json.Unmarshal(lm.Report(), &rep))
	require.Equal(t, 3*n, rep.Operations["kv"]["get"].TotalCount)
}
