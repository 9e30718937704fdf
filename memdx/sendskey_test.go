package memdx

import "testing"

// SendsKey matches the key of the request as encoded (the collection
// prefix included, for an opcode that carries one on a connection with
// collections), and nothing else: not the key without its prefix, not a
// prefix of another collection, not a key longer or shorter by a byte.
func TestSendsKeyMatchesTheEncodedKey(t *testing.T) {
	plain := NewGet([]byte("k1"))
	coll := NewGet([]byte("k1"))
	coll.Collections, coll.CollectionID = true, 0x88 // prefix 0x88 0x01
	noop := Request{OpCode: OpNoop, Key: []byte("k1"), Collections: true, CollectionID: 8}
	cases := []struct {
		name string
		r    Request
		key  string
		want bool
	}{
		{"plain", plain, "k1", true},
		{"plain, another key", plain, "k0", false},
		{"plain, longer", plain, "k10", false},
		{"plain, shorter", plain, "k", false},
		{"plain, empty", plain, "", false},
		{"collections", coll, "\x88\x01k1", true},
		{"collections, no prefix", coll, "k1", false},
		{"collections, another collection", coll, "\x89\x01k1", false},
		{"collections, prefix only", coll, "\x88\x01", false},
		{"collections, short", coll, "\x88", false},
		{"no collection key", noop, "k1", true},
	}
	for _, c := range cases {
		if got := c.r.SendsKey([]byte(c.key)); got != c.want {
			t.Errorf("%s: SendsKey(%q) = %v, want %v", c.name, c.key, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { coll.SendsKey([]byte("\x88\x01k1")) }); n != 0 {
		t.Errorf("SendsKey allocates %v times", n)
	}
}
