package mockcluster

import (
	"bytes"
	"testing"
)

// A config's uri and streamingUri carry ?bucket_uuid=: ns_server
// (menelaus_web_buckets:checking_bucket_uuid) answers 404 when it does not
// match the bucket's uuid, so a client that follows the URI of a bucket
// since dropped and created again under the same name is not handed the
// new bucket's config as if it were the old one's.
func TestRESTBucketUUIDMismatchIs404(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	rc := newREST(t, "http://"+c.Node(0).MgmtAddr(), nil)
	old := c.Bucket(DefaultBucket).UUID()
	for _, ep := range []string{"b", "bs", "buckets", "bucketsStreaming"} {
		path := "/pools/default/" + ep + "/" + DefaultBucket + "?bucket_uuid=" + old
		if ep == "bs" || ep == "bucketsStreaming" {
			s := rc.openStream(path, DefaultUser, DefaultPassword)
			s.next()
			s.close()
			continue
		}
		if code, _, _ := rc.get(path, DefaultUser, DefaultPassword); code != 200 {
			t.Fatalf("%s with the bucket's uuid: %d", path, code)
		}
	}
	if err := c.RemoveBucket(DefaultBucket); err != nil {
		t.Fatal(err)
	}
	b, err := c.AddBucket(BucketOptions{Name: DefaultBucket, NumVbuckets: 16})
	if err != nil {
		t.Fatal(err)
	}
	if b.UUID() == old {
		t.Fatalf("recreated bucket has the old uuid %s", old)
	}
	for _, ep := range []string{"b", "bs", "buckets", "bucketsStreaming"} {
		path := "/pools/default/" + ep + "/" + DefaultBucket + "?bucket_uuid=" + old
		code, body, _ := rc.get(path, DefaultUser, DefaultPassword)
		if code != 404 || !bytes.Contains(body, []byte("Bucket uuid does not match")) {
			t.Fatalf("%s after the bucket was recreated: %d %q, want 404", path, code, body)
		}
		path = "/pools/default/" + ep + "/" + DefaultBucket + "?bucket_uuid=" + b.UUID()
		if ep == "b" || ep == "buckets" {
			if code, _, _ := rc.get(path, DefaultUser, DefaultPassword); code != 200 {
				t.Fatalf("%s with the new uuid: %d", path, code)
			}
		}
	}
}
