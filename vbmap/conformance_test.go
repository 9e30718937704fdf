package vbmap

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kvwire/kvwire/internal/conformance"
)

// readConformance reads a file of the shared corpus of real configs (see its
// README); without the corpus the test skips, or fails under
// KVWIRE_REQUIRE_CONFORMANCE=1.
func readConformance(t testing.TB, rel string) []byte {
	t.Helper()
	return conformance.Read(t, rel)
}

func mustParseFile(t testing.TB, rel, src string) *Config {
	t.Helper()
	c, err := Parse(readConformance(t, rel), src)
	if err != nil {
		t.Fatalf("Parse(%s): %v", rel, err)
	}
	return c
}

func kvAddr(t *testing.T, c *Config, server int, network string, tls bool) string {
	t.Helper()
	a, ok := c.ServerKVAddr(server, network, tls)
	if !ok {
		return "-"
	}
	return a
}

func wantAddrs(t *testing.T, c *Config, network string, tls bool, want ...string) {
	t.Helper()
	var got []string
	for i := 0; i < c.NumServers(); i++ {
		got = append(got, kvAddr(t, c, i, network, tls))
	}
	if !slices.Equal(got, want) {
		t.Errorf("server KV addrs (network %q, tls %v) = %q, want %q", network, tls, got, want)
	}
}

type confCase struct {
	file string
	src  string
	// rejected: the ParseError.Field Parse must name; "" means it parses.
	rejected string
	locator  Locator
	version  Version
	vbuckets int
	servers  int
	replicas int
	forward  bool
	nodes    int
	check    func(t *testing.T, c *Config)
}

