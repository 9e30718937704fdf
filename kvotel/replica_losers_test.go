package kvotel

import (
	"context"
	"testing"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// A GetAnyReplica whose active copy answers while the replica's read is
// still out: the replica's read, canceled once the active copy answered,
// is not the caller's operation. Its spans end (its dispatch span and its
// get_replica span with a client.EventCancelled event), but neither it nor anything
// else is a failure: no span has status Error or error.type, and
// db.client.operation.duration has no point with error.type (before, the
// loser was a RequestCanceled get_replica on both, inflating error rates).
func TestReplicaReadLosersAreNotFailures(t *testing.T) {
	mc := newMock(t)
	if _, err := mc.Bucket(mockcluster.DefaultBucket).Set("_default", "_default", "r", []byte(`{"n":1}`), client.CommonFlagsJSON, 0); err != nil {
		t.Fatal(err)
	}
	// The replica's read is held until the test ends; the active copy's
	// answer waits until the replica's read has arrived, so that it is in
	// flight, its dispatch span open, when the active copy wins.
	replicaArrived := make(chan struct{})
	hold := make(chan struct{})
	rc := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGetReplica}, Key: "r"}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		close(replicaArrived)
		return mockcluster.Action{Hold: hold}, true
	})
	ac := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "r"}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		return mockcluster.Action{Hold: replicaArrived}, true
	})
	t.Cleanup(func() { close(hold); rc.Remove(); ac.Remove() })

	c, e := connect(t, mc, nil)
	r, err := c.DefaultCollection().GetAnyReplica(context.Background(), "r", nil)
	if err != nil || r.IsReplica {
		t.Fatalf("GetAnyReplica: replica %v, %v; want the active copy", r.IsReplica, err)
	}
	e.ledger.check(t)
	sp := e.spans()
	for _, name := range []string{"get_any_replica", "get", "get_replica", client.SpanDispatchToServer} {
		for _, s := range sp[name] {
			if s.Status().Code == codes.Error {
				t.Errorf("%s status %v: nothing failed", name, s.Status())
			}
			if v, ok := attrMap(s.Attributes())["error.type"]; ok {
				t.Errorf("%s has error.type %v: nothing failed", name, v)
			}
		}
	}
	if len(sp["get_replica"]) != 1 || len(sp["get"]) != 1 {
		t.Fatalf("get spans %d, get_replica spans %d, want one each", len(sp["get"]), len(sp["get_replica"]))
	}
	loser := sp["get_replica"][0]
	if !hasEvent(loser, client.EventCancelled) {
		t.Errorf("the replica's read has events %v, want %s", loser.Events(), client.EventCancelled)
	}
	var loserDispatch []sdktrace.ReadOnlySpan
	for _, d := range sp[client.SpanDispatchToServer] {
		if d.Parent().SpanID() == loser.SpanContext().SpanID() {
			loserDispatch = append(loserDispatch, d)
		}
	}
	if len(loserDispatch) != 1 || !hasEvent(loserDispatch[0], client.EventCancelled) {
		t.Errorf("the replica's read's dispatch spans %v, want one with a %s event", loserDispatch, client.EventCancelled)
	}

	m, ok := collect(t, e.reader)[client.MetricOperationDuration]
	if !ok {
		t.Fatal("no operation duration")
	}
	for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		op, _ := dp.Attributes.Value("db.operation.name")
		if et, ok := dp.Attributes.Value("error.type"); ok {
			t.Errorf("%s recorded %d failed with error.type %s", op.AsString(), dp.Count, et.AsString())
		}
		if op.AsString() == "get_replica" {
			t.Errorf("the canceled replica read's latency was recorded: %d points", dp.Count)
		}
	}
}

func hasEvent(s sdktrace.ReadOnlySpan, name string) bool {
	for _, e := range s.Events() {
		if e.Name == name {
			return true
		}
	}
	return false
}
