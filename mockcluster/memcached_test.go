package mockcluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"testing"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/vbmap"
)

// newMemcachedCluster starts a cluster with a couchbase bucket "default"
// and a memcached bucket "cache".
func newMemcachedCluster(t *testing.T, o Options) (*Cluster, *Bucket) {
	t.Helper()
	o.Buckets = []BucketOptions{{Name: DefaultBucket, NumVbuckets: 16}, {Name: "cache", Type: MemcachedBucket}}
	c := newCluster(t, o)
	return c, c.Bucket("cache")
}

// memcachedConfig fetches the bucket's config over REST from node id and
// parses it as a client would, "$HOST" being 127.0.0.1.
func memcachedConfig(t *testing.T, c *Cluster, id int, name string) *vbmap.Config {
	t.Helper()
	code, body, _ := newREST(t, "http://"+c.Node(id).MgmtAddr(), nil).get("/pools/default/b/"+name, DefaultUser, DefaultPassword)
	if code != 200 {
		t.Fatalf("b/%s: %d %s", name, code, body)
	}
	cfg, err := vbmap.Parse(body, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// nodeOfServer maps a config's server index to the mock's node id by KV
// port.
func nodeOfServer(t *testing.T, c *Cluster, cfg *vbmap.Config, i int) int {
	t.Helper()
	addr, _ := cfg.ServerKVAddr(i, "", false)
	for _, n := range c.Nodes() {
		if n.Addr() == addr {
			return n.ID()
		}
	}
	t.Fatalf("server %d (%s) is no node", i, addr)
	return -1
}

// A memcached bucket's config has the shape a 7.6 server gives one
// (nodeLocator ketama, bucketType memcached, no vbucket map), and the
// ketama ring a client builds from it places every key on the node the
// mock's own ring (Bucket.NodeForKey, the same vbmap helper) names.
func TestMemcachedBucketConfigAndRouting(t *testing.T) {
	c, b := newMemcachedCluster(t, Options{Nodes: 3})
	if b.Type() != MemcachedBucket || b.NumVbuckets() != 0 || b.NumReplicas() != 0 {
		t.Fatalf("type %v, %d vbuckets, %d replicas", b.Type(), b.NumVbuckets(), b.NumReplicas())
	}
	raw := b.ConfigJSON(0)
	for _, want := range []string{`"nodeLocator":"ketama"`, `"bucketType":"memcached"`, `"bucketCapabilities":["cbhello","nodesExt"]`} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Fatalf("config lacks %s: %s", want, raw)
		}
	}
	for _, absent := range []string{"vBucketServerMap", "collectionsManifestUid", "numVBuckets"} {
		if bytes.Contains(raw, []byte(absent)) {
			t.Fatalf("a memcached config has %s: %s", absent, raw)
		}
	}
	cfg := memcachedConfig(t, c, 1, "cache")
	if cfg.Locator() != vbmap.LocatorKetama || cfg.BucketType() != "memcached" || cfg.NumServers() != 3 || cfg.Ketama() == nil {
		t.Fatalf("locator %v type %q servers %d", cfg.Locator(), cfg.BucketType(), cfg.NumServers())
	}
	var rs vbmap.RouteState
	perNode := map[int]int{}
	for i := range 300 {
		key := []byte("key-" + strconv.Itoa(i))
		s, vb, err := rs.Route(cfg, key, 0)
		if err != nil || vb != 0 {
			t.Fatalf("route %s: %d %d %v", key, s, vb, err)
		}
		node := nodeOfServer(t, c, cfg, s)
		if node != b.NodeForKey(key) {
			t.Fatalf("%s: client routes to node %d, mock says %d", key, node, b.NodeForKey(key))
		}
		perNode[node]++
	}
	if len(perNode) != 3 {
		t.Fatalf("300 keys over %d nodes: %v", len(perNode), perNode)
	}
	// The memcached bucket's config is not served over KV.
	cn := bootstrap(t, c.Node(0).Addr(), "cache", nil)
	if p := cn.do(memdx.NewGetClusterConfig()); p.Status != memdx.StatusKeyNotFound || len(p.Value) != 0 {
		t.Fatalf("GET_CLUSTER_CONFIG on a memcached bucket: %s %q, want KEY_ENOENT", p.Status, p.Value)
	}
	if p := cn.do(memdx.NewGetClusterConfigKnown(1, 1)); p.Status != memdx.StatusKeyNotFound {
		t.Fatalf("GET_CLUSTER_CONFIG with a known version: %s", p.Status)
	}
}

