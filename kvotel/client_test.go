package kvotel

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// A Get that the mock answers NOT_MY_VBUCKET, then LOCKED, then with the
// document, each answer held a different time, made by a client whose
// Tracer and Meter are this package's over the OpenTelemetry SDK (its
// in-memory span recorder and manual metric reader), under the caller's
// span that the context carries: one "get" span under the caller's, a
// dispatch span per request under it with the mock's server duration and
// the request's opaque, two retry events with their reasons,
// couchbase.retries 2, status Ok; one latency point with RFC 0067's
// attributes.
func TestClientSpanTreeOfRetriedGet(t *testing.T) {
	mc, err := mockcluster.New(mockcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	sr, tp := newRecorder(t)
	reader, mp := newReader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, mc.ConnString(), &client.Options{
		Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Bucket: mockcluster.DefaultBucket,
		Tracer: NewTracer(tp), Meter: NewMeter(mp)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	col := c.DefaultCollection()
	if _, err := col.Upsert(ctx, "k", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	sr.Reset()

	// The three answers, each held so long that the server duration the
	// mock reports is its own and not noise.
	holds := []time.Duration{50 * time.Millisecond, 60 * time.Millisecond, 70 * time.Millisecond}
	var n atomic.Int32
	ctl := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "k"}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		switch i := n.Add(1); i {
		case 1:
			return mockcluster.Action{Status: memdx.StatusNotMyVbucket, Delay: holds[0]}, true
		case 2:
			return mockcluster.Action{Status: memdx.StatusLocked, Delay: holds[1]}, true
		case 3:
			return mockcluster.Action{Delay: holds[2]}, true
		}
		return mockcluster.Action{}, false
	})
	defer ctl.Remove()

	ctx, caller := tp.Tracer("app").Start(ctx, "handle request")
	r, err := col.Get(ctx, "k", nil)
	caller.End()
	if err != nil || string(r.Value) != "v" {
		t.Fatalf("Get: %q, %v", r.Value, err)
	}

	get, disp := getAndDispatches(t, sr.Ended())
	checkRetriedGetSpans(t, caller, get, disp, holds)
	checkGetLatency(t, reader, get)
}

