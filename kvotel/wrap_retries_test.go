package kvotel

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// RFC 0067: every outer request span carries couchbase.retries, 0 when
// there were none, and a wrapping span (get_all_replicas, get_any_replica,
// ping) the outer span's attributes: its retries are those of the whole
// call, its reads' summed. Here the active copy's read is answered
// NOT_MY_VBUCKET once and retried. Before, the wrapping spans had no
// couchbase.retries at all.
func TestWrappingSpansCarryRetries(t *testing.T) {
	mc := newMock(t)
	if _, err := mc.Bucket(mockcluster.DefaultBucket).Set("_default", "_default", "w", []byte(`{"n":1}`), client.CommonFlagsJSON, 0); err != nil {
		t.Fatal(err)
	}
	c, e := connect(t, mc, nil)
	var n atomic.Int32
	ctl := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "w"}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		if n.Add(1) == 1 {
			return mockcluster.Action{Status: memdx.StatusNotMyVbucket}, true
		}
		return mockcluster.Action{}, false
	})
	defer ctl.Remove()
	col := c.DefaultCollection()
	bg := context.Background()
	if _, err := col.GetAllReplicas(bg, "w", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := col.GetAnyReplica(bg, "w", nil); err != nil {
		t.Fatal(err)
	}
	c.Ping(bg)
	e.ledger.check(t)
	sp := e.spans()
	// The nodes' NOOPs are ping spans too, under the call's.
	ids := map[string]bool{}
	for _, s := range sp["ping"] {
		ids[s.SpanContext().SpanID().String()] = true
	}
	for _, s := range sp["ping"] {
		if !ids[s.Parent().SpanID().String()] {
			sp["ping"] = sp["ping"][:0]
			sp["ping"] = append(sp["ping"], s)
			break
		}
	}
	for name, want := range map[string]any{"get_all_replicas": int64(1), "get_any_replica": nil, "ping": int64(0)} {
		if len(sp[name]) != 1 {
			t.Errorf("%d %s spans", len(sp[name]), name)
			continue
		}
		got, ok := attrMap(sp[name][0].Attributes())["couchbase.retries"]
		if !ok || want != nil && got != want {
			t.Errorf("%s couchbase.retries %v (set: %v), want %v", name, got, ok, want)
		}
	}
}
