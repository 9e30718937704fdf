package kvotel

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
	"go.opentelemetry.io/otel/codes"
)

// A panic in the body of a scan's loop, the scan closed by the caller's
// deferred Close (the usual idiom), over All or over Next: the panic
// goes on to the caller, unchanged, and the scan's span ends once,
// failed (status Error, error.type _OTHER), not Ok.
func TestScanLoopPanicWithDeferredCloseFailsTheSpan(t *testing.T) {
	mc := newMock(t)
	for i := range 6 {
		if _, err := mc.Bucket(mockcluster.DefaultBucket).Set("_default", "_default", fmt.Sprintf("p%02d", i), []byte(`{"n":1}`), client.CommonFlagsJSON, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		loop func(*client.ScanResult)
	}{
		{"All", func(sr *client.ScanResult) {
			defer sr.Close()
			for _, err := range sr.All() {
				if err != nil {
					t.Error(err)
				}
				panic("body")
			}
		}},
		{"Next", func(sr *client.ScanResult) {
			defer sr.Close()
			for sr.Next() {
				panic("body")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, e := connect(t, mc, nil)
			sr, err := c.DefaultCollection().Scan(context.Background(), client.PrefixScan{Prefix: "p"}, &client.ScanOptions{BatchItemLimit: 1})
			if err != nil {
				t.Fatal(err)
			}
			var got any
			func() {
				defer func() { got = recover() }()
				tc.loop(sr)
			}()
			if got != "body" {
				t.Fatalf("recovered %v, want the loop body's panic", got)
			}
			e.ledger.check(t)
			sp := e.spans()
			if len(sp["scan"]) != 1 {
				t.Fatalf("%d scan spans, want 1", len(sp["scan"]))
			}
			s := sp["scan"][0]
			if s.Status().Code != codes.Error {
				t.Errorf("scan status %v, want Error: a panic unwound it", s.Status())
			}
			if et := attrMap(s.Attributes())["error.type"]; et != client.ErrorTypeOther {
				t.Errorf("scan error.type %v, want %s", et, client.ErrorTypeOther)
			}
			if got := scanPoints(t, e); len(got) != 1 || got[0] != "scan/"+client.ErrorTypeOther+":1" {
				t.Errorf("operation duration points %v, want [scan/%s:1]", got, client.ErrorTypeOther)
			}
		})
	}
}
