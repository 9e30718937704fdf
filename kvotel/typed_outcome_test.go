package kvotel

import (
	"context"
	"errors"
	"sort"
	"testing"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

// A typed call's outcome is the caller's: GetJSON of a document that does
// not decode into the type asked for returns ErrDecodingFailure, and its
// get span fails with error.type DecodingFailure and its point has it
// (before, the span was Ok and the point had no error.type: the read
// succeeded, the call did not); so does a projected Get whose projection
// cannot be shaped (PathMismatch). UpsertJSON of a value encoding/json
// cannot encode fails before anything is sent with ErrEncodingFailure,
// and is still an operation: an upsert span, failed with error.type
// EncodingFailure, with its request_encoding span under it, and a point
// with that error type (before: no span and no point at all).
func TestTypedCallFailuresAreTheOperationsOutcome(t *testing.T) {
	mc := newMock(t)
	if _, err := mc.Bucket(mockcluster.DefaultBucket).Set("_default", "_default", "j", []byte(`{"n":"not a number"}`), client.CommonFlagsJSON, 0); err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	type doc struct{ N int }
	for _, tc := range []struct {
		name, span, errType string
		sentinel            error
		call                func(*client.Collection) error
	}{
		{"GetJSON", "get", "DecodingFailure", client.ErrDecodingFailure, func(col *client.Collection) error {
			_, r, err := client.GetJSON[doc](bg, col, "j", nil)
			if r.Cas == 0 {
				t.Error("GetJSON returned no GetResult with its decoding failure")
			}
			return err
		}},
		{"GetJSON projected", "get", "DecodingFailure", client.ErrDecodingFailure, func(col *client.Collection) error {
			_, _, err := client.GetJSON[doc](bg, col, "j", &client.GetOptions{Project: []string{"n"}})
			return err
		}},
		// A projection that cannot be shaped (n is no object): the get's
		// outcome too, though its lookup succeeded.
		{"Get projected", "get", "PathMismatch", client.ErrPathMismatch, func(col *client.Collection) error {
			_, err := col.Get(bg, "j", &client.GetOptions{Project: []string{"n.x"}})
			return err
		}},
		{"UpsertJSON", "upsert", "EncodingFailure", client.ErrEncodingFailure, func(col *client.Collection) error {
			_, err := client.UpsertJSON(bg, col, "e", make(chan int), nil)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, e := connect(t, mc, nil)
			if err := tc.call(c.DefaultCollection()); !errors.Is(err, tc.sentinel) {
				t.Fatalf("got %v, want %v", err, tc.sentinel)
			}
			e.ledger.check(t)
			sp := e.spans()
			s := checkFailed(t, sp, tc.span, tc.errType)
			if tc.span == "upsert" {
				enc := sp[client.SpanRequestEncoding]
				if len(enc) != 1 || enc[0].Parent().SpanID() != s.SpanContext().SpanID() {
					t.Errorf("request_encoding spans %v, want one under the upsert span", enc)
				}
				if n := len(sp[client.SpanDispatchToServer]); n != 0 {
					t.Errorf("%d dispatch spans: nothing was sent", n)
				}
			}
			got := scanPoints(t, e)
			sort.Strings(got)
			if want := tc.span + "/" + tc.errType + ":1"; len(got) != 1 || got[0] != want {
				t.Errorf("operation duration points %v, want [%s]", got, want)
			}
		})
	}
}
