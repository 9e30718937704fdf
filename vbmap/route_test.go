package vbmap

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// smallConfig builds a 4-vbucket, 4-server, 1-replica bucket config. cur and
// fwd are the vbucket maps (fwd nil: none); nil cur means no partitions.
func smallConfig(t testing.TB, rev uint64, cur, fwd [][]int) *Config {
	t.Helper()
	servers := []string{}
	nodes := []map[string]any{}
	if cur != nil {
		for i := 0; i < 4; i++ {
			servers = append(servers, fmt.Sprintf("10.0.0.%d:11210", i))
			nodes = append(nodes, map[string]any{
				"hostname": fmt.Sprintf("10.0.0.%d", i),
				"services": map[string]int{"kv": 11210, "kvSSL": 11207, "mgmt": 8091},
			})
		}
	} else {
		nodes = append(nodes, map[string]any{"hostname": "10.0.0.0", "services": map[string]int{"mgmt": 8091}})
		cur = [][]int{}
	}
	vsm := map[string]any{"hashAlgorithm": "CRC", "numReplicas": 1, "serverList": servers, "vBucketMap": cur}
	if fwd != nil {
		vsm["vBucketMapForward"] = fwd
	}
	raw, err := json.Marshal(map[string]any{
		"rev": rev, "name": "b", "nodeLocator": "vbucket", "nodesExt": nodes, "vBucketServerMap": vsm,
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(raw, "10.0.0.0")
	if err != nil {
		t.Fatalf("Parse(%s): %v", raw, err)
	}
	return c
}

// "hello" is vbucket 0 of 4 (libvbucket's testapp.c).
var helloKey = []byte("hello")

type routeStep struct {
	nmv     *Config // if set: OnNotMyVbucket(nmv) instead of routing
	cfg     *Config
	replica int
	server  int   // expected server
	err     error // expected error
	forward bool  // expected OnForwardMap() after the step
}

func TestRFC0005Sequences(t *testing.T) {
	// vbucket 0's entry in each config; the other vbuckets do not matter.
	rest := [][]int{{1, 0}, {2, 3}, {3, 2}}
	m := func(e []int) [][]int { return append([][]int{e}, rest...) }
	A := smallConfig(t, 10, m([]int{0, 1}), nil)             // no forward map
	B := smallConfig(t, 11, m([]int{0, 1}), m([]int{2, 3}))  // rebalance starts
	B11 := smallConfig(t, 11, m([]int{0, 1}), nil)           // same version as B, no forward map
	C := smallConfig(t, 12, m([]int{0, 1}), m([]int{3, 2}))  // newer, forward map moved on
	F12 := smallConfig(t, 12, m([]int{0, 1}), nil)           // same version as C, no forward map
	D := smallConfig(t, 13, m([]int{1, 0}), nil)             // rebalance over: no forward map
	E := smallConfig(t, 14, nil, nil)                        // no partitions at all
	G := smallConfig(t, 15, m([]int{0, 1}), m([]int{-1, 3})) // forward map has no active yet

	cases := []struct {
		name  string
		steps []routeStep
	}{
		{"steps 1-2: first attempt on the current map succeeds", []routeStep{
			{cfg: A, server: 0},
		}},
		{"steps 1,3,4,5: no forward map, NMV retries on the current map", []routeStep{
			{cfg: A, server: 0},
			{nmv: A},
			{cfg: A, server: 0},
			{nmv: A},
			{cfg: A, server: 0},
		}},
		{"step 1: the first attempt uses the current map even when a forward map exists", []routeStep{
			{cfg: B, server: 0},
		}},
		{"steps 1,3,6: NMV with a forward map moves to it", []routeStep{
			{cfg: B, server: 0},
			{nmv: B, forward: true},
			{cfg: B, server: 2, forward: true},
		}},
		{"steps 6-9: NMV on the forward map stays on the forward map", []routeStep{
			{cfg: B, server: 0},
			{nmv: B, forward: true},
			{cfg: B, server: 2, forward: true},
			{nmv: B, forward: true},
			{cfg: B, server: 2, forward: true},
			{nmv: B, forward: true},
			{cfg: B, server: 2, forward: true},
		}},
		{"a newer config that still has a forward map: use the new forward map", []routeStep{
			{cfg: B, server: 0},
			{nmv: B, forward: true},
			{cfg: B, server: 2, forward: true},
			{cfg: C, server: 3, forward: true},
		}},
		{"a newer config without a forward map: back to the current map", []routeStep{
			{cfg: B, server: 0},
			{nmv: B, forward: true},
			{cfg: B, server: 2, forward: true},
			{cfg: D, server: 1},
			{nmv: D},
			{cfg: D, server: 1},
		}},
		{"NMV on the current map when the config now held has a forward map", []routeStep{
			{cfg: A, server: 0},
			{nmv: B, forward: true},
			{cfg: B, server: 2, forward: true},
		}},
		{"NMV without a forward map, then a config with one arrives before the retry: forward", []routeStep{
			{cfg: A, server: 0},
			{nmv: A},
			{cfg: B, server: 2, forward: true},
			{cfg: D, server: 1},
			{cfg: G, server: 0}, // back on the current map: a new forward map needs a new NMV
		}},
		{"NMV when the config now held has no forward map: stay on current", []routeStep{
			{cfg: B, server: 0},
			{nmv: D},
			{cfg: D, server: 1},
		}},
		{"an older config without a forward map is stale and changes nothing", []routeStep{
			{cfg: B, server: 0},
			{nmv: B, forward: true},
			{cfg: A, server: -1, err: ErrStaleConfig, forward: true},
			{cfg: B, server: 2, forward: true},
		}},
		{"an equal-version config without a forward map is not newer: stale", []routeStep{
			{cfg: B, server: 0},
			{nmv: B, forward: true},
			{cfg: B11, server: -1, err: ErrStaleConfig, forward: true},
		}},
		{"a later NMV with a newer forward-map config moves the remembered version", []routeStep{
			{cfg: B, server: 0},
			{nmv: B, forward: true},
			{cfg: C, server: 3, forward: true},
			{nmv: C, forward: true},
			{cfg: F12, server: -1, err: ErrStaleConfig, forward: true}, // rev 12 is not newer than C
			{cfg: D, server: 1},
		}},
		{"a later NMV with an older forward-map config keeps the newer remembered version", []routeStep{
			{cfg: B, server: 0},
			{nmv: C, forward: true},
			{nmv: B, forward: true},
			{cfg: F12, server: -1, err: ErrStaleConfig, forward: true},
		}},
		{"a config with no vbucket map changes nothing", []routeStep{
			{cfg: B, server: 0},
			{nmv: B, forward: true},
			{cfg: E, server: -1, err: ErrNoVbucketMap, forward: true},
			{nmv: E, forward: true},
			{cfg: C, server: 3, forward: true},
		}},
		{"NMV with a no-map config on the current map changes nothing", []routeStep{
			{cfg: A, server: 0},
			{nmv: E},
			{cfg: E, server: -1, err: ErrNoVbucketMap},
			{cfg: A, server: 0},
		}},
		{"replicas route by the same map", []routeStep{
			{cfg: B, replica: 1, server: 1},
			{nmv: B, forward: true},
			{cfg: B, replica: 1, server: 3, forward: true},
			{cfg: B, replica: 2, server: -1, err: ErrReplicaOutOfRange, forward: true},
		}},
		{"a forward map without an owner is ErrNoServer, and the op stays on it", []routeStep{
			{cfg: G, server: 0},
			{nmv: G, forward: true},
			{cfg: G, server: -1, err: ErrNoServer, forward: true},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rs RouteState
			for i, st := range tc.steps {
				if st.nmv != nil {
					rs.OnNotMyVbucket(st.nmv)
				} else {
					server, vb, err := rs.Route(st.cfg, helloKey, st.replica)
					if !errors.Is(err, st.err) || (st.err == nil && err != nil) {
						t.Fatalf("step %d (rev %d): err %v, want %v", i, st.cfg.Version().Rev, err, st.err)
					}
					if server != st.server {
						t.Fatalf("step %d (rev %d): server %d, want %d", i, st.cfg.Version().Rev, server, st.server)
					}
					if st.cfg.HasVbucketMap() && vb != 0 {
						t.Fatalf("step %d: vbucket %d, want 0", i, vb)
					}
				}
				if rs.OnForwardMap() != st.forward {
					t.Fatalf("step %d: OnForwardMap() = %v, want %v", i, rs.OnForwardMap(), st.forward)
				}
			}
		})
	}
}

func TestRouteMemcachedIgnoresState(t *testing.T) {
	c := mustParseFile(t, "configs/memcached_terse_4node_host_placeholder.json", "localhost")
	var rs RouteState
	rs.OnNotMyVbucket(c)
	if rs.OnForwardMap() {
		t.Fatal("a memcached config has no forward map")
	}
	if _, _, err := rs.Route(c, []byte("Key_0"), 1); !errors.Is(err, ErrReplicaOutOfRange) {
		t.Fatalf("replica on memcached: %v", err)
	}
	if _, err := c.VbucketServer(0, 0, false); !errors.Is(err, ErrNoVbucketMap) {
		t.Fatalf("VbucketServer on memcached: %v", err)
	}
}

func TestVbucketServerErrors(t *testing.T) {
	c := smallConfig(t, 1, [][]int{{0, -1}, {1, 0}, {2, 3}, {3, 2}}, nil)
	if _, err := c.VbucketServer(4, 0, false); !errors.Is(err, ErrVbucketOutOfRange) {
		t.Errorf("vb 4 of 4: %v", err)
	}
	if _, err := c.VbucketServer(0, -1, false); !errors.Is(err, ErrReplicaOutOfRange) {
		t.Errorf("replica -1: %v", err)
	}
	if _, err := c.VbucketServer(0, 1, false); !errors.Is(err, ErrNoServer) {
		t.Errorf("-1 entry: %v", err)
	}
	if _, err := c.VbucketServer(0, 0, true); !errors.Is(err, ErrNoForwardMap) {
		t.Errorf("forward without map: %v", err)
	}
}

// The two real rebalance captures (rev 28957 and 28958; 682 of 1024 vbuckets
// differ between vBucketMap and vBucketMapForward) route real keys through
// their forward maps after an NMV, and back to the current map once a newer
// config without a forward map arrives.
func TestRebalanceConfigsRouteThroughForwardMap(t *testing.T) {
	r57 := mustParseFile(t, "configs/cb_terse_rebalance_vbmapforward_rev28957.json", "10.143.200.104")
	r58 := mustParseFile(t, "configs/cb_terse_rebalance_vbmapforward_rev28958.json", "10.143.200.104")
	done := rebalanceDone(t, readConformance(t, "configs/cb_terse_rebalance_vbmapforward_rev28958.json"))

	moved := 0
	for i := 0; i < 2000; i++ {
		key := []byte(fmt.Sprintf("airline_%d", i))
		vb := r57.VbucketForKey(key)
		wantCur, _ := r57.VbucketServer(vb, 0, false)
		wantFwd, _ := r57.VbucketServer(vb, 0, true)

		var rs RouteState
		s1, _, err := rs.Route(r57, key, 0)
		if err != nil || s1 != wantCur {
			t.Fatalf("%s attempt 1: %d %v, want current-map server %d", key, s1, err, wantCur)
		}
		rs.OnNotMyVbucket(r57)
		s2, _, err := rs.Route(r57, key, 0)
		if err != nil || s2 != wantFwd {
			t.Fatalf("%s attempt 2: %d %v, want forward-map server %d", key, s2, err, wantFwd)
		}
		rs.OnNotMyVbucket(r58) // an NMV body carried rev 28958, still rebalancing
		s3, _, err := rs.Route(r58, key, 0)
		if fwd58, _ := r58.VbucketServer(vb, 0, true); err != nil || s3 != fwd58 || !rs.OnForwardMap() {
			t.Fatalf("%s attempt 3 on rev 28958: %d %v, want its forward-map server %d", key, s3, err, fwd58)
		}
		s4, _, err := rs.Route(done, key, 0)
		if cur, _ := done.VbucketServer(vb, 0, false); err != nil || s4 != cur || rs.OnForwardMap() {
			t.Fatalf("%s after the rebalance: %d %v forward=%v, want current-map server %d", key, s4, err, rs.OnForwardMap(), cur)
		}
		if s1 != s2 {
			moved++
		}
	}
	// About a third of the actives move (341 of 1024 vbuckets).
	if moved < 500 || moved > 850 {
		t.Fatalf("%d of 2000 keys changed server between the maps; expected about 666", moved)
	}
	if !r58.Newer(r57) || r57.Newer(r58) {
		t.Fatal("rev 28958 must be newer than rev 28957, and not the other way round")
	}
}

// rebalanceDone makes the config that ends the rebalance: rev+1, the forward
// map as the current map, no forward map.
func rebalanceDone(t *testing.T, data []byte) *Config {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	vsm := m["vBucketServerMap"].(map[string]any)
	vsm["vBucketMap"] = vsm["vBucketMapForward"]
	delete(vsm, "vBucketMapForward")
	m["rev"] = m["rev"].(float64) + 1
	raw, _ := json.Marshal(m)
	c, err := Parse(raw, "10.143.200.104")
	if err != nil {
		t.Fatal(err)
	}
	if c.HasForwardMap() || c.Version().Rev != 28959 {
		t.Fatalf("synthetic config: forward %v rev %d", c.HasForwardMap(), c.Version().Rev)
	}
	return c
}

func TestRouteAllocs(t *testing.T) {
	r57 := mustParseFile(t, "configs/cb_terse_rebalance_vbmapforward_rev28957.json", "10.143.200.104")
	key := []byte("airline_10")
	var rs RouteState
	if a := testing.AllocsPerRun(100, func() {
		rs = RouteState{}
		_, _, _ = rs.Route(r57, key, 0)
		rs.OnNotMyVbucket(r57)
		_, _, _ = rs.Route(r57, key, 1)
	}); a != 0 {
		t.Fatalf("Route allocates %v times", a)
	}
	mc := mustParseFile(t, "configs/memcached_terse_4node_host_placeholder.json", "localhost")
	if a := testing.AllocsPerRun(100, func() { _, _, _ = rs.Route(mc, key, 0) }); a != 0 {
		t.Fatalf("ketama Route allocates %v times", a)
	}
}

func TestServerKVAddrAllocs(t *testing.T) {
	c := mustParseFile(t, "configs/cb_terse_external_alternate_addresses.json", "x")
	if a := testing.AllocsPerRun(100, func() {
		_, _ = c.ServerKVAddr(1, "", false)
		_, _ = c.ServerKVAddr(2, "external", true)
		_, _ = c.ServerKVAddr(2, "nosuch", true)
	}); a != 0 {
		t.Fatalf("ServerKVAddr allocates %v times", a)
	}
	// It agrees with Node.KVAddr on every server, network and TLS setting.
	for i, n := range c.Servers() {
		for _, net := range []string{"", "default", "external", "nosuch"} {
			for _, tls := range []bool{false, true} {
				a1, ok1 := c.ServerKVAddr(i, net, tls)
				a2, ok2 := n.KVAddr(net, tls)
				if a1 != a2 || ok1 != ok2 {
					t.Fatalf("server %d %q %v: %q %v vs %q %v", i, net, tls, a1, ok1, a2, ok2)
				}
			}
		}
	}
	if _, ok := c.ServerKVAddr(3, "", false); ok {
		t.Fatal("out-of-range server has an address")
	}
}
