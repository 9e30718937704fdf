package mockcluster

import (
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A key in a collection other than _default has at most 246 bytes after
// its prefix, 250 in _default: kv_engine's is_document_key_valid
// (mcbp_validators.cc) allows MaxCollectionsLogicalKeyLen (246) for any
// collection id but the default one. (The mock used to allow 250 in every
// collection.)
func TestKeyLengthPerCollection(t *testing.T) {
	e := newKVEnv(t, Options{}, []memdx.HelloFeature{memdx.FeatureCollections, memdx.FeatureXerror})
	if _, err := e.b.AddScope("app"); err != nil {
		t.Fatal(err)
	}
	cid, err := e.b.AddCollection("app", "users")
	if err != nil {
		t.Fatal(err)
	}
	in := func(n int, cid uint32) memdx.Packet {
		r := set(strings.Repeat("k", n), "v")
		r.CollectionID = cid
		return e.do(r)
	}
	e.expect("246 bytes in a named collection", in(246, cid), memdx.StatusSuccess)
	p := e.expect("247 bytes in a named collection", in(247, cid), memdx.StatusInvalidArgs)
	if !strings.Contains(string(p.Value), "Logical key exceeds 246") {
		t.Fatalf("error context %q", p.Value)
	}
	e.expect("250 bytes in a named collection", in(250, cid), memdx.StatusInvalidArgs)
	e.expect("250 bytes in _default", in(250, 0), memdx.StatusSuccess)
	e.expect("251 bytes in _default", in(251, 0), memdx.StatusInvalidArgs)
	if _, err := e.b.Set("app", "users", strings.Repeat("k", 247), []byte("v"), 0, 0); err == nil {
		t.Fatal("Bucket.Set took a 247-byte key in a named collection")
	}
}
