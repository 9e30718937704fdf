package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A key request's frame infos follow kv_engine's verify_header rules for
// every opcode: a 2-byte DCP stream id is accepted (a 1-byte one is EINVAL),
// a barrier or tracing context must be well-formed, and a durability
// requirement on a read is refused as one the command does not support.
func TestKeyRequestFrameInfos(t *testing.T) {
	e := newKVEnv(t, Options{}, nil)
	k := []byte("frames")
	if p := e.do(memdx.NewStore(memdx.OpSet, k, []byte(`{}`), 0, 0)); p.Status != memdx.StatusSuccess {
		t.Fatalf("SET: %s", p.Status)
	}
	get := func(f ...byte) memdx.Request { r := memdx.NewGet(k); r.FramingExtras = f; return r }
	for _, tc := range []struct {
		name string
		req  memdx.Request
		st   memdx.Status
		ctx  string
	}{
		{"stream id", get(0x22, 0, 1), memdx.StatusSuccess, ""},
		{"stream id of 1 byte", get(0x21, 0), memdx.StatusInvalidArgs, "DcpStreamId invalid size:1"},
		{"barrier with value", get(0x01, 0), memdx.StatusInvalidArgs, "Barrier should not contain value"},
		{"empty tracing context", get(0x30), memdx.StatusInvalidArgs, "OpenTracingContext cannot be empty"},
		{"durability on a read", get(0x11, 0x01), memdx.StatusInvalidArgs, "The requested command does not support durability requirements"},
		{"bad durability level on a read", get(0x11, 0x07), memdx.StatusDurabilityInvalidLevel, ""},
	} {
		expectAnswer(t, tc.name, e.do(tc.req), tc.st, tc.ctx)
	}
}
