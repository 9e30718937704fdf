package faultnode_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
)

// RewritePorts rewrites a config the node sends snappy-compressed (once a
// client negotiates SnappyEverywhere, the mock and kv_engine compress
// configs) as it rewrites a plain one, and keeps it compressed: a client
// that asks for SnappyEverywhere stays on the proxy too.
func TestProxyRewritePortsInSnappyConfig(t *testing.T) {
	mc, p := proxied(t)
	nodePort, proxyPort := faultnode.Port(mc.Node(0).Addr()), faultnode.Port(p.Addr())
	p.RewritePorts(map[string]string{nodePort: proxyPort})
	o := opts()
	o.Features = []memdx.HelloFeature{memdx.FeatureSnappy, memdx.FeatureSnappyEverywhere, memdx.FeatureJSON}
	c := dial(t, p.Addr(), o)
	if !c.Features().Has(memdx.FeatureSnappyEverywhere) {
		t.Fatal("the mock did not grant SnappyEverywhere")
	}
	req := memdx.NewGetClusterConfig()
	var dt memdx.Datatype
	var body []byte
	err := c.Do(testCtx(t), &req, func(pk *memdx.Packet) error {
		dt, body = pk.Datatype, slices.Clone(pk.Value)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !dt.Has(memdx.DatatypeSnappy) {
		t.Fatalf("datatype %v: the config reached the client uncompressed", dt)
	}
	cfg, err := memdx.DecompressSnappy(nil, body, 0)
	if err != nil {
		t.Fatalf("the config is not valid snappy: %v", err)
	}
	if bytes.Contains(cfg, []byte(":"+nodePort+`"`)) || !bytes.Contains(cfg, []byte(":"+proxyPort+`"`)) {
		t.Fatalf("the node's port %s is still in the config, or the proxy's %s is not", nodePort, proxyPort)
	}
}
