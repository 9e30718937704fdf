package cluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// MemcachedBucketLacks names what default_engine does not do, and nothing
// for what it does.
func TestMemcachedBucketLacks(t *testing.T) {
	get := memdx.Request{OpCode: memdx.OpGet}
	durable := memdx.Request{OpCode: memdx.OpSet, Durability: memdx.DurabilityMajority}
	for _, c := range []struct {
		req     memdx.Request
		replica int
		coll    string
		want    string
	}{
		{get, 0, "", ""},
		{memdx.Request{OpCode: memdx.OpSet}, 0, "", ""},
		{memdx.Request{OpCode: memdx.OpSubdocGet}, 0, "", "sub-document operations"},
		{memdx.Request{OpCode: memdx.OpSubdocReplaceBodyWithXattr}, 0, "", "sub-document operations"},
		{durable, 0, "", "synchronous durability"},
		{memdx.Request{OpCode: memdx.OpObserveSeqno}, 0, "", "observe (legacy durability)"},
		{memdx.Request{OpCode: memdx.OpRangeScanContinue}, 0, "", "range scans"},
		{memdx.Request{OpCode: memdx.OpGetReplica}, 0, "", "replicas"},
		{get, 1, "", "replicas"},
		{get, 0, "s.c", "collections other than the default (s.c)"},
	} {
		if got := MemcachedBucketLacks(&c.req, c.replica, c.coll); got != c.want {
			t.Errorf("%v replica %d %q: got %q, want %q", c.req.OpCode, c.replica, c.coll, got, c.want)
		}
	}
}
