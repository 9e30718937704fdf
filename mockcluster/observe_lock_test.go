package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A lock is not replicated (d84405d): OBSERVE on a replica node, like
// GET_REPLICA, reports the CAS from before the lock, which is what the
// replica holds; the active reports the lock's CAS (kv_engine's
// getKeyStats reads the stored value's CAS).
func TestObserveOfLockedDocumentOnReplica(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	const k = "observed-locked"
	vb := b.VbucketForKey([]byte(k))
	chain := b.VbucketMap()[vb]
	a := bootstrap(t, c.Node(chain[0]).Addr(), DefaultBucket, nil)
	s := a.do(keyReq(a, b, set(k, "v")))
	if s.Status != memdx.StatusSuccess {
		t.Fatal(s.Status)
	}
	l := a.do(keyReq(a, b, memdx.NewGetLocked([]byte(k), 10)))
	if l.Status != memdx.StatusSuccess {
		t.Fatal(l.Status)
	}
	keys := []memdx.ObserveKey{{Vbucket: vb, Key: append([]byte{0}, k...)}}
	for _, c2 := range []struct {
		node int
		want uint64
	}{{chain[0], l.Cas}, {chain[1], s.Cas}} {
		cl := bootstrap(t, c.Node(c2.node).Addr(), DefaultBucket, nil)
		p := cl.do(memdx.NewObserve(keys))
		if p.Status != memdx.StatusSuccess {
			t.Fatalf("node %d: OBSERVE: %s", c2.node, p.Status)
		}
		got, err := memdx.DecodeObserve(p.Value)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Cas != c2.want {
			t.Fatalf("node %d (active %d): OBSERVE of a locked document: %+v, want CAS %x", c2.node, chain[0], got, c2.want)
		}
	}
}
