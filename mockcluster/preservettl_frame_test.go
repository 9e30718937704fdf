package mockcluster

import (
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// The PreserveTtl frame info is accepted on the opcodes kv_engine's
// is_preserve_ttl_supported lists (SET, REPLACE, APPEND, PREPEND, the
// counters, sub-document mutations); on any other the frame validator
// (mcbp_validators.cc) answers NOT_SUPPORTED, and a frame with a value
// EINVAL. The mock answered EINVAL for all of them, and refused it on
// APPEND and PREPEND.
func TestPreserveTTLFrameStatuses(t *testing.T) {
	e := newKVEnv(t, Options{}, []memdx.HelloFeature{memdx.FeatureXerror})
	e.expect("set ttl", e.do(memdx.NewStore(memdx.OpSet, []byte("k"), []byte("v"), 0, 100)), memdx.StatusSuccess)
	keep := func(r memdx.Request) memdx.Request { r.PreserveTTL = true; return r }

	e.expect("append", e.do(keep(memdx.NewConcat(memdx.OpAppend, []byte("k"), []byte("w")))), memdx.StatusSuccess)
	e.expect("prepend", e.do(keep(memdx.NewConcat(memdx.OpPrepend, []byte("k"), []byte("u")))), memdx.StatusSuccess)
	if d, _ := e.b.Get("", "", "k"); string(d.Value) != "uvw" || d.Expiry.Unix() != e.now.Unix()+100 {
		t.Fatalf("after append/prepend: %q expiry %v", d.Value, d.Expiry)
	}
	for _, c := range []struct {
		what string
		r    memdx.Request
	}{
		{"add", memdx.NewStore(memdx.OpAdd, []byte("k2"), []byte("v"), 0, 0)},
		{"delete", memdx.NewDelete([]byte("k"))},
		{"touch", memdx.NewTouch([]byte("k"), 10)},
		{"get", memdx.NewGet([]byte("k"))},
	} {
		p := e.expect(c.what+" with PreserveTtl", e.do(keep(c.r)), memdx.StatusNotSupported)
		if want := "This command does not support PreserveTtl"; !strings.Contains(string(p.Value), want) {
			t.Fatalf("%s: context %q", c.what, p.Value)
		}
	}
	bad := set("k", "v")
	bad.FramingExtras = []byte{byte(memdx.FramePreserveTTL)<<4 | 1, 0}
	e.expect("PreserveTtl with a value", e.do(bad), memdx.StatusInvalidArgs)
}
