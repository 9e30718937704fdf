package mockcluster

import (
	"bytes"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// Once SnappyEverywhere is negotiated, configs travel compressed with
// datatype JSON|SNAPPY, as kv_engine sends them: GET_CLUSTER_CONFIG
// (daemon/protocol/mcbp/cluster_config_executor.cc), NOT_MY_VBUCKET bodies
// (daemon/cookie.cc, Cookie::sendNotMyVBucket) and full cluster-map change
// notifications (push_cluster_config). A client with Snappy alone gets the
// JSON text.
func TestSnappyEverywhereCompressesConfigs(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	const key = "some-key"
	owner := ownerOf(b, key)
	other := (owner + 1) % 3
	addr := c.Node(other).Addr()
	base := []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket, memdx.FeatureJSON,
		memdx.FeatureSnappy, memdx.FeatureDuplex, memdx.FeatureClustermapChangeNotification}
	se := bootstrap(t, addr, DefaultBucket, append([]memdx.HelloFeature{memdx.FeatureSnappyEverywhere}, base...))
	if !se.feats[memdx.FeatureSnappyEverywhere] {
		t.Fatal("SnappyEverywhere was not granted")
	}
	plain := bootstrap(t, addr, DefaultBucket, base)

	want := b.ConfigJSON(other)
	check := func(what string, p memdx.Packet, compressed bool, want []byte) {
		t.Helper()
		if !compressed {
			if p.Datatype != memdx.DatatypeJSON || !bytes.Equal(p.Value, want) {
				t.Fatalf("%s without SnappyEverywhere: datatype %s, value %.60q, want JSON text", what, p.Datatype, p.Value)
			}
			return
		}
		if p.Datatype != memdx.DatatypeJSON|memdx.DatatypeSnappy {
			t.Fatalf("%s with SnappyEverywhere: datatype %s, want JSON|SNAPPY", what, p.Datatype)
		}
		got, err := memdx.DecompressSnappy(nil, p.Value, 1<<20)
		if err != nil {
			t.Fatalf("%s: the value does not inflate: %v", what, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: inflates to %.60q, want the config", what, got)
		}
	}

	for _, cl := range []*rawClient{se, plain} {
		compressed := cl == se
		p := cl.do(memdx.NewGetClusterConfig())
		check("GET_CLUSTER_CONFIG", p, compressed, want)
		// A key request to a node that does not own the key.
		p = cl.do(keyReq(cl, b, memdx.NewGet([]byte(key))))
		if p.Status != memdx.StatusNotMyVbucket {
			t.Fatalf("GET on a non-owner: %s", p.Status)
		}
		check("NOT_MY_VBUCKET body", p, compressed, want)
	}

	if _, err := b.AddScope("app"); err != nil {
		t.Fatal(err)
	}
	want = b.ConfigJSON(other)
	for _, cl := range []*rawClient{se, plain} {
		got := nextPackets(t, cl)
		if len(got) != 1 {
			t.Fatalf("%d packets before the NOOP answer, want the notification", len(got))
		}
		check("cluster-map change notification", got[0], cl == se, want)
	}
}
