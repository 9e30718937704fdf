package vbmap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Rejections: each input names the field Parse must blame.
func TestParseRejects(t *testing.T) {
	vsm := func(body string) string {
		return `{"rev":1,"name":"b","nodeLocator":"vbucket","nodesExt":[{"hostname":"h","services":{"kv":11210}}],"vBucketServerMap":` + body + `}`
	}
	cases := []struct {
		name, in, field string
	}{
		{"not json", `{`, "json"},
		{"two documents", `{"rev":1}{"rev":2}`, "json"},
		{"array", `[1,2]`, "json"},
		{"negative rev", `{"rev":-1,"nodesExt":[{"hostname":"h"}]}`, "json"},
		{"rev above 2^64-1", `{"rev":18446744073709551616,"nodesExt":[{"hostname":"h"}]}`, "json"},
		{"empty object", `{}`, "nodesExt"},
		{"null", `null`, "nodesExt"},
		{"unknown locator", `{"name":"b","nodeLocator":"random","nodesExt":[{"hostname":"h"}]}`, "nodeLocator"},
		{"named bucket without locator or map", `{"name":"b","nodesExt":[{"hostname":"h"}]}`, "nodeLocator"},
		{"vbucket locator without map", `{"name":"b","nodeLocator":"vbucket","nodesExt":[{"hostname":"h"}]}`, "vBucketServerMap"},
		{"hash algorithm", vsm(`{"hashAlgorithm":"MD5","serverList":["h:11210"],"vBucketMap":[[0]]}`), "vBucketServerMap.hashAlgorithm"},
		{"too many replicas", vsm(`{"numReplicas":4,"serverList":["h:11210"],"vBucketMap":[[0]]}`), "vBucketServerMap.numReplicas"},
		{"negative replicas", vsm(`{"numReplicas":-1,"serverList":["h:11210"],"vBucketMap":[[0]]}`), "vBucketServerMap.numReplicas"},
		{"server without port", vsm(`{"serverList":["h"],"vBucketMap":[[0]]}`), "vBucketServerMap.serverList[0]"},
		{"server port out of range", vsm(`{"serverList":["h:70000"],"vBucketMap":[[0]]}`), "vBucketServerMap.serverList[0]"},
		{"server port not a number", vsm(`{"serverList":["h:x"],"vBucketMap":[[0]]}`), "vBucketServerMap.serverList[0]"},
		{"empty map with servers", vsm(`{"serverList":["h:11210"],"vBucketMap":[]}`), "vBucketServerMap.vBucketMap"},
		{"forward map without map", vsm(`{"serverList":[],"vBucketMap":[],"vBucketMapForward":[[0]]}`), "vBucketServerMap.vBucketMapForward"},
		{"index past serverList", vsm(`{"numReplicas":1,"serverList":["h:11210"],"vBucketMap":[[0,-1],[1,0]]}`), "vBucketServerMap.vBucketMap[1][0]"},
		{"index below -1", vsm(`{"numReplicas":1,"serverList":["h:11210"],"vBucketMap":[[0,-2]]}`), "vBucketServerMap.vBucketMap[0][1]"},
		{"empty entry", vsm(`{"serverList":["h:11210"],"vBucketMap":[[0],[]]}`), "vBucketServerMap.vBucketMap[1]"},
		{"entry too long", vsm(`{"serverList":["h:11210"],"vBucketMap":[[0,0,0,0,0]]}`), "vBucketServerMap.vBucketMap"},
		{"forward index past serverList", vsm(`{"serverList":["h:11210"],"vBucketMap":[[0]],"vBucketMapForward":[[3]]}`), "vBucketServerMap.vBucketMapForward[0][0]"},
		{"forward length", vsm(`{"serverList":["h:11210"],"vBucketMap":[[0],[0]],"vBucketMapForward":[[0]]}`), "vBucketServerMap.vBucketMapForward"},
		{"map element not a number", vsm(`{"serverList":["h:11210"],"vBucketMap":[["0"]]}`), "json"},
		{"numVBuckets disagrees", `{"name":"b","numVBuckets":2,"nodeLocator":"vbucket","nodesExt":[{"hostname":"h","services":{"kv":1}}],"vBucketServerMap":{"serverList":["h:1"],"vBucketMap":[[0]]}}`, "numVBuckets"},
		{"port out of range", `{"nodesExt":[{"hostname":"h","services":{"kv":65536}}]}`, "nodesExt[0].services.kv"},
		{"negative port", `{"nodesExt":[{"hostname":"h","services":{"kvSSL":-1}}]}`, "nodesExt[0].services.kvSSL"},
		{"alternate port out of range", `{"nodesExt":[{"hostname":"h","alternateAddresses":{"external":{"hostname":"x","ports":{"kv":99999}}}}]}`, "nodesExt[0].alternateAddresses.external.ports.kv"},
		{"alternate without hostname", `{"nodesExt":[{"hostname":"h","alternateAddresses":{"external":{"ports":{"kv":1}}}}]}`, "nodesExt[0].alternateAddresses.external.hostname"},
		{"alternate named default", `{"nodesExt":[{"hostname":"h","alternateAddresses":{"default":{"hostname":"x"}}}]}`, "nodesExt[0].alternateAddresses.default"},
		{"verbose hostname bad port", `{"nodes":[{"hostname":"h:99999","ports":{"direct":1}}]}`, "nodes[0].hostname"},
		{"verbose empty hostname", `{"nodes":[{"hostname":"","ports":{"direct":1}}]}`, "nodes[0].hostname"},
		{"manifest uid not hex", `{"collectionsManifestUid":"xyz","nodesExt":[{"hostname":"h"}]}`, "collectionsManifestUid"},
		{"ketama server twice", `{"name":"m","nodeLocator":"ketama","nodesExt":[{"hostname":"h","services":{"kv":11210}},{"hostname":"h","services":{"kv":11210}}]}`, "nodesExt[1].services.kv"},
		{"verbose ketama server twice", `{"name":"m","nodeLocator":"ketama","nodes":[{"hostname":"h:8091","ports":{"direct":11210}},{"hostname":"h:9000","ports":{"direct":11210}}]}`, "nodes[1].ports.direct"},
		{"$HOST in serverList without source", `{"name":"b","nodeLocator":"vbucket","nodesExt":[{"hostname":"h","services":{"kv":1}}],"vBucketServerMap":{"serverList":["$HOST:1"],"vBucketMap":[[0]]}}`, "vBucketServerMap.serverList[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.in), "")
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Parse = %v, %v; want a *ParseError", c, err)
			}
			if pe.Field != tc.field {
				t.Fatalf("field %q (%v), want %q", pe.Field, err, tc.field)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("message %q does not name the field", err)
			}
		})
	}
}

