package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

func TestSmokeSetGet(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	key := "hello"
	n := c.Node(ownerOf(b, key))
	cl := bootstrap(t, n.Addr(), DefaultBucket, nil)
	set := cl.do(keyReq(cl, b, memdx.NewStore(memdx.OpSet, []byte(key), []byte(`{"a":1}`), 7, 0)))
	if set.Status != memdx.StatusSuccess || set.Cas == 0 {
		t.Fatalf("set: %s cas %d", set.Status, set.Cas)
	}
	get := cl.do(keyReq(cl, b, memdx.NewGet([]byte(key))))
	if get.Status != memdx.StatusSuccess || string(get.Value) != `{"a":1}` || u32(get.Extras) != 7 || get.Cas != set.Cas {
		t.Fatalf("get: %s %q flags %v cas %d/%d", get.Status, get.Value, get.Extras, get.Cas, set.Cas)
	}
	if get.Datatype != memdx.DatatypeJSON {
		t.Fatalf("datatype %s", get.Datatype)
	}
}
