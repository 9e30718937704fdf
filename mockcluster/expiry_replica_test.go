package mockcluster

import (
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// TestReplicaReadsLeaveExpiryToTheActive: a read on a replica node (a
// replica sub-document lookup, OBSERVE) of an expired document answers it
// missing and does not process the expiry: kv_engine's fetchValidValue
// queues the expiry of an expired stored value only in an active vbucket.
// The document stays expired, not deleted, so GET_META still answers it
// with its own CAS and expiry, until the active finds it.
func TestReplicaReadsLeaveExpiryToTheActive(t *testing.T) {
	e := newSubdocEnv(t)
	const k = "expires-on-replica"
	s := e.expect("set", e.do(memdx.NewStore(memdx.OpSet, []byte(k), []byte(`{"a":1}`), 3, 10)), memdx.StatusSuccess)
	e.now = e.now.Add(20 * time.Second)
	p0, m0 := e.getMeta(k)
	if p0.Status != memdx.StatusSuccess || !m0.Deleted || p0.Cas != s.Cas {
		t.Fatalf("GET_META of the expired document: %s %+v cas %x, want deleted with CAS %x", p0.Status, m0, p0.Cas, s.Cas)
	}

	vb := e.b.VbucketForKey([]byte(k))
	rep := e.conns[e.b.VbucketMap()[vb][1]]
	lookup := memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte(k), []byte("a"), 0, memdx.SubdocDocReplicaRead)
	if p := rep.do(keyReq(rep, e.b, lookup)); p.Status != memdx.StatusKeyNotFound {
		t.Fatalf("replica lookup of an expired document: %s", p.Status)
	}
	p := rep.do(memdx.NewObserve([]memdx.ObserveKey{{Vbucket: vb, Key: append([]byte{0}, k...)}}))
	if p.Status != memdx.StatusSuccess {
		t.Fatalf("OBSERVE on the replica: %s", p.Status)
	}
	if got, err := memdx.DecodeObserve(p.Value); err != nil || len(got) != 1 || got[0].Cas != 0 {
		t.Fatalf("OBSERVE on the replica of an expired document: %+v %v", got, err)
	}

	if p1, m1 := e.getMeta(k); p1.Status != memdx.StatusSuccess || !m1.Deleted || p1.Cas != s.Cas || m1.Expiry != m0.Expiry {
		t.Fatalf("GET_META after replica reads: %s %+v cas %x, want the expired document's (%+v cas %x)",
			p1.Status, m1, p1.Cas, m0, s.Cas)
	}
	if n := e.b.MutationCount("", "", k); n != 1 {
		t.Fatalf("MutationCount %d", n)
	}
}

// TestXattrsHelperLeavesExpiryAlone: Bucket.Xattrs is a test's look at the
// store, as Bucket.Get is: reading an expired document does not process
// its expiry (a new CAS, seqno and expiry the server never made). It
// reports the document deleted with the system xattrs an access would
// keep.
func TestXattrsHelperLeavesExpiryAlone(t *testing.T) {
	e := newSubdocEnv(t)
	x := memdx.SubdocPathXattr
	p, _ := e.mutateIn("exp", memdx.SubdocDocMkdoc, 0, mu(memdx.OpSubdocDictUpsert, "_sys", `1`, x), mu(memdx.OpSubdocDictUpsert, "u", `2`, x))
	e.expect("xattrs", p, memdx.StatusSuccess)
	s := e.expect("set", e.do(memdx.NewStore(memdx.OpSet, []byte("exp"), []byte(`{"a":1}`), 5, 10)), memdx.StatusSuccess)
	e.now = e.now.Add(11 * time.Second)

	xs, deleted, ok := e.b.Xattrs("", "", "exp")
	if !ok || !deleted || string(xs) != `{"_sys":1}` {
		t.Fatalf("Xattrs of an expired document: %s deleted %v ok %v", xs, deleted, ok)
	}
	if p, m := e.getMeta("exp"); p.Status != memdx.StatusSuccess || !m.Deleted || p.Cas != s.Cas || m.Flags != 5 {
		t.Fatalf("GET_META after Bucket.Xattrs: %s %+v cas %x, want the expired document's CAS %x", p.Status, m, p.Cas, s.Cas)
	}
}

// TestDurableDeleteOfExpiredDocumentKeepsSystemXattrs: a durable DELETE
// pending while its document expires, and a GET processes the expiry,
// commits a tombstone that still has the system xattrs: the delete was
// built from the document it was sent for (kv_engine's prepare carries
// the pruned xattrs), and the expiry kept them too. Neither drops them.
func TestDurableDeleteOfExpiredDocumentKeepsSystemXattrs(t *testing.T) {
	e := newSubdocEnv(t)
	const k = "durable-expiring"
	x := memdx.SubdocPathXattr
	p, _ := e.mutateIn(k, memdx.SubdocDocMkdoc, 0, mu(memdx.OpSubdocDictUpsert, "_sys", `1`, x))
	e.expect("xattrs", p, memdx.StatusSuccess)
	e.expect("set", e.do(memdx.NewStore(memdx.OpSet, []byte(k), []byte(`{"a":1}`), 5, 10)), memdx.StatusSuccess)

	a := bootstrap(t, e.c.Node(ownerOf(e.b, k)).Addr(), DefaultBucket,
		append([]memdx.HelloFeature{memdx.FeatureUnorderedExecution}, sdFeatures...))
	e.c.SetSyncWriteDelay(time.Hour)
	t.Cleanup(func() { e.c.SetSyncWriteDelay(0) })
	op := a.send(keyReq(a, e.b, durable(memdx.NewDelete([]byte(k)))))
	// The connection handles its requests in order: once a GET sent after
	// it is answered, the DELETE is pending.
	a.passed(e.b)
	if n := e.c.PendingSyncWrites(); n != 1 {
		t.Fatalf("%d pending sync writes", n)
	}
	e.now = e.now.Add(11 * time.Second)
	if _, st := e.body(k); st != memdx.StatusKeyNotFound {
		t.Fatalf("GET of the expired document: %s", st)
	}
	e.c.CommitSyncWrites()
	d, err := a.read(5 * time.Second)
	if err != nil || d.Opaque != op || d.Status != memdx.StatusSuccess {
		t.Fatalf("durable DELETE: %v %+v", err, d)
	}
	st, rs := e.xattrLookups(k, memdx.SubdocDocAccessDeleted, "_sys")
	if st != memdx.StatusSubdocSuccessDeleted || string(rs[0].Value) != "1" {
		t.Fatalf("tombstone after the durable DELETE: %s %+v", st, rs)
	}
}
