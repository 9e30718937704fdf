package conn

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// proxyTo starts a fault proxy in front of addr, closed with the test.
func proxyTo(t *testing.T, addr string) *faultnode.Proxy {
	t.Helper()
	p, err := faultnode.NewProxy(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// kv_engine cannot tell a client that did not negotiate XERROR that it has
// no bucket (NO_BUCKET) or no access (EACCESS): Connection::remapErrorCode
// turns both into a disconnect. A memcached-mode Dial (no HELLO) to a
// Couchbase node that lists only PLAIN (so its mechanisms do not give it
// away) logs in, and the node then hangs up on the get it asks without a
// bucket. Dial reported a bare "no response" with the EOF; it now says the
// node closed the connection where Couchbase Server does, and what that
// likely means, without claiming more than it knows.
func TestMemcachedModeHangupAfterLoginNamesLikelyCouchbase(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	p := proxyTo(t, mc.Node(0).Addr())
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if resp.OpCode != memdx.OpSASLListMechs || resp.Status != memdx.StatusSuccess {
			return faultnode.Action{}
		}
		return faultnode.Action{Send: []memdx.Packet{faultnode.Reply(req, memdx.StatusSuccess, []byte(memdx.MechPlain))}}
	})
	o := Options{Memcached: true, Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, AllowPlainAuthWithoutTLS: true}
	c, err := Dial(testCtx(t), p.Addr(), o)
	if err == nil {
		c.Close()
		t.Fatal("Dial succeeded")
	}
	t.Logf("%v", err)
	if !errors.Is(err, kverr.ErrBootstrap) {
		t.Fatalf("err %v does not match ErrBootstrap", err)
	}
	for _, want := range []string{"closed the connection", "Couchbase Server", "XERROR", "couchbase://" + p.Addr()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	var nm *NotMemcachedError
	if errors.As(err, &nm) {
		t.Errorf("a hang-up is no proof of a Couchbase node: %T", err)
	}
}

// The redial without XERROR after an unusable error map (RFC 0013): a user
// who may not use the bucket gets EACCESS to SELECT_BUCKET, which kv_engine
// turns into a disconnect for such a connection. Dial reported "bootstrap
// SELECT_BUCKET: no response" and an EOF; it now names the likely cause
// (the bucket, or the user's access to it) and why the server could not
// say so (no XERROR, because the error map was dropped), without claiming
// it knows (not a *BucketAccessError).
func TestHangupAtSelectBucketWithoutXerrorNamesLikelyCause(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Users: []mockcluster.User{
		{Name: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Buckets: []string{"*"}},
		{Name: "app", Password: "secret", Buckets: []string{mockcluster.DefaultBucket}},
	}})
	p := proxyTo(t, mc.Node(0).Addr())
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if resp.OpCode != memdx.OpGetErrorMap || resp.Status != memdx.StatusSuccess {
			return faultnode.Action{}
		}
		return faultnode.Action{Send: []memdx.Packet{faultnode.Reply(req, memdx.StatusSuccess, []byte(`{"version":2,"revision":1,"errors":{"zz":{}}}`))}}
	})
	c, err := Dial(testCtx(t), p.Addr(), Options{Username: "app", Password: "secret", Bucket: "other"})
	if err == nil {
		c.Close()
		t.Fatal("Dial succeeded")
	}
	t.Logf("%v", err)
	if !errors.Is(err, kverr.ErrBootstrap) {
		t.Fatalf("err %v does not match ErrBootstrap", err)
	}
	var be *BootstrapError
	if !errors.As(err, &be) || be.Step != memdx.OpSelectBucket {
		t.Fatalf("err %v (%T), want a *BootstrapError at SELECT_BUCKET", err, err)
	}
	for _, want := range []string{"closed the connection", `"other"`, `"app"`, "XERROR", "error map"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	var ba *BucketAccessError
	if errors.As(err, &ba) {
		t.Errorf("a hang-up is no EACCESS the server sent: %T", err)
	}
}

// Without a bucket, GET_CLUSTER_CONFIG needs the SystemSettings privilege;
// a user without it gets EACCESS with XERROR (the Dial goes on without a
// config), and a hang-up without: the Dial's error names the likely cause.
func TestHangupAtBucketlessConfigWithoutXerrorNamesLikelyCause(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Users: []mockcluster.User{
		{Name: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Buckets: []string{"*"}},
		{Name: "app", Password: "secret", Buckets: []string{mockcluster.DefaultBucket}},
	}})
	c, err := Dial(testCtx(t), mc.Node(0).Addr(), Options{Username: "app", Password: "secret"})
	if err != nil {
		t.Fatalf("with XERROR: %v", err)
	}
	if c.ClusterConfigStatus() != memdx.StatusNoAccess {
		t.Errorf("with XERROR: GET_CLUSTER_CONFIG answered %s, want EACCESS", c.ClusterConfigStatus())
	}
	c.Close()

	p := proxyTo(t, mc.Node(0).Addr())
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if resp.OpCode != memdx.OpGetErrorMap || resp.Status != memdx.StatusSuccess {
			return faultnode.Action{}
		}
		return faultnode.Action{Send: []memdx.Packet{faultnode.Reply(req, memdx.StatusSuccess, []byte(`{"version":2`))}}
	})
	c, err = Dial(testCtx(t), p.Addr(), Options{Username: "app", Password: "secret"})
	if err == nil {
		c.Close()
		t.Fatal("Dial succeeded: the node answered GET_CLUSTER_CONFIG without XERROR, which kv_engine does not")
	}
	t.Logf("%v", err)
	for _, want := range []string{"closed the connection", `"app"`, "SystemSettings", "error map"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
