package memdx

import (
	"bytes"
	"strings"
	"testing"
)

// AppendWithKey encodes exactly what AppendTo encodes for the same request
// with that key: on its direct path (a body of the key alone) and on the
// general one (frame infos, extras, collection prefix, value), and it
// refuses what AppendTo refuses, leaving dst as it was.
func TestAppendWithKeyEncodesAsAppendTo(t *testing.T) {
	withCollections := NewGet(nil)
	withCollections.Collections, withCollections.CollectionID = true, 0x1234
	store := NewStore(OpSetQ, nil, []byte("value"), 7, 9)
	durable := NewStore(OpSet, nil, []byte("v"), 0, 0)
	durable.Durability = DurabilityMajority
	reqs := map[string]Request{
		"GETQ":              {OpCode: OpGetQ},
		"GETKQ vb cas dt":   {OpCode: OpGetKQ, Vbucket: 1023, Cas: 0xdeadbeef, Datatype: DatatypeJSON},
		"GET collections":   withCollections,
		"SETQ extras+value": store,
		"SET durability":    durable,
		"GAT extras":        NewGAT(nil, 60),
	}
	keys := [][]byte{nil, []byte("k"), []byte("bench-1234"), bytes.Repeat([]byte("x"), 250), bytes.Repeat([]byte("y"), 70000)}
	for name, r := range reqs {
		for _, key := range keys {
			prefix := []byte("prefix")
			want := append([]byte(nil), prefix...)
			c := r
			c.Key = key
			want, wantErr := c.AppendTo(want, 42)
			got, gotErr := r.AppendWithKey(append([]byte(nil), prefix...), key, 42)
			if (wantErr == nil) != (gotErr == nil) {
				t.Fatalf("%s key %d bytes: error %v, AppendTo's %v", name, len(key), gotErr, wantErr)
			}
			if wantErr != nil && !strings.Contains(gotErr.Error(), "key") {
				t.Errorf("%s key %d bytes: error %q does not name the key", name, len(key), gotErr)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s key %d bytes:\n got %x\nwant %x", name, len(key), got, want)
			}
		}
	}
}