// conformanceCases says, for every file under configs/, whether Parse accepts
// it and what it must get out of it. TestConformanceTableIsComplete fails if a
// file is missing from this table.
var conformanceCases = []confCase{
	{file: "cb_terse_2.5_host_placeholder_nodes_only.json", src: "192.168.1.10",
		locator: LocatorVbucket, version: Version{0, 19}, vbuckets: 64, servers: 1, replicas: 1, nodes: 1,
		check: func(t *testing.T, c *Config) {
			wantAddrs(t, c, "default", false, "192.168.1.10:11210")
			wantAddrs(t, c, "default", true, "-") // nodes-only configs carry no TLS port
			if c.ServerNode(0) != 0 {
				t.Errorf("server 0 matched node %d, want 0", c.ServerNode(0))
			}
		}},
	{file: "cb_terse_3.0_host_placeholder.json", src: "10.1.1.1",
		locator: LocatorVbucket, version: Version{0, 17}, vbuckets: 1024, servers: 1, replicas: 1, nodes: 1,
		check: func(t *testing.T, c *Config) {
			wantAddrs(t, c, "", false, "10.1.1.1:11210")
			wantAddrs(t, c, "", true, "10.1.1.1:11207")
		}},
	{file: "cb_terse_7.6.0_2kv_only_one_active.json", src: "1.2.3.4",
		locator: LocatorVbucket, version: Version{1, 24610}, vbuckets: 64, servers: 2, replicas: 0, nodes: 2,
		check: func(t *testing.T, c *Config) {
			wantAddrs(t, c, "", false, "1.2.3.4:11210", "2.3.4.5:11210")
			wantAddrs(t, c, "", true, "1.2.3.4:11207", "2.3.4.5:11207")
			for vb := 0; vb < 64; vb++ {
				if s, err := c.VbucketServer(uint16(vb), 0, false); s != 0 || err != nil {
					t.Fatalf("vb %d active = %d, %v; want server 0", vb, s, err)
				}
			}
			if _, err := c.VbucketServer(0, 1, false); !errors.Is(err, ErrReplicaOutOfRange) {
				t.Errorf("replica 1 of a 0-replica bucket: %v, want ErrReplicaOutOfRange", err)
			}
		}},
	{file: "cb_terse_7.6.4_3node_server_groups.json", src: "192.168.106.128",
		locator: LocatorVbucket, version: Version{1, 289}, vbuckets: 1024, servers: 3, replicas: 1, nodes: 3,
		check: func(t *testing.T, c *Config) {
			var groups []string
			for _, n := range c.Servers() {
				groups = append(groups, n.ServerGroup)
			}
			if !slices.Equal(groups, []string{"Group 1", "Group 1", "Group 2"}) {
				t.Errorf("server groups %q", groups)
			}
			if uid, ok := c.CollectionsManifestUID(); !ok || uid != 2 {
				t.Errorf("manifest uid %d %v, want 2", uid, ok)
			}
			if !c.HasClusterCapability("n1ql", "readFromReplica") || !c.HasBucketCapability("collections") {
				t.Error("capabilities not parsed")
			}
			if c.BucketType() != "membase" || c.BucketName() != "travel-sample" || c.BucketUUID() != "7aee1f3bde34b9c8ef7514cc28e29180" {
				t.Errorf("bucket %q %q %q", c.BucketType(), c.BucketName(), c.BucketUUID())
			}
			// vBucketMap[1000] is [2, 1].
			if s, _ := c.VbucketServer(1000, 0, false); s != 2 {
				t.Errorf("vb 1000 active = %d, want 2", s)
			}
			if s, _ := c.VbucketServer(1000, 1, false); s != 1 {
				t.Errorf("vb 1000 replica 1 = %d, want 1", s)
			}
		}},
	{file: "cb_terse_7.x_rev_epoch.json", src: "localhost",
		locator: LocatorVbucket, version: Version{2, 2}, vbuckets: 1024, servers: 1, replicas: 1, nodes: 1},
	{file: "cb_terse_app_telemetry.json", src: "192.168.106.128",
		locator: LocatorVbucket, version: Version{1, 1100}, vbuckets: 1024, servers: 3, replicas: 1, nodes: 3,
		check: func(t *testing.T, c *Config) {
			if u := c.Servers()[1].UUID; u != "9a5e59ac41a1cc006c4850805e43cfe0" {
				t.Errorf("node uuid %q", u)
			}
		}},
	{file: "cb_terse_capella_private_link_alt.json", src: "private-endpoint.ui0cn1dkh45zmrb.cloud.couchbase.com",
		locator: LocatorVbucket, version: Version{1, 554}, vbuckets: 1024, servers: 3, replicas: 1, nodes: 3,
		check: func(t *testing.T, c *Config) {
			if n := c.DetectNetwork("private-endpoint.ui0cn1dkh45zmrb.cloud.couchbase.com"); n != "external" {
				t.Errorf("DetectNetwork = %q, want external", n)
			}
			if n := c.DetectNetwork("svc-dqis-node-002.ui0cn1dkh45zmrb.cloud.couchbase.com:11210"); n != "default" {
				t.Errorf("DetectNetwork(default host) = %q, want default", n)
			}
			const pe = "private-endpoint.ui0cn1dkh45zmrb.cloud.couchbase.com"
			wantAddrs(t, c, "external", true, pe+":11209", pe+":11210", pe+":11208")
			// The external network lists ports, none of them plain KV.
			wantAddrs(t, c, "external", false, "-", "-", "-")
		}},
	{file: "cb_terse_cloud_tls_only.json", src: "i-041c154dd0246354e.sdk.dev.cloud.couchbase.com",
		locator: LocatorVbucket, version: Version{1, 4538}, vbuckets: 64, servers: 3, replicas: 0, nodes: 12,
		check: func(t *testing.T, c *Config) {
			// serverList ports are all 0 and hostnames repeat: servers are
			// matched by position (same answer as the Java SDK's
			// shouldParseElixirConfig: 21001, 21002, 11207).
			const h = "i-041c154dd0246354e.sdk.dev.cloud.couchbase.com"
			wantAddrs(t, c, "", true, h+":21001", h+":21002", h+":11207")
			wantAddrs(t, c, "", false, "-", "-", "-")
		}},
	{file: "cb_terse_empty_vbmap_invalid.json", src: "10.0.0.250", rejected: "vBucketServerMap.vBucketMap"},
	{file: "cb_terse_external_alternate_addresses.json", src: "192.168.132.234",
		locator: LocatorVbucket, version: Version{0, 1073}, vbuckets: 1024, servers: 3, replicas: 1, nodes: 3,
		check: func(t *testing.T, c *Config) {
			if n := c.DetectNetwork("192.168.132.234"); n != "external" {
				t.Errorf("DetectNetwork = %q, want external", n)
			}
			if n := c.DetectNetwork("172.17.0.3"); n != "default" {
				t.Errorf("DetectNetwork(internal) = %q, want default", n)
			}
			wantAddrs(t, c, "external", false, "192.168.132.234:32775", "192.168.132.234:32799", "192.168.132.234:32823")
			wantAddrs(t, c, "external", true, "192.168.132.234:32776", "192.168.132.234:32800", "192.168.132.234:32824")
			wantAddrs(t, c, "default", false, "172.17.0.2:11210", "172.17.0.3:11210", "172.17.0.4:11210")
			wantAddrs(t, c, "nosuchnetwork", false, "-", "-", "-")
		}},
	{file: "cb_terse_external_alternate_addresses_without_ports.json", src: "192.168.132.234",
		locator: LocatorVbucket, version: Version{0, 1073}, vbuckets: 1024, servers: 3, replicas: 1, nodes: 3,
		check: func(t *testing.T, c *Config) {
			// No ports listed: the default ports apply on the external host.
			wantAddrs(t, c, "external", false, "192.168.132.234:11210", "192.168.132.234:11210", "192.168.132.234:11210")
			wantAddrs(t, c, "external", true, "192.168.132.234:11207", "192.168.132.234:11207", "192.168.132.234:11207")
		}},
	{file: "cb_terse_host_placeholder_64vb.json", src: "::1",
		locator: LocatorVbucket, version: Version{0, 61}, vbuckets: 64, servers: 1, replicas: 1, nodes: 1,
		check: func(t *testing.T, c *Config) {
			// An IPv6 source host replaces $HOST and comes out bracketed.
			wantAddrs(t, c, "", false, "[::1]:11210")
			wantAddrs(t, c, "", true, "[::1]:11207")
			if h := c.Nodes()[0].Hostname; h != "::1" {
				t.Errorf("hostname %q, want ::1", h)
			}
		}},
	{file: "cb_terse_ipv6.json", src: "fd63:6f75:6368:2068:c490:b5ff:fe86:9cf7",
		locator: LocatorVbucket, version: Version{0, 22}, vbuckets: 1024, servers: 2, replicas: 1, nodes: 2,
		check: func(t *testing.T, c *Config) {
			wantAddrs(t, c, "", false, "[fd63:6f75:6368:2068:1471:75ff:fe25:a8be]:11210", "[fd63:6f75:6368:2068:c490:b5ff:fe86:9cf7]:11210")
			wantAddrs(t, c, "", true, "[fd63:6f75:6368:2068:1471:75ff:fe25:a8be]:11207", "[fd63:6f75:6368:2068:c490:b5ff:fe86:9cf7]:11207")
			if c.ServerNode(0) != 0 || c.ServerNode(1) != 1 {
				t.Errorf("IPv6 serverList not matched to nodes: %d %d", c.ServerNode(0), c.ServerNode(1))
			}
		}},
	{file: "cb_terse_no_partitions_4nodes.json", src: "10.112.150.102",
		locator: LocatorVbucket, version: Version{0, 11761}, vbuckets: 0, servers: 0, replicas: 0, nodes: 4,
		check: func(t *testing.T, c *Config) {
			// Parses (the nodes are useful) but routes nothing.
			if c.HasVbucketMap() {
				t.Error("HasVbucketMap() = true for a config with no partitions")
			}
			var rs RouteState
			if _, _, err := rs.Route(c, []byte("key"), 0); !errors.Is(err, ErrNoVbucketMap) {
				t.Errorf("Route: %v, want ErrNoVbucketMap", err)
			}
			if _, err := c.VbucketServer(24, 1, false); !errors.Is(err, ErrNoVbucketMap) {
				t.Errorf("VbucketServer: %v, want ErrNoVbucketMap", err)
			}
		}},
	{file: "cb_terse_node_uuids.json", src: "192.168.106.129",
		locator: LocatorVbucket, version: Version{1, 134}, vbuckets: 1024, servers: 3, replicas: 1, nodes: 3,
		check: func(t *testing.T, c *Config) {
			if !c.Servers()[1].ThisNode || c.Servers()[0].ThisNode {
				t.Error("thisNode not parsed")
			}
		}},
	{file: "cb_terse_nodesext_without_hostname.json", src: "example.com",
		locator: LocatorVbucket, version: Version{0, 12}, vbuckets: 1024, servers: 1, replicas: 1, nodes: 1,
		check: func(t *testing.T, c *Config) {
			// The nodesExt entry has no hostname: it is the source host, and
			// serverList[0] ("1.2.3.4:11210") is that node by position.
			wantAddrs(t, c, "", false, "example.com:11210")
			wantAddrs(t, c, "", true, "example.com:11207")
			if c.ServerNode(0) != 0 {
				t.Errorf("ServerNode(0) = %d", c.ServerNode(0))
			}
		}},
	{file: "cb_terse_rebalance_vbmapforward_rev28957.json", src: "10.143.200.104",
		locator: LocatorVbucket, version: Version{0, 28957}, vbuckets: 1024, servers: 3, replicas: 1, forward: true, nodes: 3,
		check: checkRebalance},
	{file: "cb_terse_rebalance_vbmapforward_rev28958.json", src: "10.143.200.104",
		locator: LocatorVbucket, version: Version{0, 28958}, vbuckets: 1024, servers: 3, replicas: 1, forward: true, nodes: 3,
		check: checkRebalance},
	{file: "cb_terse_rev_uint64_max.json", src: "10.112.192.102",
		locator: LocatorVbucket, version: Version{0, math.MaxUint64}, vbuckets: 1024, servers: 2, replicas: 1, nodes: 2,
		check: func(t *testing.T, c *Config) {
			// "vBucketMapForward": [] means no forward map.
			if _, err := c.VbucketServer(0, 0, true); !errors.Is(err, ErrNoForwardMap) {
				t.Errorf("forward lookup: %v, want ErrNoForwardMap", err)
			}
		}},
	{file: "cb_verbose_http_2.5_full.json", src: "10.0.0.120",
		locator: LocatorVbucket, version: Version{0, 0}, vbuckets: 64, servers: 1, replicas: 1, nodes: 1,
		check: func(t *testing.T, c *Config) {
			wantAddrs(t, c, "", false, "10.0.0.120:11210")
			n := c.Nodes()[0]
			if n.Ports.Mgmt != 8091 || n.Ports.MgmtTLS != 18091 || !n.ThisNode {
				t.Errorf("verbose node %+v", n)
			}
		}},
	{file: "cb_verbose_http_2node_1024vb.json", src: "192.168.56.101",
		locator: LocatorVbucket, version: Version{0, 0}, vbuckets: 1024, servers: 2, replicas: 1, nodes: 2,
		check: func(t *testing.T, c *Config) {
			wantAddrs(t, c, "", false, "192.168.56.101:11210", "192.168.56.104:11210")
		}},
	{file: "global_6.5_multi_node.json", src: "10.143.193.101",
		locator: LocatorNone, version: Version{0, 1172}, nodes: 2, check: checkGlobal},
	{file: "global_6.5_single_node.json", src: "10.0.0.9",
		locator: LocatorNone, version: Version{0, 26}, nodes: 1,
		check: func(t *testing.T, c *Config) {
			checkGlobal(t, c)
			n := c.Nodes()[0]
			if a, _ := n.KVAddr("", false); a != "10.0.0.9:11210" {
				t.Errorf("single node without hostname: %q", a)
			}
		}},
	{file: "global_7.6_external_ports_not_unique.json", src: "private-endpoint.nyarjaj-crhge67o.sandbox.nonprod-project-avengers.com",
		locator: LocatorNone, version: Version{1, 397}, nodes: 5,
		check: func(t *testing.T, c *Config) {
			checkGlobal(t, c)
			if n := c.DetectNetwork("private-endpoint.nyarjaj-crhge67o.sandbox.nonprod-project-avengers.com"); n != "external" {
				t.Errorf("DetectNetwork = %q", n)
			}
			var got []string
			for _, n := range c.Nodes() {
				a, _ := n.KVAddr("external", true)
				_, plain := n.KVAddr("external", false)
				if plain {
					t.Errorf("node %s has a plain external KV port; its external ports list none", n.Hostname)
				}
				got = append(got, a[len(a)-5:])
			}
			if !slices.Equal(got, []string{"11210", "11211", "11212", "11208", "11209"}) {
				t.Errorf("external kvSSL ports %q", got)
			}
		}},
	{file: "global_alternate_addresses.json", src: "mbp.local",
		locator: LocatorNone, version: Version{1, 2576}, nodes: 2,
		check: func(t *testing.T, c *Config) {
			checkGlobal(t, c)
			ns := c.Nodes()
			if a, ok := ns[0].KVAddr("external", false); !ok || a != "mbp.local:11211" {
				t.Errorf("cb1 external kv %q %v", a, ok)
			}
			// cb2's external ports list only mgmt: no KV there, and the
			// default port must not be borrowed.
			if a, ok := ns[1].KVAddr("external", false); ok {
				t.Errorf("cb2 external kv %q, want none", a)
			}
			if ns[1].Alternates[0].Ports.Mgmt != 9092 {
				t.Errorf("cb2 external mgmt %d", ns[1].Alternates[0].Ports.Mgmt)
			}
			// The cluster manager's addresses, where an HTTP config
			// stream is opened: per network, TLS or not.
			for _, m := range []struct {
				node     int
				network  string
				tls      bool
				want     string
				wantSome bool
			}{
				{0, "", false, "cb1.lan:8091", true},
				{0, "default", true, "cb1.lan:18091", true},
				{0, "external", false, "mbp.local:9091", true},
				{1, "external", false, "mbp.local:9092", true},
				{1, "external", true, "", false}, // no mgmtSSL listed there
				{1, "nosuch", false, "", false},
			} {
				if a, ok := ns[m.node].MgmtAddr(m.network, m.tls); a != m.want || ok != m.wantSome {
					t.Errorf("node %d MgmtAddr(%q, %v) = %q, %v; want %q", m.node, m.network, m.tls, a, ok, m.want)
				}
			}
		}},
	{file: "global_rev_epoch_4node.json", src: "svc-dqis-node-003.2e0tvnn48fxnokjq.cloud.couchbase.com",
		locator: LocatorNone, version: Version{1, 18318}, nodes: 4, check: checkGlobal},
	{file: "http_terse_streaming_two_configs.txt", src: "localhost", rejected: "json"},
	{file: "memcached_terse_4node_host_placeholder.json", src: "localhost",
		locator: LocatorKetama, version: Version{0, 49}, servers: 4, nodes: 4,
		check: func(t *testing.T, c *Config) {
			wantAddrs(t, c, "", false, "10.0.0.195:12000", "localhost:12002", "localhost:12004", "localhost:12006")
			wantAddrs(t, c, "", true, "10.0.0.195:11996", "localhost:11992", "localhost:11988", "localhost:11984")
		}},
	{file: "memcached_terse_7.6.0_alt_host_placeholder.json", src: "10.5.5.5",
		locator: LocatorKetama, version: Version{1, 34060}, servers: 1, nodes: 1,
		check: func(t *testing.T, c *Config) {
			wantAddrs(t, c, "", false, "10.5.5.5:11210")
			wantAddrs(t, c, "external", false, "booper:21210")
			if c.BucketType() != "memcached" {
				t.Errorf("bucket type %q", c.BucketType())
			}
		}},
	{file: "memcached_terse_external_alt.json", src: "192.168.132.234",
		locator: LocatorKetama, version: Version{0, 1078}, servers: 3, nodes: 3,
		check: func(t *testing.T, c *Config) {
			wantAddrs(t, c, "external", false, "192.168.132.234:32775", "192.168.132.234:32799", "192.168.132.234:32823")
		}},
	{file: "memcached_terse_nodesext_has_extra_node.json", src: "10.0.0.1",
		locator: LocatorKetama, version: Version{0, 32470}, servers: 3, nodes: 4,
		check: func(t *testing.T, c *Config) {
			// 10.0.0.4 is in nodesExt but not in nodes: not on the ring yet
			// (gocbcore TestNodeExtConfig expects 3 KV servers).
			wantAddrs(t, c, "", false, "10.0.0.1:11210", "10.0.0.2:11210", "10.0.0.3:11210")
			if c.Ketama().NumServers() != 3 || len(c.Ketama().Points()) != 3*160 {
				t.Errorf("ring of %d servers, %d points", c.Ketama().NumServers(), len(c.Ketama().Points()))
			}
		}},
	{file: "memcached_verbose_http.json", src: "10.112.192.101",
		locator: LocatorKetama, version: Version{0, 0}, servers: 2, nodes: 2,
		check: func(t *testing.T, c *Config) {
			wantAddrs(t, c, "", false, "10.112.192.102:11210", "10.112.192.101:11210")
		}},
	{file: "memcached_verbose_http_2.5.json", src: "10.0.0.120",
		locator: LocatorKetama, version: Version{0, 0}, servers: 1, nodes: 1},
	{file: "rev_epoch_compare/config_higher_rev_higher_epoch.json", src: "localhost",
		locator: LocatorVbucket, version: Version{2, 2}, vbuckets: 1024, servers: 1, replicas: 1, nodes: 1},
	{file: "rev_epoch_compare/config_higher_rev_lower_epoch.json", src: "localhost",
		locator: LocatorVbucket, version: Version{1, 2}, vbuckets: 1024, servers: 1, replicas: 1, nodes: 1},
	{file: "rev_epoch_compare/config_higher_rev_no_epoch.json", src: "localhost",
		locator: LocatorVbucket, version: Version{0, 2}, vbuckets: 1024, servers: 1, replicas: 1, nodes: 1},
	{file: "rev_epoch_compare/config_lower_rev_higher_epoch.json", src: "localhost",
		locator: LocatorVbucket, version: Version{2, 1}, vbuckets: 1024, servers: 1, replicas: 1, nodes: 1},
	{file: "rev_epoch_compare/config_lower_rev_lower_epoch.json", src: "localhost",
		locator: LocatorVbucket, version: Version{1, 1}, vbuckets: 1024, servers: 1, replicas: 1, nodes: 1},
	{file: "rev_epoch_compare/config_lower_rev_no_epoch.json", src: "localhost",
		locator: LocatorVbucket, version: Version{0, 1}, vbuckets: 1024, servers: 1, replicas: 1, nodes: 1},
}

