// Package kvotel connects kvwire's client to OpenTelemetry (Couchbase SDK
// RFC 0067's OpenTelemetryRequestTracer and OpenTelemetryMeter): NewTracer
// makes a client.RequestTracer of a trace.TracerProvider, NewMeter a
// client.Meter of a metric.MeterProvider. It is a module of its own, so
// that kvwire's core module does not depend on OpenTelemetry.
//
// Spans are of kind client and start under the caller's span: the span a
// client.RequestSpan from WrapSpan wraps, else the one the operation's
// context.Context carries (trace.ContextWithSpan, as OpenTelemetry
// instrumentation leaves it), else none.
//
// The tracer and meter are named after this package's import path
// (ScopeName), as OpenTelemetry's Go instrumentation libraries name
// theirs, and carry this module's version as the program's build
// information records it (runtime/debug.ReadBuildInfo: the version the
// program requires, or its replacement's), as OpenTelemetry asks of an
// instrumentation library and RFC 0067 "if the version can be set"; none
// when it records none (a program built from this module's own tree, a
// test, a replacement by a directory).
package kvotel

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/kvwire/kvwire/client"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/kvwire/kvwire/kvotel"

var (
	_ client.RequestTracer = (*Tracer)(nil)
	_ client.RequestSpan   = (*Span)(nil)
	_ client.Meter         = (*Meter)(nil)
)

// Tracer is a client.RequestTracer making OpenTelemetry spans.
type Tracer struct {
	tracer trace.Tracer
}

// NewTracer returns a RequestTracer whose spans tp's tracer makes; nil
// is OpenTelemetry's global TracerProvider (otel.GetTracerProvider), as
// OpenTelemetry's Go instrumentation libraries take it.
func NewTracer(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Tracer{tracer: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(scopeVersion()))}
}

// RequestSpan starts an OpenTelemetry span of kind client at start, under
// parent when it is one of this package's spans, else under the span ctx
// carries (a nil ctx carries none). A nil or zero Tracer (not made by
// NewTracer) returns a span that records nothing.
func (t *Tracer) RequestSpan(ctx context.Context, name string, parent client.RequestSpan, start time.Time) client.RequestSpan {
	if t == nil || t.tracer == nil {
		return &Span{}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if p, ok := parent.(*Span); ok && p != nil && p.span != nil {
		ctx = trace.ContextWithSpan(ctx, p.span)
	}
	_, s := t.tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient))
	return &Span{span: s}
}

// Span is a client.RequestSpan over an OpenTelemetry span. A nil Span, or
// one over no span (WrapSpan(nil)), records nothing, and as a parent is
// none.
type Span struct {
	span trace.Span
}

// WrapSpan makes an OpenTelemetry span a client.RequestSpan, to hand an
// operation as its parent (client.ContextWithParentSpan, or an operation's
// options) when the operation's context does not carry it.
func WrapSpan(s trace.Span) *Span { return &Span{span: s} }

// Unwrap returns the OpenTelemetry span (nil for none).
func (s *Span) Unwrap() trace.Span {
	if s == nil {
		return nil
	}
	return s.span
}

// SetAttribute sets an attribute; see Attribute for the conversion.
func (s *Span) SetAttribute(key string, value slog.Value) {
	if s == nil || s.span == nil {
		return
	}
	s.span.SetAttributes(Attribute(key, value))
}

// AddEvent adds an event at a time.
func (s *Span) AddEvent(name string, at time.Time, attrs ...slog.Attr) {
	if s == nil || s.span == nil {
		return
	}
	opts := []trace.EventOption{trace.WithTimestamp(at)}
	if len(attrs) > 0 {
		kvs := make([]attribute.KeyValue, len(attrs))
		for i, a := range attrs {
			kvs[i] = Attribute(a.Key, a.Value)
		}
		opts = append(opts, trace.WithAttributes(kvs...))
	}
	s.span.AddEvent(name, opts...)
}

// SetStatus sets the span's status: Ok or Error (Unset leaves it).
func (s *Span) SetStatus(status client.SpanStatus) {
	if s == nil || s.span == nil {
		return
	}
	switch status {
	case client.SpanStatusOK:
		s.span.SetStatus(codes.Ok, "")
	case client.SpanStatusError:
		s.span.SetStatus(codes.Error, "")
	}
}

// End ends the span at a time.
func (s *Span) End(at time.Time) {
	if s == nil || s.span == nil {
		return
	}
	s.span.End(trace.WithTimestamp(at))
}

// Attribute converts a client attribute to OpenTelemetry's: strings, bools,
// integers and floats as themselves (an unsigned integer over the int64
// range as its decimal string), a duration as int64 microseconds (the unit
// of RFC 0067's durations), a time as RFC 3339 text, anything else as its
// text.
func Attribute(key string, v slog.Value) attribute.KeyValue {
	v = v.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return attribute.String(key, v.String())
	case slog.KindInt64:
		return attribute.Int64(key, v.Int64())
	case slog.KindUint64:
		if u := v.Uint64(); u <= math.MaxInt64 {
			return attribute.Int64(key, int64(u))
		}
		return attribute.String(key, v.String())
	case slog.KindFloat64:
		return attribute.Float64(key, v.Float64())
	case slog.KindBool:
		return attribute.Bool(key, v.Bool())
	case slog.KindDuration:
		return attribute.Int64(key, v.Duration().Microseconds())
	case slog.KindTime:
		return attribute.String(key, v.Time().Format(time.RFC3339Nano))
	}
	return attribute.String(key, fmt.Sprint(v.Any()))
}
