package client

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/internal/optrace"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// error.type is RFC 0058's name of the error's sentinel, the timeout's
// kind before whatever caused it, _OTHER without one.
func TestErrorTypes(t *testing.T) {
	for err, want := range map[error]string{
		&KeyValueError{Err: ErrDocumentNotFound}:                           "DocumentNotFound",
		fmt.Errorf("x: %w", ErrCasMismatch):                                "CasMismatch",
		fmt.Errorf("%w: %w", ErrUnambiguousTimeout, ErrTemporaryFailure):   "UnambiguousTimeout",
		&KeyValueError{Err: ErrAmbiguousTimeout, Cause: ErrDocumentLocked}: "AmbiguousTimeout",
		&KeyValueError{Err: ErrServerFailure}:                              "InternalServerFailure",
		&KeyValueError{Err: ErrRequestCanceled}:                            "RequestCanceled",
		fmt.Errorf("no"):                                                   ErrorTypeOther,
		&KeyValueError{Err: ErrDocumentNotJSON}:                            "DocumentNotJson",
		&KeyValueError{Err: ErrNoNodeAvailable}:                            "ServiceNotAvailable",
		// RFC 0058's RequestCanceled: "the request is in-flight on the
		// socket and the socket gets closed", or the client shut down.
		&KeyValueError{Err: ErrAmbiguous, Cause: ErrConnectionClosed, Ambiguous: true}: "RequestCanceled",
		&KeyValueError{Err: ErrClosed}:                               "RequestCanceled",
		&KeyValueError{Err: ErrClosed, Cause: ErrConnectionClosed}:   "RequestCanceled",
		&KeyValueError{Err: ErrDurabilityAmbiguous, Ambiguous: true}: "DurabilityAmbiguous",
		&KeyValueError{Err: ErrAmbiguousTimeout, Ambiguous: true}:    "AmbiguousTimeout",
	} {
		assert.Equal(t, want, optrace.ErrorType(err, ErrorTypeOther), "%v", err)
	}
}

// countingMeter counts the recorders it is asked for and what they record.
type countingMeter struct {
	mu     sync.Mutex
	asked  []map[string]string
	values map[string][]uint64 // by operation and error type
}

func (m *countingMeter) Counter(string, map[string]string) (Counter, error) {
	return noopInstrument{}, nil
}
func (m *countingMeter) ValueRecorder(name string, attrs map[string]string) (ValueRecorder, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked = append(m.asked, attrs)
	return countingRecorder{m, attrs[AttributeOperationName] + "/" + attrs[AttributeErrorType]}, nil
}

type countingRecorder struct {
	m *countingMeter
	k string
}

func (r countingRecorder) RecordValue(v uint64) {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	if r.m.values == nil {
		r.m.values = map[string][]uint64{}
	}
	r.m.values[r.k] = append(r.m.values[r.k], v)
}

// A Meter is asked once for each recorder, with RFC 0067's attributes;
// the latency is recorded in microseconds on it.
func TestOperationMetricRecorders(t *testing.T) {
	m := &countingMeter{}
	ob := newObservers(&Options{Meter: m, Bucket: "b", ThresholdLogging: ThresholdLoggingOptions{Disabled: true},
		OrphanReporting: OrphanReportingOptions{Disabled: true}}, retry.NewFakeClock(reportEpoch), retry.NewFakeClock(reportEpoch), "")
	defer ob.close()
	col := &Collection{scope: "s", name: "c"}
	for i, err := range []error{nil, nil, &KeyValueError{Err: ErrDocumentNotFound}, nil} {
		var tr opTrace
		ob.begin(context.Background(), &tr, optrace.NameOf("Get", memdx.OpGet), col, nil, reportEpoch, time.Second)
		ob.end(&tr, col, err, 0, reportEpoch.Add(time.Duration(i+1)*time.Millisecond))
	}
	require.Len(t, m.asked, 2)
	require.Equal(t, map[string]string{AttributeSystemName: "couchbase", AttributeService: "kv", AttributeOperationName: "get",
		AttributeBucketName: "b", AttributeScopeName: "s", AttributeCollectionName: "c"}, m.asked[0])
	require.Equal(t, "DocumentNotFound", m.asked[1][AttributeErrorType])
	require.Equal(t, map[string][]uint64{"get/": {1000, 2000, 4000}, "get/DocumentNotFound": {3000}}, m.values)
}

