package mockcluster

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/internal/conformance"
	"github.com/kvwire/kvwire/memdx"
)

func TestHelloEchoesSupportedSubsetInOrder(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := dialRaw(t, c.Node(0).Addr())
	got := cl.hello(memdx.FeatureCollections, memdx.FeatureTLS, memdx.FeatureXerror, memdx.FeatureXattr,
		memdx.FeatureSelectBucket, memdx.FeatureJSON, memdx.FeatureSnappy, memdx.FeatureAltRequests,
		memdx.FeatureSyncReplication, memdx.FeatureUnorderedExecution, memdx.FeatureDuplex,
		memdx.FeatureClustermapChangeNotificationBrief, memdx.FeatureClustermapChangeNotification,
		memdx.FeatureDedupeNotMyVbucketClustermap, memdx.FeatureGetClusterConfigWithKnownVersion,
		memdx.FeatureTracing, memdx.FeatureSubdocReplicaRead, memdx.HelloFeature(0x7777), memdx.FeatureXerror)
	want := []memdx.HelloFeature{memdx.FeatureXattr, memdx.FeatureXerror, memdx.FeatureSelectBucket, memdx.FeatureSnappy,
		memdx.FeatureJSON, memdx.FeatureDuplex,
		memdx.FeatureUnorderedExecution, memdx.FeatureTracing, memdx.FeatureAltRequests, memdx.FeatureSyncReplication,
		memdx.FeatureCollections, memdx.FeatureSubdocReplicaRead, memdx.FeatureGetClusterConfigWithKnownVersion,
		memdx.FeatureDedupeNotMyVbucketClustermap, memdx.FeatureClustermapChangeNotificationBrief}
	// Brief and full notifications both asked for: only the brief one.
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("granted %v\nwant    %v", got, want)
	}
	// A second HELLO replaces the first one's features.
	if got := cl.hello(memdx.FeatureJSON); !reflect.DeepEqual(got, []memdx.HelloFeature{memdx.FeatureJSON}) {
		t.Fatalf("second HELLO granted %v", got)
	}
}

func TestHelloRejectsInvalidCombinations(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, DisabledFeatures: []memdx.HelloFeature{memdx.FeatureCollections}})
	cl := dialRaw(t, c.Node(0).Addr())
	for _, fs := range [][]memdx.HelloFeature{
		{memdx.FeatureClustermapChangeNotification},
		{memdx.FeatureClustermapChangeNotificationBrief},
	} {
		if p := cl.do(memdx.NewHello(nil, fs)); p.Status != memdx.StatusInvalidArgs {
			t.Errorf("HELLO %v: %s, want EINVAL", fs, p.Status)
		}
	}
	if got := cl.hello(memdx.FeatureCollections, memdx.FeatureJSON); len(got) != 1 || got[0] != memdx.FeatureJSON {
		t.Fatalf("disabled feature granted: %v", got)
	}
	odd := memdx.NewHello(nil, nil)
	odd.Value = []byte{0}
	if p := cl.do(odd); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("odd HELLO value: %s", p.Status)
	}
}

