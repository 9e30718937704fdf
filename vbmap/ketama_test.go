package vbmap

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// SDK-RFC 26's expected continuum (640 points over 192.168.1.101..104:11210),
// from the libcouchbase config ketama/memcached_ketama_4node_config.json with
// $HOST = 192.168.1.104, as libcouchbase's test does.
func TestKetamaRFC26Continuum(t *testing.T) {
	var want []struct {
		Hash     uint32 `json:"hash"`
		Hostname string `json:"hostname"`
	}
	if err := json.Unmarshal(readConformance(t, "ketama/sdk_rfc26_ketama_hashes.json"), &want); err != nil {
		t.Fatal(err)
	}
	c := mustParseFile(t, "ketama/memcached_ketama_4node_config.json", "192.168.1.104")
	if c.Locator() != LocatorKetama || c.NumServers() != 4 {
		t.Fatalf("locator %v servers %d", c.Locator(), c.NumServers())
	}
	got := c.Ketama().Points()
	if len(got) != len(want) || len(want) != 640 {
		t.Fatalf("%d points, want %d (640)", len(got), len(want))
	}
	for i, p := range got {
		host, _ := c.ServerKVAddr(p.Server, "", false)
		if p.Hash != want[i].Hash || host != want[i].Hostname {
			t.Fatalf("point %d = %d %s, want %d %s", i, p.Hash, host, want[i].Hash, want[i].Hostname)
		}
	}
}

type keyRoute struct {
	Hash  uint32 `json:"hash"`
	Index int    `json:"index"`
}

func loadKeyRoutes(t *testing.T) map[string]keyRoute {
	var exp map[string]keyRoute
	if err := json.Unmarshal(readConformance(t, "ketama/memcached_4node_expected_key_routing.json"), &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp) != 1024 {
		t.Fatalf("%d keys in the expected routing, want 1024", len(exp))
	}
	return exp
}

// All 1024 keys of gocbcore's memd_4node expectations, through the config
// (whose $HOST and missing hostnames become "localhost", as gocbcore's test
// passed) and through RouteState.Route.
func TestKetamaExpectedKeyRoutingFromConfig(t *testing.T) {
	exp := loadKeyRoutes(t)
	c := mustParseFile(t, "configs/memcached_terse_4node_host_placeholder.json", "localhost")
	var rs RouteState
	for key, e := range exp {
		if h := KetamaHash([]byte(key)); h != e.Hash {
			t.Fatalf("KetamaHash(%q) = %d, want %d", key, h, e.Hash)
		}
		s, vb, err := rs.Route(c, []byte(key), 0)
		if err != nil || s != e.Index || vb != 0 {
			t.Fatalf("Route(%q) = %d, %d, %v; want server %d", key, s, vb, err, e.Index)
		}
	}
}

// The same expectations through the plain constructor, as a memcached://
// connection string's server list would build it.
func TestKetamaExpectedKeyRoutingFromList(t *testing.T) {
	exp := loadKeyRoutes(t)
	k, err := NewKetama([]string{"10.0.0.195:12000", "localhost:12002", "localhost:12004", "localhost:12006"})
	if err != nil {
		t.Fatal(err)
	}
	for key, e := range exp {
		if s := k.Server([]byte(key)); s != e.Index {
			t.Fatalf("Server(%q) = %d, want %d", key, s, e.Index)
		}
	}
}

func TestKetamaRingProperties(t *testing.T) {
	if _, err := NewKetama(nil); !errors.Is(err, ErrNoServers) {
		t.Fatalf("NewKetama(nil): %v", err)
	}
	servers := []string{"a:11211", "b:11211", "c:11211"}
	k, _ := NewKetama(servers)
	pts := k.Points()
	if len(pts) != 3*160 {
		t.Fatalf("%d points", len(pts))
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].Hash < pts[i-1].Hash {
			t.Fatal("points not sorted")
		}
	}
	// A key above the last point wraps to the first point's server.
	last := pts[len(pts)-1].Hash
	for i := 0; i < 1<<20; i++ {
		key := []byte(fmt.Sprint("wrap", i))
		if KetamaHash(key) > last {
			if s := k.Server(key); s != pts[0].Server {
				t.Fatalf("key past the last point went to %d, want %d", s, pts[0].Server)
			}
			break
		}
	}
	// The ring does not depend on the order of the list.
	r, _ := NewKetama([]string{"c:11211", "a:11211", "b:11211"})
	for i := 0; i < 2000; i++ {
		key := []byte(fmt.Sprint("key", i))
		if servers[k.Server(key)] != []string{"c:11211", "a:11211", "b:11211"}[r.Server(key)] {
			t.Fatalf("key %q routes differently with a reordered list", key)
		}
	}
	// Keys spread over all servers.
	seen := map[int]int{}
	for i := 0; i < 3000; i++ {
		seen[k.Server([]byte(fmt.Sprint("spread", i)))]++
	}
	if len(seen) != 3 {
		t.Fatalf("keys reached %d servers", len(seen))
	}
}

func TestKetamaAllocs(t *testing.T) {
	k, _ := NewKetama([]string{"a:1", "b:2"})
	key := []byte("k")
	if a := testing.AllocsPerRun(100, func() { _ = k.Server(key) }); a != 0 {
		t.Fatalf("Ketama.Server allocates %v times", a)
	}
}

// gocbcore v10.8 hashes each memcached-bucket server as
// "couchbase://host:port" (its endpoint address) where libcouchbase, SDK
// RFC 26 and this package hash "host:port": the package doc's figure of
// 754 of the corpus's 1024 keys placed elsewhere is this count.
func TestKetamaSchemePrefixedNamesRouteElsewhere(t *testing.T) {
	exp := loadKeyRoutes(t)
	servers := []string{"10.0.0.195:12000", "localhost:12002", "localhost:12004", "localhost:12006"}
	prefixed := make([]string, len(servers))
	for i, s := range servers {
		prefixed[i] = "couchbase://" + s
	}
	k, err := NewKetama(prefixed)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for key, e := range exp {
		if k.Server([]byte(key)) != e.Index {
			moved++
		}
	}
	if moved != 754 {
		t.Fatalf("%d of %d keys placed elsewhere by prefixed names; the package doc says 754", moved, len(exp))
	}
}
