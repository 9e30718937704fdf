package mockcluster

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// A node that stops, or closes connections (DropConnections, RemoveUser,
// RemoveBucket), applies nothing more from them once the call returns, even
// requests it had already read: a client pipelined many SETs, the node is
// slowed down while applying them, and the call comes part way through.
// Whatever was applied when it returned is all that is ever applied
// (Cluster.Close waits for every connection goroutine to end).
func TestClosedConnectionAppliesNothingMore(t *testing.T) {
	const bucket, userName, password = "b", "u", "pw"
	for _, tc := range []struct {
		name string
		act  func(c *Cluster, n *Node) error
	}{
		{"Node.Stop", func(_ *Cluster, n *Node) error { n.Stop(); return nil }},
		{"Node.DropConnections", func(_ *Cluster, n *Node) error { n.DropConnections(); return nil }},
		{"Cluster.DropConnections", func(c *Cluster, _ *Node) error { c.DropConnections(); return nil }},
		{"Cluster.RemoveUser", func(c *Cluster, _ *Node) error { return c.RemoveUser(userName) }},
		{"Cluster.RemoveBucket", func(c *Cluster, _ *Node) error { return c.RemoveBucket(bucket) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, Options{Nodes: 1,
				Buckets: []BucketOptions{{Name: bucket, NumVbuckets: 4}},
				Users:   []User{{Name: userName, Password: password, Buckets: []string{bucket}}}})
			b := c.Bucket(bucket)
			n := c.Node(0)
			cl := dialRaw(t, n.Addr())
			cl.hello(stdFeatures...)
			if st := cl.authPlain(userName, password); st != memdx.StatusSuccess {
				t.Fatalf("auth: %s", st)
			}
			if st := cl.selectBucket(bucket); st != memdx.StatusSuccess {
				t.Fatalf("select bucket: %s", st)
			}

			// Each SET takes 2 ms to apply: the node is still working
			// through the pipeline when the test acts.
			var applying atomic.Int64
			ctl := c.Control(Match{OpCodes: []memdx.OpCode{memdx.OpSet}}, 0, func(*Request) (Action, bool) {
				applying.Add(1)
				time.Sleep(2 * time.Millisecond)
				return Action{}, false
			})
			defer ctl.Remove()
			const total = 400
			keys := make([]string, total)
			var buf []byte
			for i := range keys {
				keys[i] = fmt.Sprintf("k%d", i)
				r := keyReq(cl, b, set(keys[i], "v"))
				buf, _ = r.AppendTo(buf, uint32(i+100))
			}
			cl.write(buf)
			waitFor(t, "the node to apply some of the SETs", func() bool { return applying.Load() >= 5 })
			applied := func() (sum uint64) {
				for _, k := range keys {
					sum += b.MutationCount("", "", k)
				}
				return sum
			}

			if err := tc.act(c, n); err != nil {
				t.Fatal(err)
			}
			atReturn := applied()
			c.Close() // waits for the connection goroutines
			after := applied()
			if after != atReturn {
				t.Errorf("%d SETs were applied when %s returned, %d in the end: the closed connection went on applying requests",
					atReturn, tc.name, after)
			}
			if atReturn == total {
				t.Fatalf("all %d SETs were applied before %s returned: the test did not catch the node mid-pipeline", total, tc.name)
			}
		})
	}
}

// Stopping and restarting a node and dropping connections publish no
// config (the package doc says so): only topology changes do.
func TestStopRestartDropPublishNothing(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	cl := bootstrap(t, c.Node(1).Addr(), DefaultBucket, nil)
	rev := b.Rev()
	n := c.Node(0)
	n.Stop()
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	n.DropConnections()
	c.DropConnections()
	if got := b.Rev(); got != rev {
		t.Fatalf("bucket revision %d -> %d after Stop, Restart and DropConnections", rev, got)
	}
	if !slices.Contains(b.Servers(), 0) {
		t.Fatal("the configs no longer name the stopped and restarted node")
	}
	if got := cl.expectClosed(); len(got) != 0 {
		t.Fatalf("the dropped connection got %d packets (a config notification?) before closing", len(got))
	}
	if err := c.Failover(0); err != nil {
		t.Fatal(err)
	}
	if got := b.Rev(); got <= rev {
		t.Fatalf("bucket revision %d -> %d after Failover", rev, got)
	}
}
