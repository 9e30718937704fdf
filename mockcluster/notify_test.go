package mockcluster

import (
	"strconv"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// nextPacket reads the next packet; notifications are sent before the
// change call returns, so a NOOP sent afterwards is answered after them.
func nextPackets(t *testing.T, cl *rawClient) []memdx.Packet {
	t.Helper()
	op := cl.send(memdx.NewNoop())
	var got []memdx.Packet
	for {
		p, err := cl.read(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if p.Magic == memdx.MagicRes && p.Opaque == op {
			return got
		}
		got = append(got, p)
	}
}

func TestClustermapChangeNotifications(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	addr := c.Node(2).Addr()
	full := bootstrap(t, addr, DefaultBucket, []memdx.HelloFeature{memdx.FeatureDuplex,
		memdx.FeatureClustermapChangeNotification, memdx.FeatureJSON})
	brief := bootstrap(t, addr, DefaultBucket, []memdx.HelloFeature{memdx.FeatureDuplex,
		memdx.FeatureClustermapChangeNotificationBrief})
	none := bootstrap(t, addr, DefaultBucket, []memdx.HelloFeature{memdx.FeatureDuplex})
	other := bootstrap(t, addr, "", []memdx.HelloFeature{memdx.FeatureDuplex,
		memdx.FeatureClustermapChangeNotification})

	before := b.Rev()
	if _, err := b.AddScope("app"); err != nil {
		t.Fatal(err)
	}
	after := b.Rev()
	if after <= before {
		t.Fatalf("rev %d -> %d", before, after)
	}
	check := func(name string, cl *rawClient, wantConfig bool) {
		got := nextPackets(t, cl)
		if len(got) != 1 {
			t.Fatalf("%s: %d packets before the NOOP answer, want 1", name, len(got))
		}
		n, err := memdx.DecodeClustermapNotification(&got[0])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(n.Bucket) != DefaultBucket || !n.HasEpoch || n.Version.Epoch != 1 || n.Version.Revision != after {
			t.Fatalf("%s: %+v", name, n)
		}
		if got[0].Opaque != 0 || got[0].Cas != 0 {
			t.Fatalf("%s: opaque %d cas %d", name, got[0].Opaque, got[0].Cas)
		}
		if wantConfig {
			cfg := parseConfig(t, n.Config)
			if cfg.Rev != after || cfg.CollectionsManifestUID != strconv.FormatUint(b.ManifestUID(), 16) {
				t.Fatalf("%s: config rev %d manifest %s", name, cfg.Rev, cfg.CollectionsManifestUID)
			}
			if got[0].Datatype != memdx.DatatypeJSON {
				t.Fatalf("%s: datatype %s", name, got[0].Datatype)
			}
		} else if len(n.Config) != 0 {
			t.Fatalf("%s: brief notification carries %d bytes", name, len(n.Config))
		}
	}
	check("full", full, true)
	check("brief", brief, false)
	if got := nextPackets(t, none); len(got) != 0 {
		t.Fatalf("client without the feature got %d packets", len(got))
	}
	// A connection without a bucket is notified of cluster config changes
	// only (none happened).
	if got := nextPackets(t, other); len(got) != 0 {
		t.Fatalf("bucketless client got %d packets", len(got))
	}

	// A client that already fetched the newest config is not notified of
	// it again (dedupe against the known version); a newer one arrives.
	if p := full.do(memdx.NewGetClusterConfig()); p.Status != memdx.StatusSuccess {
		t.Fatal(p.Status)
	}
	if _, err := b.AddCollection("app", "c1"); err != nil {
		t.Fatal(err)
	}
	check2 := nextPackets(t, full)
	if len(check2) != 1 {
		t.Fatalf("got %d notifications", len(check2))
	}
	// Adding a node changes the cluster config too.
	if _, err := c.AddNode(); err != nil {
		t.Fatal(err)
	}
	gp := nextPackets(t, other)
	if len(gp) != 1 {
		t.Fatalf("bucketless client got %d packets after AddNode", len(gp))
	}
	if n, err := memdx.DecodeClustermapNotification(&gp[0]); err != nil || len(n.Bucket) != 0 || len(n.Config) == 0 {
		t.Fatalf("global notification %+v %v", n, err)
	}
}
