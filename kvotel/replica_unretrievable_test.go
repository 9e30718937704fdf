package kvotel

import (
	"context"
	"errors"
	"testing"

	"github.com/kvwire/kvwire/client"
	"go.opentelemetry.io/otel/codes"
)

// A read of any copy of a key no copy has fails as the other SDKs' do
// (RFC 0058's DocumentUnretrievable, gocb's ErrDocumentUnretrievable),
// still matching ErrDocumentNotFound, and its observers say the same: the
// wrapping span's error.type and the call's one latency point are
// DocumentUnretrievable (before: the error and both said
// DocumentNotFound, which RFC 0058 keeps for a read of one copy). Like a
// document not found, it is no failure of the span's status.
func TestAnyReplicaOfAMissingKeyIsDocumentUnretrievable(t *testing.T) {
	mc := newMock(t)
	bg := context.Background()
	for _, tc := range []struct {
		span string
		call func(*client.Collection) error
	}{
		{"get_any_replica", func(col *client.Collection) error {
			_, err := col.GetAnyReplica(bg, "missing", nil)
			return err
		}},
		{"lookup_in_any_replica", func(col *client.Collection) error {
			_, err := col.LookupInAnyReplica(bg, "missing", []client.LookupInSpec{client.GetSpec("n", nil)}, nil)
			return err
		}},
	} {
		t.Run(tc.span, func(t *testing.T) {
			c, e := connect(t, mc, nil)
			err := tc.call(c.DefaultCollection())
			if !errors.Is(err, client.ErrDocumentUnretrievable) || !errors.Is(err, client.ErrDocumentNotFound) {
				t.Errorf("got %v, want ErrDocumentUnretrievable matching ErrDocumentNotFound too", err)
			}
			e.ledger.check(t)
			sp := e.spans()[tc.span]
			if len(sp) != 1 {
				t.Fatalf("%d %s spans, want 1", len(sp), tc.span)
			}
			if et := attrMap(sp[0].Attributes())["error.type"]; et != "DocumentUnretrievable" {
				t.Errorf("%s error.type %v, want DocumentUnretrievable", tc.span, et)
			}
			if st := sp[0].Status().Code; st == codes.Error {
				t.Errorf("%s status %v: a document no copy has is no failure", tc.span, st)
			}
			if got := scanPoints(t, e); len(got) != 1 || got[0] != tc.span+"/DocumentUnretrievable:1" {
				t.Errorf("operation duration points %v, want [%s/DocumentUnretrievable:1]", got, tc.span)
			}
		})
	}
}
