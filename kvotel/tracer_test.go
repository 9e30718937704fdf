package kvotel

import (
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func newRecorder(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return sr, tp
}

// getAndDispatches returns the "get" span of spans and its three
// dispatch spans, failing the test when they are not there.
func getAndDispatches(t *testing.T, spans []sdktrace.ReadOnlySpan) (sdktrace.ReadOnlySpan, []sdktrace.ReadOnlySpan) {
	t.Helper()
	var get sdktrace.ReadOnlySpan
	var disp []sdktrace.ReadOnlySpan
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
		switch s.Name() {
		case "get":
			get = s
		case client.SpanDispatchToServer:
			disp = append(disp, s)
		}
	}
	if get == nil || len(disp) != 3 {
		t.Fatalf("spans %v: want a get span and 3 dispatches", names)
	}
	return get, disp
}

func attrMap(kvs []attribute.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// A Get that was retried through a NOT_MY_VBUCKET and a LOCKED, made the
// way the client's operations make their spans (one "get" span, a
// dispatch span per request sent, a retry event per retry, the client's
// own times), under the caller's OpenTelemetry span that the operation's
// context carries: the recorded tree, kinds, times, attributes, events
// and status are the client's.
func TestTracerSpanTreeOfRetriedGet(t *testing.T) {
	sr, tp := newRecorder(t)
	ctx, caller := tp.Tracer("app").Start(context.Background(), "handle request")
	tracer := NewTracer(tp)
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	op := tracer.RequestSpan(ctx, "get", nil, at(0))
	for k, v := range map[string]slog.Value{
		client.AttributeSystemName: slog.StringValue(client.SystemCouchbase), client.AttributeService: slog.StringValue(client.ServiceKV),
		client.AttributeOperationName: slog.StringValue("get"), client.AttributeBucketName: slog.StringValue("default"),
		client.AttributeScopeName: slog.StringValue("_default"), client.AttributeCollectionName: slog.StringValue("_default"),
	} {
		op.SetAttribute(k, v)
	}
	dispatches := []struct {
		start, end int
		opaque     int64
		server     time.Duration
		retry      string
	}{
		{1, 2, 7, 15 * time.Microsecond, "KV_NOT_MY_VBUCKET"},
		{3, 4, 8, 20 * time.Microsecond, "KV_LOCKED"},
		{60, 61, 9, 30 * time.Microsecond, ""},
	}
	for _, d := range dispatches {
		s := tracer.RequestSpan(ctx, client.SpanDispatchToServer, op, at(d.start))
		s.SetAttribute(client.AttributeNetworkTransport, slog.StringValue(client.TransportTCP))
		s.SetAttribute(client.AttributeServerDuration, slog.Int64Value(d.server.Microseconds()))
		s.SetAttribute(client.AttributeOperationID, slog.Int64Value(d.opaque))
		s.SetAttribute(client.AttributeLocalID, slog.StringValue("66388CF5BFCF7522/18CC8791579B567C"))
		s.SetAttribute(client.AttributePeerAddress, slog.StringValue("127.0.0.1"))
		s.SetAttribute(client.AttributePeerPort, slog.IntValue(11210))
		s.End(at(d.end))
		if d.retry != "" {
			op.AddEvent(client.EventRetry, at(d.end), slog.String(client.AttributeRetryReason, d.retry))
		}
	}
	op.SetAttribute(client.AttributeRetries, slog.IntValue(2))
	op.SetStatus(client.SpanStatusOK)
	op.End(at(62))
	caller.End()

	ended := sr.Ended()
	if len(ended) != 5 {
		t.Fatalf("%d spans ended, want the caller's, the get and 3 dispatches", len(ended))
	}
	get, disp := getAndDispatches(t, ended)
	if get.Parent().SpanID() != caller.SpanContext().SpanID() || get.SpanContext().TraceID() != caller.SpanContext().TraceID() {
		t.Errorf("the get span's parent is %v, want the caller's span %v", get.Parent().SpanID(), caller.SpanContext().SpanID())
	}
	if get.SpanKind() != trace.SpanKindClient || !get.StartTime().Equal(at(0)) || !get.EndTime().Equal(at(62)) {
		t.Errorf("get span: kind %v, %v to %v", get.SpanKind(), get.StartTime(), get.EndTime())
	}
	if get.Status().Code != codes.Ok {
		t.Errorf("get status %v", get.Status())
	}
	ga := attrMap(get.Attributes())
	for k, v := range map[string]any{"db.system.name": "couchbase", "couchbase.service": "kv", "db.operation.name": "get",
		"db.namespace": "default", "couchbase.scope.name": "_default", "couchbase.collection.name": "_default", "couchbase.retries": int64(2)} {
		if ga[k] != v {
			t.Errorf("get attribute %s = %v (%T), want %v", k, ga[k], ga[k], v)
		}
	}
	ev := get.Events()
	if len(ev) != 2 {
		t.Fatalf("get events %v", ev)
	}
	for i, want := range []string{"KV_NOT_MY_VBUCKET", "KV_LOCKED"} {
		if ev[i].Name != client.EventRetry || !ev[i].Time.Equal(at(dispatches[i].end)) || attrMap(ev[i].Attributes)["couchbase.retry.reason"] != want {
			t.Errorf("event %d: %s at %v %v, want a retry for %s at %v", i, ev[i].Name, ev[i].Time, ev[i].Attributes, want, at(dispatches[i].end))
		}
	}
	for i, s := range disp {
		d := dispatches[i]
		if s.Parent().SpanID() != get.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("dispatch %d: parent %v kind %v, want under the get span", i, s.Parent().SpanID(), s.SpanKind())
		}
		if !s.StartTime().Equal(at(d.start)) || !s.EndTime().Equal(at(d.end)) {
			t.Errorf("dispatch %d: %v to %v", i, s.StartTime(), s.EndTime())
		}
		a := attrMap(s.Attributes())
		for k, v := range map[string]any{"network.transport": "tcp", "couchbase.server_duration": d.server.Microseconds(),
			"couchbase.operation_id": d.opaque, "couchbase.local_id": "66388CF5BFCF7522/18CC8791579B567C",
			"network.peer.address": "127.0.0.1", "network.peer.port": int64(11210)} {
			if a[k] != v {
				t.Errorf("dispatch %d attribute %s = %v (%T), want %v", i, k, a[k], a[k], v)
			}
		}
	}
	if got := get.InstrumentationScope().Name; got != ScopeName {
		t.Errorf("instrumentation scope %q", got)
	}
}

