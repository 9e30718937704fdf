package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A system xattr (a key starting with '_') needs SystemXattrRead to be
// looked up and SystemXattrWrite to be changed: kv_engine's
// validate_xattr_privilege (daemon/subdocument.cc) checks it in the xattr
// phase, after the document was fetched, answering a single-path command
// EACCESS and marking every xattr spec of a multi-path one EACCESS
// (MULTI_PATH_FAILURE; a lookup's body specs still run); $XTOC lists the
// system xattrs only with SystemXattrRead. In the mock only an impersonated
// user without access to the bucket lacks privileges, holding those the
// request grants; the mock gave it the system xattrs with Read alone.
func TestSystemXattrPrivileges(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: privilegeUsers()})
	b := c.Bucket(DefaultBucket)
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, sdFeatures)
	as := func(r memdx.Request, privs ...string) memdx.Request {
		r = keyReq(cl, b, r)
		return asElsewhere(t, r, privs...)
	}
	seed := memdx.NewSubdocMultiMutation([]byte("doc"), memdx.SubdocDocMkdoc, 0, []memdx.SubdocMutateOp{
		mu(memdx.OpSubdocDictUpsert, "_sys", `{"a":1}`, memdx.SubdocPathXattr),
		mu(memdx.OpSubdocDictUpsert, "user", `2`, memdx.SubdocPathXattr),
		mu(memdx.OpSubdocDictUpsert, "body", `3`, 0),
	})
	if p := cl.do(keyReq(cl, b, seed)); p.Status != memdx.StatusSuccess {
		t.Fatalf("seed: %s %s", p.Status, p.Value)
	}

	t.Run("single lookup", func(t *testing.T) {
		r := memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte("doc"), []byte("_sys.a"), memdx.SubdocPathXattr, 0)
		if p := cl.do(as(r, "Read")); p.Status != memdx.StatusNoAccess {
			t.Fatalf("system xattr lookup with Read only: %s %s, want NO_ACCESS", p.Status, p.Value)
		}
		if p := cl.do(as(r, "Read", "SystemXattrRead")); p.Status != memdx.StatusSuccess || string(p.Value) != "1" {
			t.Fatalf("system xattr lookup with SystemXattrRead: %s %s", p.Status, p.Value)
		}
		r = memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte("doc"), []byte("user"), memdx.SubdocPathXattr, 0)
		if p := cl.do(as(r, "Read")); p.Status != memdx.StatusSuccess || string(p.Value) != "2" {
			t.Fatalf("user xattr lookup with Read: %s %s", p.Status, p.Value)
		}
	})
	t.Run("multi lookup", func(t *testing.T) {
		r := memdx.NewSubdocMultiLookup([]byte("doc"), 0, []memdx.SubdocLookupOp{
			lk(memdx.OpSubdocGet, "user", memdx.SubdocPathXattr),
			lk(memdx.OpSubdocGet, "_sys", memdx.SubdocPathXattr),
			lk(memdx.OpSubdocGet, "body", 0),
		})
		p := cl.do(as(r, "Read"))
		if p.Status != memdx.StatusSubdocMultiPathFailure {
			t.Fatalf("multi lookup of a system xattr with Read only: %s, want MULTI_PATH_FAILURE", p.Status)
		}
		rs, err := memdx.DecodeSubdocMultiLookup(p.Value, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].Status != memdx.StatusNoAccess || rs[1].Status != memdx.StatusNoAccess ||
			rs[2].Status != memdx.StatusSuccess || string(rs[2].Value) != "3" {
			t.Fatalf("results %+v: want both xattr specs NO_ACCESS, the body spec run", rs)
		}
	})
	t.Run("XTOC", func(t *testing.T) {
		r := memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte("doc"), []byte("$XTOC"), memdx.SubdocPathXattr, 0)
		if p := cl.do(as(r, "Read")); p.Status != memdx.StatusSuccess || string(p.Value) != `["user"]` {
			t.Fatalf("$XTOC without SystemXattrRead: %s %s, want [\"user\"]", p.Status, p.Value)
		}
		if p := cl.do(as(r, "Read", "SystemXattrRead")); p.Status != memdx.StatusSuccess || string(p.Value) != `["_sys","user"]` {
			t.Fatalf("$XTOC with SystemXattrRead: %s %s", p.Status, p.Value)
		}
	})
	t.Run("mutation", func(t *testing.T) {
		r := memdx.NewSubdocMutation(memdx.OpSubdocDictUpsert, []byte("doc"), []byte("_sys.b"), []byte("4"), memdx.SubdocPathXattr, 0, 0)
		if p := cl.do(as(r, "Upsert")); p.Status != memdx.StatusNoAccess {
			t.Fatalf("system xattr mutation with Upsert only: %s %s, want NO_ACCESS", p.Status, p.Value)
		}
		m := memdx.NewSubdocMultiMutation([]byte("doc"), 0, 0, []memdx.SubdocMutateOp{
			mu(memdx.OpSubdocDictUpsert, "user", `5`, memdx.SubdocPathXattr),
			mu(memdx.OpSubdocDictUpsert, "_sys.b", `4`, memdx.SubdocPathXattr),
		})
		p := cl.do(as(m, "Upsert"))
		if p.Status != memdx.StatusSubdocMultiPathFailure {
			t.Fatalf("multi mutation of a system xattr with Upsert only: %s, want MULTI_PATH_FAILURE", p.Status)
		}
		rs, err := memdx.DecodeSubdocMultiMutation(p.Value, nil)
		if err != nil || len(rs) != 1 || rs[0].Index != 0 || rs[0].Status != memdx.StatusNoAccess {
			t.Fatalf("results %+v (%v): want index 0 NO_ACCESS", rs, err)
		}
		if p := cl.do(as(r, "Upsert", "SystemXattrWrite")); p.Status != memdx.StatusSuccess {
			t.Fatalf("system xattr mutation with SystemXattrWrite: %s %s", p.Status, p.Value)
		}
		g := memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte("doc"), []byte("user"), memdx.SubdocPathXattr, 0)
		if p := cl.do(keyReq(cl, b, g)); string(p.Value) != "2" {
			t.Fatalf("user xattr after the refused multi mutation: %s", p.Value)
		}
	})
}