func TestGetErrorMapV1V2(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := dialRaw(t, c.Node(0).Addr())
	type entry struct {
		Name  string          `json:"name"`
		Desc  string          `json:"desc"`
		Attrs []string        `json:"attrs"`
		Retry json.RawMessage `json:"retry"`
	}
	type emap struct {
		Version  int              `json:"version"`
		Revision int              `json:"revision"`
		Errors   map[string]entry `json:"errors"`
	}
	fetch := func(v uint16) emap {
		p := cl.do(memdx.NewGetErrorMap(v))
		if p.Status != memdx.StatusSuccess {
			t.Fatalf("GET_ERROR_MAP %d: %s", v, p.Status)
		}
		var m emap
		if err := json.Unmarshal(p.Value, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	v2, v1, v3 := fetch(2), fetch(1), fetch(3)
	if v2.Version != 2 || v2.Revision != ErrorMapRevision || v3.Version != 2 {
		t.Fatalf("v2 map: version %d revision %d; v3 request got version %d", v2.Version, v2.Revision, v3.Version)
	}
	if v1.Version != 1 || v1.Revision != ErrorMapRevision+4 {
		t.Fatalf("v1 map: version %d revision %d", v1.Version, v1.Revision)
	}
	for key := range v2.Errors {
		if key != strings.ToLower(key) || strings.HasPrefix(key, "0") && key != "0" {
			t.Errorf("key %q is not unpadded lowercase hex", key)
		}
	}
	retry, ok := v2.Errors["7ff0"]
	if !ok || !reflect.DeepEqual(retry.Attrs, []string{"temp", "retry-later", "auto-retry"}) || len(retry.Retry) == 0 {
		t.Fatalf("7ff0 in v2: %+v", retry)
	}
	var spec RetrySpec
	if err := json.Unmarshal(retry.Retry, &spec); err != nil || spec.Strategy != "constant" || spec.Interval != 10 {
		t.Fatalf("7ff0 retry spec %s: %v", retry.Retry, err)
	}
	if nr := v2.Errors["7ff1"]; contains(nr.Attrs, "retry-now") || contains(nr.Attrs, "retry-later") || contains(nr.Attrs, "auto-retry") || nr.Retry != nil {
		t.Fatalf("7ff1 has retry attributes: %+v", nr)
	}
	// v1 keeps only the 16 v1 attributes.
	if a := v1.Errors["7ff0"].Attrs; !reflect.DeepEqual(a, []string{"temp", "retry-later"}) {
		t.Fatalf("7ff0 in v1: %v", a)
	}
	if a := v1.Errors["c"].Attrs; !reflect.DeepEqual(a, []string{"temp", "retry-later"}) {
		t.Fatalf("EWOULD_THROTTLE in v1 kept rate-limit: %v", a)
	}
	if p := cl.do(memdx.NewGetErrorMap(0)); p.Status != memdx.StatusKeyNotFound {
		t.Fatalf("version 0: %s", p.Status)
	}
}

// The mock's table agrees with kv_engine's current map on every status
// both name (names, descriptions and attributes), and its v1 derivation
// agrees with kv_engine's.
func TestErrorMapMatchesKVEngine(t *testing.T) {
	for _, tc := range []struct {
		file    string
		version uint16
	}{{"kv_engine_error_map_v2.json", 2}, {"kv_engine_error_map_v1_derived_from_current_v2.json", 1}} {
		raw := conformance.Read(t, "errmap/"+tc.file)
		type entry struct {
			Name  string   `json:"name"`
			Desc  string   `json:"desc"`
			Attrs []string `json:"attrs"`
		}
		var real, mine struct {
			Errors map[string]entry `json:"errors"`
		}
		if err := json.Unmarshal(raw, &real); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ErrorMapJSON(tc.version), &mine); err != nil {
			t.Fatal(err)
		}
		n := 0
		for k, m := range mine.Errors {
			r, ok := real.Errors[k]
			if !ok {
				continue
			}
			n++
			sort.Strings(m.Attrs)
			sort.Strings(r.Attrs)
			if !reflect.DeepEqual(m, r) {
				t.Errorf("%s status %s: mock %+v, kv_engine %+v", tc.file, k, m, r)
			}
		}
		if n < 40 {
			t.Errorf("%s: only %d statuses in common", tc.file, n)
		}
	}
}

func TestSASL(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: []User{
		{Name: "alice", Password: "wonder,land=", Buckets: []string{"*"}},
		{Name: "bob", Password: "builder", Buckets: []string{"other"}},
	}})
	addr := c.Node(0).Addr()
	t.Run("list mechs", func(t *testing.T) {
		cl := dialRaw(t, addr)
		p := cl.do(memdx.NewSASLListMechs())
		got := memdx.DecodeSASLMechanisms(p.Value)
		want := []string{"SCRAM-SHA512", "SCRAM-SHA256", "SCRAM-SHA1", "PLAIN"}
		if p.Status != memdx.StatusSuccess || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s %v", p.Status, got)
		}
	})
	t.Run("plain", func(t *testing.T) {
		cl := dialRaw(t, addr)
		cl.hello(memdx.FeatureXerror)
		if st := cl.authPlain("alice", "wrong"); st != memdx.StatusAuthError {
			t.Fatalf("bad password: %s", st)
		}
		if st := cl.authPlain("nobody", "x"); st != memdx.StatusAuthError {
			t.Fatalf("unknown user: %s", st)
		}
		if st := cl.selectBucket(DefaultBucket); st != memdx.StatusNoAccess {
			t.Fatalf("select before auth: %s", st)
		}
		if st := cl.authPlain("alice", "wonder,land="); st != memdx.StatusSuccess {
			t.Fatalf("good password: %s", st)
		}
		if st := cl.selectBucket(DefaultBucket); st != memdx.StatusSuccess {
			t.Fatalf("select: %s", st)
		}
	})
	for _, mech := range []string{memdx.MechScramSHA1, memdx.MechScramSHA256, memdx.MechScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			for _, pass := range []string{"wonder,land=", "wrong"} {
				cl := dialRaw(t, addr)
				sc, err := memdx.NewScramClient(mech, "alice", pass, nil)
				if err != nil {
					t.Fatal(err)
				}
				p := cl.do(memdx.NewSASLAuth(mech, sc.ClientFirst()))
				if p.Status != memdx.StatusAuthContinue {
					t.Fatalf("auth: %s", p.Status)
				}
				final, err := sc.ClientFinal(p.Value)
				if err != nil {
					t.Fatal(err)
				}
				p = cl.do(memdx.NewSASLStep(mech, final))
				if pass == "wrong" {
					if p.Status != memdx.StatusAuthError {
						t.Fatalf("wrong password: %s", p.Status)
					}
					if st := cl.selectBucket(DefaultBucket); st != memdx.StatusNoAccess {
						t.Fatalf("select after failed auth: %s", st)
					}
					continue
				}
				if p.Status != memdx.StatusSuccess {
					t.Fatalf("step: %s", p.Status)
				}
				if err := sc.VerifyServerFinal(p.Value); err != nil {
					t.Fatalf("server signature: %v", err)
				}
				if st := cl.selectBucket(DefaultBucket); st != memdx.StatusSuccess {
					t.Fatalf("select: %s", st)
				}
			}
		})
	}
	t.Run("step without auth", func(t *testing.T) {
		cl := dialRaw(t, addr)
		if p := cl.do(memdx.NewSASLStep(memdx.MechScramSHA512, []byte("c=biws,r=x,p=eA=="))); p.Status != memdx.StatusInvalidArgs {
			t.Fatalf("%s", p.Status)
		}
	})
	t.Run("per-bucket access", func(t *testing.T) {
		cl := dialRaw(t, addr)
		// With XERROR: kv_engine closes the connection of a client
		// without it instead of answering EACCESS.
		cl.hello(memdx.FeatureXerror)
		if st := cl.authPlain("bob", "builder"); st != memdx.StatusSuccess {
			t.Fatal(st)
		}
		if st := cl.selectBucket(DefaultBucket); st != memdx.StatusNoAccess {
			t.Fatalf("bucket bob may not use: %s", st)
		}
		if st := cl.selectBucket("missing"); st != memdx.StatusNoAccess {
			t.Fatalf("missing bucket: %s", st)
		}
		if _, err := c.AddBucket(BucketOptions{Name: "other", NumVbuckets: 16}); err != nil {
			t.Fatal(err)
		}
		if st := cl.selectBucket("other"); st != memdx.StatusSuccess {
			t.Fatalf("bucket bob may use: %s", st)
		}
		if p := cl.do(memdx.NewGet([]byte("x"))); p.Status == memdx.StatusNoBucket {
			t.Fatalf("bucket not selected")
		}
	})
}

