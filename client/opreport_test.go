package client

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/require"
)

// logged is one record a capture handler received.
type logged struct {
	level  slog.Level
	msg    string
	report []byte // the "report" attribute's JSON, nil when absent
}

// captureHandler is a slog.Handler sending every record to a channel.
type captureHandler struct{ out chan logged }

func newCapture() (*slog.Logger, chan logged) {
	out := make(chan logged, 64)
	return slog.New(captureHandler{out}), out
}

func (h captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h captureHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h captureHandler) WithGroup(string) slog.Handler            { return h }
func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	l := logged{level: r.Level, msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "report" {
			if m, ok := a.Value.Any().(json.Marshaler); ok {
				l.report, _ = m.MarshalJSON()
			}
		}
		return true
	})
	h.out <- l
	return nil
}

// nextLog returns the next record logged, failing the test when none comes
// within a minute (the reporters log from their goroutine once a fake
// clock's timer fired, at once on any machine).
func nextLog(t *testing.T, ch <-chan logged) logged {
	t.Helper()
	select {
	case l := <-ch:
		return l
	case <-time.After(time.Minute):
		t.Fatal("nothing was logged")
		return logged{}
	}
}

// requireNoLog checks that nothing was logged (call it when the reporter
// has re-armed its timer, so that whatever it would log is already sent).
func requireNoLog(t *testing.T, ch <-chan logged) {
	t.Helper()
	select {
	case l := <-ch:
		t.Fatalf("logged %q %s", l.msg, l.report)
	default:
	}
}

// tick moves clock by d once the reporter's timer is armed, and returns
// once the reporter has re-armed it: whatever it logs for that tick has
// been sent.
func tick(t *testing.T, clock *retry.FakeClock, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, clock.BlockUntilTimers(ctx, 1))
	clock.Advance(d)
	require.NoError(t, clock.BlockUntilTimers(ctx, 1))
}

// fullRecord is an operation record with every field set.
func fullRecord(total time.Duration) opRecord {
	return opRecord{
		service: ServiceKV, operation: "get", total: total, encode: 3 * time.Microsecond,
		dispatched: true, lastDispatch: total - 10*time.Microsecond, totalDispatch: total - 5*time.Microsecond,
		operationID: 0x2a, localID: "66388CF5BFCF7522/18CC8791579B567C",
		localSocket: "10.0.0.2:52450", remoteSocket: "10.0.0.1:11210",
		hasServer: true, lastServer: 700 * time.Millisecond, totalServer: 701 * time.Millisecond,
		timeout: 2500 * time.Millisecond,
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
	b, err := json.Marshal(r.entry())
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
	b, err = json.Marshal((&opRecord{service: ServiceKV, operation: "upsert", total: time.Second}).entry())
	require.NoError(t, err)
	require.JSONEq(t, `{"total_duration_us":1000000,"operation_name":"upsert"}`, string(b))
	// A server duration of 0 that a response carried is there.
	b, err = json.Marshal((&opRecord{operation: "get", hasServer: true}).entry())
	require.NoError(t, err)
	require.JSONEq(t, `{"total_duration_us":0,"last_server_duration_us":0,"total_server_duration_us":0,"operation_name":"get"}`, string(b))
}

// A sample keeps the slowest records, slowest first, and counts them all.
func TestSampleKeepsSlowest(t *testing.T) {
	s := newSample(3)
	for _, ms := range []int{5, 1, 9, 3, 7, 9, 2} {
		r := opRecord{operation: "get", total: time.Duration(ms) * time.Millisecond}
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
		r.total = time.Duration(i) * time.Millisecond
		sm.add(&r)
	})
	require.Zero(t, allocs)
}

// The report logs through any handler: a JSON handler embeds it as an
// object, a text handler prints it as JSON on the same line.
func TestReportAsLogAttribute(t *testing.T) {
	rep := []byte(`{"kv":{"total_count":1,"top_requests":[]}}`)
	var out []byte
	logger := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) { out = append(out, p...) }), nil))
	logReport(logger, slog.LevelWarn, "kvwire: test", rep)
	var line struct {
		Msg    string          `json:"msg"`
		Report json.RawMessage `json:"report"`
	}
	require.NoError(t, json.Unmarshal(out, &line))
	require.JSONEq(t, string(rep), string(line.Report))

	out = out[:0]
	logger = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) { out = append(out, p...) }), nil))
	logReport(logger, slog.LevelWarn, "kvwire: test", rep)
	require.Contains(t, string(out), `report="{\"kv\":{\"total_count\":1,\"top_requests\":[]}}"`)
	require.Equal(t, 1, strings.Count(string(out), "\n"), "one line")
}

type writerFunc func(p []byte)

func (w writerFunc) Write(p []byte) (int, error) { w(p); return len(p), nil }
