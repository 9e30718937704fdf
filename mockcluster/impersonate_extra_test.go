package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// The ImpersonateUserExtraPrivilege frame info names a privilege the
// impersonated user is granted for the request. kv_engine's frame parser
// (verify_header in daemon/mcbp_validators.cc) answers EINVAL "Privilege
// name must be set" for an empty name and "Failed to look up the
// privilege" for a name cb::rbac::to_privilege does not know
// (rbac/privileges.cc); Cookie::checkPrivilege (daemon/cookie.cc) then
// grants a privilege the connection's user holds to the impersonated user
// when the frame names it, and ignores the frame when the request
// impersonates nobody (there is no effective user's privilege context to
// extend). The mock accepted any name and granted nothing: an impersonated
// user without access to the bucket got EACCESS even for the privilege the
// request granted.
func TestImpersonateExtraPrivilege(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: []User{
		{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}},
		{Name: "app", Password: "secret", Buckets: []string{DefaultBucket}},
		{Name: "elsewhere", Password: "secret", Buckets: []string{"other"}},
	}})
	b := c.Bucket(DefaultBucket)
	if _, err := b.Set("", "", "doc", []byte(`{"a":1}`), 0, 0); err != nil {
		t.Fatal(err)
	}
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
	with := func(cl *rawClient, r memdx.Request, euid string, privs ...string) memdx.Request {
		r = keyReq(cl, b, r)
		var fe []byte
		var err error
		if euid != "" {
			if fe, err = memdx.AppendFrameInfo(fe, uint16(memdx.FrameImpersonateUser), []byte(euid)); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range privs {
			if fe, err = memdx.AppendFrameInfo(fe, uint16(memdx.FrameImpersonateUserExtraPrivilege), []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		r.FramingExtras = fe
		return r
	}
	get := func() memdx.Request { return memdx.NewGet([]byte("doc")) }

	admin := login(DefaultUser, DefaultPassword)
	expectAnswer(t, "GET as a user without the bucket, granted Read",
		admin.do(with(admin, get(), "elsewhere", "Read")), memdx.StatusSuccess, "")
	expectAnswer(t, "SET as a user without the bucket, granted Read",
		admin.do(with(admin, set("doc", "2"), "elsewhere", "Read")),
		memdx.StatusNoAccess, "Authorization failure: can't execute SET operation without the Upsert privilege")
	expectAnswer(t, "SET as a user without the bucket, granted Upsert",
		admin.do(with(admin, set("doc", `{"a":2}`), "elsewhere", "Upsert")), memdx.StatusSuccess, "")
	// GAT needs Read and Upsert (McbpPrivilegeChains).
	expectAnswer(t, "GAT as a user without the bucket, granted Read",
		admin.do(with(admin, memdx.NewGAT([]byte("doc"), 0), "elsewhere", "Read")),
		memdx.StatusNoAccess, "Authorization failure: can't execute GAT operation without the Upsert privilege")
	expectAnswer(t, "GAT as a user without the bucket, granted Read and Upsert",
		admin.do(with(admin, memdx.NewGAT([]byte("doc"), 0), "elsewhere", "Read", "Upsert")), memdx.StatusSuccess, "")
	// The grant is for that request only.
	expectAnswer(t, "GET as a user without the bucket, granted nothing",
		admin.do(with(admin, get(), "elsewhere")),
		memdx.StatusNoAccess, "Authorization failure: can't execute GET operation without the Read privilege")

	expectAnswer(t, "an unknown privilege",
		admin.do(with(admin, get(), "elsewhere", "ReadEverything")), memdx.StatusInvalidArgs, "Failed to look up the privilege")
	expectAnswer(t, "an unknown privilege, impersonating nobody",
		admin.do(with(admin, get(), "", "read")), memdx.StatusInvalidArgs, "Failed to look up the privilege")
	expectAnswer(t, "an empty privilege",
		admin.do(with(admin, get(), "elsewhere", "")), memdx.StatusInvalidArgs, "Privilege name must be set")

	// Without a bucket the impersonated user has no bucket privilege but
	// those granted: then the engine answers NO_BUCKET.
	nob := dialRaw(t, c.Node(0).Addr())
	nob.hello(stdFeatures...)
	if st := nob.authPlain(DefaultUser, DefaultPassword); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	expectAnswer(t, "GET as app without a bucket, granted Read", nob.do(with(nob, get(), "app", "Read")), memdx.StatusNoBucket, "")
	expectAnswer(t, "GET as app without a bucket, granted Upsert", nob.do(with(nob, get(), "app", "Upsert")),
		memdx.StatusNoAccess, "Authorization failure: can't execute GET operation without the Read privilege")

	// Impersonating nobody, the frame changes nothing: it grants a user
	// without Impersonate nothing, and is not refused.
	app := login("app", "secret")
	expectAnswer(t, "GET granted Read, impersonating nobody", app.do(with(app, get(), "", "Read")), memdx.StatusSuccess, "")
	expectAnswer(t, "GET as the administrator granted Impersonate, without Impersonate",
		app.do(with(app, get(), DefaultUser, "Impersonate")),
		memdx.StatusNoAccess, "Authorization failure: can't execute GET operation without the Impersonate privilege")
}

// The privileges the mock names in its EACCESS contexts, and checks an
// impersonated user for, are kv_engine 7.6's (McbpPrivilegeChains,
// daemon/mcbp_privileges.cc; the names of rbac/privileges.cc): VERBOSITY
// needs Administrator (NodeManagement is gone), GET_META Read (MetaRead is
// gone), SUBDOC_MULTI_MUTATION Upsert alone, and ADD, Insert or Upsert,
// names Upsert when it has neither (its last check).
func TestPrivilegeNamesAreKVEngines(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: []User{
		{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}},
		{Name: "app", Password: "secret", Buckets: []string{DefaultBucket}},
		{Name: "elsewhere", Password: "secret", Buckets: []string{"other"}},
	}})
	b := c.Bucket(DefaultBucket)
	if _, err := b.Set("", "", "doc", []byte(`{"a":1}`), 0, 0); err != nil {
		t.Fatal(err)
	}
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
	as := func(cl *rawClient, r memdx.Request, privs ...string) memdx.Request {
		r = keyReq(cl, b, r)
		fe, err := memdx.AppendFrameInfo(nil, uint16(memdx.FrameImpersonateUser), []byte("elsewhere"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range privs {
			if fe, err = memdx.AppendFrameInfo(fe, uint16(memdx.FrameImpersonateUserExtraPrivilege), []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		r.FramingExtras = fe
		return r
	}
	app := login("app", "secret")
	expectAnswer(t, "VERBOSITY by a user who is not an administrator",
		app.do(memdx.Request{OpCode: memdx.OpVerbosity, Extras: []byte{0, 0, 0, 1}}),
		memdx.StatusNoAccess, "Authorization failure: can't execute VERBOSITY operation without the Administrator privilege")
	admin := login(DefaultUser, DefaultPassword)
	expectAnswer(t, "GET_META as a user without the bucket",
		admin.do(as(admin, memdx.Request{OpCode: memdx.OpGetMeta, Key: []byte("doc")})),
		memdx.StatusNoAccess, "Authorization failure: can't execute GET_META operation without the Read privilege")
	expectAnswer(t, "GET_META as a user without the bucket, granted Read",
		admin.do(as(admin, memdx.Request{OpCode: memdx.OpGetMeta, Key: []byte("doc")}, "Read")), memdx.StatusSuccess, "")
	mm := memdx.NewSubdocMultiMutation([]byte("doc"), 0, 0, []memdx.SubdocMutateOp{
		{Op: memdx.OpSubdocDictUpsert, Path: []byte("b"), Value: []byte("2")}})
	expectAnswer(t, "ADD as a user without the bucket",
		admin.do(as(admin, memdx.NewStore(memdx.OpAdd, []byte("new"), []byte("1"), 0, 0))),
		memdx.StatusNoAccess, "Authorization failure: can't execute ADD operation without the Upsert privilege")
	expectAnswer(t, "ADD as a user without the bucket, granted Insert",
		admin.do(as(admin, memdx.NewStore(memdx.OpAdd, []byte("new"), []byte("1"), 0, 0), "Insert")), memdx.StatusSuccess, "")
	expectAnswer(t, "multi-mutation as a user without the bucket, granted Upsert",
		admin.do(as(admin, mm, "Upsert")), memdx.StatusSuccess, "")
}

// A cluster-wide privilege the request grants the impersonated user counts
// too (Cookie::checkPrivilege): VERBOSITY as a user who is not an
// administrator, granted Administrator, runs.
func TestImpersonateExtraPrivilegeCoversClusterPrivileges(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: []User{
		{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}},
		{Name: "app", Password: "secret", Buckets: []string{DefaultBucket}},
	}})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	verbosity := func(privs ...string) memdx.Request {
		r := memdx.Request{OpCode: memdx.OpVerbosity, Extras: []byte{0, 0, 0, 1}}
		fe, err := memdx.AppendFrameInfo(nil, uint16(memdx.FrameImpersonateUser), []byte("app"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range privs {
			if fe, err = memdx.AppendFrameInfo(fe, uint16(memdx.FrameImpersonateUserExtraPrivilege), []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		r.FramingExtras = fe
		return r
	}
	expectAnswer(t, "VERBOSITY as app", cl.do(verbosity()),
		memdx.StatusNoAccess, "Authorization failure: can't execute VERBOSITY operation without the Administrator privilege")
	expectAnswer(t, "VERBOSITY as app, granted Administrator", cl.do(verbosity("Administrator")), memdx.StatusSuccess, "")
}

// STAT as an impersonated user without the bucket needs SimpleStats
// (the stat executor), and the key group Read in the document's collection
// (doKeyStats' checkCollectionAccess); the request may grant both.
func TestImpersonateExtraPrivilegeStat(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: []User{
		{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}},
		{Name: "elsewhere", Password: "secret", Buckets: []string{"other"}},
	}, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	b := c.Bucket(DefaultBucket)
	if _, err := b.Set("", "", "doc", []byte(`{}`), 0, 0); err != nil {
		t.Fatal(err)
	}
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	stat := func(group string, privs ...string) memdx.Packet {
		r := memdx.NewStat([]byte(group))
		fe, err := memdx.AppendFrameInfo(nil, uint16(memdx.FrameImpersonateUser), []byte("elsewhere"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range privs {
			if fe, err = memdx.AppendFrameInfo(fe, uint16(memdx.FrameImpersonateUserExtraPrivilege), []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		r.FramingExtras = fe
		op := cl.send(r)
		for {
			p := cl.recv(op)
			if p.Status != memdx.StatusSuccess || len(p.Key) == 0 {
				return p
			}
		}
	}
	expectAnswer(t, "STAT", stat(""), memdx.StatusNoAccess,
		"Authorization failure: can't execute STAT operation without the SimpleStats privilege")
	expectAnswer(t, "STAT granted SimpleStats", stat("", "SimpleStats"), memdx.StatusSuccess, "")
	expectAnswer(t, "STAT key granted SimpleStats", stat("key doc 0", "SimpleStats"), memdx.StatusNoAccess,
		"Authorization failure: can't execute STAT operation without the Read privilege")
	expectAnswer(t, "STAT key granted SimpleStats and Read", stat("key doc 0", "SimpleStats", "Read"), memdx.StatusSuccess, "")
}