func TestNoBucketAndUnauthenticated(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := dialRaw(t, c.Node(0).Addr())
	cl.hello(memdx.FeatureXerror, memdx.FeatureJSON)
	p := cl.do(memdx.NewGet([]byte("k")))
	if p.Status != memdx.StatusNoAccess {
		t.Fatalf("GET before auth: %s", p.Status)
	}
	// kv_engine sends no error context here (Cookie::validate), XERROR or
	// not, and refuses NOOP too before authentication.
	if len(p.Value) != 0 {
		t.Fatalf("EACCESS before auth carries %q", p.Value)
	}
	if p := cl.do(memdx.NewNoop()); p.Status != memdx.StatusNoAccess {
		t.Fatalf("NOOP before auth: %s", p.Status)
	}
	cl.authPlain(DefaultUser, DefaultPassword)
	if p := cl.do(memdx.NewGet([]byte("k"))); p.Status != memdx.StatusNoBucket {
		t.Fatalf("GET without bucket: %s", p.Status)
	}
	if p := cl.do(memdx.Request{OpCode: memdx.OpCode(0xe7)}); p.Status != memdx.StatusUnknownCommand {
		t.Fatalf("unknown opcode: %s", p.Status)
	}
}

// terseConfig is the part of a bucket config the tests read.
type terseConfig struct {
	Rev                    int64    `json:"rev"`
	RevEpoch               int64    `json:"revEpoch"`
	Name                   string   `json:"name"`
	NodeLocator            string   `json:"nodeLocator"`
	BucketType             string   `json:"bucketType"`
	UUID                   string   `json:"uuid"`
	BucketCapabilities     []string `json:"bucketCapabilities"`
	CollectionsManifestUID string   `json:"collectionsManifestUid"`
	VBucketServerMap       struct {
		HashAlgorithm     string   `json:"hashAlgorithm"`
		NumReplicas       int      `json:"numReplicas"`
		ServerList        []string `json:"serverList"`
		VBucketMap        [][]int  `json:"vBucketMap"`
		VBucketMapForward [][]int  `json:"vBucketMapForward"`
	} `json:"vBucketServerMap"`
	Nodes []struct {
		Hostname string         `json:"hostname"`
		Ports    map[string]int `json:"ports"`
	} `json:"nodes"`
	NodesExt []struct {
		Services map[string]int `json:"services"`
		ThisNode bool           `json:"thisNode"`
		Hostname string         `json:"hostname"`
	} `json:"nodesExt"`
}

