package mockcluster

import (
	"strings"
	"testing"

	"github.com/kvwire/kvwire/vbmap"
)

// AdvertiseMgmtPort: the configs a node serves and streams name the port
// given as the node's REST port, and its own again after 0; the node
// still listens on its own.
func TestAdvertiseMgmtPortNamedInConfigs(t *testing.T) {
	c := newCluster(t, Options{Nodes: 2, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 4}}})
	n := c.Node(1)
	own := n.MgmtAddr()
	rc := newREST(t, "http://"+c.Node(0).MgmtAddr(), nil)
	s := rc.openStream("/pools/default/bs/"+DefaultBucket, DefaultUser, DefaultPassword)
	mgmtOf := func(raw []byte) string {
		t.Helper()
		cfg, err := vbmap.Parse(raw, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		for _, nd := range cfg.Nodes() {
			if kv, _ := nd.KVAddr("", false); kv == n.Addr() {
				a, _ := nd.MgmtAddr("", false)
				return a
			}
		}
		t.Fatalf("node 1 is not in the config: %s", raw)
		return ""
	}
	if got := mgmtOf(s.next()); got != own {
		t.Fatalf("before: the config names %s for node 1; want its own %s", got, own)
	}
	n.AdvertiseMgmtPort(4242)
	if got := mgmtOf(s.next()); got != "127.0.0.1:4242" {
		t.Fatalf("streamed after AdvertiseMgmtPort(4242): node 1's REST address %s", got)
	}
	if _, body, _ := rc.get("/pools/default/b/"+DefaultBucket, DefaultUser, DefaultPassword); mgmtOf(body) != "127.0.0.1:4242" {
		t.Fatalf("fetched after AdvertiseMgmtPort(4242): %s", body)
	}
	if _, body, _ := rc.get("/pools/default", DefaultUser, DefaultPassword); !strings.Contains(string(body), ":4242\"") {
		t.Fatalf("/pools/default does not name the port: %s", body)
	}
	if code, _, _ := newREST(t, "http://"+own, nil).get("/pools", DefaultUser, DefaultPassword); code != 200 {
		t.Fatalf("the node's own port answered %d", code)
	}
	n.AdvertiseMgmtPort(0)
	if got := mgmtOf(s.next()); got != own {
		t.Fatalf("after AdvertiseMgmtPort(0): %s; want %s", got, own)
	}
}
