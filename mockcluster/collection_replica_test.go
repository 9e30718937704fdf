package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// kv_engine looks the collection up in the validator (verify_header's
// setCurrentCollectionInfo, get_collection_meta with the request's
// vbucket) before the command asks whether the vbucket is active: a node
// that holds the vbucket in any state answers an unknown collection
// UNKNOWN_COLLECTION, and only a node without the vbucket answers
// NOT_MY_VBUCKET.
func TestUnknownCollectionBeforeVbucketState(t *testing.T) {
	c := newCluster(t, Options{Nodes: 2})
	b := c.Bucket(DefaultBucket)
	chains := b.snap.Load().chains
	vb := -1
	for i, ch := range chains {
		if len(ch) == 2 && ch[0] == 0 && ch[1] == 1 {
			vb = i
			break
		}
	}
	if vb < 0 {
		t.Fatal("no vbucket with chain [0 1]")
	}
	key := []byte{0x99, 0x01, 'k'} // collection 0x99, which does not exist
	replica := bootstrap(t, c.Node(1).Addr(), DefaultBucket, stdFeatures)
	if p := replica.do(memdx.Request{OpCode: memdx.OpGet, Vbucket: uint16(vb), Key: key}); p.Status != memdx.StatusUnknownCollection {
		t.Errorf("GET of an unknown collection on the replica: %s, want UNKNOWN_COLLECTION", p.Status)
	}
	active := bootstrap(t, c.Node(0).Addr(), DefaultBucket, stdFeatures)
	if p := active.do(memdx.Request{OpCode: memdx.OpGetReplica, Vbucket: uint16(vb), Key: key}); p.Status != memdx.StatusUnknownCollection {
		t.Errorf("GET_REPLICA of an unknown collection on the active: %s, want UNKNOWN_COLLECTION", p.Status)
	}
	// A known collection still gets NOT_MY_VBUCKET from the replica.
	if p := replica.do(memdx.Request{OpCode: memdx.OpGet, Vbucket: uint16(vb), Key: []byte{0, 'k'}}); p.Status != memdx.StatusNotMyVbucket {
		t.Errorf("GET on the replica: %s, want NOT_MY_VBUCKET", p.Status)
	}
}