// An orphan from a connection becomes a record of the orphan report:
// its total from the request's dispatch to the late answer (from when it
// was abandoned when the request said nothing), the connection's id and
// sockets, the opaque and the server's duration. The request's Sent is
// the client's clock's (a fake one here), the connection's Abandoned and
// Arrived the system clock's: the total from Sent is read on the client's
// clock, the one from Abandoned on the connection's.
func TestOrphanRecordFromConnection(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	logger, logs := logcapture.New()
	ob := newObservers(&Options{Logger: logger, LoggingMeter: LoggingMeterOptions{Disabled: true},
		ThresholdLogging: ThresholdLoggingOptions{Disabled: true}}, clock, clock, "")
	clock.Advance(750 * time.Millisecond) // the late answer comes 750 ms after the send
	now := time.Now()
	ob.onOrphan(conn.Orphan{Origin: conn.Origin{Operation: "get", Sent: reportEpoch, Timeout: 50 * time.Millisecond},
		OpCode: memdx.OpGet, Opaque: 42, ConnID: "a/b", LocalAddr: "127.0.0.1:5000", RemoteAddr: "127.0.0.1:11210",
		Abandoned: now.Add(-700 * time.Millisecond), Arrived: now,
		ServerDuration: 700 * time.Millisecond, HasServerDuration: true})
	ob.onOrphan(conn.Orphan{OpCode: memdx.OpNoop, Opaque: 7, Abandoned: now.Add(-time.Second), Arrived: now})
	ob.close()
	l := logcapture.Next(t, logs)
	require.Equal(t, OrphanReportMessage, l.Msg)
	rep := logcapture.ParseKV(t, l)
	require.EqualValues(t, 2, rep.KV.TotalCount)
	require.Equal(t, map[string]any{"operation_name": "ping", "total_duration_us": 1e6, "last_dispatch_duration_us": 1e6,
		"total_dispatch_duration_us": 1e6, "operation_id": "0x7"}, rep.KV.TopRequests[0])
	require.Equal(t, map[string]any{"operation_name": "get", "total_duration_us": 750000.0, "last_dispatch_duration_us": 750000.0,
		"total_dispatch_duration_us": 750000.0, "last_server_duration_us": 700000.0, "total_server_duration_us": 700000.0,
		"operation_id": "0x2a", "last_local_id": "a/b", "last_local_socket": "127.0.0.1:5000",
		"last_remote_socket": "127.0.0.1:11210", "timeout_ms": 50.0}, rep.KV.TopRequests[1])
}

var reportEpoch = logcapture.Epoch

// RFC 0067's defaults, with Options that set nothing: the slow-operation
// report every 10 s, over 500 ms for KV, the 10 slowest; the orphan
// report every 10 s, the 10 slowest; the logging meter on, every 10
// minutes.
func TestReportDefaults(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	logger, logs := logcapture.New()
	ob := newObservers(&Options{Logger: logger}, clock, clock, "")
	require.True(t, ob.Metered(), "the logging meter records")
	require.Equal(t, 10, ob.orphans.SampleSize())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, clock.BlockUntilTimers(ctx, 3))
	require.ElementsMatch(t, []time.Time{reportEpoch.Add(10 * time.Second), reportEpoch.Add(10 * time.Second),
		reportEpoch.Add(600 * time.Second)}, clock.Timers(), "the first reports are due one interval on")
	for i := range 12 { // 500 ms is not over the threshold; 501 ms to 511 ms are
		var tr opTrace
		ob.begin(ctx, &tr, optrace.NameOf("Get", memdx.OpGet), nil, nil, reportEpoch, time.Second)
		ob.end(&tr, nil, nil, 0, reportEpoch.Add(500*time.Millisecond+time.Duration(i)*time.Millisecond))
	}
	ob.close()
	for {
		l := logcapture.Next(t, logs)
		if l.Msg != ThresholdReportMessage {
			continue
		}
		rep := logcapture.ParseKV(t, l)
		require.EqualValues(t, 11, rep.KV.TotalCount)
		require.Len(t, rep.KV.TopRequests, 10)
		return
	}
}
