package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A sub-document lookup of a locked document runs as kv_engine's
// (SubdocExecutionContext::get_document_for_searching, daemon/subdocument*):
// the engine's get hides the lock behind CAS 0xffffffffffffffff, so without
// a CAS (or with that one) the lookup answers LOCKED; with any other CAS it
// cannot be checked and the lookup runs, answering the CAS it was given. A
// replica read of the locked document is not locked at all: locks are not
// replicated, and the replica holds the CAS from before the lock.
func TestSubdocLookupOfLockedDocument(t *testing.T) {
	e := newSubdocEnv(t)
	k := "locked-lookup"
	s := e.expect("set", e.do(set(k, `{"a":1}`)), memdx.StatusSuccess)
	l := e.expect("getl", e.do(memdx.NewGetLocked([]byte(k), 5)), memdx.StatusSuccess)
	get := lk(memdx.OpSubdocGet, "a", 0)

	p, _ := e.lookupIn(k, 0, get)
	e.expect("lookup without CAS", p, memdx.StatusLocked)
	r := memdx.NewSubdocMultiLookup([]byte(k), 0, []memdx.SubdocLookupOp{get})
	r.Cas = lockedCas
	e.expect("lookup with the hidden CAS", e.do(r), memdx.StatusLocked)
	for _, cas := range []uint64{l.Cas, l.Cas + 1} {
		r.Cas = cas
		p := e.expect("lookup with a CAS", e.do(r), memdx.StatusSuccess)
		if p.Cas != cas {
			t.Fatalf("lookup with CAS %x answered CAS %x, want the one given", cas, p.Cas)
		}
	}

	vb := e.b.VbucketForKey([]byte(k))
	rep := e.conns[e.b.VbucketMap()[vb][1]]
	for _, req := range []memdx.Request{
		memdx.NewSubdocMultiLookup([]byte(k), memdx.SubdocDocReplicaRead, []memdx.SubdocLookupOp{get}),
		memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte(k), []byte("a"), 0, memdx.SubdocDocReplicaRead),
	} {
		p := rep.do(keyReq(rep, e.b, req))
		if p.Status != memdx.StatusSuccess || p.Cas != s.Cas {
			t.Fatalf("replica %s of a locked document: %s CAS %x, want success with the pre-lock CAS %x",
				req.OpCode, p.Status, p.Cas, s.Cas)
		}
	}
	e.expect("unlock", e.do(memdx.NewUnlock([]byte(k), l.Cas)), memdx.StatusSuccess)
	p, _ = e.lookupIn(k, 0, get)
	e.expect("lookup once unlocked", p, memdx.StatusSuccess)
}
