package mockcluster

import (
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// With the default collection dropped, a request for it is not refused by
// kv_engine's validator (verify_header looks up only a collection other
// than the default one), but by the engine: KVBucket::getInternal (and
// operationPrologue for the mutations, engines/ep/src/kv_bucket.cc) checks
// the vbucket's state first, NOT_MY_VBUCKET on a node that is not its
// active, and only then looks the collection up. The engine's
// unknown_collection goes through handle_executor_status, whose
// Connection::remapErrorCode answers a client that did not negotiate
// Collections EINVAL. The mock answered UNKNOWN_COLLECTION, as its
// validator does for another collection, to every client, and answered it
// before NOT_MY_VBUCKET on a node holding a replica of the vbucket.
func TestDroppedDefaultCollectionAnswersAsTheEngine(t *testing.T) {
	c := newCluster(t, Options{Nodes: 2})
	b := c.Bucket(DefaultBucket)
	if err := b.DropCollection("_default", "_default"); err != nil {
		t.Fatal(err)
	}
	const key = "k"
	owner := ownerOf(b, key)
	replica := b.VbucketMap()[b.VbucketForKey([]byte(key))][1]
	if replica < 0 {
		t.Fatal("no replica")
	}
	noColl := []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket, memdx.FeatureJSON}

	cl := bootstrap(t, c.Node(owner).Addr(), DefaultBucket, noColl)
	p := cl.do(keyReq(cl, b, memdx.NewGet([]byte(key))))
	if p.Status != memdx.StatusInvalidArgs {
		t.Errorf("GET without Collections: %s, want EINVAL (remapErrorCode)", p.Status)
	}
	if !strings.Contains(string(p.Value), `"manifest_uid"`) {
		t.Errorf("GET without Collections: body %s, want the manifest uid the engine set", p.Value)
	}

	withColl := bootstrap(t, c.Node(owner).Addr(), DefaultBucket, nil)
	if p := withColl.do(keyReq(withColl, b, memdx.NewGet([]byte(key)))); p.Status != memdx.StatusUnknownCollection {
		t.Errorf("GET with Collections: %s, want UNKNOWN_COLLECTION", p.Status)
	}

	rep := bootstrap(t, c.Node(replica).Addr(), DefaultBucket, nil)
	if p := rep.do(keyReq(rep, b, memdx.NewGet([]byte(key)))); p.Status != memdx.StatusNotMyVbucket {
		t.Errorf("GET on the replica's node: %s, want NOT_MY_VBUCKET (the vbucket's state is checked first)", p.Status)
	}
}
