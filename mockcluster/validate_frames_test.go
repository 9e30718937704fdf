package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// kv_engine's verify_header judges the frame infos of every opcode, the
// connection-level ones included: a durability requirement or PreserveTtl
// on a command that takes none is refused, a malformed frame is EINVAL, an
// unknown id UNKNOWN_FRAME_INFO, and the frames kv_engine accepts
// everywhere (an empty barrier, a 2-byte DCP stream id) let it run.
func TestConnCommandsJudgeFrameInfos(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	frames := func(r memdx.Request, f ...byte) memdx.Request { r.FramingExtras = f; return r }
	for _, tc := range []struct {
		name string
		req  memdx.Request
		st   memdx.Status
		ctx  string
	}{
		{"NOOP durability", frames(memdx.NewNoop(), 0x11, 0x01), memdx.StatusInvalidArgs, "The requested command does not support durability requirements"},
		{"NOOP bad durability level", frames(memdx.NewNoop(), 0x11, 0x09), memdx.StatusDurabilityInvalidLevel, ""},
		{"HELLO PreserveTtl", frames(memdx.NewHello(nil, stdFeatures), 0x50), memdx.StatusNotSupported, "This command does not support PreserveTtl"},
		{"NOOP PreserveTtl with value", frames(memdx.NewNoop(), 0x51, 0x00), memdx.StatusInvalidArgs, "PreserveTtl should not contain value"},
		{"NOOP barrier with value", frames(memdx.NewNoop(), 0x01, 0x00), memdx.StatusInvalidArgs, "Barrier should not contain value"},
		{"NOOP empty tracing context", frames(memdx.NewNoop(), 0x30), memdx.StatusInvalidArgs, "OpenTracingContext cannot be empty"},
		{"NOOP stream id of 1 byte", frames(memdx.NewNoop(), 0x21, 0x00), memdx.StatusInvalidArgs, "DcpStreamId invalid size:1"},
		{"NOOP unknown frame", frames(memdx.NewNoop(), 0xe0), memdx.StatusUnknownFrameInfo, ""},
		{"NOOP truncated frame", frames(memdx.NewNoop(), 0x35, 0x00), memdx.StatusInvalidArgs, "Invalid encoding in FrameExtras"},
		{"GET_ERROR_MAP durability", frames(memdx.NewGetErrorMap(2), 0x11, 0x01), memdx.StatusInvalidArgs, "The requested command does not support durability requirements"},
		{"NOOP barrier", frames(memdx.NewNoop(), 0x00), memdx.StatusSuccess, ""},
		{"NOOP stream id", frames(memdx.NewNoop(), 0x22, 0x00, 0x01), memdx.StatusSuccess, ""},
		{"NOOP tracing context", frames(memdx.NewNoop(), 0x32, 'a', 'b'), memdx.StatusSuccess, ""},
	} {
		expectAnswer(t, tc.name, cl.do(tc.req), tc.st, tc.ctx)
	}
}
