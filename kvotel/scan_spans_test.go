package kvotel

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// A scan is one operation, as every other public call is: a "scan" span
// under the caller's, from Scan until its results end or it is closed,
// whose requests (its creates, continues and cancels) are its
// dispatch_to_server spans, and one db.client.operation.duration point
// named scan. It ends exactly once on every path: the results exhausted,
// a loop broken early, Close after one item, a failed request, the
// context canceled; no span is left open after Close, and none of the
// requests is an operation of its own.
func TestScanIsOneOperation(t *testing.T) {
	mc := newMock(t)
	for i := range 12 {
		if _, err := mc.Bucket(mockcluster.DefaultBucket).Set("_default", "_default", fmt.Sprintf("s%02d", i), []byte(`{"n":1}`), client.CommonFlagsJSON, 0); err != nil {
			t.Fatal(err)
		}
	}
	bg := context.Background()
	for _, tc := range []struct {
		name    string
		errType string // "": the scan succeeded
		run     func(t *testing.T, ctx context.Context, col *client.Collection)
	}{
		{"exhausted", "", func(t *testing.T, ctx context.Context, col *client.Collection) {
			sr, err := col.Scan(ctx, client.PrefixScan{Prefix: "s"}, &client.ScanOptions{BatchItemLimit: 5})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for sr.Next() {
				n++
			}
			if sr.Err() != nil || n != 12 {
				t.Fatalf("%d items, %v", n, sr.Err())
			}
			if err := sr.Close(); err != nil { // after the end: nothing more
				t.Fatal(err)
			}
		}},
		{"break early", "", func(t *testing.T, ctx context.Context, col *client.Collection) {
			sr, err := col.Scan(ctx, client.RangeScan{}, &client.ScanOptions{BatchItemLimit: 1, Concurrency: 4})
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range sr.All() {
				if err != nil {
					t.Fatal(err)
				}
				break
			}
		}},
		{"close after one", "", func(t *testing.T, ctx context.Context, col *client.Collection) {
			sr, err := col.Scan(ctx, client.SamplingScan{Limit: 5, Seed: 1}, &client.ScanOptions{BatchItemLimit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !sr.Next() {
				t.Fatal(sr.Err())
			}
			if err := sr.Close(); err != nil {
				t.Fatal(err)
			}
			if sr.Next() {
				t.Fatal("Next after Close")
			}
		}},
		// EACCESS: ErrNoAccess, RFC 0058's AuthenticationFailure.
		{"failed", "AuthenticationFailure", func(t *testing.T, ctx context.Context, col *client.Collection) {
			ctl := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanCreate}}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
				return mockcluster.Action{Status: memdx.StatusNoAccess}, true
			})
			defer ctl.Remove()
			sr, err := col.Scan(ctx, client.RangeScan{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for sr.Next() {
			}
			if sr.Err() == nil {
				t.Fatal("a scan whose creates were refused succeeded")
			}
			if err := sr.Close(); err == nil {
				t.Fatal("Close after a failure: nil")
			}
		}},
		{"context canceled", "RequestCanceled", func(t *testing.T, ctx context.Context, col *client.Collection) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			sr, err := col.Scan(ctx, client.RangeScan{}, &client.ScanOptions{BatchItemLimit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !sr.Next() {
				t.Fatal(sr.Err())
			}
			cancel()
			for sr.Next() {
			}
			if !errors.Is(sr.Err(), client.ErrRequestCanceled) {
				t.Fatalf("Err %v, want ErrRequestCanceled", sr.Err())
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, e := connect(t, mc, nil)
			ctx, caller := e.tp.Tracer("app").Start(bg, "caller")
			tc.run(t, ctx, c.DefaultCollection())
			caller.End()
			e.ledger.check(t)
			sp := e.spans()
			for _, name := range []string{"range_scan_create", "range_scan_continue", "range_scan_cancel"} {
				if len(sp[name]) != 0 {
					t.Errorf("%d %s spans: the scan's requests are its dispatch spans", len(sp[name]), name)
				}
			}
			if len(sp["scan"]) != 1 {
				t.Fatalf("%d scan spans, want 1", len(sp["scan"]))
			}
			scan := sp["scan"][0]
			if scan.Parent().SpanID() != caller.SpanContext().SpanID() {
				t.Errorf("the scan's parent %v, want the caller's", scan.Parent().SpanID())
			}
			a := attrMap(scan.Attributes())
			for k, v := range map[string]any{"db.operation.name": "scan", "couchbase.service": "kv",
				"db.namespace": mockcluster.DefaultBucket, "couchbase.scope.name": "_default", "couchbase.collection.name": "_default"} {
				if a[k] != v {
					t.Errorf("scan attribute %s = %v, want %v", k, a[k], v)
				}
			}
			if _, ok := a["couchbase.retries"]; !ok {
				t.Error("the scan has no couchbase.retries")
			}
			if tc.errType == "" {
				if scan.Status().Code == codes.Error || a["error.type"] != nil {
					t.Errorf("scan status %v error.type %v, want a success", scan.Status(), a["error.type"])
				}
			} else if scan.Status().Code != codes.Error || a["error.type"] != tc.errType {
				t.Errorf("scan status %v error.type %v, want Error %s", scan.Status(), a["error.type"], tc.errType)
			}
			var disp int
			for _, d := range sp[client.SpanDispatchToServer] {
				if d.Parent().SpanID() != scan.SpanContext().SpanID() {
					t.Errorf("a dispatch span under %v, not the scan", d.Parent().SpanID())
					continue
				}
				if d.StartTime().Before(scan.StartTime()) || d.EndTime().After(scan.EndTime()) {
					t.Errorf("a dispatch span (%v to %v) outside the scan (%v to %v)", d.StartTime(), d.EndTime(), scan.StartTime(), scan.EndTime())
				}
				disp++
			}
			if disp == 0 {
				t.Error("the scan has no dispatch spans")
			}

			m := collect(t, e.reader)[client.MetricOperationDuration]
			var points []string
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				op, _ := dp.Attributes.Value("db.operation.name")
				et, _ := dp.Attributes.Value("error.type")
				points = append(points, fmt.Sprintf("%s/%s:%d", op.AsString(), et.AsString(), dp.Count))
			}
			if want := fmt.Sprintf("scan/%s:1", tc.errType); len(points) != 1 || points[0] != want {
				t.Errorf("operation duration points %v, want [%s]", points, want)
			}
		})
	}
}
