package mockcluster

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestKVPortNumbersTheNodes: with Options.KVPort the nodes listen for KV on
// it and the ports after it, the configs say so, and a node added later
// takes the next one.
func TestKVPortNumbersTheNodes(t *testing.T) {
	// Two ports free now (on 127.0.0.3, so that no other test's ephemeral
	// port takes them in between).
	var base int
	for p := 20000 + (time.Now().Nanosecond()/1000)%20000; ; p += 2 {
		a, errA := net.Listen("tcp4", "127.0.0.3:"+strconv.Itoa(p))
		b, errB := net.Listen("tcp4", "127.0.0.3:"+strconv.Itoa(p+1))
		if errA == nil {
			a.Close()
		}
		if errB == nil {
			b.Close()
		}
		if errA == nil && errB == nil {
			base = p
			break
		}
	}
	c := newCluster(t, Options{Host: "127.0.0.3", Nodes: 1, KVPort: base})
	if got := c.Node(0).Addr(); got != "127.0.0.3:"+strconv.Itoa(base) {
		t.Fatalf("node 0 at %s, want port %d", got, base)
	}
	n, err := c.AddNode()
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Addr(); got != "127.0.0.3:"+strconv.Itoa(base+1) {
		t.Fatalf("added node at %s, want port %d", got, base+1)
	}
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	if r := cl.do(memdx.NewGetClusterConfig()); !strings.Contains(string(r.Value), `"kv":`+strconv.Itoa(base+1)) {
		t.Errorf("config does not list the added node's port %d: %s", base+1, r.Value)
	}
	if _, err := New(Options{KVPort: 65535, Nodes: 2}); err == nil || !strings.Contains(err.Error(), "KVPort 65535") {
		t.Errorf("KVPort past 65535 for the second node: %v", err)
	}
}