func TestParseErrorUnwrapsJSON(t *testing.T) {
	_, err := Parse([]byte(`{"rev":"x"}`), "")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Err == nil || errors.Unwrap(err) != pe.Err {
		t.Fatalf("json error not kept: %#v", err)
	}
}

// Accepted shapes beyond the corpus, from testdata/.
func TestParseOwnFixtures(t *testing.T) {
	t.Run("libvbucket style: serverList only", func(t *testing.T) {
		// membase/libvbucket tests/testapp.c's config: no nodes at all.
		c := mustParseFixture(t, "serverlist_only.json")
		if c.Locator() != LocatorVbucket || c.NumServers() != 3 || c.NumVbuckets() != 4 || c.NumReplicas() != 2 {
			t.Fatalf("locator %v servers %d vbuckets %d replicas %d", c.Locator(), c.NumServers(), c.NumVbuckets(), c.NumReplicas())
		}
		wantAddrs(t, c, "", false, "server1:11211", "server2:11210", "server3:11211")
		// libvbucket's expected masters and replicas.
		want := [][3]int{{0, 1, 2}, {1, 2, 0}, {2, 1, -1}, {1, 2, 0}}
		for vb, w := range want {
			for r, s := range w {
				got, err := c.VbucketServer(uint16(vb), r, false)
				if s < 0 {
					if !errors.Is(err, ErrNoServer) {
						t.Errorf("vb %d copy %d: %d %v, want ErrNoServer", vb, r, got, err)
					}
					continue
				}
				if got != s || err != nil {
					t.Errorf("vb %d copy %d: %d %v, want %d", vb, r, got, err, s)
				}
			}
		}
		for _, k := range []struct {
			key string
			vb  uint16
		}{{"hello", 0}, {"name", 3}, {"tomorrow", 1}, {"another key", 2}} {
			if vb := c.VbucketForKey([]byte(k.key)); vb != k.vb {
				t.Errorf("%q -> vb %d, want %d", k.key, vb, k.vb)
			}
		}
	})
	t.Run("verbose nodes in another order than serverList", func(t *testing.T) {
		// libvbucket testConfigCouchApiBase: three nodes on one host, listed
		// in a different order from serverList; matched by direct port.
		c := mustParseFixture(t, "verbose_nodes_reordered.json")
		got := []int{c.ServerNode(0), c.ServerNode(1), c.ServerNode(2)}
		if got[0] != 1 || got[1] != 2 || got[2] != 0 {
			t.Fatalf("server -> node %v, want [1 2 0]", got)
		}
	})
	t.Run("unmatched serverList entry falls back to its own address", func(t *testing.T) {
		c := mustParseFixture(t, "serverlist_unmatched.json")
		if c.ServerNode(1) != -1 {
			t.Fatalf("ServerNode(1) = %d, want -1", c.ServerNode(1))
		}
		wantAddrs(t, c, "", false, "10.0.0.1:11210", "10.9.9.9:11210")
		wantAddrs(t, c, "", true, "10.0.0.1:11207", "-")
	})
	t.Run("short entries are padded and numReplicas comes from entries", func(t *testing.T) {
		c, err := Parse([]byte(`{"name":"b","vBucketServerMap":{"serverList":["a:1","b:1"],"vBucketMap":[[0,1],[1]]}}`), "")
		if err != nil {
			t.Fatal(err)
		}
		if c.NumReplicas() != 1 {
			t.Fatalf("NumReplicas %d", c.NumReplicas())
		}
		if _, err := c.VbucketServer(1, 1, false); !errors.Is(err, ErrNoServer) {
			t.Fatalf("padded copy: %v", err)
		}
	})
	t.Run("bracketed and ported source host", func(t *testing.T) {
		for _, src := range []string{"[::1]", "[::1]:8091", "::1"} {
			c, err := Parse([]byte(`{"nodesExt":[{"thisNode":true,"services":{"kv":11210}}]}`), src)
			if err != nil {
				t.Fatal(err)
			}
			if a, _ := c.Nodes()[0].KVAddr("", false); a != "[::1]:11210" {
				t.Errorf("source %q: %q", src, a)
			}
		}
	})
}