// The system xattr privilege is checked while the sub-document command
// executes, and its failure is the command's own status, sent as it is
// (SubdocCommandContext::send_response: Cookie::sendResponse with an mcbp
// status, which Connection::remapErrorCode never sees): a client without
// XERROR gets EACCESS for a single path and MULTI_PATH_FAILURE, with the
// xattr specs EACCESS, for a multi-path command, as one with XERROR does.
// The mock closed its connection instead, as for a privilege refused before
// the command runs.
func TestSystemXattrPrivilegesWithoutXerror(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: privilegeUsers()})
	b := c.Bucket(DefaultBucket)
	var fs []memdx.HelloFeature
	for _, f := range sdFeatures {
		if f != memdx.FeatureXerror {
			fs = append(fs, f)
		}
	}
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, fs)
	as := func(r memdx.Request, privs ...string) memdx.Request {
		r = keyReq(cl, b, r)
		return asElsewhere(t, r, privs...)
	}
	seed := memdx.NewSubdocMultiMutation([]byte("doc"), memdx.SubdocDocMkdoc, 0, []memdx.SubdocMutateOp{
		mu(memdx.OpSubdocDictUpsert, "_sys", `{"a":1}`, memdx.SubdocPathXattr),
		mu(memdx.OpSubdocDictUpsert, "body", `3`, 0),
	})
	if p := cl.do(keyReq(cl, b, seed)); p.Status != memdx.StatusSuccess {
		t.Fatalf("seed: %s %s", p.Status, p.Value)
	}

	r := memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte("doc"), []byte("_sys.a"), memdx.SubdocPathXattr, 0)
	if p := cl.do(as(r, "Read")); p.Status != memdx.StatusNoAccess {
		t.Fatalf("single-path lookup of a system xattr with Read only: %s %s, want NO_ACCESS", p.Status, p.Value)
	}
	ml := memdx.NewSubdocMultiLookup([]byte("doc"), 0, []memdx.SubdocLookupOp{
		lk(memdx.OpSubdocGet, "_sys", memdx.SubdocPathXattr),
		lk(memdx.OpSubdocGet, "body", 0),
	})
	p := cl.do(as(ml, "Read"))
	if p.Status != memdx.StatusSubdocMultiPathFailure {
		t.Fatalf("multi lookup of a system xattr with Read only: %s, want MULTI_PATH_FAILURE", p.Status)
	}
	if rs, err := memdx.DecodeSubdocMultiLookup(p.Value, nil); err != nil || rs[0].Status != memdx.StatusNoAccess ||
		rs[1].Status != memdx.StatusSuccess || string(rs[1].Value) != "3" {
		t.Fatalf("multi lookup results %+v (%v): want the xattr spec NO_ACCESS, the body spec run", rs, err)
	}
	m := memdx.NewSubdocMutation(memdx.OpSubdocDictUpsert, []byte("doc"), []byte("_sys.b"), []byte("4"), memdx.SubdocPathXattr, 0, 0)
	if p := cl.do(as(m, "Upsert")); p.Status != memdx.StatusNoAccess {
		t.Fatalf("single-path mutation of a system xattr with Upsert only: %s %s, want NO_ACCESS", p.Status, p.Value)
	}
	mm := memdx.NewSubdocMultiMutation([]byte("doc"), 0, 0, []memdx.SubdocMutateOp{
		mu(memdx.OpSubdocDictUpsert, "_sys.b", `4`, memdx.SubdocPathXattr),
	})
	p = cl.do(as(mm, "Upsert"))
	if p.Status != memdx.StatusSubdocMultiPathFailure {
		t.Fatalf("multi mutation of a system xattr with Upsert only: %s, want MULTI_PATH_FAILURE", p.Status)
	}
	if rs, err := memdx.DecodeSubdocMultiMutation(p.Value, nil); err != nil || len(rs) != 1 || rs[0].Status != memdx.StatusNoAccess {
		t.Fatalf("multi mutation results %+v (%v): want index 0 NO_ACCESS", rs, err)
	}
}
