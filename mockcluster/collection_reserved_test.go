package mockcluster

import (
	"bytes"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// TestReservedCollectionIDs: collection ids 1 to 7 are reserved and may not
// appear on the wire; kv_engine's key validator (is_document_key_valid in
// mcbp_validators.cc, CollectionID::isReserved) answers EINVAL with the
// context "Invalid collection-id:<id>" before the request reaches a
// vbucket or the manifest, in couchbase and memcached buckets alike.
func TestReservedCollectionIDs(t *testing.T) {
	c := newCluster(t, Options{Buckets: []BucketOptions{{Name: DefaultBucket}, {Name: "mc", Type: MemcachedBucket}}})
	cb := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	mc := bootstrap(t, c.Node(0).Addr(), "mc", nil)
	for _, cl := range []*rawClient{cb, mc} {
		for cid := uint32(1); cid <= 8; cid++ {
			r := memdx.NewGet([]byte("k"))
			r.CollectionID, r.Collections = cid, true
			p := cl.do(r)
			if cid == 8 {
				// Past the validator (7.6's _system._mobile in the
				// couchbase bucket, unknown in the memcached one).
				if p.Status == memdx.StatusInvalidArgs {
					t.Fatalf("GET in collection 8: %s %s", p.Status, p.Value)
				}
				continue
			}
			if p.Status != memdx.StatusInvalidArgs || !bytes.Contains(p.Value, []byte("Invalid collection-id:")) {
				t.Fatalf("GET in reserved collection %d: %s %s", cid, p.Status, p.Value)
			}
		}
	}
}
