package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A request with the Impersonate frame info runs as the named user
// (kv_engine: parseFrameExtras in daemon/mcbp_validators.cc takes the
// name, "^name" for an external user; Cookie::doExecute and
// fetchEuidPrivilegeSet in daemon/cookie.cc then decide before the command
// runs):
//
//   - a connection whose user lacks the Impersonate privilege gets EACCESS
//     ("Authorization failure: can't execute <OP> operation without the
//     Impersonate privilege"), whatever the opcode;
//   - an external user without an external authentication service gets
//     NOT_SUPPORTED, an unknown local user EACCESS (`User "x" is not a
//     Couchbase user`);
//   - otherwise the command runs with the privileges both users have, so
//     an impersonated user without access to the bucket gets EACCESS from
//     the command's privilege check (Cookie::testPrivilege).
//
// The mock's users that may use every bucket are its administrators, the
// only ones with Impersonate. The mock answered UNKNOWN_FRAME_INFO to a
// document command with the frame, and ran anything else as the
// connection's user.
func TestImpersonateFrame(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: []User{
		{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}},
		{Name: "app", Password: "secret", Buckets: []string{DefaultBucket}},
		{Name: "elsewhere", Password: "secret", Buckets: []string{"other"}},
	}})
	b := c.Bucket(DefaultBucket)
	login := func(user, pass string) *rawClient {
		cl := dialRaw(t, c.Node(0).Addr())
		cl.hello(stdFeatures...)
		if st := cl.authPlain(user, pass); st != memdx.StatusSuccess {
			t.Fatalf("auth %s: %s", user, st)
		}
		if st := cl.selectBucket(DefaultBucket); st != memdx.StatusSuccess {
			t.Fatalf("select as %s: %s", user, st)
		}
		return cl
	}
	as := func(cl *rawClient, r memdx.Request, euid string) memdx.Request {
		r = keyReq(cl, b, r)
		var err error
		if r.FramingExtras, err = memdx.AppendFrameInfo(nil, uint16(memdx.FrameImpersonateUser), []byte(euid)); err != nil {
			t.Fatal(err)
		}
		return r
	}

	admin := login(DefaultUser, DefaultPassword)
	expectAnswer(t, "SET as app", admin.do(as(admin, set("imp", `{"a":1}`), "app")), memdx.StatusSuccess, "")
	expectAnswer(t, "GET as app", admin.do(as(admin, memdx.NewGet([]byte("imp")), "app")), memdx.StatusSuccess, "")
	expectAnswer(t, "GET as a user without the bucket", admin.do(as(admin, memdx.NewGet([]byte("imp")), "elsewhere")),
		memdx.StatusNoAccess, "Authorization failure: can't execute GET operation without the Read privilege")
	expectAnswer(t, "SET as a user without the bucket", admin.do(as(admin, set("imp", "2"), "elsewhere")),
		memdx.StatusNoAccess, "Authorization failure: can't execute SET operation without the Upsert privilege")
	expectAnswer(t, "GET as an unknown user", admin.do(as(admin, memdx.NewGet([]byte("imp")), "ghost")),
		memdx.StatusNoAccess, `User "ghost" is not a Couchbase user`)
	expectAnswer(t, "GET as an external user", admin.do(as(admin, memdx.NewGet([]byte("imp")), "^ldap")),
		memdx.StatusNotSupported, "External authentication service not configured")
	expectAnswer(t, "NOOP as app", admin.do(as(admin, memdx.NewNoop(), "app")), memdx.StatusSuccess, "")

	app := login("app", "secret")
	expectAnswer(t, "GET as the administrator, without Impersonate", app.do(as(app, memdx.NewGet([]byte("imp")), DefaultUser)),
		memdx.StatusNoAccess, "Authorization failure: can't execute GET operation without the Impersonate privilege")
	expectAnswer(t, "NOOP as the administrator, without Impersonate", app.do(as(app, memdx.NewNoop(), DefaultUser)),
		memdx.StatusNoAccess, "Authorization failure: can't execute NOOP operation without the Impersonate privilege")
	// Without a bucket the impersonated user has no bucket privilege: the
	// privilege check fails before the engine could say NO_BUCKET.
	nob := dialRaw(t, c.Node(0).Addr())
	nob.hello(stdFeatures...)
	if st := nob.authPlain(DefaultUser, DefaultPassword); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	expectAnswer(t, "GET as app without a bucket", nob.do(as(nob, memdx.NewGet([]byte("imp")), "app")),
		memdx.StatusNoAccess, "Authorization failure: can't execute GET operation without the Read privilege")
	expectAnswer(t, "GET without a bucket", nob.do(keyReq(nob, b, memdx.NewGet([]byte("imp")))), memdx.StatusNoBucket, "")

	// Before authentication nobody may impersonate.
	anon := dialRaw(t, c.Node(0).Addr())
	hello := memdx.NewHello(memdx.HelloKey("mocktest", "1"), []memdx.HelloFeature{memdx.FeatureXerror})
	hello.FramingExtras, _ = memdx.AppendFrameInfo(nil, uint16(memdx.FrameImpersonateUser), []byte(DefaultUser))
	expectAnswer(t, "HELLO as the administrator, unauthenticated", anon.do(hello), memdx.StatusNoAccess, "")
	// The refused SET was not applied.
	if d, ok := b.Get("_default", "_default", "imp"); !ok || string(d.Value) != `{"a":1}` {
		t.Fatalf("document after the refused SET: %q %v", d.Value, ok)
	}
}
