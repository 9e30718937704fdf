package reftest

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10"
	"github.com/couchbase/gocbcore/v10/memd"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/vbmap"
)

// newHTTPAgent bootstraps a gocbcore agent for bucket from the mock's REST
// ports only (no KV seed): gocbcore streams /pools/default/bs/<bucket>.
func newHTTPAgent(t *testing.T, c *mockcluster.Cluster, bucket string) *gocbcore.Agent {
	t.Helper()
	var cfg gocbcore.AgentConfig
	cfg.SeedConfig.HTTPAddrs = c.MgmtAddrs()
	cfg.BucketName = bucket
	cfg.UserAgent = "kvwire-reftest"
	cfg.SecurityConfig.Auth = gocbcore.PasswordAuthProvider{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword}
	cfg.SecurityConfig.AuthMechanisms = []gocbcore.AuthMechanism{gocbcore.ScramSha512AuthMechanism}
	cfg.IoConfig.UseMutationTokens = true
	cfg.ConfigPollerConfig.CccpPollPeriod = time.Hour
	agent, err := gocbcore.CreateAgent(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Close() })
	ready := make(chan error, 1)
	if _, err := agent.WaitUntilReady(time.Now().Add(opTimeout), gocbcore.WaitUntilReadyOptions{
		ServiceTypes: []gocbcore.ServiceType{gocbcore.MemdService},
	}, func(_ *gocbcore.WaitUntilReadyResult, err error) { ready <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-ready; err != nil {
		t.Fatalf("WaitUntilReady over HTTP: %v", err)
	}
	return agent
}

// gocbcore bootstraps a couchbase bucket from the mock's REST ports alone.
func TestGocbcoreHTTPBootstrap(t *testing.T) {
	c, err := mockcluster.New(mockcluster.Options{Buckets: []mockcluster.BucketOptions{{Name: "default", NumVbuckets: 64}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	agent := newHTTPAgent(t, c, "default")
	key := []byte("over-http")
	if _, err := call(t, func(cb func(*gocbcore.StoreResult, error)) (gocbcore.PendingOp, error) {
		return agent.Set(gocbcore.SetOptions{Key: key, Value: []byte("v"), Deadline: deadline()}, cb)
	}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if d, ok := c.Bucket("default").Get("", "", string(key)); !ok || string(d.Value) != "v" {
		t.Fatalf("stored %+v %v", d, ok)
	}
}

// gocbcore uses a memcached bucket of the mock: it bootstraps over HTTP,
// stores and reads keys, refuses what memcached buckets do not serve, and
// learns a rebalance's config from the HTTP stream alone (a memcached
// bucket has no CCCP and no notifications). It places keys by hashing
// "couchbase://host:port" (its endpoint addresses), not libcouchbase's
// "host:port": this test pins which node each key reaches, so that the
// divergence vbmap's doc states is checked against gocbcore itself.
func TestGocbcoreMemcachedBucket(t *testing.T) {
	c, err := mockcluster.New(mockcluster.Options{Buckets: []mockcluster.BucketOptions{
		{Name: "default", NumVbuckets: 16}, {Name: "cache", Type: mockcluster.MemcachedBucket}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b := c.Bucket("cache")
	agent := newHTTPAgent(t, c, "cache")

	// gocbcore's ring: the bucket's servers as "couchbase://host:port",
	// sorted (newKetamaContinuum sorts them), the ring's index then used as
	// an index into the servers in config order.
	var prefixed []string
	for _, id := range b.Servers() {
		prefixed = append(prefixed, "couchbase://"+c.Node(id).Addr())
	}
	slices.Sort(prefixed)
	theirs, err := vbmap.NewKetama(prefixed)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := 0
	const keys = 40
	for i := range keys {
		key := "mc-" + strconv.Itoa(i)
		before := setsPerNode(c)
		if _, err := call(t, func(cb func(*gocbcore.StoreResult, error)) (gocbcore.PendingOp, error) {
			return agent.Set(gocbcore.SetOptions{Key: []byte(key), Value: []byte(key), Deadline: deadline()}, cb)
		}); err != nil {
			t.Fatalf("Set %s: %v", key, err)
		}
		got := nodeThatGrew(t, before, setsPerNode(c))
		if want := b.Servers()[theirs.Server([]byte(key))]; got != want {
			t.Fatalf("%s went to node %d; a ring over couchbase://host:port names node %d", key, got, want)
		}
		if got != b.NodeForKey([]byte(key)) {
			elsewhere++
		}
		r, err := call(t, func(cb func(*gocbcore.GetResult, error)) (gocbcore.PendingOp, error) {
			return agent.Get(gocbcore.GetOptions{Key: []byte(key), Deadline: deadline()}, cb)
		})
		if err != nil || string(r.Value) != key {
			t.Fatalf("Get %s: %q %v", key, r.Value, err)
		}
	}
	t.Logf("gocbcore placed %d of %d keys on another node than libcouchbase's hashing would", elsewhere, keys)

	// A durable write is refused by the server as a memcached bucket's
	// engine refuses it.
	_, err = call(t, func(cb func(*gocbcore.StoreResult, error)) (gocbcore.PendingOp, error) {
		return agent.Set(gocbcore.SetOptions{Key: []byte("d"), Value: []byte("v"), DurabilityLevel: memd.DurabilityLevelMajority, Deadline: deadline()}, cb)
	})
	if err == nil {
		t.Fatal("a durable write to a memcached bucket succeeded")
	}

	// A node rebalanced in reaches gocbcore only through the HTTP stream.
	if _, err := c.AddNode(); err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRebalance(mockcluster.RebalanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	deadlineAt := time.Now().Add(opTimeout)
	for {
		snap, err := agent.ConfigSnapshot()
		if err == nil && snap.RevID() == b.Rev() {
			if n, _ := snap.NumServers(); n != 4 {
				t.Fatalf("gocbcore's config after the rebalance has %d servers, want 4", n)
			}
			break
		}
		if time.Now().After(deadlineAt) {
			t.Fatalf("gocbcore did not see rev %d through the HTTP stream", b.Rev())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// setsPerNode counts the SET requests each node received.
func setsPerNode(c *mockcluster.Cluster) map[int]uint64 {
	out := map[int]uint64{}
	for _, n := range c.Nodes() {
		out[n.ID()] = n.RequestCount(memdx.OpSet)
	}
	return out
}

// nodeThatGrew returns the one node whose count grew between before and
// after.
func nodeThatGrew(t *testing.T, before, after map[int]uint64) int {
	t.Helper()
	found := -1
	for id, n := range after {
		if n != before[id] {
			if found >= 0 {
				t.Fatalf("nodes %d and %d both received a SET", found, id)
			}
			found = id
		}
	}
	if found < 0 {
		t.Fatal("no node received the SET")
	}
	return found
}
