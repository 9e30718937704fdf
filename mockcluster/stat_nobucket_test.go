package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// The default STAT group asks the bucket's engine for its stats first
// (stat_all_stats in kv_engine's stats_context.cc), and the no-bucket
// engine answers NO_BUCKET: without a selected bucket the group fails.
func TestStatDefaultGroupNeedsABucket(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), "", nil)
	if p := cl.do(memdx.NewStat(nil)); p.Status != memdx.StatusNoBucket {
		t.Fatalf("STAT without a bucket: %s, want NO_BUCKET", p.Status)
	}
	if st := cl.selectBucket(DefaultBucket); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	op := cl.send(memdx.NewStat(nil))
	for {
		p := cl.recv(op)
		if p.Status != memdx.StatusSuccess {
			t.Fatalf("STAT with a bucket: %s", p.Status)
		}
		if _, _, done := memdx.DecodeStat(&p); done {
			break
		}
	}
}

// Any group but the daemon's own goes to the bucket's engine
// (getStatHandler in kv_engine's stats_context.cc hands an unknown group to
// stat_bucket_stats), so without a selected bucket an unknown group, too,
// answers NO_BUCKET; with one the engine does not know it (KEY_ENOENT).
// The mock answered KEY_ENOENT without a bucket.
func TestStatUnknownGroupWithoutBucket(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), "", nil)
	expectAnswer(t, "unknown group without a bucket", cl.do(memdx.NewStat([]byte("nosuchgroup"))), memdx.StatusNoBucket, "")
	if st := cl.selectBucket(DefaultBucket); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	expectAnswer(t, "unknown group with a bucket", cl.do(memdx.NewStat([]byte("nosuchgroup"))), memdx.StatusKeyNotFound, "")
}

// Without a selected bucket a document command is still judged by its
// packet validator first (Cookie::validate runs McbpValidator before the
// command reaches the no-bucket engine, which answers NO_BUCKET): a
// malformed one answers EINVAL. The mock answered NO_BUCKET to anything.
func TestNoBucketValidatesFirst(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), "", nil)
	b := c.Bucket(DefaultBucket)
	bad := keyReq(cl, b, memdx.NewGet([]byte("k")))
	bad.Extras = []byte{1, 2, 3, 4}
	expectAnswer(t, "GET with extras without a bucket", cl.do(bad), memdx.StatusInvalidArgs, "Request must not include extras")
	expectAnswer(t, "GET without a bucket", cl.do(keyReq(cl, b, memdx.NewGet([]byte("k")))), memdx.StatusNoBucket, "")
}
