package mockcluster

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// TestHostListensOnlyOnTheGivenAddress starts a cluster on 127.0.0.2 (on
// Linux every 127/8 address is local): the nodes must be reachable there,
// named there by Addrs, ConnString and the management address, and not
// listen on 127.0.0.1.
func TestHostListensOnlyOnTheGivenAddress(t *testing.T) {
	c := newCluster(t, Options{Host: "127.0.0.2", Nodes: 2})
	if cs := c.ConnString(); strings.Contains(cs, "127.0.0.1") || !strings.Contains(cs, "127.0.0.2:") {
		t.Fatalf("ConnString %q does not name only 127.0.0.2", cs)
	}
	for _, n := range c.Nodes() {
		for _, a := range []string{n.Addr(), n.MgmtAddr()} {
			if h, _, _ := net.SplitHostPort(a); h != "127.0.0.2" {
				t.Fatalf("node %d address %q, want host 127.0.0.2", n.ID(), a)
			}
		}
		if nc, err := net.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(mustPort(n.Addr()))); err == nil {
			nc.Close()
			t.Fatalf("node %d also accepts on 127.0.0.1", n.ID())
		}
	}
	b := c.Bucket(DefaultBucket)
	cl := bootstrap(t, c.Node(ownerOf(b, "k")).Addr(), DefaultBucket, nil)
	if r := cl.do(keyReq(cl, b, memdx.NewStore(memdx.OpSet, []byte("k"), []byte("v"), 0, 0))); r.Status != memdx.StatusSuccess {
		t.Fatalf("set on 127.0.0.2: %s", r.Status)
	}
}

func TestHostMustBeAnIPv4Address(t *testing.T) {
	for _, h := range []string{"localhost", "::1", "198.51.100.300"} {
		if c, err := New(Options{Host: h}); err == nil {
			c.Close()
			t.Fatalf("Host %q accepted", h)
		} else if !strings.Contains(err.Error(), h) {
			t.Fatalf("Host %q: error %q does not name it", h, err)
		}
	}
}