func TestDetectNetwork(t *testing.T) {
	c := mustParseFixture(t, "two_networks.json")
	cases := map[string]string{
		"10.0.0.1":           "default",
		"10.0.0.1:11210":     "default",
		"EXT.example.com":    "external",
		"ext.example.com":    "external",
		"[2001:db8::1]":      "backup",
		"2001:db8:0:0::1":    "backup",
		"unknown.host":       "default",
		"":                   "default",
		"shared.example.com": "backup", // both alt networks use it: smallest name
	}
	for host, want := range cases {
		if got := c.DetectNetwork(host); got != want {
			t.Errorf("DetectNetwork(%q) = %q, want %q", host, got, want)
		}
	}
}

// What a caller gets back is a copy: changing it does not change the config.
func TestConfigIsImmutable(t *testing.T) {
	c := mustParseFile(t, "configs/cb_terse_external_alternate_addresses.json", "x")
	ns := c.Nodes()
	ns[0].Hostname = "changed"
	ns[0].Alternates[0].Hostname = "changed"
	ss := c.Servers()
	ss[0].Alternates[0].Ports.KV = 1
	caps := c.BucketCapabilities()
	if len(caps) > 0 {
		caps[0] = "changed"
	}
	cc := mustParseFile(t, "configs/cb_terse_7.6.4_3node_server_groups.json", "x")
	m := cc.ClusterCapabilities()
	m["n1ql"][0] = "changed"
	if c.Nodes()[0].Hostname != "172.17.0.2" || c.Nodes()[0].Alternates[0].Hostname != "192.168.132.234" ||
		c.Servers()[0].Alternates[0].Ports.KV != 32775 || (len(caps) > 0 && c.BucketCapabilities()[0] == "changed") ||
		cc.ClusterCapabilities()["n1ql"][0] == "changed" {
		t.Fatal("a returned value aliases the config")
	}
}

// mustParseFixture parses one of this package's own fixtures in testdata/.
func mustParseFixture(t *testing.T, name string) *Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data, "")
	if err != nil {
		t.Fatalf("Parse(testdata/%s): %v", name, err)
	}
	return c
}

func TestParseVerbosePortsChecked(t *testing.T) {
	_, err := Parse([]byte(`{"nodes":[{"hostname":"h:8091","ports":{"direct":-3}}]}`), "")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Field != "nodes[0].ports.direct" {
		t.Fatalf("%v", err)
	}
}

func TestParseLimits(t *testing.T) {
	big := func(n int, elem string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + "]"
	}
	cases := []struct{ name, in, field string }{
		{"65537 vbuckets", `{"name":"b","vBucketServerMap":{"serverList":["h:1"],"vBucketMap":` + big(65537, "[0]") + `}}`, "vBucketServerMap.vBucketMap"},
		{"32768 servers", `{"name":"b","vBucketServerMap":{"serverList":` + big(32768, `"h:1"`) + `,"vBucketMap":[[0]]}}`, "vBucketServerMap.serverList"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.in), "")
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Field != tc.field {
			t.Errorf("%s: %v, want a rejection at %s", tc.name, err, tc.field)
		}
	}
}

// Entries longer than numReplicas+1: the extra copies are not served, so
// VbucketServer and NumReplicas agree.
func TestReplicaIndexFollowsNumReplicas(t *testing.T) {
	c, err := Parse([]byte(`{"name":"b","vBucketServerMap":{"numReplicas":0,"serverList":["a:1","b:1"],"vBucketMap":[[0,1],[1,0]]}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if c.NumReplicas() != 0 {
		t.Fatalf("NumReplicas %d", c.NumReplicas())
	}
	if _, err := c.VbucketServer(0, 1, false); !errors.Is(err, ErrReplicaOutOfRange) {
		t.Fatalf("replica 1: %v", err)
	}
}
