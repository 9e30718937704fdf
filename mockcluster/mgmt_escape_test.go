package mockcluster

import (
	"encoding/json"
	"net/url"
	"testing"
)

// A bucket name may hold '%'. ns_server builds a config's uri and
// streamingUri (and ddocs.uri, which a magma bucket has not) with each path segment escaped
// (bucket_info_cache:build_pools_uri, menelaus_util:bin_concat_path), so a
// client can follow them; unescaped, "100%" makes them unparsable URLs.
func TestConfigURIsEscapeBucketName(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Buckets: []BucketOptions{{Name: "100%", NumVbuckets: 4}}})
	b := c.Bucket("100%")
	var cfg struct {
		URI, StreamingURI string
	}
	if err := json.Unmarshal(b.ConfigJSON(0), &cfg); err != nil {
		t.Fatal(err)
	}
	rc := newREST(t, "http://"+c.Node(0).MgmtAddr(), nil)
	for _, u := range []string{cfg.URI, cfg.StreamingURI} {
		if _, err := url.Parse(u); err != nil {
			t.Fatalf("config names %q: %v", u, err)
		}
	}
	if code, body, _ := rc.get(cfg.URI, DefaultUser, DefaultPassword); code != 200 {
		t.Fatalf("GET %s: %d %s", cfg.URI, code, body)
	}
	s := rc.openStream(cfg.StreamingURI, DefaultUser, DefaultPassword)
	defer s.close()
	s.next()
	if code, body, _ := rc.get("/pools/default/b/100%25", DefaultUser, DefaultPassword); code != 200 {
		t.Fatalf("GET /pools/default/b/100%%25: %d %s", code, body)
	}
}
