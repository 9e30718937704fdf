package mockcluster

import (
	"errors"
	"strings"
	"testing"
)

// Couchbase Server refuses to create a bucket whose name has characters
// other than A-Z a-z 0-9 _ . - %, starts with a dot or is reserved
// (ns_bucket:is_valid_bucket_name): the mock must refuse them too, or a
// test could use a bucket no real cluster can have (one whose name breaks
// the REST paths, for instance).
func TestBucketNameValidation(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	for _, name := range []string{"a b", "a/b", "a?b", "[bucket]", "Zoë", ".hidden", "_users.couch.1", "_Replicator.couch.2"} {
		if _, err := c.AddBucket(BucketOptions{Name: name, NumVbuckets: 4}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("AddBucket(%q): %v, want an error naming it", name, err)
		}
		if cl, err := New(Options{Nodes: 1, Buckets: []BucketOptions{{Name: name, NumVbuckets: 4}}}); err == nil {
			cl.Close()
			t.Errorf("New with bucket %q: no error", name)
		}
	}
	for _, name := range []string{"travel-sample", "a.b", "a_b", "100%", "A9"} {
		if _, err := c.AddBucket(BucketOptions{Name: name, NumVbuckets: 4}); err != nil {
			t.Errorf("AddBucket(%q): %v", name, err)
		}
	}
}

// Couchbase Server refuses a bucket whose name differs from an existing
// one's only in case (ns_bucket:name_conflict, case insensitive), so two
// such buckets never coexist on a real cluster.
func TestBucketNameConflictIgnoresCase(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	_, err := c.AddBucket(BucketOptions{Name: "Default", NumVbuckets: 4})
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "Default") {
		t.Fatalf("AddBucket(Default) with bucket default: %v, want ErrExists naming it", err)
	}
	if cl, err := New(Options{Nodes: 1, Buckets: []BucketOptions{{Name: "a", NumVbuckets: 4}, {Name: "A", NumVbuckets: 4}}}); err == nil {
		cl.Close()
		t.Fatal("New with buckets a and A: no error")
	}
	if err := c.RemoveBucket(DefaultBucket); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddBucket(BucketOptions{Name: "Default", NumVbuckets: 4}); err != nil {
		t.Fatalf("AddBucket(Default) once default is gone: %v", err)
	}
}
