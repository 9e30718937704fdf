package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// kv_engine puts the error JSON ({"error":{"context":...}} and, for an
// unknown collection, "manifest_uid") in every error response whatever the
// connection negotiated: Cookie::sendResponse (daemon/cookie.cc) injects
// getErrorJson() for any non-success status and XERROR is not consulted;
// only the JSON datatype bit is masked by what was negotiated
// (Connection::getEnabledDatatypes). The mock sent the context only to
// clients with XERROR.
func TestErrorContextWithoutXerror(t *testing.T) {
	for _, json := range []bool{false, true} {
		feats := []memdx.HelloFeature{memdx.FeatureCollections}
		wantDT := memdx.Datatype(0)
		if json {
			feats = append(feats, memdx.FeatureJSON)
			wantDT = memdx.DatatypeJSON
		}
		c := newCluster(t, Options{Nodes: 1})
		cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, feats)

		// A validator's refusal.
		noop := memdx.NewNoop()
		noop.Extras = []byte{1}
		p := cl.do(noop)
		if p.Status != memdx.StatusInvalidArgs || p.Datatype != wantDT {
			t.Fatalf("json=%v: NOOP with extras: %s datatype %s %q", json, p.Status, p.Datatype, p.Value)
		}
		if ec, ok := memdx.DecodeErrorContext(p.Datatype, p.Value); !ok || ec.Context != "Request must not include extras" {
			t.Errorf("json=%v: NOOP with extras: body %q, want the error context", json, p.Value)
		}

		// An unknown collection: the manifest uid and the context.
		r := memdx.NewGet([]byte("k"))
		r.Collections, r.CollectionID = true, 0x77
		p = cl.do(r)
		if p.Status != memdx.StatusUnknownCollection {
			t.Fatalf("json=%v: GET in an unknown collection: %s", json, p.Status)
		}
		body, ok := memdx.DecodeErrorBody(p.Datatype, p.Value)
		if !ok || !body.HasContext || body.Context == "" || !body.HasManifest {
			t.Errorf("json=%v: UNKNOWN_COLLECTION body %q, want the context and the manifest uid", json, p.Value)
		}
	}
}
