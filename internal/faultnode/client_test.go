package faultnode_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// With the node's port rewritten in configs, the client bootstraps through
// the proxy and stays on it: its operations go through the proxy, and a
// black hole makes them time out.
func TestProxyRewritePortsKeepsClientOnProxy(t *testing.T) {
	mc, p := proxied(t)
	p.RewritePorts(map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(p.Addr())})
	cl, err := client.Connect(testCtx(t), "couchbase://"+p.Addr()+"/"+mockcluster.DefaultBucket,
		&client.Options{Username: faultnode.DefaultUser, Password: faultnode.DefaultPassword})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	col := cl.DefaultCollection()
	if _, err := col.Upsert(testCtx(t), "k", []byte(`"v"`), nil); err != nil {
		t.Fatal(err)
	}
	if r, err := col.Get(testCtx(t), "k", nil); err != nil || string(r.Value) != `"v"` {
		t.Fatalf("Get: %q %v", r.Value, err)
	}
	if p.Requests(memdx.OpGet) != 1 || p.Requests(memdx.OpSet) != 1 {
		t.Fatalf("the proxy saw %d GETs and %d SETs; want 1 and 1", p.Requests(memdx.OpGet), p.Requests(memdx.OpSet))
	}

	p.Blackhole(true)
	err = cancelAfter(t, p.NextRequest(memdx.OpGet), func(ctx context.Context) error {
		_, err := col.Get(ctx, "k", nil)
		return err
	})
	if !errors.Is(err, client.ErrRequestCanceled) {
		t.Fatalf("Get into the black hole: %v; want it unanswered until cancelled", err)
	}
	p.Blackhole(false)
	if r, err := col.Get(testCtx(t), "k", nil); err != nil || string(r.Value) != `"v"` {
		t.Fatalf("Get after the black hole: %q %v", r.Value, err)
	}
}
