package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

func TestGetSetDeleteNoop(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	for _, collections := range []bool{true, false} {
		fs := []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureMutationSeqno, memdx.FeatureJSON}
		if collections {
			fs = append(fs, memdx.FeatureCollections)
		}
		key := "doc-basic"
		if !collections {
			key = "doc-basic-nocoll"
		}
		cl := bootstrap(t, c.Node(ownerOf(b, key)).Addr(), DefaultBucket, fs)
		kr := func(r memdx.Request) memdx.Request { return keyReq(cl, b, r) }

		if p := cl.do(kr(memdx.NewGet([]byte(key)))); p.Status != memdx.StatusKeyNotFound {
			t.Fatalf("get missing: %s", p.Status)
		}
		set := cl.do(kr(memdx.NewStore(memdx.OpSet, []byte(key), []byte("v1"), 0xdead, 0)))
		tok, ok, err := memdx.DecodeMutationToken(&set)
		if set.Status != memdx.StatusSuccess || !ok || err != nil || tok.Seqno == 0 || tok.VbUUID != b.VbucketUUID(b.VbucketForKey([]byte(key))) {
			t.Fatalf("set: %s token %+v %v %v", set.Status, tok, ok, err)
		}
		get := cl.do(kr(memdx.NewGet([]byte(key))))
		if get.Status != memdx.StatusSuccess || string(get.Value) != "v1" || u32(get.Extras) != 0xdead ||
			get.Cas != set.Cas || get.Datatype != 0 {
			t.Fatalf("get: %s %q cas %d", get.Status, get.Value, get.Cas)
		}
		getk := cl.do(kr(memdx.Request{OpCode: memdx.OpGetK, Key: []byte(key)}))
		wantKey := key
		if collections {
			wantKey = "\x00" + key // the key as sent: collection 0 prefix
		}
		if getk.Status != memdx.StatusSuccess || string(getk.Key) != wantKey {
			t.Fatalf("GETK: %s key %q", getk.Status, getk.Key)
		}
		del := cl.do(kr(memdx.NewDelete([]byte(key))))
		if del.Status != memdx.StatusSuccess || del.Cas == 0 || del.Cas == set.Cas {
			t.Fatalf("delete: %s cas %d", del.Status, del.Cas)
		}
		if p := cl.do(kr(memdx.NewGet([]byte(key)))); p.Status != memdx.StatusKeyNotFound {
			t.Fatalf("get deleted: %s", p.Status)
		}
		if p := cl.do(kr(memdx.NewDelete([]byte(key)))); p.Status != memdx.StatusKeyNotFound {
			t.Fatalf("delete missing: %s", p.Status)
		}
		if p := cl.do(memdx.NewNoop()); p.Status != memdx.StatusSuccess {
			t.Fatalf("noop: %s", p.Status)
		}
		if n := b.MutationCount("", "", key); n != 2 {
			t.Fatalf("mutation count %d, want 2", n)
		}
	}
}
