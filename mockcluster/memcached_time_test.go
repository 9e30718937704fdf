package mockcluster

import (
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// A memcached bucket keeps default_engine's time rules, not ep-engine's:
// default_engine expires a document at the second its expiry names
// (do_item_get: exptime <= current_time) and releases a lock at the second
// it ends (locked while locktime > current_time), where a couchbase bucket
// keeps both through that second (TestExpiryAndLockLastThroughTheirLastSecond).
func TestMemcachedBucketExpiryAndLockEndAtTheirLastSecond(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	now := start
	c, b := newMemcachedCluster(t, Options{Nodes: 1, Clock: func() time.Time { return now }})
	cn := bootstrap(t, c.Node(0).Addr(), "cache", nil)
	do := func(what string, r memdx.Request, want memdx.Status) {
		t.Helper()
		if p := cn.do(mcReq(cn, r)); p.Status != want {
			t.Fatalf("%s: %s, want %s", what, p.Status, want)
		}
	}
	do("set ttl 10", memdx.NewStore(memdx.OpSet, []byte("ttl"), []byte("v"), 0, 10), memdx.StatusSuccess)
	do("set lk", set("lk", "v"), memdx.StatusSuccess)
	do("getl 10", memdx.NewGetLocked([]byte("lk"), 10), memdx.StatusSuccess)
	now = start.Add(10*time.Second - time.Millisecond)
	do("get at +9.999s", memdx.NewGet([]byte("ttl")), memdx.StatusSuccess)
	do("set locked at +9.999s", set("lk", "x"), memdx.StatusLocked)
	now = start.Add(10 * time.Second)
	do("get at +10s", memdx.NewGet([]byte("ttl")), memdx.StatusKeyNotFound)
	do("set at +10s", set("lk", "x"), memdx.StatusSuccess)
	if _, ok := b.Get("", "", "ttl"); ok {
		t.Fatal("Bucket.Get sees the expired document")
	}
}