func checkGlobal(t *testing.T, c *Config) {
	t.Helper()
	if c.BucketName() != "" || c.HasVbucketMap() || c.NumServers() != 0 || c.Ketama() != nil {
		t.Errorf("global config has bucket parts: name %q map %v servers %d", c.BucketName(), c.HasVbucketMap(), c.NumServers())
	}
	var rs RouteState
	if _, _, err := rs.Route(c, []byte("k"), 0); !errors.Is(err, ErrNoVbucketMap) {
		t.Errorf("Route on a global config: %v, want ErrNoVbucketMap", err)
	}
}

func checkRebalance(t *testing.T, c *Config) {
	t.Helper()
	wantAddrs(t, c, "", false, "10.143.200.101:11210", "10.143.200.102:11210", "10.143.200.104:11210")
	differ := 0
	for vb := 0; vb < c.NumVbuckets(); vb++ {
		for r := 0; r <= c.NumReplicas(); r++ {
			a, errA := c.VbucketServer(uint16(vb), r, false)
			b, errB := c.VbucketServer(uint16(vb), r, true)
			if errA != nil || errB != nil {
				t.Fatalf("vb %d replica %d: %v %v", vb, r, errA, errB)
			}
			if a != b {
				differ++
				break
			}
		}
	}
	// The corpus README: 682 of 1024 entries differ between the maps.
	if differ != 682 {
		t.Errorf("%d vbuckets differ between vBucketMap and vBucketMapForward, want 682", differ)
	}
}

