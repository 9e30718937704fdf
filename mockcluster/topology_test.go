package mockcluster

import (
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// The acceptance test for rebalance: with raw memdx requests, the old owner
// answers NOT_MY_VBUCKET with a config body once a vbucket moved, the new
// owner serves it (with the data written before), and the published
// configs carry vBucketMapForward during the rebalance and drop it at the
// end, with increasing revisions.
func TestRebalanceMovesVbucketRaw(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	const key = "moving-key"
	vb := b.VbucketForKey([]byte(key))
	cur := b.VbucketMap()
	oldOwner, newOwner := cur[vb][0], cur[vb][1]

	watcher := bootstrap(t, c.Node(0).Addr(), DefaultBucket, []memdx.HelloFeature{memdx.FeatureDuplex,
		memdx.FeatureClustermapChangeNotification, memdx.FeatureJSON})
	// Plain clients: no notifications, no NMV dedupe, so the NMV carries the
	// config.
	plain := []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureCollections, memdx.FeatureJSON}
	oldCl := bootstrap(t, c.Node(oldOwner).Addr(), DefaultBucket, plain)
	newCl := bootstrap(t, c.Node(newOwner).Addr(), DefaultBucket, plain)
	get := func(cl *rawClient) memdx.Packet { return cl.do(keyReq(cl, b, memdx.NewGet([]byte(key)))) }
	if p := oldCl.do(keyReq(oldCl, b, set(key, "before"))); p.Status != memdx.StatusSuccess {
		t.Fatal(p.Status)
	}
	rev0 := b.Rev()

	// The target swaps active and replica of the key's vbucket only.
	target := b.VbucketMap()
	target[vb] = []int{newOwner, oldOwner}
	r, err := c.StartRebalance(RebalanceOptions{Targets: map[string][][]int{DefaultBucket: target}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartRebalance(RebalanceOptions{}); !errors.Is(err, ErrRebalancing) {
		t.Fatalf("second rebalance: %v", err)
	}
	if r.Remaining() != 1 {
		t.Fatalf("remaining %d, want 1", r.Remaining())
	}
	idx := func(cfg terseConfig, node int) int {
		return slices.Index(cfg.VBucketServerMap.ServerList, "$HOST:"+portOf(c.Node(node).Addr()))
	}
	cfg1 := parseConfig(t, b.ConfigJSON(0))
	if cfg1.Rev <= rev0 || cfg1.VBucketServerMap.VBucketMapForward == nil {
		t.Fatalf("rebalance start: rev %d (was %d), forward map %v", cfg1.Rev, rev0, cfg1.VBucketServerMap.VBucketMapForward != nil)
	}
	if fw := cfg1.VBucketServerMap.VBucketMapForward[vb]; fw[0] != idx(cfg1, newOwner) || fw[1] != idx(cfg1, oldOwner) {
		t.Fatalf("forward chain %v", fw)
	}
	if cur := cfg1.VBucketServerMap.VBucketMap[vb]; cur[0] != idx(cfg1, oldOwner) {
		t.Fatalf("current chain moved before a step: %v", cur)
	}
	// Not moved yet: the old owner serves, the new one does not.
	if p := get(oldCl); p.Status != memdx.StatusSuccess {
		t.Fatalf("old owner before the move: %s", p.Status)
	}
	if p := get(newCl); p.Status != memdx.StatusNotMyVbucket {
		t.Fatalf("new owner before the move: %s", p.Status)
	}

	if n, err := r.Step(1); n != 1 || err != nil {
		t.Fatalf("step moved %d: %v", n, err)
	}
	p := get(oldCl)
	if p.Status != memdx.StatusNotMyVbucket || len(p.Value) == 0 {
		t.Fatalf("old owner after the move: %s with %d bytes", p.Status, len(p.Value))
	}
	cfg2 := parseConfig(t, p.Value)
	if cfg2.Rev <= cfg1.Rev || cfg2.VBucketServerMap.VBucketMapForward == nil {
		t.Fatalf("NMV config rev %d (start %d), forward %v", cfg2.Rev, cfg1.Rev, cfg2.VBucketServerMap.VBucketMapForward != nil)
	}
	if got := cfg2.VBucketServerMap.VBucketMap[vb][0]; got != idx(cfg2, newOwner) {
		t.Fatalf("NMV config names server %d as active, want %d", got, idx(cfg2, newOwner))
	}
	if p := get(newCl); p.Status != memdx.StatusSuccess || string(p.Value) != "before" {
		t.Fatalf("new owner after the move: %s %q", p.Status, p.Value)
	}
	if p := newCl.do(keyReq(newCl, b, set(key, "after"))); p.Status != memdx.StatusSuccess {
		t.Fatalf("write on the new owner: %s", p.Status)
	}
	if p := oldCl.do(keyReq(oldCl, b, memdx.NewGetReplica([]byte(key)))); p.Status != memdx.StatusSuccess || string(p.Value) != "after" {
		t.Fatalf("replica read on the old owner: %s %q", p.Status, p.Value)
	}

	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Done():
	default:
		t.Fatal("Done not closed after Finish")
	}
	cfg3 := parseConfig(t, b.ConfigJSON(0))
	if cfg3.Rev <= cfg2.Rev || cfg3.VBucketServerMap.VBucketMapForward != nil {
		t.Fatalf("finish: rev %d (step %d), forward map still there: %v", cfg3.Rev, cfg2.Rev, cfg3.VBucketServerMap.VBucketMapForward != nil)
	}
	if _, err := r.Step(1); err == nil {
		t.Fatal("Step after Finish succeeded")
	}

	// The watcher saw the three configs in order.
	var revs []int64
	var fwd []bool
	for _, n := range nextPackets(t, watcher) {
		cn, err := memdx.DecodeClustermapNotification(&n)
		if err != nil {
			t.Fatal(err)
		}
		cfg := parseConfig(t, cn.Config)
		revs = append(revs, cfg.Rev)
		fwd = append(fwd, cfg.VBucketServerMap.VBucketMapForward != nil)
	}
	// Rebalance start and finish also publish the cluster config, which a
	// bucket connection does not get; so the bucket revisions are exactly
	// these three.
	if !slices.Equal(revs, []int64{cfg1.Rev, cfg2.Rev, cfg3.Rev}) || !slices.Equal(fwd, []bool{true, true, false}) {
		t.Fatalf("notified revisions %v forward %v, want %v/%v/%v", revs, fwd, cfg1.Rev, cfg2.Rev, cfg3.Rev)
	}
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// Adding a node and rebalancing at a background pace spreads the vbuckets
// over four nodes; every document stays readable from its new owner.
func TestAddNodeAndPacedRebalance(t *testing.T) {
	c := newCluster(t, Options{Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 64}}})
	b := c.Bucket(DefaultBucket)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, k := range keys {
		if _, err := b.Set("", "", k, []byte("v-"+k), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	n, err := c.AddNode()
	if err != nil {
		t.Fatal(err)
	}
	if n.ID() != 3 || len(c.Addrs()) != 4 {
		t.Fatalf("new node %d, %d addrs", n.ID(), len(c.Addrs()))
	}
	cfg := parseConfig(t, b.ConfigJSON(0))
	if len(cfg.NodesExt) != 4 || len(cfg.VBucketServerMap.ServerList) != 3 || len(cfg.Nodes) != 3 {
		t.Fatalf("after AddNode: %d nodesExt, %d servers", len(cfg.NodesExt), len(cfg.VBucketServerMap.ServerList))
	}
	r, err := c.StartRebalance(RebalanceOptions{Pace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("paced rebalance did not finish; %d left", r.Remaining())
	}
	cfg = parseConfig(t, b.ConfigJSON(0))
	if len(cfg.VBucketServerMap.ServerList) != 4 || cfg.VBucketServerMap.VBucketMapForward != nil {
		t.Fatalf("after rebalance: servers %v", cfg.VBucketServerMap.ServerList)
	}
	owned := map[int]int{}
	for _, ch := range b.VbucketMap() {
		owned[ch[0]]++
	}
	if owned[3] != 16 {
		t.Fatalf("new node active for %d vbuckets, want 16", owned[3])
	}
	for _, k := range keys {
		cl := bootstrap(t, c.Node(ownerOf(b, k)).Addr(), DefaultBucket, nil)
		if p := cl.do(keyReq(cl, b, memdx.NewGet([]byte(k)))); p.Status != memdx.StatusSuccess || string(p.Value) != "v-"+k {
			t.Fatalf("%s after rebalance: %s %q", k, p.Status, p.Value)
		}
	}
}

func TestRemoveNode(t *testing.T) {
	c := newCluster(t, Options{Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 32}}})
	b := c.Bucket(DefaultBucket)
	if _, err := b.Set("", "", "k", []byte("v"), 0, 0); err != nil {
		t.Fatal(err)
	}
	addr := c.Node(1).Addr()
	cl := bootstrap(t, addr, DefaultBucket, nil)
	if err := c.RemoveNode(1); err != nil {
		t.Fatal(err)
	}
	cl.expectClosed()
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("removed node still accepts connections")
	}
	if c.Node(1) != nil || len(c.Nodes()) != 2 {
		t.Fatal("removed node still listed")
	}
	cfg := parseConfig(t, b.ConfigJSON(0))
	if len(cfg.VBucketServerMap.ServerList) != 2 || len(cfg.NodesExt) != 2 {
		t.Fatalf("config after removal: %v", cfg.VBucketServerMap.ServerList)
	}
	for _, ch := range b.VbucketMap() {
		if slices.Contains(ch, 1) {
			t.Fatalf("chain %v still names node 1", ch)
		}
	}
	o := bootstrap(t, c.Node(ownerOf(b, "k")).Addr(), DefaultBucket, nil)
	if p := o.do(keyReq(o, b, memdx.NewGet([]byte("k")))); string(p.Value) != "v" {
		t.Fatalf("data after removal: %s", p.Status)
	}
	if err := c.RemoveNode(1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removing twice: %v", err)
	}
}

