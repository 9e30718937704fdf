package opreport

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fullRecord is an operation record with every field set.
func fullRecord(total time.Duration) Record {
	return Record{
		Service: "kv", Operation: "get", Total: total, Encode: 3 * time.Microsecond,
		Dispatched: true, LastDispatch: total - 10*time.Microsecond, TotalDispatch: total - 5*time.Microsecond,
		OperationID: 0x2a, LocalID: "66388CF5BFCF7522/18CC8791579B567C",
		LocalSocket: "10.0.0.2:52450", RemoteSocket: "10.0.0.1:11210",
		HasServer: true, LastServer: 700 * time.Millisecond, TotalServer: 701 * time.Millisecond,
		Timeout: 2500 * time.Millisecond,
	}
}

// rfcEntryKeys are every key of an RFC 0067 report entry.
var rfcEntryKeys = []string{
	"total_duration_us", "encode_duration_us", "last_dispatch_duration_us", "total_dispatch_duration_us",
	"last_server_duration_us", "total_server_duration_us", "operation_name", "last_local_id",
	"operation_id", "last_local_socket", "last_remote_socket", "timeout_ms",
}

// An entry with every field set has exactly RFC 0067's keys and values in
// its units: nothing else, so no document key, value or credential, can
// be in a report.
func TestReportEntryFields(t *testing.T) {
	r := fullRecord(800 * time.Millisecond)
	b, err := json.Marshal(r.Entry())
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	require.ElementsMatch(t, rfcEntryKeys, keys)
	require.Equal(t, map[string]any{
		"total_duration_us": 800000.0, "encode_duration_us": 3.0, "last_dispatch_duration_us": 799990.0,
		"total_dispatch_duration_us": 799995.0, "last_server_duration_us": 700000.0, "total_server_duration_us": 701000.0,
		"operation_name": "get", "last_local_id": "66388CF5BFCF7522/18CC8791579B567C", "operation_id": "0x2a",
		"last_local_socket": "10.0.0.2:52450", "last_remote_socket": "10.0.0.1:11210", "timeout_ms": 2500.0,
	}, m)

	// Fields that do not apply are left out: an operation never sent has
	// its total and name only.
	b, err = json.Marshal((&Record{Service: "kv", Operation: "upsert", Total: time.Second}).Entry())
	require.NoError(t, err)
	require.JSONEq(t, `{"total_duration_us":1000000,"operation_name":"upsert"}`, string(b))
	// A server duration of 0 that a response carried is there.
	b, err = json.Marshal((&Record{Operation: "get", HasServer: true}).Entry())
	require.NoError(t, err)
	require.JSONEq(t, `{"total_duration_us":0,"last_server_duration_us":0,"total_server_duration_us":0,"operation_name":"get"}`, string(b))
}

// A sample keeps the slowest records, slowest first, and counts them all.
func TestSampleKeepsSlowest(t *testing.T) {
	s := newSample(3)
	for _, ms := range []int{5, 1, 9, 3, 7, 9, 2} {
		r := Record{Operation: "get", Total: time.Duration(ms) * time.Millisecond}
		s.add(&r)
	}
	rep := s.drain()
	require.EqualValues(t, 7, rep.TotalCount)
	var got []uint64
	for _, e := range rep.TopRequests {
		got = append(got, e.TotalDurationUs)
	}
	require.Equal(t, []uint64{9000, 9000, 7000}, got)
	require.Zero(t, s.drain().TotalCount, "a drain empties the sample")

	empty := newSample(0)
	r := fullRecord(time.Second)
	empty.add(&r)
	require.EqualValues(t, 1, empty.drain().TotalCount, "a sample of size 0 still counts")
}

func TestSampleAddAllocatesNothing(t *testing.T) {
	sm := newSampler(10)
	r := fullRecord(time.Second)
	sm.add(&r) // the service's sample is made on its first record
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		r.Total = time.Duration(i) * time.Millisecond
		sm.add(&r)
	})
	require.Zero(t, allocs)
}
