package kvotel

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/kvwire/kvwire/client"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func newReader(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return r, mp
}

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// collectScopes returns the instrumentation scopes of r's metrics.
func collectScopes(t *testing.T, r *sdkmetric.ManualReader) []instrumentation.Scope {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []instrumentation.Scope
	for _, sm := range rm.ScopeMetrics {
		out = append(out, sm.Scope)
	}
	return out
}

// The operation duration the client records in microseconds is a
// histogram in seconds (unit "s") with the client's attributes, one data
// point per attribute set; another value recorder keeps its values, a
// counter sums.
func TestMeterOperationDuration(t *testing.T) {
	reader, mp := newReader(t)
	m := NewMeter(mp)
	ok := map[string]string{client.AttributeService: client.ServiceKV, client.AttributeOperationName: "get",
		client.AttributeBucketName: "default", client.AttributeScopeName: "_default", client.AttributeCollectionName: "_default"}
	failed := map[string]string{client.AttributeService: client.ServiceKV, client.AttributeOperationName: "get",
		client.AttributeErrorType: "DocumentLocked"}
	r1, err := m.ValueRecorder(client.MetricOperationDuration, ok)
	if err != nil {
		t.Fatal(err)
	}
	r1.RecordValue(1500)
	r1.RecordValue(500)
	r2, err := m.ValueRecorder(client.MetricOperationDuration, failed)
	if err != nil {
		t.Fatal(err)
	}
	r2.RecordValue(2_000_000)
	other, err := m.ValueRecorder("kvwire.test.sizes", nil)
	if err != nil {
		t.Fatal(err)
	}
	other.RecordValue(42)
	c, err := m.Counter("kvwire.test.count", map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	c.IncrementBy(3)
	c.IncrementBy(4)

	got := collect(t, reader)
	dur, okm := got[client.MetricOperationDuration]
	if !okm {
		t.Fatalf("no %s in %v", client.MetricOperationDuration, got)
	}
	if dur.Unit != "s" {
		t.Errorf("unit %q, want s", dur.Unit)
	}
	h, isHist := dur.Data.(metricdata.Histogram[float64])
	if !isHist || len(h.DataPoints) != 2 {
		t.Fatalf("data %T %+v", dur.Data, dur.Data)
	}
	for _, dp := range h.DataPoints {
		attrs := map[string]string{}
		for _, kv := range dp.Attributes.ToSlice() {
			attrs[string(kv.Key)] = kv.Value.AsString()
		}
		switch attrs[client.AttributeErrorType] {
		case "":
			if dp.Count != 2 || math.Abs(dp.Sum-0.002) > 1e-12 || len(attrs) != len(ok) {
				t.Errorf("success point: count %d sum %v attrs %v", dp.Count, dp.Sum, attrs)
			}
		case "DocumentLocked":
			if dp.Count != 1 || dp.Sum != 2 || len(attrs) != len(failed) {
				t.Errorf("failure point: count %d sum %v attrs %v", dp.Count, dp.Sum, attrs)
			}
		default:
			t.Errorf("point %v", attrs)
		}
	}
	if ih, isInt := got["kvwire.test.sizes"].Data.(metricdata.Histogram[int64]); !isInt || ih.DataPoints[0].Sum != 42 {
		t.Errorf("other recorder: %+v", got["kvwire.test.sizes"].Data)
	}
	sum, isSum := got["kvwire.test.count"].Data.(metricdata.Sum[int64])
	if !isSum || len(sum.DataPoints) != 1 || sum.DataPoints[0].Value != 7 ||
		sum.DataPoints[0].Attributes != attribute.NewSet(attribute.String("k", "v")) {
		t.Errorf("counter: %+v", got["kvwire.test.count"].Data)
	}
}

// An instrument name OpenTelemetry refuses is the Meter's error (the
// client logs it and records nothing on it).
func TestMeterInvalidName(t *testing.T) {
	_, mp := newReader(t)
	m := NewMeter(mp)
	if _, err := m.ValueRecorder("not a valid name!", nil); err == nil {
		t.Error("ValueRecorder with an invalid name: no error")
	}
	if _, err := m.Counter("", nil); err == nil {
		t.Error("Counter with an empty name: no error")
	}
}

// What recording costs through the OpenTelemetry SDK (the adapter adds no
// allocation of its own: the attribute set and options are made once per
// recorder).
func BenchmarkMeterRecordValue(b *testing.B) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	rec, err := NewMeter(mp).ValueRecorder(client.MetricOperationDuration,
		map[string]string{client.AttributeService: client.ServiceKV, client.AttributeOperationName: "get"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		rec.RecordValue(1234)
	}
}

// db.client.operation.duration's buckets are the ones OpenTelemetry's
// database semantic conventions give it, in seconds: with the SDK's
// default boundaries (0, 5, 10, ... 10000, meant for milliseconds) every
// KV operation, well under a second, fell in the one bucket (0, 5], and
// any percentile a backend read off the histogram was meaningless.
func TestMeterOperationDurationBuckets(t *testing.T) {
	reader, mp := newReader(t)
	r, err := NewMeter(mp).ValueRecorder(client.MetricOperationDuration,
		map[string]string{client.AttributeService: client.ServiceKV, client.AttributeOperationName: "get"})
	if err != nil {
		t.Fatal(err)
	}
	r.RecordValue(1500)   // 1.5 ms
	r.RecordValue(30_000) // 30 ms
	r.RecordValue(700_000)
	h, ok := collect(t, reader)[client.MetricOperationDuration].Data.(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 {
		t.Fatalf("data %+v", h)
	}
	dp := h.DataPoints[0]
	want := []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}
	if !slices.Equal(dp.Bounds, want) {
		t.Fatalf("bounds %v, want the semantic conventions' %v", dp.Bounds, want)
	}
	wantCounts := []uint64{0, 1, 0, 1, 0, 0, 1, 0, 0, 0}
	if !slices.Equal(dp.BucketCounts, wantCounts) {
		t.Errorf("bucket counts %v, want %v", dp.BucketCounts, wantCounts)
	}
}