func TestFailover(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	const key = "fo"
	vb := b.VbucketForKey([]byte(key))
	chain := b.VbucketMap()[vb]
	failed, promoted := chain[0], chain[1]
	if _, err := b.Set("", "", key, []byte("v"), 0, 0); err != nil {
		t.Fatal(err)
	}
	uuid := b.VbucketUUID(vb)
	fcl := bootstrap(t, c.Node(failed).Addr(), DefaultBucket, nil)
	rev := b.Rev()
	if err := c.Failover(failed); err != nil {
		t.Fatal(err)
	}
	if b.Rev() <= rev {
		t.Fatal("failover did not publish")
	}
	if got := b.VbucketMap()[vb]; got[0] != promoted || got[1] != -1 {
		t.Fatalf("chain after failover %v, want [%d -1]", got, promoted)
	}
	if b.VbucketUUID(vb) == uuid {
		t.Fatal("promoted vbucket kept its uuid")
	}
	cfg := parseConfig(t, b.ConfigJSON(promoted))
	if len(cfg.VBucketServerMap.ServerList) != 2 || len(cfg.NodesExt) != 2 {
		t.Fatalf("config after failover lists %v", cfg.VBucketServerMap.ServerList)
	}
	// The failed-over node still runs and answers NMV.
	if p := fcl.do(keyReq(fcl, b, memdx.NewGet([]byte(key)))); p.Status != memdx.StatusNotMyVbucket {
		t.Fatalf("failed-over node: %s", p.Status)
	}
	pcl := bootstrap(t, c.Node(promoted).Addr(), DefaultBucket, []memdx.HelloFeature{memdx.FeatureMutationSeqno, memdx.FeatureCollections})
	if p := pcl.do(keyReq(pcl, b, memdx.NewGet([]byte(key)))); p.Status != memdx.StatusSuccess || string(p.Value) != "v" {
		t.Fatalf("promoted replica: %s %q", p.Status, p.Value)
	}
	p := pcl.do(keyReq(pcl, b, set(key, "w")))
	if tok, _, _ := memdx.DecodeMutationToken(&p); tok.VbUUID != b.VbucketUUID(vb) {
		t.Fatalf("mutation token uuid %x, want the new %x", tok.VbUUID, b.VbucketUUID(vb))
	}
	// A rebalance that lists the node again adds it back.
	r, err := c.StartRebalance(RebalanceOptions{Nodes: []int{0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	if got := parseConfig(t, b.ConfigJSON(0)); len(got.VBucketServerMap.ServerList) != 3 {
		t.Fatalf("after add-back: %v", got.VBucketServerMap.ServerList)
	}
}

func TestStopRestartNode(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	const key = "sr"
	owner := c.Node(ownerOf(b, key))
	cl := bootstrap(t, owner.Addr(), DefaultBucket, nil)
	if p := cl.do(keyReq(cl, b, set(key, "v"))); p.Status != memdx.StatusSuccess {
		t.Fatal(p.Status)
	}
	rev := b.Rev()
	owner.Stop()
	if owner.Running() {
		t.Fatal("Running after Stop")
	}
	cl.expectClosed()
	if _, err := net.DialTimeout("tcp", owner.Addr(), time.Second); err == nil {
		t.Fatal("stopped node accepts connections")
	}
	if b.Rev() != rev {
		t.Fatal("Stop changed the config")
	}
	if len(c.Addrs()) != 2 {
		t.Fatalf("Addrs lists %d nodes", len(c.Addrs()))
	}
	if err := owner.Restart(); err != nil {
		t.Fatal(err)
	}
	cl = bootstrap(t, owner.Addr(), DefaultBucket, nil)
	if p := cl.do(keyReq(cl, b, memdx.NewGet([]byte(key)))); p.Status != memdx.StatusSuccess || string(p.Value) != "v" {
		t.Fatalf("after restart: %s %q", p.Status, p.Value)
	}
}

func TestDropConnections(t *testing.T) {
	c := newCluster(t, Options{})
	var cls []*rawClient
	for _, n := range c.Nodes() {
		cls = append(cls, bootstrap(t, n.Addr(), DefaultBucket, nil))
	}
	c.Node(0).DropConnections()
	cls[0].expectClosed()
	if p := cls[1].do(memdx.NewNoop()); p.Status != memdx.StatusSuccess {
		t.Fatal("node 1 lost its connection")
	}
	c.DropConnections()
	cls[1].expectClosed()
	cls[2].expectClosed()
	for _, n := range c.Nodes() {
		if n.NumConnections() != 0 {
			waitFor(t, "connections to be forgotten", func() bool { return n.NumConnections() == 0 })
		}
		cl := bootstrap(t, n.Addr(), DefaultBucket, nil)
		if p := cl.do(memdx.NewNoop()); p.Status != memdx.StatusSuccess {
			t.Fatal("node does not accept new connections")
		}
	}
}

func TestBucketAndUserManagement(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	if _, err := c.AddBucket(BucketOptions{Name: DefaultBucket}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate bucket: %v", err)
	}
	nb, err := c.AddBucket(BucketOptions{Name: "small", NumVbuckets: 8, NumReplicas: NoReplicas})
	if err != nil || nb.NumVbuckets() != 8 || nb.NumReplicas() != 0 {
		t.Fatalf("AddBucket: %v", err)
	}
	if err := c.AddUser(User{Name: "u", Password: "p", Buckets: []string{"small"}}); err != nil {
		t.Fatal(err)
	}
	cl := dialRaw(t, c.Node(0).Addr())
	if st := cl.authPlain("u", "p"); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	if st := cl.selectBucket("small"); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	if p := cl.do(memdx.Request{OpCode: memdx.OpListBuckets}); string(p.Value) != "small" {
		t.Fatalf("LIST_BUCKETS %q", p.Value)
	}
	if err := c.RemoveBucket("small"); err != nil {
		t.Fatal(err)
	}
	cl.expectClosed()
	if err := c.RemoveUser("u"); err != nil {
		t.Fatal(err)
	}
	cl = dialRaw(t, c.Node(0).Addr())
	if st := cl.authPlain("u", "p"); st != memdx.StatusAuthError {
		t.Fatalf("removed user: %s", st)
	}
}

func TestTLS(t *testing.T) {
	c := newCluster(t, Options{TLS: true, Nodes: 2})
	if got := c.ConnString(); got[:13] != "couchbases://" {
		t.Fatalf("conn string %q", got)
	}
	cfg := parseConfig(t, c.Bucket(DefaultBucket).ConfigJSON(0))
	if cfg.NodesExt[0].Services["kvSSL"] != mustPort(c.Node(0).TLSAddr()) {
		t.Fatalf("kvSSL %v", cfg.NodesExt[0].Services)
	}
	if c.CACertPEM() == nil {
		t.Fatal("no CA PEM")
	}
	tc := dialTLS(t, c.Node(0).TLSAddr(), tlsConfig(c))
	sc, _ := memdx.NewScramClient(memdx.MechScramSHA512, DefaultUser, DefaultPassword, nil)
	p := tc.do(memdx.NewSASLAuth(memdx.MechScramSHA512, sc.ClientFirst()))
	final, err := sc.ClientFinal(p.Value)
	if err != nil {
		t.Fatal(err)
	}
	if p := tc.do(memdx.NewSASLStep(memdx.MechScramSHA512, final)); p.Status != memdx.StatusSuccess {
		t.Fatalf("SCRAM over TLS: %s", p.Status)
	}
}
