package kvotel

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"
)

// noPanic runs f and fails t, naming what, when it panics.
func noPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

// What a user may hand the adapter by mistake or by design does not
// panic: nil providers (the global ones then, as OpenTelemetry's Go
// instrumentation libraries take them), a nil or zero Tracer, Meter or
// Span, WrapSpan(nil) as a parent (the context's span is then the parent),
// a nil context.
func TestNilAndZeroValuesDoNotPanic(t *testing.T) {
	sr, tp := newRecorder(t)
	now := time.Now()
	use := func(s client.RequestSpan) {
		s.SetAttribute("k", slog.StringValue("v"))
		s.AddEvent("e", now, slog.Int("n", 1))
		s.SetStatus(client.SpanStatusError)
		s.End(now)
	}
	noPanic(t, "NewTracer(nil)", func() {
		otel.SetTracerProvider(tp)
		defer otel.SetTracerProvider(noop.NewTracerProvider())
		use(NewTracer(nil).RequestSpan(context.Background(), "get", nil, now))
		if len(sr.Ended()) != 1 {
			t.Errorf("NewTracer(nil) did not use the global provider: %d spans", len(sr.Ended()))
		}
	})
	noPanic(t, "nil *Tracer", func() { use((*Tracer)(nil).RequestSpan(context.Background(), "get", nil, now)) })
	noPanic(t, "zero Tracer", func() { use((&Tracer{}).RequestSpan(context.Background(), "get", nil, now)) })
	noPanic(t, "WrapSpan(nil)", func() { use(WrapSpan(nil)) })
	noPanic(t, "nil *Span", func() { use((*Span)(nil)) })
	noPanic(t, "nil context", func() {
		//lint:ignore SA1012 a nil context is the odd input tested
		use(NewTracer(tp).RequestSpan(nil, "get", WrapSpan(nil), now)) //nolint:staticcheck
	})
	sr.Reset()
	noPanic(t, "WrapSpan(nil) as parent", func() {
		ctx, caller := tp.Tracer("app").Start(context.Background(), "caller")
		NewTracer(tp).RequestSpan(ctx, "get", WrapSpan(nil), now).End(now)
		caller.End()
		for _, s := range sr.Ended() {
			if s.Name() == "get" && s.Parent().SpanID() != caller.SpanContext().SpanID() {
				t.Errorf("get under %v, want the context's span %v", s.Parent().SpanID(), caller.SpanContext().SpanID())
			}
		}
	})
	record := func(m client.Meter) {
		if r, err := m.ValueRecorder(client.MetricOperationDuration, nil); err == nil {
			r.RecordValue(1)
		}
		if r, err := m.ValueRecorder("other", map[string]string{"": ""}); err == nil {
			r.RecordValue(1)
		}
		if c, err := m.Counter("count", nil); err == nil {
			c.IncrementBy(1)
		}
	}
	noPanic(t, "NewMeter(nil)", func() { record(NewMeter(nil)) })
	noPanic(t, "nil *Meter", func() { record((*Meter)(nil)) })
	noPanic(t, "zero Meter", func() { record(&Meter{}) })
}
