package reftest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/mockcluster"
)

var (
	hashRE    = regexp.MustCompile(`^(\S+): \[vBucket=(\d+), Index=(\d+)\] Server: (\S+)$`)
	replicaRE = regexp.MustCompile(`^Replica #0: Index=(\d+), Host=(\S+)$`)
)

// lcbRoute is where cbc hash says a key goes.
type lcbRoute struct {
	vb              uint16
	active, replica string
}

// cbc hash routes 1000 keys to the vbucket, active node and replica kvwire
// routes them to (client.Route), which are those of the mock's map.
func TestLcbHashMatchesKvwireRouting(t *testing.T) {
	lcb := findLcbTools(t)
	c, cl := lcbCluster(t, mockcluster.Options{})
	b := c.Bucket(mockcluster.DefaultBucket)
	tg := newLcbTarget(t, c, false)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("lcb-hash-%d-%x", i, i*7919)
	}
	out := lcb.cbc(t, tg, append([]string{"hash"}, keys...)...)

	got := map[string]lcbRoute{}
	var last string
	for _, line := range strings.Split(out.stderr, "\n") {
		if m := hashRE.FindStringSubmatch(line); m != nil {
			vb, _ := strconv.Atoi(m[2])
			last = m[1]
			got[last] = lcbRoute{vb: uint16(vb), active: m[4]}
		} else if m := replicaRE.FindStringSubmatch(line); m != nil && last != "" {
			r := got[last]
			r.replica = m[2]
			got[last] = r
		}
	}
	if len(got) != len(keys) {
		t.Fatalf("cbc hash printed routes for %d keys, want %d:\n%s", len(got), len(keys), out.stderr)
	}
	nodes := map[string]bool{}
	for _, k := range keys {
		l := got[k]
		kv := cl.Route(k)
		if len(kv.Replicas) != 1 {
			t.Fatalf("kvwire routes %q to replicas %v, want one", k, kv.Replicas)
		}
		if l.vb != kv.Vbucket || l.active != kv.Active || l.replica != kv.Replicas[0] {
			t.Fatalf("%q: cbc hash says vbucket %d on %s, replica %s; kvwire says vbucket %d on %s, replica %s",
				k, l.vb, l.active, l.replica, kv.Vbucket, kv.Active, kv.Replicas[0])
		}
		chain := b.VbucketMap()[b.VbucketForKey([]byte(k))]
		if mock := c.Node(chain[0]).Addr(); b.VbucketForKey([]byte(k)) != l.vb || mock != l.active {
			t.Fatalf("%q: the mock holds vbucket %d on %s; cbc hash says %d on %s", k, b.VbucketForKey([]byte(k)), mock, l.vb, l.active)
		}
		nodes[l.active] = true
	}
	if len(nodes) != len(c.Nodes()) {
		t.Fatalf("the keys landed on %d nodes of %d", len(nodes), len(c.Nodes()))
	}
}