func parseConfig(t testing.TB, b []byte) terseConfig {
	t.Helper()
	var c terseConfig
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("config %q: %v", b, err)
	}
	return c
}

func TestGetClusterConfig(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	n1 := c.Node(1)
	cl := bootstrap(t, n1.Addr(), DefaultBucket, nil)
	p := cl.do(memdx.NewGetClusterConfig())
	if p.Status != memdx.StatusSuccess || p.Datatype != memdx.DatatypeJSON {
		t.Fatalf("%s %s", p.Status, p.Datatype)
	}
	cfg := parseConfig(t, p.Value)
	if cfg.Rev != b.Rev() || cfg.RevEpoch != 1 || cfg.Name != DefaultBucket || cfg.NodeLocator != "vbucket" ||
		cfg.BucketType != "membase" || cfg.UUID != b.UUID() {
		t.Fatalf("header fields: %+v", cfg)
	}
	vsm := cfg.VBucketServerMap
	if vsm.HashAlgorithm != "CRC" || vsm.NumReplicas != 1 || len(vsm.VBucketMap) != 1024 || vsm.VBucketMapForward != nil {
		t.Fatalf("vBucketServerMap: %s %d %d", vsm.HashAlgorithm, vsm.NumReplicas, len(vsm.VBucketMap))
	}
	if len(vsm.ServerList) != 3 || len(cfg.Nodes) != 3 || len(cfg.NodesExt) != 3 {
		t.Fatalf("%d servers, %d nodes, %d nodesExt", len(vsm.ServerList), len(cfg.Nodes), len(cfg.NodesExt))
	}
	for i, n := range c.Nodes() {
		if want := "$HOST:" + strings.Split(n.Addr(), ":")[1]; vsm.ServerList[i] != want {
			t.Errorf("serverList[%d] = %q, want %q", i, vsm.ServerList[i], want)
		}
		ext := cfg.NodesExt[i]
		if ext.Services["kv"] != n.kvPort || ext.Services["mgmt"] != n.mgmtPort || ext.Hostname != "" {
			t.Errorf("nodesExt[%d] = %+v", i, ext)
		}
		if ext.ThisNode != (n.ID() == 1) {
			t.Errorf("nodesExt[%d].thisNode = %v", i, ext.ThisNode)
		}
		if cfg.Nodes[i].Ports["direct"] != n.kvPort {
			t.Errorf("nodes[%d] = %+v", i, cfg.Nodes[i])
		}
	}
	for vb, ch := range vsm.VBucketMap {
		if len(ch) != 2 || ch[0] == ch[1] || ch[0] < 0 || ch[1] < 0 {
			t.Fatalf("vbucket %d chain %v", vb, ch)
		}
	}
	for _, capab := range []string{"collections", "cbhello", "touch", "cccp", "durableWrite", "preserveExpiry", "nodesExt",
		"xattr", "tombstonedUserXAttrs", "subdoc.ReplaceBodyWithXattr", "subdoc.DocumentMacroSupport", "subdoc.ReviveDocument",
		"subdoc.ReplicaRead", "rangeScan"} {
		if !contains(cfg.BucketCapabilities, capab) {
			t.Errorf("bucketCapabilities lacks %q", capab)
		}
	}
	// Only what the mock implements: no DCP.
	for _, capab := range []string{"dcp"} {
		if contains(cfg.BucketCapabilities, capab) {
			t.Errorf("bucketCapabilities lists %q, which the mock does not implement", capab)
		}
	}

	// Known version: an empty body unless the server's config is newer.
	p = cl.do(memdx.NewGetClusterConfigKnown(1, cfg.Rev))
	if p.Status != memdx.StatusSuccess || len(p.Value) != 0 {
		t.Fatalf("known current version: %s %d bytes", p.Status, len(p.Value))
	}
	p = cl.do(memdx.NewGetClusterConfigKnown(1, cfg.Rev-1))
	if p.Status != memdx.StatusSuccess || parseConfig(t, p.Value).Rev != cfg.Rev {
		t.Fatalf("known older version: %s %d bytes", p.Status, len(p.Value))
	}
	p = cl.do(memdx.NewGetClusterConfigKnown(-1, cfg.Rev+100))
	if p.Status != memdx.StatusSuccess || len(p.Value) == 0 {
		t.Fatalf("known older epoch: %s %d bytes", p.Status, len(p.Value))
	}
	// kv_engine's validator: a revision below 1, an epoch neither -1 nor
	// at least 1.
	for _, v := range [][2]int64{{0, cfg.Rev}, {-2, cfg.Rev}, {1, 0}, {1, -1}} {
		if p := cl.do(memdx.NewGetClusterConfigKnown(v[0], v[1])); p.Status != memdx.StatusInvalidArgs {
			t.Fatalf("known version %v: %s", v, p.Status)
		}
	}
	bad := memdx.NewGetClusterConfig()
	bad.Extras = []byte{1, 2, 3}
	if p := cl.do(bad); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("3-byte extras: %s", p.Status)
	}

	// Without a bucket: the cluster config.
	g := bootstrap(t, n1.Addr(), "", nil)
	p = g.do(memdx.NewGetClusterConfig())
	var global struct {
		Rev      int64            `json:"rev"`
		NodesExt []map[string]any `json:"nodesExt"`
		VBSM     any              `json:"vBucketServerMap"`
	}
	if err := json.Unmarshal(p.Value, &global); err != nil || p.Status != memdx.StatusSuccess {
		t.Fatalf("global config: %s %v", p.Status, err)
	}
	if len(global.NodesExt) != 3 || global.VBSM != nil || global.Rev == 0 {
		t.Fatalf("global config %s", p.Value)
	}
}

