package client

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/optrace"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// What the observability hooks cost an operation when nothing is set up:
// the spans an operation makes through the guard with the NoopTracer
// (operation span, one dispatch span, their attributes) and its latency on
// the NoopMeter. Run with -benchmem: 0 allocs/op is the requirement.
func BenchmarkNoopTracerOperation(b *testing.B) {
	g := newHookGuard(nil, nil)
	ctx := context.Background()
	st := spanStarter{g, NoopTracer{}} // as the engine starts spans
	rec := g.valueRecorder(NoopMeter{}, MetricOperationDuration, nil)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		op := st.Start(ctx, "get", nil, now)
		g.SetAttribute(op, AttributeSystemName, slog.StringValue(SystemCouchbase))
		g.SetAttribute(op, AttributeService, slog.StringValue(ServiceKV))
		d := st.Start(ctx, SpanDispatchToServer, op, now)
		g.SetAttribute(d, AttributeServerDuration, slog.Int64Value(12))
		g.SetAttribute(d, AttributeOperationID, slog.Int64Value(42))
		g.EndSpan(d, now)
		g.SetAttribute(op, AttributeRetries, slog.IntValue(0))
		st.SetStatus(op, false)
		g.EndSpan(op, now)
		g.RecordValue(rec, 25)
	}
}

// What the default tracer costs an operation as the client uses it: one
// check, and no span call.
func BenchmarkNoopTracerSkipped(b *testing.B) {
	var tracer RequestTracer = NoopTracer{}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if tracerOn(tracer) {
			n++
		}
	}
	if n != 0 {
		b.Fatal("the NoopTracer is on")
	}
}

// What the observers cost one operation with the defaults (no tracer, the
// logging meter, the slow-operation and orphan reports on), as execute
// calls them for a Get answered at once: begin, send, ended, end. The
// clock readings are the engine's, not counted here.
func BenchmarkDefaultObserversOperation(b *testing.B) {
	logger := slog.New(slog.DiscardHandler)
	o := Options{Logger: logger, Bucket: "b"}
	cs, _ := ParseConnStr("couchbase://h/b")
	o, _ = o.resolved(cs)
	benchObserversOperation(b, o)
}

// benchObserversOperation runs one operation's begin and end (its send's
// Origin filled between) on the observers o sets up.
func benchObserversOperation(b *testing.B, o Options) {
	clock := retry.NewFakeClock(reportEpoch)
	ob := newObservers(&o, clock, clock, "ABCDEF0123456789")
	defer ob.close()
	col := &Collection{scope: DefaultScope, name: DefaultCollection, isDefault: true}
	ctx := context.Background()
	start := reportEpoch
	end := start.Add(30 * time.Microsecond)
	b.ReportAllocs()
	for b.Loop() {
		var t opTrace
		ob.begin(ctx, &t, optrace.NameOf("Get", memdx.OpGet), col, nil, start, 2500*time.Millisecond)
		t.Origin.Sent = start
		ob.end(&t, col, nil, 0, end)
	}
}

// benchSpan is a span that counts the calls it gets.
type benchSpan struct{ n int }

func (s *benchSpan) SetAttribute(string, slog.Value)          { s.n++ }
func (s *benchSpan) AddEvent(string, time.Time, ...slog.Attr) { s.n++ }
func (s *benchSpan) SetStatus(SpanStatus)                     { s.n++ }
func (s *benchSpan) End(time.Time)                            { s.n++ }

// benchTracer starts its one span, again and again.
type benchTracer struct{ s *benchSpan }

func (t benchTracer) RequestSpan(context.Context, string, RequestSpan, time.Time) RequestSpan {
	return t.s
}

// What the observers cost one traced operation (its span through the
// guard; no meter, no reports), begin and end: the tracer's own cost is
// a counter's.
func BenchmarkTracedObserversOperation(b *testing.B) {
	benchObserversOperation(b, Options{Logger: slog.New(slog.DiscardHandler), Bucket: "b", Tracer: benchTracer{&benchSpan{}},
		Meter: NoopMeter{}, ThresholdLogging: ThresholdLoggingOptions{Disabled: true}, OrphanReporting: OrphanReportingOptions{Disabled: true}})
}
