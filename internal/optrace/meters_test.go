package optrace

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/hookguard"
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

// countingRecorder counts the values recorded on it.
type countingRecorder struct{ n *int }

func (r countingRecorder) RecordValue(uint64) { *r.n++ }

// TestCallerMeterRecordersAreBounded: with a caller's Meter, the client
// kept a recorder per operation, scope, collection and error type, and a
// Coll per collection path, for good (and copied the whole recorder map
// to add each): a client going through many collections over weeks grew
// both by one or more per collection. Both are now bounded; past the
// bound they start anew and the Meter is asked again, and every value
// still reaches the recorder of its own attributes.
func TestCallerMeterRecordersAreBounded(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	logger, _ := logcapture.New()
	counts := map[MeterKey]*int{}
	asked := 0
	var ob Observers
	ob.Init(Config{Clock: clock, Service: "kv", Guard: hookguard.New(logger, clock),
		Recorder: func(k MeterKey) hookguard.ValueRecorder {
			asked++
			if counts[k] == nil {
				counts[k] = new(int)
			}
			return countingRecorder{counts[k]}
		}})
	const bound, n = 8, 100
	ob.meters.maxRecs, ob.meters.maxColls = bound, bound
	for i := range n {
		name := "c" + strconv.Itoa(i)
		cm := ob.Coll("s", name, "s."+name)
		ob.RecordN(cm, "Get", memdx.OpGet, time.Millisecond, 1)
		ob.meters.record(cm, "get", opUnlisted, "DocumentNotFound", time.Millisecond)
		require.LessOrEqual(t, len(ob.meters.colls), bound, "Colls kept")
		require.LessOrEqual(t, len(*ob.meters.m.Load()), bound, "recorders kept")
	}
	require.Len(t, counts, 2*n)
	for k, c := range counts {
		require.Equal(t, 1, *c, "%v", k)
	}
	require.Equal(t, 2*n, asked)
}

// TestCallerMeterRecordersDoNotThrash: with more recorders in use at
// once than the bound (a client among thousands of collections, each
// with an error type or two), starting anew at each one past the bound
// dropped the very recorders about to be used again: nearly every
// operation asked the Meter again and copied the whole map to add its
// recorder back (a benchmark cycling 5000 keys over the 4096 kept: 0.4
// ms and 300 KB per operation). The recorders now start anew at most
// once per maxRecordersResetEvery; meanwhile a recorder past the bound
// is asked for and used, not kept.
func TestCallerMeterRecordersDoNotThrash(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	logger, _ := logcapture.New()
	counts := map[MeterKey]*int{}
	asked := 0
	var ob Observers
	ob.Init(Config{Clock: clock, Service: "kv", Guard: hookguard.New(logger, clock),
		Recorder: func(k MeterKey) hookguard.ValueRecorder {
			asked++
			if counts[k] == nil {
				counts[k] = new(int)
			}
			return countingRecorder{counts[k]}
		}})
	const bound, keys, rounds = 8, 10, 100
	ob.meters.maxRecs = bound
	cms := make([]*Coll, keys)
	for i := range cms {
		name := "c" + strconv.Itoa(i)
		cms[i] = ob.Coll("s", name, "s."+name)
	}
	round := func() {
		for _, cm := range cms {
			ob.meters.record(cm, "get", opUnlisted, "DocumentNotFound", time.Millisecond)
			require.LessOrEqual(t, len(*ob.meters.m.Load()), bound, "recorders kept")
		}
	}
	for range rounds {
		round()
	}
	// The bound's 8 kept, the 2 past it asked for at each use.
	require.Equal(t, bound+(keys-bound)*rounds, asked, "the Meter asked again for recorders kept")
	for k, c := range counts {
		require.Equal(t, rounds, *c, "%v", k)
	}
	// Later, the recorders start anew: those used since are kept.
	clock.Advance(maxRecordersResetEvery)
	asked = 0
	round()
	round()
	require.Equal(t, keys, asked, "started anew once (8, 9 asked), then as before (0 to 5 kept, 6 and 7 asked)")
}
