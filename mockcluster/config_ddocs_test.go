package mockcluster

import (
	"encoding/json"
	"slices"
	"testing"
)

// The mock's couchbase buckets say storageBackend "magma", and a magma
// bucket cannot have views (ns_bucket:can_have_views: couchstore only), so
// ns_server's terse config (bucket_info_cache:build_ddocs) names no ddocs
// for it, and lists no couchapi capability. A config with ddocs tells a
// client it may run view queries the server would refuse.
func TestMagmaBucketConfigHasNoDDocs(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(c.Bucket(DefaultBucket).ConfigJSON(0), &cfg); err != nil {
		t.Fatal(err)
	}
	if string(cfg["storageBackend"]) != `"magma"` {
		t.Fatalf("storageBackend %s", cfg["storageBackend"])
	}
	if d, ok := cfg["ddocs"]; ok {
		t.Fatalf("a magma bucket's config names ddocs %s", d)
	}
	var caps []string
	if err := json.Unmarshal(cfg["bucketCapabilities"], &caps); err != nil || slices.Contains(caps, "couchapi") {
		t.Fatalf("bucketCapabilities %v (%v)", caps, err)
	}
}