// mcReq addresses a request for key to vbucket 0 of a memcached bucket,
// in the default collection when the client negotiated collections.
func mcReq(c *rawClient, r memdx.Request) memdx.Request {
	r.Vbucket = 0
	r.Collections = c.feats[memdx.FeatureCollections]
	return r
}

// Each node keeps what it is sent (no vbucket ownership): a key lives on
// the node a client stored it on. Mutation tokens carry default_engine's
// constant UUID and seqno 0; values over 1 MiB answer E2BIG; values come
// back inflated to snappy clients.
func TestMemcachedBucketKV(t *testing.T) {
	c, b := newMemcachedCluster(t, Options{Nodes: 3})
	key := "alpha"
	home := b.NodeForKey([]byte(key))
	other := (home + 1) % 3
	cn := bootstrap(t, c.Node(home).Addr(), "cache", append(append([]memdx.HelloFeature(nil), stdFeatures...), memdx.FeatureXattr))

	p := cn.do(mcReq(cn, memdx.NewStore(memdx.OpSet, []byte(key), []byte(`{"v":1}`), 7, 0)))
	if p.Status != memdx.StatusSuccess || len(p.Extras) != 16 {
		t.Fatalf("SET: %s extras %x", p.Status, p.Extras)
	}
	if uuid, seqno := binary.BigEndian.Uint64(p.Extras[0:8]), binary.BigEndian.Uint64(p.Extras[8:16]); uuid != 0xdeadbeef || seqno != 0 {
		t.Fatalf("mutation token %x/%d, want default_engine's deadbeef/0", uuid, seqno)
	}
	if got := cn.do(mcReq(cn, memdx.NewGet([]byte(key)))); got.Status != memdx.StatusSuccess || string(got.Value) != `{"v":1}` || u32(got.Extras) != 7 {
		t.Fatalf("GET: %s %q", got.Status, got.Value)
	}
	if d, ok := b.Get("", "", key); !ok || string(d.Value) != `{"v":1}` || d.Vbucket != 0 {
		t.Fatalf("Bucket.Get: %+v %v", d, ok)
	}
	for _, r := range []memdx.Request{
		memdx.NewConcat(memdx.OpAppend, []byte("text"), []byte("b")),
		memdx.NewCounter(memdx.OpIncrement, []byte("n"), 5, 10, 0),
		memdx.NewTouch([]byte(key), 100),
		memdx.NewGetMeta([]byte(key)),
	} {
		want := memdx.StatusSuccess
		if r.OpCode == memdx.OpAppend {
			want = memdx.StatusNotStored
		}
		if p := cn.do(mcReq(cn, r)); p.Status != want {
			t.Fatalf("%s: %s, want %s", r.OpCode, p.Status, want)
		}
	}
	lock := cn.do(mcReq(cn, memdx.NewGetLocked([]byte(key), 5)))
	if lock.Status != memdx.StatusSuccess {
		t.Fatalf("GET_LOCKED: %s", lock.Status)
	}
	if p := cn.do(mcReq(cn, memdx.NewUnlock([]byte(key), lock.Cas))); p.Status != memdx.StatusSuccess {
		t.Fatalf("UNLOCK_KEY: %s", p.Status)
	}

	// Another node has its own store: the key is not there.
	oc := bootstrap(t, c.Node(other).Addr(), "cache", nil)
	if p := oc.do(mcReq(oc, memdx.NewGet([]byte(key)))); p.Status != memdx.StatusKeyNotFound {
		t.Fatalf("GET on another node: %s, want KEY_ENOENT", p.Status)
	}

	big := bytes.Repeat([]byte("x"), memcachedMaxValue+1)
	if p := cn.do(mcReq(cn, memdx.NewStore(memdx.OpSet, []byte("big"), big, 0, 0))); p.Status != memdx.StatusTooBig {
		t.Fatalf("SET of %d bytes: %s, want E2BIG (1 MiB limit)", len(big), p.Status)
	}
	snappy := memdx.NewStore(memdx.OpSet, []byte("z"), memdx.CompressSnappy(nil, bytes.Repeat([]byte("ab"), 100)), 0, 0)
	snappy.Datatype = memdx.DatatypeSnappy
	if p := cn.do(mcReq(cn, snappy)); p.Status != memdx.StatusSuccess {
		t.Fatalf("snappy SET: %s", p.Status)
	}
	if p := cn.do(mcReq(cn, memdx.NewGet([]byte("z")))); p.Status != memdx.StatusSuccess || p.Datatype.Has(memdx.DatatypeSnappy) || len(p.Value) != 200 {
		t.Fatalf("GET of a snappy value: %s datatype %s, %d bytes, want it inflated", p.Status, p.Datatype, len(p.Value))
	}

	// A DELETE leaves no tombstone, even of a document with system xattrs.
	if p := cn.do(mcReq(cn, memdx.NewSubdocMutation(memdx.OpSubdocDictUpsert, []byte(key), []byte("_sys.a"), []byte("1"), memdx.SubdocPathXattr|memdx.SubdocPathMkdirP, 0, 0))); p.Status != memdx.StatusSuccess {
		t.Fatalf("xattr upsert: %s", p.Status)
	}
	if p := cn.do(mcReq(cn, memdx.NewDelete([]byte(key)))); p.Status != memdx.StatusSuccess {
		t.Fatalf("DELETE: %s", p.Status)
	}
	if _, deleted, ok := b.Xattrs("", "", key); ok || deleted {
		t.Fatal("a memcached bucket kept a tombstone")
	}
}

