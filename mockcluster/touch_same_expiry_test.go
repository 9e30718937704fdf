package mockcluster

import (
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// A TOUCH or GAT that gives a document the expiry it already has changes
// nothing: kv_engine's VBucket::processGetAndUpdateTtl takes a new CAS and
// seqno only when the expiry changes (exptime_mutated). A new expiry does
// take them. (The mock used to give every touch a new CAS and seqno.)
func TestTouchSameExpiryKeepsCas(t *testing.T) {
	e := newKVEnv(t, Options{}, []memdx.HelloFeature{memdx.FeatureMutationSeqno})
	s := e.expect("set", e.do(set("k", "v")), memdx.StatusSuccess)
	before, _ := e.b.Get("", "", "k")

	tp := e.expect("touch 0 of a document without expiry", e.do(memdx.NewTouch([]byte("k"), 0)), memdx.StatusSuccess)
	if tp.Cas != s.Cas {
		t.Fatalf("touch with the same expiry answered CAS %#x, want the document's %#x", tp.Cas, s.Cas)
	}
	g := e.expect("gat 0 of a document without expiry", e.do(memdx.NewGAT([]byte("k"), 0)), memdx.StatusSuccess)
	if g.Cas != s.Cas {
		t.Fatalf("gat with the same expiry answered CAS %#x, want %#x", g.Cas, s.Cas)
	}
	if d, _ := e.b.Get("", "", "k"); d.Cas != s.Cas || d.Seqno != before.Seqno {
		t.Fatalf("document CAS %#x seqno %d after, want %#x %d", d.Cas, d.Seqno, s.Cas, before.Seqno)
	}

	// The same relative expiry within the same second is the same expiry.
	t1 := e.expect("touch 100", e.do(memdx.NewTouch([]byte("k"), 100)), memdx.StatusSuccess)
	if t1.Cas == s.Cas {
		t.Fatal("a new expiry kept the CAS")
	}
	t2 := e.expect("touch 100 again", e.do(memdx.NewTouch([]byte("k"), 100)), memdx.StatusSuccess)
	if t2.Cas != t1.Cas {
		t.Fatalf("the same expiry again changed the CAS: %#x -> %#x", t1.Cas, t2.Cas)
	}
	e.now = e.now.Add(time.Second)
	t3 := e.expect("touch 100 a second later", e.do(memdx.NewTouch([]byte("k"), 100)), memdx.StatusSuccess)
	if t3.Cas == t2.Cas {
		t.Fatal("a later expiry kept the CAS")
	}
}
