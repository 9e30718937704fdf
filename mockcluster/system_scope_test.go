package mockcluster

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// From 7.6 the cluster manager makes every new Couchbase bucket with the
// _system scope (id 8) holding _mobile (8) and _query (9), manifest uid 1
// (ns_server's collections:manifest_with_system_scope, enabled by cluster
// compat 7.6; kv_engine has no scope of its own and takes the manifest it
// is given); a user's first scope is then 9 and first collection 10 (0xa).
// Before 7.6 the manifest held _default alone, uid 0, and ids started at
// 8. The mock, a 7.6.4 cluster by default, had no _system scope.
func TestNewBucketHasTheSystemScopeFrom76(t *testing.T) {
	for _, c := range []struct {
		version          string
		system           bool
		uid              string
		firstSid, firstC uint32
	}{
		{"", true, "1", 9, 10},
		{"7.6.0-1234-enterprise", true, "1", 9, 10},
		{"7.2.4-7070-enterprise", false, "0", 8, 8},
	} {
		t.Run("version="+c.version, func(t *testing.T) {
			cl := newCluster(t, Options{Nodes: 1, Version: c.version})
			b := cl.Bucket(DefaultBucket)
			raw := bootstrap(t, cl.Node(0).Addr(), DefaultBucket, nil)
			p := raw.do(memdx.NewCollectionsGetManifest())
			var m manifestJSON
			if err := json.Unmarshal(p.Value, &m); err != nil {
				t.Fatalf("manifest %q: %v", p.Value, err)
			}
			if m.UID != c.uid {
				t.Errorf("manifest uid %s, want %s", m.UID, c.uid)
			}
			got := map[string]string{}
			for _, s := range m.Scopes {
				got[s.Name] = s.UID
				for _, col := range s.Collections {
					got[s.Name+"."+col.Name] = col.UID
				}
			}
			want := map[string]string{"_default": "0", "_default._default": "0"}
			if c.system {
				want["_system"], want["_system._mobile"], want["_system._query"] = "8", "8", "9"
			}
			if len(got) != len(want) {
				t.Fatalf("manifest %s, want %v", p.Value, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: uid %q, want %q (%s)", k, got[k], v, p.Value)
				}
			}
			if c.system {
				if cid, err := b.CollectionID("_system", "_query"); err != nil || cid != 9 {
					t.Errorf("_system._query: %d %v", cid, err)
				}
			}
			sid, err := b.AddScope("app")
			if err != nil || sid != c.firstSid {
				t.Errorf("first scope id %d (%v), want %d", sid, err, c.firstSid)
			}
			cid, err := b.AddCollection("app", "users")
			if err != nil || cid != c.firstC {
				t.Errorf("first collection id %d (%v), want %d", cid, err, c.firstC)
			}
		})
	}
}

// The cluster manager refuses to drop the _system scope or its collections
// and to create a collection in it (ns_server's collections:verify_oper:
// cannot_drop_system_scope, cannot_drop_system_collection,
// cannot_create_collection_in_system_scope).
func TestSystemScopeCannotBeChanged(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	b := c.Bucket(DefaultBucket)
	if err := b.DropScope("_system"); !errors.Is(err, ErrInvalid) {
		t.Errorf("DropScope(_system): %v", err)
	}
	if err := b.DropCollection("_system", "_query"); !errors.Is(err, ErrInvalid) {
		t.Errorf("DropCollection(_system._query): %v", err)
	}
	if _, err := b.AddCollection("_system", "mine"); !errors.Is(err, ErrInvalid) {
		t.Errorf("AddCollection(_system.mine): %v", err)
	}
	if cid, err := b.CollectionID("_system", "_mobile"); err != nil || cid != 8 {
		t.Errorf("_system._mobile after the refusals: %d %v", cid, err)
	}
}

// A memcached bucket has no manifest of the cluster manager's, 7.6 or
// not: kv_engine's default_engine answers every GET_COLLECTIONS_MANIFEST
// with the epoch manifest (uid 0, _default alone) and any other scope's
// COLLECTIONS_GET_ID with UNKNOWN_SCOPE against uid 0 (default_engine.cc,
// get_collection_manifest and get_collection_id). The mock gave a 7.6
// cluster's memcached buckets the _system scope too, so a client could
// look up _system._mobile's id there and then get UNKNOWN_COLLECTION for
// it.
func TestMemcachedBucketHasNoSystemScope(t *testing.T) {
	c, b := newMemcachedCluster(t, Options{Nodes: 1})
	if uid := b.ManifestUID(); uid != 0 {
		t.Errorf("manifest uid %d, want 0", uid)
	}
	if cid, err := b.CollectionID("_system", "_mobile"); err == nil {
		t.Errorf("_system._mobile has id %d in a memcached bucket", cid)
	}
	raw := bootstrap(t, c.Node(0).Addr(), "cache", nil)
	p := raw.do(memdx.NewCollectionsGetManifest())
	var m manifestJSON
	if err := json.Unmarshal(p.Value, &m); err != nil {
		t.Fatalf("manifest %q: %v", p.Value, err)
	}
	if m.UID != "0" || len(m.Scopes) != 1 || m.Scopes[0].Name != "_default" {
		t.Errorf("manifest %s, want uid 0 and _default alone", p.Value)
	}
	if p := raw.do(memdx.NewCollectionsGetID("_system", "_mobile")); p.Status != memdx.StatusUnknownScope {
		t.Errorf("COLLECTIONS_GET_ID _system._mobile: %s, want UNKNOWN_SCOPE", p.Status)
	}
}