// What a memcached bucket refuses, answered as kv_engine answers it (see
// memcached.go for the file that decides each).
func TestMemcachedBucketRefusals(t *testing.T) {
	c, b := newMemcachedCluster(t, Options{Nodes: 2})
	key := []byte("k")
	home := b.NodeForKey(key)
	cn := bootstrap(t, c.Node(home).Addr(), "cache", append(append([]memdx.HelloFeature(nil), stdFeatures...), memdx.FeatureXattr))
	if p := cn.do(mcReq(cn, memdx.NewStore(memdx.OpSet, key, []byte(`{"a":1}`), 0, 0))); p.Status != memdx.StatusSuccess {
		t.Fatal(p.Status)
	}

	durable := mcReq(cn, memdx.NewStore(memdx.OpSet, key, []byte("v"), 0, 0))
	durable.Durability = memdx.DurabilityMajority
	delDurable := mcReq(cn, memdx.NewDelete(key))
	delDurable.Durability = memdx.DurabilityMajority
	replicaLookup := mcReq(cn, memdx.NewSubdocLookup(memdx.OpSubdocGet, key, []byte("a"), 0, memdx.SubdocDocReplicaRead))
	otherVb := mcReq(cn, memdx.NewGet(key))
	otherVb.Vbucket = 1
	scan, err := memdx.NewRangeScanCreate(&memdx.RangeScanCreate{Range: &memdx.RangeScanRange{Start: []byte("a"), End: []byte("z")}})
	if err != nil {
		t.Fatal(err)
	}
	scan.Vbucket = 0
	for _, tc := range []struct {
		name string
		req  memdx.Request
		want memdx.Status
	}{
		{"durable SET", durable, memdx.StatusNotSupported},
		{"durable DELETE", delDurable, memdx.StatusNotSupported},
		{"GET_REPLICA", mcReq(cn, memdx.NewGetReplica(key)), memdx.StatusNotSupported},
		{"lookup on a replica", replicaLookup, memdx.StatusNotSupported},
		{"GET on vbucket 1", otherVb, memdx.StatusNotMyVbucket},
		{"RANGE_SCAN_CREATE", scan, memdx.StatusNotSupported},
		{"OBSERVE_SEQNO", memdx.NewObserveSeqno(0, 1), memdx.StatusUnknownCommand},
		{"OBSERVE", memdx.NewObserve([]memdx.ObserveKey{{Vbucket: 0, Key: key}}), memdx.StatusUnknownCommand},
	} {
		p := cn.do(tc.req)
		if p.Status != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, p.Status, tc.want)
		}
		if tc.want == memdx.StatusNotMyVbucket && len(p.Value) != 0 {
			t.Errorf("%s: NOT_MY_VBUCKET carries %q; a memcached bucket's node has no config to send", tc.name, p.Value)
		}
	}
	// The document is unchanged by the refused durable writes.
	if d, ok := b.Get("", "", "k"); !ok || string(d.Value) != `{"a":1}` {
		t.Fatalf("after refused durable writes: %+v %v", d, ok)
	}

	// Collections: only the default one, against the epoch manifest (uid 0).
	r := memdx.NewGet(key)
	r.CollectionID, r.Collections = 8, true
	if p := cn.do(r); p.Status != memdx.StatusUnknownCollection || !bytes.Contains(p.Value, []byte(`"manifest_uid":"0"`)) {
		t.Fatalf("GET in collection 8: %s %s", p.Status, p.Value)
	}
	if p := cn.do(memdx.NewCollectionsGetManifest()); p.Status != memdx.StatusSuccess || !bytes.Contains(p.Value, []byte(`"uid":"0"`)) {
		t.Fatalf("manifest: %s %s", p.Status, p.Value)
	}
	if _, err := b.AddScope("inventory"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("AddScope on a memcached bucket: %v, want ErrInvalid", err)
	}

	// Sub-documents are served: kv_engine runs them in the daemon over
	// default_engine's get and store (daemon/subdocument.cc), with no
	// bucket-type check.
	if p := cn.do(mcReq(cn, memdx.NewSubdocLookup(memdx.OpSubdocGet, key, []byte("a"), 0, 0))); p.Status != memdx.StatusSuccess || string(p.Value) != "1" {
		t.Fatalf("SUBDOC_GET: %s %q", p.Status, p.Value)
	}
	if p := cn.do(mcReq(cn, memdx.NewSubdocMutation(memdx.OpSubdocCounter, key, []byte("a"), []byte("2"), 0, 0, 0))); p.Status != memdx.StatusSuccess || string(p.Value) != "3" {
		t.Fatalf("SUBDOC_COUNTER: %s %q", p.Status, p.Value)
	}

	// The node that does not hold the key still serves the bucket; a
	// node that does not serve the bucket answers NOT_MY_VBUCKET.
	n2, err := c.AddNode()
	if err != nil {
		t.Fatal(err)
	}
	nc := bootstrap(t, n2.Addr(), "cache", nil)
	if p := nc.do(mcReq(nc, memdx.NewGet(key))); p.Status != memdx.StatusNotMyVbucket || len(p.Value) != 0 {
		t.Fatalf("GET on a node not serving the bucket: %s %q", p.Status, p.Value)
	}
}

