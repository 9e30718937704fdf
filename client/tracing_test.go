package client

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/internal/optrace"
	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/require"
)

// The defaults cost nothing: a span of the NoopTracer and an instrument of
// the NoopMeter, used as the client uses them (through the guard),
// allocate nothing.
func TestNoopTracerAndMeterAllocateNothing(t *testing.T) {
	g := newHookGuard(nil, nil)
	ctx := context.Background()
	st := spanStarter{g, NoopTracer{}} // as the engine starts spans
	var meter Meter = NoopMeter{}
	rec := g.valueRecorder(meter, MetricOperationDuration, nil)
	cnt := g.counter(meter, "c", nil)
	now := time.Now()
	// An event's attributes come from a slice the operation keeps: a
	// variadic list built at the call would escape to the heap.
	reason := []slog.Attr{slog.String(AttributeRetryReason, "KV_LOCKED")}
	allocs := testing.AllocsPerRun(1000, func() {
		op := st.Start(ctx, "get", nil, now)
		g.SetAttribute(op, AttributeSystemName, slog.StringValue(SystemCouchbase))
		g.SetAttribute(op, AttributeRetries, slog.IntValue(2))
		d := st.Start(ctx, SpanDispatchToServer, op, now)
		g.SetAttribute(d, AttributeServerDuration, slog.Int64Value(700000))
		g.EndSpan(d, now)
		g.AddEvent(op, EventRetry, now, reason...)
		st.SetStatus(op, false)
		g.EndSpan(op, now)
		g.RecordValue(rec, 1234)
		g.IncrementBy(cnt, 1)
	})
	require.Zero(t, allocs)
}

// The client skips span and metric calls for the no-op defaults.
func TestNoopDefaultsAreRecognised(t *testing.T) {
	require.False(t, tracerOn(nil))
	require.False(t, tracerOn(NoopTracer{}))
	require.False(t, tracerOn(&NoopTracer{}))
	require.True(t, tracerOn(panicky{}))
	require.False(t, meterOn(nil))
	require.False(t, meterOn(NoopMeter{}))
	require.False(t, meterOn(&NoopMeter{}))
	require.True(t, meterOn(panicky{}))
}

// An operation's parent span is the one its options name, else the one
// its context carries.
func TestParentSpanFromOptionsOrContext(t *testing.T) {
	ctx := context.Background()
	require.Nil(t, ParentSpanFromContext(ctx))
	require.Nil(t, parentSpan(ctx, nil))
	fromCtx, fromOpts := &recordingSpan{name: "ctx"}, &recordingSpan{name: "opts"}
	ctx = ContextWithParentSpan(ctx, fromCtx)
	require.Same(t, fromCtx, ParentSpanFromContext(ctx))
	require.Same(t, fromCtx, parentSpan(ctx, nil))
	require.Same(t, fromOpts, parentSpan(ctx, fromOpts))
}

func TestSpanStatusNames(t *testing.T) {
	require.Equal(t, "unset", SpanStatusUnset.String())
	require.Equal(t, "ok", SpanStatusOK.String())
	require.Equal(t, "error", SpanStatusError.String())
	require.Equal(t, "SpanStatus(9)", SpanStatus(9).String())
}

// recordingSpan records what it is told.
type recordingSpan struct {
	name   string
	attrs  map[string]slog.Value
	events []string
	status SpanStatus
	ended  time.Time
}

func (s *recordingSpan) SetAttribute(k string, v slog.Value) {
	if s.attrs == nil {
		s.attrs = map[string]slog.Value{}
	}
	s.attrs[k] = v
}
func (s *recordingSpan) AddEvent(name string, _ time.Time, _ ...slog.Attr) {
	s.events = append(s.events, name)
}
func (s *recordingSpan) SetStatus(st SpanStatus) { s.status = st }
func (s *recordingSpan) End(at time.Time)        { s.ended = at }

// panicky is a tracer, span, meter and instrument that panic in every
// method, or fail.
type panicky struct{}

