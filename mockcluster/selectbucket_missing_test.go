package mockcluster

import (
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// SELECT_BUCKET answers as kv_engine's select_bucket
// (daemon/protocol/mcbp/select_bucket_executor.cc): EACCESS when the user
// may not use that name, KEY_ENOENT when it may but no such bucket exists.
// A failed select leaves the selected bucket as it was.
func TestSelectBucketMissingVersusNoAccess(t *testing.T) {
	c := newCluster(t, Options{Users: []User{
		{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}},
		{Name: "bob", Password: "builder", Buckets: []string{"later"}},
	}})
	addr := c.Node(0).Addr()

	admin := bootstrap(t, addr, DefaultBucket, nil)
	if st := admin.selectBucket("missing"); st != memdx.StatusKeyNotFound {
		t.Fatalf("a user with access to every bucket selects a missing one: %s, want KEY_ENOENT", st)
	}
	if p := admin.do(keyReq(admin, c.Bucket(DefaultBucket), memdx.NewGet([]byte("k")))); p.Status == memdx.StatusNoBucket {
		t.Fatal("a failed SELECT_BUCKET deselected the bucket")
	}

	bob := dialRaw(t, addr)
	bob.hello(stdFeatures...)
	if st := bob.authPlain("bob", "builder"); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	if st := bob.selectBucket("later"); st != memdx.StatusKeyNotFound {
		t.Fatalf("bob selects a bucket he may use that does not exist yet: %s, want KEY_ENOENT", st)
	}
	if st := bob.selectBucket("missing"); st != memdx.StatusNoAccess {
		t.Fatalf("bob selects a missing bucket he may not use: %s, want EACCESS", st)
	}
	if st := bob.selectBucket(DefaultBucket); st != memdx.StatusNoAccess {
		t.Fatalf("bob selects an existing bucket he may not use: %s, want EACCESS", st)
	}
	if _, err := c.AddBucket(BucketOptions{Name: "later", NumVbuckets: 16}); err != nil {
		t.Fatal(err)
	}
	if st := bob.selectBucket("later"); st != memdx.StatusSuccess {
		t.Fatalf("bob selects his bucket once it exists: %s", st)
	}
}

// kv_engine's select_bucket_validator (daemon/mcbp_validators.cc) refuses a
// name longer than MAX_BUCKET_NAME_LENGTH (100, daemon/buckets.h) before
// the command runs: EINVAL ("Request key length exceeds maximum"), for any
// user. The mock answered it as a name like any other: KEY_ENOENT to an
// administrator, EACCESS to others.
func TestSelectBucketNameTooLong(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	admin := bootstrap(t, c.Node(0).Addr(), "", nil)
	long := strings.Repeat("b", 101)
	expectAnswer(t, "SELECT_BUCKET of 101 bytes", admin.do(memdx.NewSelectBucket(long)), memdx.StatusInvalidArgs,
		"Request key length exceeds maximum")
	expectAnswer(t, "SELECT_BUCKET of 100 bytes", admin.do(memdx.NewSelectBucket(long[:100])), memdx.StatusKeyNotFound, "")
}