// A memcached bucket's config changes with the cluster: a node rebalanced
// in joins the ring (nodesExt lists it as soon as it is added, nodes once
// the rebalance is over), a node failed over leaves it and takes its keys
// with it. No cluster-map notification is sent for a memcached bucket; the
// REST stream carries each config.
func TestMemcachedBucketTopology(t *testing.T) {
	c, b := newMemcachedCluster(t, Options{Nodes: 2})
	cn := bootstrap(t, c.Node(0).Addr(), "cache", nil)
	st := newREST(t, "http://"+c.Node(0).MgmtAddr(), nil).openStream("/pools/default/bs/cache", DefaultUser, DefaultPassword)
	st.next()

	n2, err := c.AddNode()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := vbmap.Parse(st.next(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Nodes()) != 3 || cfg.NumServers() != 2 {
		t.Fatalf("after AddNode: %d nodes, %d servers (nodesExt lists the new node, the ring does not)", len(cfg.Nodes()), cfg.NumServers())
	}
	r, err := c.StartRebalance(RebalanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _ = vbmap.Parse(st.next(), "127.0.0.1"); cfg.NumServers() != 2 || cfg.HasForwardMap() {
		t.Fatalf("rebalance start: %d servers, forward map %v", cfg.NumServers(), cfg.HasForwardMap())
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	if cfg, _ = vbmap.Parse(st.next(), "127.0.0.1"); cfg.NumServers() != 3 {
		t.Fatalf("rebalance end: %d servers, want 3", cfg.NumServers())
	}
	if got := b.Servers(); len(got) != 3 || got[2] != n2.ID() {
		t.Fatalf("servers %v", got)
	}

	// A key stored on node 1, then node 1 fails over: the key is gone.
	var key string
	for i := 0; ; i++ {
		key = "k" + strconv.Itoa(i)
		if b.NodeForKey([]byte(key)) == 1 {
			break
		}
	}
	if _, err := b.Set("", "", key, []byte("v"), 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Failover(1); err != nil {
		t.Fatal(err)
	}
	if cfg, _ = vbmap.Parse(st.next(), "127.0.0.1"); cfg.NumServers() != 2 {
		t.Fatalf("after failover: %d servers", cfg.NumServers())
	}
	if b.NodeForKey([]byte(key)) == 1 {
		t.Fatal("the ring still names the failed-over node")
	}
	if _, ok := b.Get("", "", key); ok {
		t.Fatal("a failed-over node's key is still found")
	}

	// No notification was pushed to the connection for any of it.
	if p := cn.do(memdx.NewNoop()); p.Status != memdx.StatusSuccess {
		t.Fatal(p.Status)
	}
	for _, n := range cn.notes {
		if string(n.Key) == "cache" {
			t.Fatalf("a cluster-map notification for the memcached bucket: rev extras %x", n.Extras)
		}
	}
}

// A client that does what memcached:// does against a Couchbase KV port
// (no SELECT_BUCKET) is answered as Couchbase Server answers it: NO_BUCKET
// on data commands once authenticated (kv_engine's no-bucket engine),
// EACCESS before authentication; and memcached's text protocol, which
// kv_engine does not speak, closes the connection once a header's worth
// of it (24 bytes) arrived, whose magic is not binary (a shorter text
// request gets no answer: kv_engine, like the mock, waits for a whole
// header before it judges one; daemon/connection.cc,
// Connection::isPacketAvailable).
func TestMemcachedStyleConnectionToKVPort(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 16}}})
	addr := c.Node(0).Addr()

	authed := dialRaw(t, addr)
	authed.hello(memdx.FeatureXerror)
	if st := authed.authPlain(DefaultUser, DefaultPassword); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	for _, r := range []memdx.Request{
		memdx.NewGet([]byte("k")),
		memdx.NewStore(memdx.OpSet, []byte("k"), []byte("v"), 0, 0),
		memdx.NewDelete([]byte("k")),
		memdx.NewCounter(memdx.OpIncrement, []byte("n"), 1, 0, 0),
	} {
		if p := authed.do(r); p.Status != memdx.StatusNoBucket {
			t.Fatalf("%s without a bucket: %s, want NO_BUCKET", r.OpCode, p.Status)
		}
	}
	if p := authed.do(memdx.NewVersion()); p.Status != memdx.StatusSuccess {
		t.Fatalf("VERSION without a bucket: %s", p.Status)
	}

	anon := dialRaw(t, addr)
	if p := anon.do(memdx.NewGet([]byte("k"))); p.Status != memdx.StatusNoAccess {
		t.Fatalf("GET before authentication: %s, want EACCESS", p.Status)
	}

	text := dialRaw(t, addr)
	text.write([]byte("gets key-one key-two key-three\r\n"))
	if got := text.expectClosed(); len(got) != 0 {
		t.Fatalf("text protocol: %d packets before the close", len(got))
	}
}