func TestConformanceConfigs(t *testing.T) {
	for _, tc := range conformanceCases {
		t.Run(tc.file, func(t *testing.T) {
			data := readConformance(t, filepath.Join("configs", tc.file))
			c, err := Parse(data, tc.src)
			if tc.rejected != "" {
				var pe *ParseError
				if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("Parse = %v, %v; want a *ParseError", c, err)
				}
				if pe.Field != tc.rejected {
					t.Fatalf("rejected at %q (%v), want field %q", pe.Field, err, tc.rejected)
				}
				t.Logf("rejected as expected: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if c.Locator() != tc.locator || c.Version() != tc.version || c.NumVbuckets() != tc.vbuckets ||
				c.NumServers() != tc.servers || c.NumReplicas() != tc.replicas || c.HasForwardMap() != tc.forward ||
				len(c.Nodes()) != tc.nodes {
				t.Errorf("got locator %v version %v vbuckets %d servers %d replicas %d forward %v nodes %d\n"+
					"want locator %v version %v vbuckets %d servers %d replicas %d forward %v nodes %d",
					c.Locator(), c.Version(), c.NumVbuckets(), c.NumServers(), c.NumReplicas(), c.HasForwardMap(), len(c.Nodes()),
					tc.locator, tc.version, tc.vbuckets, tc.servers, tc.replicas, tc.forward, tc.nodes)
			}
			checkRoutesEverything(t, c)
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

// checkRoutesEverything: every vbucket and copy of a parsed config routes to
// a valid server index or to ErrNoServer, on both maps; ketama routes every
// key to a valid index.
func checkRoutesEverything(t testing.TB, c *Config) {
	t.Helper()
	for _, fwd := range []bool{false, true} {
		if fwd && !c.HasForwardMap() {
			continue
		}
		for vb := 0; vb < c.NumVbuckets(); vb++ {
			for r := 0; r <= c.NumReplicas(); r++ {
				s, err := c.VbucketServer(uint16(vb), r, fwd)
				if err != nil {
					if !errors.Is(err, ErrNoServer) {
						t.Fatalf("vb %d copy %d fwd %v: %v", vb, r, fwd, err)
					}
					continue
				}
				if s < 0 || s >= c.NumServers() {
					t.Fatalf("vb %d copy %d fwd %v: server %d of %d", vb, r, fwd, s, c.NumServers())
				}
			}
		}
	}
	if k := c.Ketama(); k != nil {
		if k.NumServers() != c.NumServers() {
			t.Fatalf("ring has %d servers, config %d", k.NumServers(), c.NumServers())
		}
		for i := 0; i < 64; i++ {
			if s := k.Server([]byte{byte(i), 'k'}); s < 0 || s >= c.NumServers() {
				t.Fatalf("ketama server %d of %d", s, c.NumServers())
			}
		}
	}
}

// Every file in configs/ must have a row above: a new capture cannot slip in
// untested.
func TestConformanceTableIsComplete(t *testing.T) {
	dir := conformance.Path("configs")
	if _, err := os.Stat(dir); err != nil {
		conformance.Missing(t, dir, err)
	}
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, tc := range conformanceCases {
		covered[tc.file] = true
	}
	for _, f := range files {
		if !covered[f] {
			t.Errorf("configs/%s has no row in conformanceCases", f)
		}
	}
	if len(files) != len(conformanceCases) {
		t.Errorf("%d files, %d cases", len(files), len(conformanceCases))
	}
}

func TestParseNeedsSourceHostForPlaceholder(t *testing.T) {
	data := readConformance(t, "configs/cb_terse_host_placeholder_64vb.json")
	_, err := Parse(data, "")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Field != "nodesExt[0].hostname" {
		t.Fatalf("Parse without source host: %v", err)
	}
}

// The HTTP streaming body is two configs separated by "\n\n\n\n": Parse
// rejects it whole (see conformanceCases); split, each config parses.
func TestStreamingConfigs(t *testing.T) {
	data := readConformance(t, "configs/http_terse_streaming_two_configs.txt")
	for _, chunk := range []int{len(data), 1, 7, 4096} {
		sc := bufio.NewScanner(&chunkReader{data: data, n: chunk})
		sc.Buffer(nil, 1<<20)
		sc.Split(scanStreamConfigs)
		var revs []uint64
		for sc.Scan() {
			c, err := Parse(sc.Bytes(), "localhost")
			if err != nil {
				t.Fatalf("chunk %d: config %d: %v", chunk, len(revs), err)
			}
			revs = append(revs, c.Version().Rev)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(revs, []uint64{18815, 18820}) {
			t.Fatalf("chunk %d: revs %v, want [18815 18820]", chunk, revs)
		}
	}
}

func TestScanStreamConfigsSkipsEmptyAndTrims(t *testing.T) {
	in := "\n\n\n\n  {\"a\":1}\n\n\n\n\n\n\n\n{\"b\":2}  \n"
	sc := bufio.NewScanner(bytes.NewReader([]byte(in)))
	sc.Split(scanStreamConfigs)
	var got []string
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	if !slices.Equal(got, []string{`{"a":1}`, `{"b":2}`}) {
		t.Fatalf("tokens %q", got)
	}
}

// scanStreamConfigs is a bufio.SplitFunc that cuts an HTTP config stream
// (/pools/default/bs/<bucket>) into configs: the server writes each config
// followed by "\n\n\n\n". Tokens are trimmed of surrounding white space;
// empty ones are skipped. At EOF the remaining bytes, if any are not white
// space, are the last token.
func scanStreamConfigs(data []byte, atEOF bool) (advance int, token []byte, err error) {
	sep := []byte("\n\n\n\n")
	for {
		i := bytes.Index(data[advance:], sep)
		if i < 0 {
			break
		}
		tok := bytes.TrimSpace(data[advance : advance+i])
		advance += i + len(sep)
		if len(tok) > 0 {
			return advance, tok, nil
		}
	}
	if atEOF {
		if tok := bytes.TrimSpace(data[advance:]); len(tok) > 0 {
			return len(data), tok, nil
		}
		return len(data), nil, nil
	}
	return advance, nil, nil
}

// chunkReader returns at most n bytes per Read, to split the stream at every
// possible place.
type chunkReader struct {
	data []byte
	n    int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, errEOF
	}
	n := min(len(p), r.n, len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

var errEOF = io.EOF
