package mockcluster

import (
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// A request in alternative framing is served on a connection whose HELLO
// did not ask for AltRequestSupport (nor SyncReplication), as kv_engine
// serves it (the feature is informative there): its frame infos are judged
// as on any connection. libcouchbase sends durable writes on its bootstrap
// connection this way.
func TestAlternativeFramingWithoutHelloFeature(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	k := "framed"
	feats := []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket, memdx.FeatureCollections}
	cl := bootstrap(t, c.Node(ownerOf(b, k)).Addr(), DefaultBucket, feats)
	if cl.feats[memdx.FeatureAltRequests] || cl.feats[memdx.FeatureSyncReplication] {
		t.Fatalf("the connection negotiated %v", cl.feats)
	}

	durable := keyReq(cl, b, set(k, "v1"))
	durable.Durability = memdx.DurabilityMajority
	if p := cl.do(durable); p.Status != memdx.StatusSuccess {
		t.Fatalf("durable SET in alternative framing: %s (%q)", p.Status, p.Value)
	}
	if d, ok := b.Get("", "", k); !ok || string(d.Value) != "v1" {
		t.Fatalf("the mock holds %q (found %v) after the durable SET", d.Value, ok)
	}

	if _, err := b.Set("", "", k, []byte("v1"), 0, time.Hour); err != nil {
		t.Fatal(err)
	}
	keep := keyReq(cl, b, set(k, "v2"))
	keep.PreserveTTL = true
	if p := cl.do(keep); p.Status != memdx.StatusSuccess {
		t.Fatalf("SET with PreserveTTL in alternative framing: %s", p.Status)
	}
	if d, _ := b.Get("", "", k); string(d.Value) != "v2" || d.Expiry.IsZero() {
		t.Fatalf("after the preserving SET: value %q, expiry %v (want v2 and the expiry kept)", d.Value, d.Expiry)
	}

	// The frame infos are still judged: durability on a read is invalid,
	// an unknown id is refused.
	g := keyReq(cl, b, memdx.NewGet([]byte(k)))
	g.FramingExtras = []byte{0x11, 0x01}
	if p := cl.do(g); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("durability on GET: %s, want EINVAL", p.Status)
	}
	g.FramingExtras = []byte{0xf0, 0x0e}
	if p := cl.do(g); p.Status != memdx.StatusUnknownFrameInfo {
		t.Fatalf("unknown frame info: %s, want UNKNOWN_FRAME_INFO", p.Status)
	}
}
