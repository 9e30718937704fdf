package httpconfig

import (
	"context"
	"slices"
	"testing"

	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/vbmap"
)

// The seeds a DNS SRV record gave when looked up again (KV addresses) are
// streamed from after the nodes of the config, at the REST address the
// bootstrap derives from a seed: a target at the scheme's KV port (11210;
// 11207 with TLS) at its host's REST port (8091; 18091), one at another
// port skipped (no convention names its REST port), one given twice
// listed once. Only those the config does not list are judged as looked-up
// seeds (Sink.LookedUpForeign). They are streamed from only after a round
// of the stream that no node served (stranded), until a node the config
// names serves again.
func TestSourceStreamsFromTheSeedsLookedUpAgain(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	mgmt := mc.MgmtAddrs()
	c := New(Config{Bucket: "default", Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword})
	raw, host, err := c.Fetch(context.Background(), mgmt[0])
	if err != nil {
		t.Fatal(err)
	}
	installed, err := vbmap.Parse(raw, host)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tls              bool
		kvPort, restPort int
		seeds            []string
		want             []string
	}{
		{false, 11210, 8091, []string{"cb-0.example:11210", "cb-1.example:9000", "cb-0.example:11210", "10.0.0.7:11207"},
			[]string{"cb-0.example:8091"}},
		{true, 11207, 18091, []string{"cb-0.example:11207", "cb-1.example:11210", "[2001:db8::1]:11207"},
			[]string{"cb-0.example:18091", "[2001:db8::1]:18091"}},
	} {
		var lookedUp []string
		sn := streamNodes{s: NewSource(c, nil, tc.kvPort, tc.restPort, tc.tls),
			onItsWay: func(vbmap.Version) bool { return true }, lookedUp: func() []string { return lookedUp }}
		var nodes []string
		for _, n := range installed.Nodes() {
			if a, ok := n.MgmtAddr("", tc.tls); ok {
				nodes = append(nodes, a)
			}
		}
		cfg := func() *vbmap.Config { return installed }
		if got := sn.addrs(cfg, ""); !slices.Equal(got, nodes) || len(sn.lookedUpOnly) != 0 {
			t.Fatalf("tls=%v, no lookup: %v (looked-up %v), want %v", tc.tls, got, sn.lookedUpOnly, nodes)
		}
		lookedUp = tc.seeds
		if got := sn.addrs(cfg, ""); !slices.Equal(got, nodes) || len(sn.lookedUpOnly) != 0 {
			t.Fatalf("tls=%v, a node serves the stream: %v (looked-up %v), want %v", tc.tls, got, sn.lookedUpOnly, nodes)
		}
		sn.stranded = true // a round no node served
		want := append(slices.Clone(nodes), tc.want...)
		if got := sn.addrs(cfg, ""); !slices.Equal(got, want) {
			t.Fatalf("tls=%v: %v, want %v", tc.tls, got, want)
		}
		for _, a := range want {
			if sn.lookedUpOnly[a] != slices.Contains(tc.want, a) {
				t.Errorf("tls=%v: %s judged as a looked-up seed: %v", tc.tls, a, sn.lookedUpOnly[a])
			}
		}
		lookedUp = nil
		if got := sn.addrs(cfg, ""); !slices.Equal(got, nodes) || len(sn.lookedUpOnly) != 0 {
			t.Fatalf("tls=%v, the lookup's seeds dropped (a newer config installed): %v (looked-up %v), want %v", tc.tls, got, sn.lookedUpOnly, nodes)
		}
	}
}
