package kvotel

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A scan whose create and then a continue the server refuses once each
// with TMPFAIL: both are retried, and the scan's span shows it as any
// operation's does, couchbase.retries 2 and a retry event per retry
// with its reason (before, the count alone: no event said why).
func TestScanRetriesAreEvents(t *testing.T) {
	mc := newMock(t)
	for i := range 4 {
		if _, err := mc.Bucket(mockcluster.DefaultBucket).Set("_default", "_default", fmt.Sprintf("e%02d", i), []byte(`{"n":1}`), client.CommonFlagsJSON, 0); err != nil {
			t.Fatal(err)
		}
	}
	var creates, continues atomic.Int32
	cc := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanCreate}}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		if creates.Add(1) == 1 {
			return mockcluster.Action{Status: memdx.StatusTmpFail}, true
		}
		return mockcluster.Action{}, false
	})
	defer cc.Remove()
	ct := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanContinue}}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		if continues.Add(1) == 1 {
			return mockcluster.Action{Status: memdx.StatusTmpFail}, true
		}
		return mockcluster.Action{}, false
	})
	defer ct.Remove()
	c, e := connect(t, mc, nil)
	sr, err := c.DefaultCollection().Scan(context.Background(), client.PrefixScan{Prefix: "e"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for sr.Next() {
		n++
	}
	if sr.Err() != nil || n != 4 {
		t.Fatalf("%d items, %v", n, sr.Err())
	}
	e.ledger.check(t)
	sp := e.spans()
	if len(sp["scan"]) != 1 {
		t.Fatalf("%d scan spans", len(sp["scan"]))
	}
	s := sp["scan"][0]
	if got := attrMap(s.Attributes())["couchbase.retries"]; got != int64(2) {
		t.Errorf("couchbase.retries %v, want 2", got)
	}
	var reasons []string
	for _, ev := range s.Events() {
		if ev.Name == client.EventRetry {
			reasons = append(reasons, fmt.Sprint(attrMap(ev.Attributes)["couchbase.retry.reason"]))
		}
		if ev.Time.Before(s.StartTime()) || ev.Time.After(s.EndTime()) {
			t.Errorf("event %s at %v outside the scan (%v to %v)", ev.Name, ev.Time, s.StartTime(), s.EndTime())
		}
	}
	if len(reasons) != 2 || reasons[0] != "KV_TEMPORARY_FAILURE" || reasons[1] != "KV_TEMPORARY_FAILURE" {
		t.Errorf("retry events %v, want two for KV_TEMPORARY_FAILURE", reasons)
	}
}
