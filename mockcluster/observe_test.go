package mockcluster

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// OBSERVE_SEQNO answers as kv_engine's ep engine: on the active and on a
// replica the vbucket's UUID and seqnos (format 0), with an earlier UUID
// of the failover log format 1 with that UUID and its last seqno, with a
// UUID the log does not hold KEY_ENOENT, and on a node holding neither
// NOT_MY_VBUCKET. The SDKs' legacy PersistTo/ReplicateTo durability runs on
// it.
func TestObserveSeqno(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	const k = "observed"
	vb := b.VbucketForKey([]byte(k))
	chain := b.VbucketMap()[vb]
	active, replica := chain[0], chain[1]
	neither := 3 - active - replica
	a := bootstrap(t, c.Node(active).Addr(), DefaultBucket, nil)
	p := a.do(keyReq(a, b, set(k, "v")))
	if p.Status != memdx.StatusSuccess || len(p.Extras) != 16 {
		t.Fatalf("SET: %s, extras %d", p.Status, len(p.Extras))
	}
	uuid, seqno := binary.BigEndian.Uint64(p.Extras[0:8]), binary.BigEndian.Uint64(p.Extras[8:16])

	for _, node := range []int{active, replica} {
		cl := bootstrap(t, c.Node(node).Addr(), DefaultBucket, nil)
		p := cl.do(memdx.NewObserveSeqno(vb, uuid))
		if p.Status != memdx.StatusSuccess {
			t.Fatalf("node %d: OBSERVE_SEQNO: %s", node, p.Status)
		}
		r, err := memdx.DecodeObserveSeqno(p.Value)
		if err != nil {
			t.Fatalf("node %d: %v", node, err)
		}
		want := memdx.ObserveSeqnoResult{Vbucket: vb, VbUUID: uuid, PersistSeqno: seqno, CurrentSeqno: seqno}
		if r != want {
			t.Fatalf("node %d: %+v, want %+v", node, r, want)
		}
	}
	cl := bootstrap(t, c.Node(neither).Addr(), DefaultBucket, nil)
	if p := cl.do(memdx.NewObserveSeqno(vb, uuid)); p.Status != memdx.StatusNotMyVbucket {
		t.Fatalf("OBSERVE_SEQNO on a node without the vbucket: %s", p.Status)
	}
	if p := a.do(memdx.NewObserveSeqno(vb, uuid^1)); p.Status != memdx.StatusKeyNotFound {
		t.Fatalf("OBSERVE_SEQNO with a UUID the vbucket never had: %s, want KEY_ENOENT", p.Status)
	}

	if err := c.Failover(active); err != nil {
		t.Fatal(err)
	}
	nu := b.VbucketUUID(vb)
	if nu == uuid {
		t.Fatal("the failover kept the vbucket UUID")
	}
	promoted := bootstrap(t, c.Node(b.VbucketMap()[vb][0]).Addr(), DefaultBucket, nil)
	p = promoted.do(memdx.NewObserveSeqno(vb, uuid))
	if p.Status != memdx.StatusSuccess {
		t.Fatalf("OBSERVE_SEQNO with the UUID before the failover: %s", p.Status)
	}
	r, err := memdx.DecodeObserveSeqno(p.Value)
	if err != nil {
		t.Fatal(err)
	}
	want := memdx.ObserveSeqnoResult{DidFailover: true, Vbucket: vb, VbUUID: nu, PersistSeqno: seqno,
		CurrentSeqno: seqno, OldVbUUID: uuid, LastReceivedSeqno: seqno}
	if r != want {
		t.Fatalf("after the failover: %+v, want %+v", r, want)
	}
}

// OBSERVE answers each key's state and CAS as kv_engine does: persisted
// (the mock persists at once) with the document's CAS, or not found with
// CAS 0, on the active and on a replica; NOT_MY_VBUCKET elsewhere;
// malformed lists EINVAL.
func TestObserve(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	const k, missing = "observed", "never-written"
	vb := b.VbucketForKey([]byte(k))
	chain := b.VbucketMap()[vb]
	a := bootstrap(t, c.Node(chain[0]).Addr(), DefaultBucket, nil)
	p := a.do(keyReq(a, b, set(k, "v")))
	if p.Status != memdx.StatusSuccess {
		t.Fatal(p.Status)
	}
	cas := p.Cas
	// Keys carry the collection prefix (the default collection: 0x00).
	keys := []memdx.ObserveKey{
		{Vbucket: vb, Key: append([]byte{0}, k...)},
		{Vbucket: vb, Key: append([]byte{0}, missing...)},
	}
	if b.VbucketForKey([]byte(missing)) != vb {
		keys[1].Vbucket = b.VbucketForKey([]byte(missing))
	}
	for _, node := range []int{chain[0], chain[1]} {
		cl := bootstrap(t, c.Node(node).Addr(), DefaultBucket, nil)
		ks := keys
		if !cl.holdsAll(b, ks) {
			ks = ks[:1]
		}
		p := cl.do(memdx.NewObserve(ks))
		if p.Status != memdx.StatusSuccess {
			t.Fatalf("node %d: OBSERVE: %s", node, p.Status)
		}
		got, err := memdx.DecodeObserve(p.Value)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(ks) {
			t.Fatalf("node %d: %d results for %d keys", node, len(got), len(ks))
		}
		if !bytes.Equal(got[0].Key, ks[0].Key) || got[0].Vbucket != vb || got[0].State != memdx.ObservePersisted || got[0].Cas != cas {
			t.Fatalf("node %d: stored key: %+v, want persisted with CAS %d", node, got[0], cas)
		}
		if len(got) == 2 && (got[1].State != memdx.ObserveNotFound || got[1].Cas != 0) {
			t.Fatalf("node %d: missing key: %+v, want not found", node, got[1])
		}
	}
	neither := 3 - chain[0] - chain[1]
	cl := bootstrap(t, c.Node(neither).Addr(), DefaultBucket, nil)
	if p := cl.do(memdx.NewObserve(keys[:1])); p.Status != memdx.StatusNotMyVbucket {
		t.Fatalf("OBSERVE on a node without the vbucket: %s", p.Status)
	}
	bad := memdx.NewObserve(keys[:1])
	bad.Value = bad.Value[:len(bad.Value)-1]
	if p := a.do(bad); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("OBSERVE with a truncated key: %s", p.Status)
	}
	// kv_engine's observe_validator wants a value (ExpectedValueLen::NonZero).
	if p := a.do(memdx.NewObserve(nil)); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("OBSERVE without keys: %s %q, want EINVAL", p.Status, p.Value)
	}
}

// holdsAll reports whether the node the client is connected to holds every
// key's vbucket (as active or replica).
func (c *rawClient) holdsAll(b *Bucket, keys []memdx.ObserveKey) bool {
	port := mustPort(c.nc.RemoteAddr().String())
	node := -1
	for _, n := range b.c.Nodes() {
		if mustPort(n.Addr()) == port {
			node = n.ID()
		}
	}
	for _, k := range keys {
		held := false
		for _, id := range b.VbucketMap()[k.Vbucket] {
			held = held || id == node
		}
		if !held {
			return false
		}
	}
	return true
}
