package kvotel

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/kvwire/kvwire/client"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// db.client.operation.duration, as an OpenTelemetry backend receives it
// from a client running many operations on many keys: unit s, the
// semantic conventions' buckets, one time series per operation and
// outcome (RFC 0067's attributes only: no key, so that the number of
// series does not grow with the keys), and one count per operation of
// the caller's: each key of a batch counted, a fan-out (GetAllReplicas)
// once, as its outer span get_all_replicas (RFC 0067), not per copy read.
func TestOperationMetricSeriesAreBounded(t *testing.T) {
	mc := newMock(t)
	c, e := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	var keys []string
	for i := range 40 {
		k := fmt.Sprintf("key-%03d", i)
		keys = append(keys, k)
		if _, err := col.Upsert(ctx, k, []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := col.Get(ctx, k, nil); err != nil {
			t.Fatal(err)
		}
		_, _ = col.Get(ctx, k+"-missing", nil)
	}
	col.GetMany(ctx, keys, nil)
	if _, err := col.GetAllReplicas(ctx, keys[0], nil); err != nil {
		t.Fatal(err)
	}

	m, ok := collect(t, e.reader)[client.MetricOperationDuration]
	if !ok {
		t.Fatal("no db.client.operation.duration")
	}
	h, _ := m.Data.(metricdata.Histogram[float64])
	if m.Unit != "s" || len(h.DataPoints) == 0 {
		t.Fatalf("unit %q, %d points", m.Unit, len(h.DataPoints))
	}
	allowed := []string{"db.system.name", "couchbase.service", "db.operation.name", "db.namespace",
		"couchbase.scope.name", "couchbase.collection.name", "error.type", "couchbase.cluster.name", "couchbase.cluster.uuid"}
	counts := map[string]uint64{}
	for _, dp := range h.DataPoints {
		op, _ := dp.Attributes.Value("db.operation.name")
		et, _ := dp.Attributes.Value("error.type")
		counts[op.AsString()+"/"+et.AsString()] += dp.Count
		for _, kv := range dp.Attributes.ToSlice() {
			if !slices.Contains(allowed, string(kv.Key)) {
				t.Errorf("attribute %s=%s is not one of RFC 0067's", kv.Key, kv.Value.String())
			}
			if v := kv.Value.String(); slices.Contains(keys, v) {
				t.Errorf("attribute %s holds a document's key %q", kv.Key, v)
			}
		}
		if !slices.Equal(dp.Bounds, durationBuckets) {
			t.Errorf("bounds %v", dp.Bounds)
		}
	}
	if len(h.DataPoints) > 6 {
		t.Errorf("%d series for 40 keys: %v", len(h.DataPoints), counts)
	}
	// 40 gets, 40 of the GetMany, and GetAllReplicas as one.
	if counts["upsert/"] != 40 || counts["get/"] != 80 || counts["get/DocumentNotFound"] != 40 ||
		counts["get_all_replicas/"] != 1 || counts["get_replica/"] != 0 {
		t.Errorf("counts %v", counts)
	}
}
