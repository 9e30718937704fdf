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

// unusableErrMap makes p answer GET_ERROR_MAP with a map that does not
// parse, so that Dial redials without XERROR (RFC 0013).
func unusableErrMap(p *faultnode.Proxy) {
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if resp.OpCode != memdx.OpGetErrorMap || resp.Status != memdx.StatusSuccess {
			return faultnode.Action{}
		}
		return faultnode.Action{Send: []memdx.Packet{faultnode.Reply(req, memdx.StatusSuccess, []byte(`{"version":2,"revision":1,"errors":{"zz":{}}}`))}}
	})
}

// The redial without XERROR after an unusable error map (RFC 0013): a user
// who may not use the bucket gets EACCESS to SELECT_BUCKET, which kv_engine
// turns into a disconnect for such a connection. Dial reported "bootstrap
// SELECT_BUCKET: no response" and an EOF, a failure Connect could not tell
// from the network's (ErrNoNodeAvailable, and the wait for a fallback).
// One hang-up may be the network's: Dial dials once more, and the same
// hang-up there, after a login that succeeded again, is the node's
// refusal: a *BucketAccessError (ErrBucketNotFound) with no Status (none
// came), naming the likely cause (the bucket, or the user's access to it)
// and why the server could not say so (no XERROR, because the error map
// was dropped).
func TestHangupAtSelectBucketWithoutXerrorNamesLikelyCause(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Users: []mockcluster.User{
		{Name: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Buckets: []string{"*"}},
		{Name: "app", Password: "secret", Buckets: []string{mockcluster.DefaultBucket}},
	}})
	p := proxyTo(t, mc.Node(0).Addr())
	unusableErrMap(p)
	c, err := Dial(testCtx(t), p.Addr(), Options{Username: "app", Password: "secret", Bucket: "other"})
	if err == nil {
		c.Close()
		t.Fatal("Dial succeeded")
	}
	t.Logf("%v", err)
	if !errors.Is(err, kverr.ErrBootstrap) || !errors.Is(err, kverr.ErrBucketNotFound) {
		t.Fatalf("err %v does not match ErrBootstrap and ErrBucketNotFound", err)
	}
	var ba *BucketAccessError
	if !errors.As(err, &ba) || ba.HungUp == nil || ba.HungUp.Step != memdx.OpSelectBucket || ba.Status != 0 || ba.Bucket != "other" {
		t.Fatalf("err %v (%T), want a *BucketAccessError for bucket \"other\" hung up at SELECT_BUCKET, without a status", err, err)
	}
	if errors.Is(err, memdx.StatusNoAccess) || errors.Is(err, memdx.StatusSuccess) {
		t.Errorf("a hang-up is no status the server sent: %v", err)
	}
	for _, want := range []string{"closed the connection", "two connections", `"other"`, `"app"`, "XERROR", "error map"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := p.Requests(memdx.OpSelectBucket); n != 2 {
		t.Errorf("%d SELECT_BUCKETs, want 2: one per connection without XERROR", n)
	}
}

// A connection without XERROR that ends at SELECT_BUCKET once (a network
// fault, a node restarting) is dialed again, and the next one that
// selects the bucket makes the Dial succeed.
func TestOneHangupAtSelectBucketWithoutXerrorIsDialedAgain(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	p := proxyTo(t, mc.Node(0).Addr())
	unusableErrMap(p)
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSelectBucket}},
		Action: mockcluster.Action{Close: mockcluster.CloseBeforeApply}, Times: 1})
	c, err := Dial(testCtx(t), p.Addr(), Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword,
		Bucket: mockcluster.DefaultBucket})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	c.Close()
	if n := p.Requests(memdx.OpSelectBucket); n != 2 {
		t.Errorf("%d SELECT_BUCKETs, want 2", n)
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