// With NoRevEpoch the configs carry no revEpoch and the nodes' version has
// kv_engine's unset epoch, -1: a known version of epoch -1 and an older
// revision gets the config, one of epoch 0 is refused (EINVAL: kv_engine's
// validator takes epoch -1 or at least 1), and the notifications say
// epoch -1.
func TestNoRevEpoch(t *testing.T) {
	c := newCluster(t, Options{NoRevEpoch: true})
	b := c.Bucket(DefaultBucket)
	addr := c.Node(0).Addr()
	cl := bootstrap(t, addr, DefaultBucket, nil)
	p := cl.do(memdx.NewGetClusterConfig())
	if p.Status != memdx.StatusSuccess || bytes.Contains(p.Value, []byte(`"revEpoch"`)) {
		t.Fatalf("%s: %s", p.Status, p.Value)
	}
	for _, known := range []struct {
		epoch, rev int64
		status     memdx.Status
		want       bool
	}{
		{-1, b.Rev() - 1, memdx.StatusSuccess, true}, {-1, b.Rev(), memdx.StatusSuccess, false},
		{0, b.Rev() - 1, memdx.StatusInvalidArgs, false}, {0, 0, memdx.StatusInvalidArgs, false},
	} {
		cl := bootstrap(t, addr, DefaultBucket, nil) // a connection that knows nothing else
		p := cl.do(memdx.NewGetClusterConfigKnown(known.epoch, known.rev))
		if p.Status != known.status || p.Status == memdx.StatusSuccess && (len(p.Value) > 0) != known.want {
			t.Errorf("known {%d, %d}: %s, %d bytes; want %s, a config: %v", known.epoch, known.rev, p.Status,
				len(p.Value), known.status, known.want)
		}
	}
	g := bootstrap(t, addr, "", nil)
	if p := g.do(memdx.NewGetClusterConfig()); bytes.Contains(p.Value, []byte(`"revEpoch"`)) {
		t.Fatalf("global config: %s", p.Value)
	}

	brief := bootstrap(t, addr, DefaultBucket, []memdx.HelloFeature{memdx.FeatureDuplex,
		memdx.FeatureClustermapChangeNotificationBrief})
	if _, err := b.AddScope("app"); err != nil {
		t.Fatal(err)
	}
	got := nextPackets(t, brief)
	if len(got) != 1 {
		t.Fatalf("%d packets before the NOOP answer, want 1", len(got))
	}
	n, err := memdx.DecodeClustermapNotification(&got[0])
	if err != nil || n.Version != (memdx.ClusterConfigVersion{Epoch: -1, Revision: b.Rev()}) {
		t.Fatalf("notification %+v, %v", n.Version, err)
	}
}