func (panicky) RequestSpan(context.Context, string, RequestSpan, time.Time) RequestSpan {
	panic("tracer bug")
}
func (panicky) SetAttribute(string, slog.Value)          { panic("span bug") }
func (panicky) AddEvent(string, time.Time, ...slog.Attr) { panic("span bug") }
func (panicky) SetStatus(SpanStatus)                     { panic("span bug") }
func (panicky) End(time.Time)                            { panic("span bug") }
func (panicky) Counter(string, map[string]string) (Counter, error) {
	panic("meter bug")
}
func (panicky) ValueRecorder(string, map[string]string) (ValueRecorder, error) {
	return nil, errors.New("meter refuses")
}
func (panicky) IncrementBy(uint64) { panic("counter bug") }
func (panicky) RecordValue(uint64) { panic("recorder bug") }

// A tracer or meter that panics (or fails) does not unwind the operation:
// each call through the guard returns, a span that could not start is one
// that records nothing, a refused instrument records nothing, and each
// hook's panic is logged at error, then at most once a minute.
func TestHookPanicsAreContained(t *testing.T) {
	clock := retry.NewFakeClock(reportEpoch)
	logger, logs := logcapture.New()
	g := newHookGuard(logger, clock)
	ctx, now := context.Background(), clock.Now()

	s := g.startSpan(panicky{}, ctx, "get", nil, now)
	require.Equal(t, noopSpan{}, s, "a tracer that panicked gives a span that records nothing")
	l := logcapture.Next(t, logs)
	require.Equal(t, slog.LevelError, l.Level)
	require.Contains(t, l.Msg, "panicked")

	var sp RequestSpan = panicky{}
	for range 3 {
		g.SetAttribute(sp, "k", slog.StringValue("v"))
		g.AddEvent(sp, EventRetry, now)
		g.setStatus(sp, SpanStatusError)
		g.EndSpan(sp, now)
	}
	var inst panicky
	g.RecordValue(inst, 1)
	g.IncrementBy(inst, 1)
	require.Equal(t, noopInstrument{}, g.counter(panicky{}, "c", nil))
	require.Equal(t, noopInstrument{}, g.valueRecorder(panicky{}, MetricOperationDuration, nil))
	// One log per hook: SetAttribute, AddEvent, SetStatus, End,
	// RecordValue, IncrementBy, Counter (panics) and ValueRecorder (an
	// error).
	for range 8 {
		logcapture.Next(t, logs)
	}
	logcapture.RequireNone(t, logs)
	require.EqualValues(t, 1+4*3+3, g.Panics())

	clock.Advance(59 * time.Second)
	g.EndSpan(sp, now)
	logcapture.RequireNone(t, logs)
	clock.Advance(time.Second)
	g.EndSpan(sp, now)
	require.Contains(t, logcapture.Next(t, logs).Msg, "panicked", "a minute on, the hook's panic is logged again")
}

// The spans carry the names the client publishes: internal/optrace, which
// makes them, declares the same text.
func TestSpanNamesAreTheClients(t *testing.T) {
	for public, engine := range map[string]string{
		SpanDispatchToServer: optrace.SpanDispatchToServer, SpanRequestEncoding: optrace.SpanRequestEncoding,
		EventRetry: optrace.EventRetry, EventCancelled: optrace.EventCancelled, SystemCouchbase: optrace.SystemCouchbase, TransportTCP: optrace.TransportTCP,
		AttributeSystemName: optrace.AttrSystemName, AttributeClusterName: optrace.AttrClusterName, AttributeClusterUUID: optrace.AttrClusterUUID, AttributeService: optrace.AttrService,
		AttributeOperationName: optrace.AttrOperationName, AttributeBucketName: optrace.AttrBucketName,
		AttributeScopeName: optrace.AttrScopeName, AttributeCollectionName: optrace.AttrCollectionName,
		AttributeRetries: optrace.AttrRetries, AttributeDurability: optrace.AttrDurability, AttributeErrorType: optrace.AttrErrorType,
		AttributeNetworkTransport: optrace.AttrNetworkTransport, AttributeServerDuration: optrace.AttrServerDuration,
		AttributeLocalID: optrace.AttrLocalID, AttributeOperationID: optrace.AttrOperationID,
		AttributeServerAddress: optrace.AttrServerAddress, AttributeServerPort: optrace.AttrServerPort,
		AttributePeerAddress: optrace.AttrPeerAddress, AttributePeerPort: optrace.AttrPeerPort,
		AttributeRetryReason: optrace.AttrRetryReason,
	} {
		require.Equal(t, public, engine)
	}
}