// A parent handed explicitly (WrapSpan) wins over the context's span; with
// neither, the span is a root; Error status is set as Error.
func TestTracerParents(t *testing.T) {
	sr, tp := newRecorder(t)
	tracer := NewTracer(tp)
	_, explicit := tp.Tracer("app").Start(context.Background(), "explicit")
	ctx, inCtx := tp.Tracer("app").Start(context.Background(), "in context")
	now := time.Now()
	s := tracer.RequestSpan(ctx, "upsert", WrapSpan(explicit), now)
	s.SetStatus(client.SpanStatusError)
	s.End(now)
	root := tracer.RequestSpan(context.Background(), "remove", nil, now)
	root.SetStatus(client.SpanStatusUnset)
	root.End(now)
	inCtx.End()
	explicit.End()
	for _, e := range sr.Ended() {
		switch e.Name() {
		case "upsert":
			if e.Parent().SpanID() != explicit.SpanContext().SpanID() {
				t.Errorf("upsert's parent %v, want the explicit one", e.Parent().SpanID())
			}
			if e.Status().Code != codes.Error {
				t.Errorf("upsert status %v", e.Status())
			}
		case "remove":
			if e.Parent().IsValid() {
				t.Errorf("remove has parent %v, want none", e.Parent())
			}
			if e.Status().Code != codes.Unset {
				t.Errorf("remove status %v", e.Status())
			}
		}
	}
	if WrapSpan(explicit).Unwrap() != explicit {
		t.Error("Unwrap")
	}
}

func TestAttributeConversion(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, tc := range []struct {
		v    slog.Value
		want attribute.Value
	}{
		{slog.StringValue("s"), attribute.StringValue("s")},
		{slog.Int64Value(-3), attribute.Int64Value(-3)},
		{slog.Uint64Value(7), attribute.Int64Value(7)},
		{slog.Uint64Value(math.MaxUint64), attribute.StringValue("18446744073709551615")},
		{slog.Float64Value(1.5), attribute.Float64Value(1.5)},
		{slog.BoolValue(true), attribute.BoolValue(true)},
		{slog.DurationValue(1500 * time.Microsecond), attribute.Int64Value(1500)},
		{slog.TimeValue(at), attribute.StringValue("2030-01-02T03:04:05.000000006Z")},
		{slog.AnyValue([]int{1, 2}), attribute.StringValue("[1 2]")},
	} {
		if got := Attribute("k", tc.v); got.Key != "k" || got.Value != tc.want {
			t.Errorf("Attribute(%v) = %v, want %v", tc.v, got.Value.String(), tc.want.String())
		}
	}
}
