package mockcluster

import (
	"strconv"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

func TestGetMeta(t *testing.T) {
	e := newKVEnv(t, Options{}, []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureJSON})
	k := "meta"
	e.expect("missing", e.do(memdx.NewGetMeta([]byte(k))), memdx.StatusKeyNotFound)
	st := memdx.NewStore(memdx.OpSet, []byte(k), []byte(`{"a":1}`), 0x02000000, 100)
	st.Datatype = memdx.DatatypeJSON
	s := e.expect("set", e.do(st), memdx.StatusSuccess)

	m := e.expect("get_meta v2", e.do(memdx.NewGetMeta([]byte(k))), memdx.StatusSuccess)
	gm, err := memdx.DecodeGetMeta(&m)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := e.b.Get("_default", "_default", k)
	if m.Cas != s.Cas || gm.Deleted || gm.Flags != 0x02000000 || gm.Expiry != uint32(d.Expiry.Unix()) ||
		gm.Seqno != 1 || gm.Datatype != memdx.DatatypeJSON || len(m.Value) != 0 {
		t.Fatalf("GET_META %+v cas %x; stored %+v cas %x", gm, m.Cas, d, s.Cas)
	}
	v1 := memdx.Request{OpCode: memdx.OpGetMeta, Key: []byte(k)}
	if m := e.expect("get_meta v1", e.do(v1), memdx.StatusSuccess); len(m.Extras) != 20 {
		t.Fatalf("v1 extras %d bytes, want 20", len(m.Extras))
	}
	bad := memdx.Request{OpCode: memdx.OpGetMeta, Key: []byte(k), Extras: []byte{3}}
	e.expect("bad version", e.do(bad), memdx.StatusInvalidArgs)

	// Locked: GET_META hides the lock's CAS as GET does (kv_engine's
	// VBucket::getMetaData answers -1 for a locked item).
	l := e.expect("getl", e.do(memdx.NewGetLocked([]byte(k), 5)), memdx.StatusSuccess)
	if m := e.expect("get_meta locked", e.do(memdx.NewGetMeta([]byte(k))), memdx.StatusSuccess); m.Cas != lockedCas {
		t.Fatalf("GET_META of a locked doc: CAS %x, want %x (the lock's is %x)", m.Cas, lockedCas, l.Cas)
	}
	e.expect("unlock", e.do(memdx.NewUnlock([]byte(k), l.Cas)), memdx.StatusSuccess)
	del := e.expect("delete", e.do(memdx.NewDelete([]byte(k))), memdx.StatusSuccess)
	// A deleted document is a tombstone: success with the deleted flag
	// and the delete's CAS (VBucket::getMetaData).
	m = e.expect("deleted", e.do(memdx.NewGetMeta([]byte(k))), memdx.StatusSuccess)
	if gm, err := memdx.DecodeGetMeta(&m); err != nil || !gm.Deleted || m.Cas != del.Cas {
		t.Fatalf("GET_META of a deleted document: %+v %v cas %x, want deleted with cas %x", gm, err, m.Cas, del.Cas)
	}
}

// TestGetMetaSeqnoIsRevSeqno: GET_META's seqno is the document's revision
// seqno (how many times it was written: 1 for its first write), not its
// vbucket seqno; kv_engine's VBucket::getMetaData fills it from
// getRevSeqno, and XDCR and clients compare revisions with it.
func TestGetMetaSeqnoIsRevSeqno(t *testing.T) {
	e := newKVEnv(t, Options{}, nil)
	k := "rev"
	vb := e.b.VbucketForKey([]byte(k))
	other := ""
	for i := 0; other == ""; i++ {
		if o := "o" + strconv.Itoa(i); e.b.VbucketForKey([]byte(o)) == vb {
			other = o
		}
	}
	e.expect("set other", e.do(set(other, "1")), memdx.StatusSuccess)
	e.expect("set other again", e.do(set(other, "2")), memdx.StatusSuccess)
	e.expect("set", e.do(set(k, "1")), memdx.StatusSuccess)
	m := e.expect("get_meta", e.do(memdx.NewGetMeta([]byte(k))), memdx.StatusSuccess)
	if gm, _ := memdx.DecodeGetMeta(&m); gm.Seqno != 1 {
		t.Fatalf("GET_META seqno %d after the first write, want revision 1", gm.Seqno)
	}
	e.expect("set again", e.do(set(k, "2")), memdx.StatusSuccess)
	e.expect("delete", e.do(memdx.NewDelete([]byte(k))), memdx.StatusSuccess)
	m = e.expect("get_meta deleted", e.do(memdx.NewGetMeta([]byte(k))), memdx.StatusSuccess)
	if gm, _ := memdx.DecodeGetMeta(&m); gm.Seqno != 3 || !gm.Deleted {
		t.Fatalf("GET_META of the tombstone: %+v, want revision 3", gm)
	}
}
