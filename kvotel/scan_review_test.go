package kvotel

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// scanPoints are the db.client.operation.duration points, as
// "name/error.type:count".
func scanPoints(t *testing.T, e *otelEnv) []string {
	t.Helper()
	m := collect(t, e.reader)[client.MetricOperationDuration]
	var points []string
	if m.Data == nil {
		return nil
	}
	for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		op, _ := dp.Attributes.Value("db.operation.name")
		et, _ := dp.Attributes.Value("error.type")
		points = append(points, fmt.Sprintf("%s/%s:%d", op.AsString(), et.AsString(), dp.Count))
	}
	return points
}

// A client closed while a scan's Next waits (its continues held by the
// server, four vbuckets at once): Next returns false with ErrClosed, and
// the scan is one span, failed, ended once, with every dispatch span
// ended inside it, and one latency point.
func TestScanEndsOnceWhenTheClientCloses(t *testing.T) {
	mc := newMock(t)
	for i := range 12 {
		if _, err := mc.Bucket(mockcluster.DefaultBucket).Set("_default", "_default", fmt.Sprintf("c%02d", i), []byte(`{"n":1}`), client.CommonFlagsJSON, 0); err != nil {
			t.Fatal(err)
		}
	}
	hold := make(chan struct{})
	arrived := make(chan struct{}, 64)
	ctl := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanContinue}}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		return mockcluster.Action{Hold: hold}, true
	})
	t.Cleanup(func() { close(hold); ctl.Remove() })
	c, e := connect(t, mc, nil)
	sr, err := c.DefaultCollection().Scan(context.Background(), client.RangeScan{}, &client.ScanOptions{Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	go func() { <-arrived; c.Close() }()
	for sr.Next() {
	}
	if !errors.Is(sr.Err(), client.ErrClosed) {
		t.Fatalf("Err %v, want ErrClosed", sr.Err())
	}
	sr.Close()
	e.ledger.check(t)
	sp := e.spans()
	if len(sp["scan"]) != 1 {
		t.Fatalf("%d scan spans", len(sp["scan"]))
	}
	scan := sp["scan"][0]
	if scan.Status().Code != codes.Error {
		t.Errorf("scan status %v, want Error", scan.Status())
	}
	for _, d := range sp[client.SpanDispatchToServer] {
		if d.EndTime().After(scan.EndTime()) {
			t.Errorf("a dispatch span ends after the scan")
		}
	}
	if p := scanPoints(t, e); len(p) != 1 {
		t.Errorf("points %v, want one scan point", p)
	}
}

// The scan's couchbase.retries is the sum of its requests' retries: two
// continues refused with TMPFAIL, each retried once.
func TestScanRetriesSumTheRequests(t *testing.T) {
	mc := newMock(t)
	for i := range 4 {
		if _, err := mc.Bucket(mockcluster.DefaultBucket).Set("_default", "_default", fmt.Sprintf("r%02d", i), []byte(`{"n":1}`), client.CommonFlagsJSON, 0); err != nil {
			t.Fatal(err)
		}
	}
	var n atomic.Int32
	ctl := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanContinue}}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		if n.Add(1) <= 2 {
			return mockcluster.Action{Status: memdx.StatusTmpFail}, true
		}
		return mockcluster.Action{}, false
	})
	defer ctl.Remove()
	c, e := connect(t, mc, nil)
	sr, err := c.DefaultCollection().Scan(context.Background(), client.PrefixScan{Prefix: "r"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for sr.Next() {
		k++
	}
	if sr.Err() != nil || k != 4 {
		t.Fatalf("%d items, %v", k, sr.Err())
	}
	e.ledger.check(t)
	sp := e.spans()
	if len(sp["scan"]) != 1 {
		t.Fatalf("%d scan spans", len(sp["scan"]))
	}
	if got := attrMap(sp["scan"][0].Attributes())["couchbase.retries"]; got != int64(2) {
		t.Errorf("couchbase.retries %v (%T), want 2", got, got)
	}
	if p := scanPoints(t, e); len(p) != 1 || p[0] != "scan/:1" {
		t.Errorf("points %v", p)
	}
}
