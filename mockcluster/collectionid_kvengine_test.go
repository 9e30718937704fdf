package mockcluster

import (
	"encoding/binary"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// COLLECTIONS_GET_ID and GET_SCOPE_ID take the path in the key or in the
// value (kv_engine's collections_get_id_validator and executor); empty
// parts are the defaults; a name kv_engine's Manifest::validName refuses
// (empty after the defaults, over 251 bytes, starting with '$', a character
// outside A-Z a-z 0-9 _ - % $) answers EINVAL with no manifest uid, where a
// well-formed unknown one answers UNKNOWN_SCOPE or UNKNOWN_COLLECTION.
func TestGetCollectionIDPaths(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	b := c.Bucket(DefaultBucket)
	sid, err := b.AddScope("inventory")
	if err != nil {
		t.Fatal(err)
	}
	cid, err := b.AddCollection("inventory", "hotels")
	if err != nil {
		t.Fatal(err)
	}
	uid := b.ManifestUID()
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	inKey := func(op memdx.OpCode, path string) memdx.Request {
		return memdx.Request{OpCode: op, Key: []byte(path)}
	}
	inValue := func(op memdx.OpCode, path string) memdx.Request {
		return memdx.Request{OpCode: op, Value: []byte(path)}
	}
	for _, tc := range []struct {
		name string
		req  memdx.Request
		st   memdx.Status
		id   uint32
	}{
		{"id in key", inKey(memdx.OpCollectionsGetID, "inventory.hotels"), memdx.StatusSuccess, cid},
		{"id in value", inValue(memdx.OpCollectionsGetID, "inventory.hotels"), memdx.StatusSuccess, cid},
		{"defaults", inValue(memdx.OpCollectionsGetID, "."), memdx.StatusSuccess, 0},
		{"scope id in key", inKey(memdx.OpCollectionsGetScopeID, "inventory"), memdx.StatusSuccess, sid},
		{"default scope", inValue(memdx.OpCollectionsGetScopeID, ""), memdx.StatusSuccess, 0},
		{"unknown scope", inValue(memdx.OpCollectionsGetID, "nope.hotels"), memdx.StatusUnknownScope, 0},
		{"unknown collection", inValue(memdx.OpCollectionsGetID, "inventory.nope"), memdx.StatusUnknownCollection, 0},
		{"bad scope name", inValue(memdx.OpCollectionsGetID, "in ventory.hotels"), memdx.StatusInvalidArgs, 0},
		{"bad collection name", inValue(memdx.OpCollectionsGetID, "inventory.$hotels"), memdx.StatusInvalidArgs, 0},
		{"unknown scope before a bad collection name", inValue(memdx.OpCollectionsGetID, "nope.$x"), memdx.StatusUnknownScope, 0},
		{"bad scope-id name", inKey(memdx.OpCollectionsGetScopeID, "a/b"), memdx.StatusInvalidArgs, 0},
		{"no dot", inValue(memdx.OpCollectionsGetID, "inventory"), memdx.StatusInvalidArgs, 0},
	} {
		p := cl.do(tc.req)
		if p.Status != tc.st {
			t.Errorf("%s: %s %q, want %s", tc.name, p.Status, p.Value, tc.st)
			continue
		}
		switch tc.st {
		case memdx.StatusSuccess:
			if len(p.Extras) != 12 || binary.BigEndian.Uint64(p.Extras) != uid || binary.BigEndian.Uint32(p.Extras[8:]) != tc.id {
				t.Errorf("%s: extras %x, want manifest %x and id %d", tc.name, p.Extras, uid, tc.id)
			}
		case memdx.StatusInvalidArgs:
			if body, _ := memdx.DecodeErrorBody(p.Datatype, p.Value); body.HasManifest {
				t.Errorf("%s: EINVAL carries a manifest uid: %q", tc.name, p.Value)
			}
		default:
			if body, _ := memdx.DecodeErrorBody(p.Datatype, p.Value); !body.HasManifest || body.ManifestUID != uid {
				t.Errorf("%s: body %q, want manifest uid %x", tc.name, p.Value, uid)
			}
		}
	}
}

// COLLECTIONS_GET_ID and GET_SCOPE_ID end through handle_executor_status
// (SteppableCommandContext::drive), whose Connection::remapErrorCode
// answers EINVAL instead of UNKNOWN_SCOPE or UNKNOWN_COLLECTION to a client
// that did not negotiate Collections (the manifest uid the engine set stays
// in the body). The mock answered the collection statuses to every client.
func TestGetCollectionIDUnknownWithoutCollectionsIsEinval(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	b := c.Bucket(DefaultBucket)
	if _, err := b.AddScope("inventory"); err != nil {
		t.Fatal(err)
	}
	uid := b.ManifestUID()
	for _, collections := range []bool{true, false} {
		fs := []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket, memdx.FeatureJSON}
		if collections {
			fs = append(fs, memdx.FeatureCollections)
		}
		cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, fs)
		for _, tc := range []struct {
			name string
			req  memdx.Request
			want memdx.Status
		}{
			{"unknown scope", memdx.Request{OpCode: memdx.OpCollectionsGetID, Value: []byte("nope.x")}, memdx.StatusUnknownScope},
			{"unknown collection", memdx.Request{OpCode: memdx.OpCollectionsGetID, Value: []byte("inventory.x")}, memdx.StatusUnknownCollection},
			{"unknown scope id", memdx.Request{OpCode: memdx.OpCollectionsGetScopeID, Value: []byte("nope")}, memdx.StatusUnknownScope},
		} {
			want := tc.want
			if !collections {
				want = memdx.StatusInvalidArgs
			}
			p := cl.do(tc.req)
			if p.Status != want {
				t.Errorf("collections=%v, %s: %s, want %s", collections, tc.name, p.Status, want)
				continue
			}
			if body, _ := memdx.DecodeErrorBody(p.Datatype, p.Value); !body.HasManifest || body.ManifestUID != uid {
				t.Errorf("collections=%v, %s: body %q, want manifest uid %x", collections, tc.name, p.Value, uid)
			}
		}
	}
}