// checkRetriedGetSpans checks the span tree of the Get of
// TestClientSpanTreeOfRetriedGet: get under the caller's span, its
// attributes and retry events, and a dispatch span per request, each with
// the server duration the mock held its answer (holds).
func checkRetriedGetSpans(t *testing.T, caller trace.Span, get sdktrace.ReadOnlySpan, disp []sdktrace.ReadOnlySpan, holds []time.Duration) {
	t.Helper()
	if get.Parent().SpanID() != caller.SpanContext().SpanID() || get.SpanKind() != trace.SpanKindClient {
		t.Errorf("the get span's parent is %v, want the caller's %v", get.Parent().SpanID(), caller.SpanContext().SpanID())
	}
	if get.Status().Code != codes.Ok {
		t.Errorf("get status %v", get.Status())
	}
	ga := attrMap(get.Attributes())
	for k, v := range map[string]any{"db.system.name": "couchbase", "couchbase.service": "kv", "db.operation.name": "get",
		"db.namespace": mockcluster.DefaultBucket, "couchbase.scope.name": "_default", "couchbase.collection.name": "_default",
		"couchbase.retries": int64(2)} {
		if ga[k] != v {
			t.Errorf("get attribute %s = %v (%T), want %v", k, ga[k], ga[k], v)
		}
	}
	if _, has := ga["error.type"]; has {
		t.Errorf("a successful get has error.type %v", ga["error.type"])
	}
	ev := get.Events()
	if len(ev) != 2 {
		t.Fatalf("get events %v, want two retries", ev)
	}
	for i, want := range []string{"KV_NOT_MY_VBUCKET", "KV_LOCKED"} {
		if ev[i].Name != client.EventRetry || attrMap(ev[i].Attributes)["couchbase.retry.reason"] != want {
			t.Errorf("event %d: %s %v, want a retry for %s", i, ev[i].Name, ev[i].Attributes, want)
		}
		if ev[i].Time.Before(disp[i].EndTime()) || !ev[i].Time.Before(disp[i+1].StartTime()) && !ev[i].Time.Equal(disp[i+1].StartTime()) {
			t.Errorf("retry %d at %v, not between dispatch %d's end %v and the next's start %v", i, ev[i].Time, i, disp[i].EndTime(), disp[i+1].StartTime())
		}
	}
	opaques := map[int64]bool{}
	for i, s := range disp {
		if s.Parent().SpanID() != get.SpanContext().SpanID() {
			t.Errorf("dispatch %d's parent %v, want the get span", i, s.Parent().SpanID())
		}
		if s.StartTime().Before(get.StartTime()) || s.EndTime().After(get.EndTime()) {
			t.Errorf("dispatch %d (%v to %v) outside the get span (%v to %v)", i, s.StartTime(), s.EndTime(), get.StartTime(), get.EndTime())
		}
		a := attrMap(s.Attributes())
		for _, k := range []string{"network.transport", "couchbase.local_id", "server.address", "server.port",
			"network.peer.address", "network.peer.port"} {
			if _, ok := a[k]; !ok {
				t.Errorf("dispatch %d has no %s: %v", i, k, a)
			}
		}
		// RFC 0067's stable conventions removed the local address and port.
		for _, k := range []string{"network.local.address", "network.local.port"} {
			if v, ok := a[k]; ok {
				t.Errorf("dispatch %d has %s %v, which RFC 0067 removed", i, k, v)
			}
		}
		op, _ := a["couchbase.operation_id"].(int64)
		if op == 0 || opaques[op] {
			t.Errorf("dispatch %d: operation id %v (seen %v)", i, a["couchbase.operation_id"], opaques)
		}
		opaques[op] = true
		// The server held the answer holds[i]; it cannot have taken longer
		// than the round trip. From 50 ms up the 2-byte encoding is within
		// 0.2%, either way (coarser below: the holds are no shorter).
		server := time.Duration(a["couchbase.server_duration"].(int64)) * time.Microsecond
		if rtt := s.EndTime().Sub(s.StartTime()); float64(server) < 0.998*float64(holds[i]) || 0.998*float64(server) > float64(rtt) {
			t.Errorf("dispatch %d: server duration %v, want at least %v and at most the round trip %v", i, server, holds[i], rtt)
		}
	}

}

// checkGetLatency checks the one latency point of the get span's
// operation that reader collects, and its attributes.
func checkGetLatency(t *testing.T, reader *sdkmetric.ManualReader, get sdktrace.ReadOnlySpan) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var points []metricdata.HistogramDataPoint[float64] // the get's (the upsert has one too)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != client.MetricOperationDuration {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				if v, _ := dp.Attributes.Value("db.operation.name"); v.AsString() == "get" {
					points = append(points, dp)
				}
			}
		}
	}
	if len(points) != 1 || points[0].Count != 1 {
		t.Fatalf("latency points of get %+v, want one, of one get", points)
	}
	p := points[0]
	attrs := map[string]string{}
	for _, kv := range p.Attributes.ToSlice() {
		attrs[string(kv.Key)] = kv.Value.AsString()
	}
	want := map[string]string{"db.system.name": "couchbase", "couchbase.service": "kv", "db.operation.name": "get",
		"db.namespace": mockcluster.DefaultBucket, "couchbase.scope.name": "_default", "couchbase.collection.name": "_default",
		"couchbase.cluster.name": "mockcluster"}
	if attrs["couchbase.cluster.uuid"] == "" {
		t.Errorf("latency attributes %v: no couchbase.cluster.uuid", attrs)
	}
	if len(attrs) != len(want)+1 {
		t.Errorf("latency attributes %v, want %v", attrs, want)
	}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("latency attribute %s = %q, want %q", k, attrs[k], v)
		}
	}
	if total := get.EndTime().Sub(get.StartTime()).Seconds(); p.Sum < 0.18 || p.Sum > total+1e-6 {
		t.Errorf("latency %vs, want at least the 180ms the answers were held and at most the span's %vs", p.Sum, total)
	}
}
