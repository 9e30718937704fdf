package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// VERBOSITY needs no bucket: kv_engine's verbosity_executor sets the log
// level for a user with the node-management privilege (an administrator)
// and the privilege check refuses other users with EACCESS.
func TestVerbosity(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: []User{
		{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}},
		{Name: "bob", Password: "builder", Buckets: []string{DefaultBucket}},
	}})
	verbosity := memdx.Request{OpCode: memdx.OpVerbosity, Extras: []byte{0, 0, 0, 1}}
	admin := bootstrap(t, c.Node(0).Addr(), "", nil)
	if p := admin.do(verbosity); p.Status != memdx.StatusSuccess {
		t.Fatalf("VERBOSITY without a bucket: %s", p.Status)
	}
	if st := admin.selectBucket(DefaultBucket); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	if p := admin.do(verbosity); p.Status != memdx.StatusSuccess {
		t.Fatalf("VERBOSITY with a bucket: %s", p.Status)
	}
	if p := admin.do(memdx.Request{OpCode: memdx.OpVerbosity}); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("VERBOSITY without its level: %s", p.Status)
	}
	bob := dialRaw(t, c.Node(0).Addr())
	bob.hello(stdFeatures...)
	if st := bob.authPlain("bob", "builder"); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	if p := bob.do(verbosity); p.Status != memdx.StatusNoAccess {
		t.Fatalf("VERBOSITY by a bucket user: %s, want EACCESS", p.Status)
	}
}