// Every key the mock writes at the top level and in vBucketServerMap also
// appears in the config a real 7.6.4 cluster served.
func TestConfigKeysMatchServer(t *testing.T) {
	raw := conformance.Read(t, "configs/cb_terse_7.6.4_3node_server_groups.json")
	var real, mine map[string]json.RawMessage
	if err := json.Unmarshal(raw, &real); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, Options{Nodes: 2})
	if err := json.Unmarshal(c.Bucket(DefaultBucket).ConfigJSON(0), &mine); err != nil {
		t.Fatal(err)
	}
	for k := range mine {
		if _, ok := real[k]; !ok {
			t.Errorf("mock writes %q, which the server does not", k)
		}
	}
	var rv, mv map[string]json.RawMessage
	_ = json.Unmarshal(real["vBucketServerMap"], &rv)
	_ = json.Unmarshal(mine["vBucketServerMap"], &mv)
	for k := range mv {
		if _, ok := rv[k]; !ok {
			t.Errorf("vBucketServerMap: mock writes %q, which the server does not", k)
		}
	}
	// The capabilities are a subset of the server's.
	var rc, mc []string
	_ = json.Unmarshal(real["bucketCapabilities"], &rc)
	_ = json.Unmarshal(mine["bucketCapabilities"], &mc)
	for _, capab := range mc {
		if !contains(rc, capab) {
			t.Errorf("bucketCapabilities: mock lists %q, which the 7.6 server does not", capab)
		}
	}
}

func TestConfigHostOption(t *testing.T) {
	c := newCluster(t, Options{Nodes: 2, ConfigHost: "127.0.0.1"})
	cfg := parseConfig(t, c.Bucket(DefaultBucket).ConfigJSON(0))
	if cfg.VBucketServerMap.ServerList[0] != c.Node(0).Addr() || cfg.NodesExt[0].Hostname != "127.0.0.1" {
		t.Fatalf("serverList %v, nodesExt[0] %+v", cfg.VBucketServerMap.ServerList, cfg.NodesExt[0])
	}
}

func TestMgmtEndpoint(t *testing.T) {
	c := newCluster(t, Options{Nodes: 2})
	get := func(path, user, pass string) (int, []byte) {
		req, _ := http.NewRequest("GET", "http://"+c.Node(1).MgmtAddr()+path, nil)
		req.SetBasicAuth(user, pass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	code, body := get("/pools/default/b/default", DefaultUser, DefaultPassword)
	if code != 200 || parseConfig(t, body).Rev != c.Bucket(DefaultBucket).Rev() || !parseConfig(t, body).NodesExt[1].ThisNode {
		t.Fatalf("%d %s", code, body)
	}
	if code, _ := get("/pools/default/b/default", DefaultUser, "wrong"); code != 401 {
		t.Fatalf("bad password: %d", code)
	}
	if code, _ := get("/pools/default/b/nope", DefaultUser, DefaultPassword); code != 404 {
		t.Fatalf("missing bucket: %d", code)
	}
	if code, body := get("/pools/default/nodeServices", DefaultUser, DefaultPassword); code != 200 || !strings.Contains(string(body), "nodesExt") {
		t.Fatalf("nodeServices: %d %s", code, body)
	}
	http.DefaultClient.CloseIdleConnections()
}
