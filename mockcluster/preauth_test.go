package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// Before authentication kv_engine runs HELLO, SASL_LIST_MECHS, SASL_AUTH,
// SASL_STEP and GET_ERROR_MAP only; everything else, NOOP, VERSION and QUIT
// included, answers EACCESS with no body (Cookie::validate, daemon/
// cookie.cc), and the connection stays open.
func TestOnlyHandshakeCommandsBeforeAuth(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := dialRaw(t, c.Node(0).Addr())
	cl.hello(memdx.FeatureXerror, memdx.FeatureJSON)
	for _, r := range []memdx.Request{
		memdx.NewNoop(), memdx.NewVersion(), memdx.NewQuit(), {OpCode: memdx.OpQuitQ},
		memdx.NewStat(nil), memdx.NewGetClusterConfig(), memdx.NewSelectBucket(DefaultBucket),
		memdx.NewGet([]byte("k")), {OpCode: memdx.OpCode(0xe7)},
	} {
		p := cl.do(r)
		if p.Status != memdx.StatusNoAccess || len(p.Value) != 0 {
			t.Errorf("%s before auth: %s %q, want EACCESS and no body", r.OpCode, p.Status, p.Value)
		}
	}
	if p := cl.do(memdx.NewSASLListMechs()); p.Status != memdx.StatusSuccess {
		t.Fatalf("SASL_LIST_MECHS before auth: %s", p.Status)
	}
	if p := cl.do(memdx.NewGetErrorMap(2)); p.Status != memdx.StatusSuccess {
		t.Fatalf("GET_ERROR_MAP before auth: %s", p.Status)
	}
	if st := cl.authPlain(DefaultUser, DefaultPassword); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	if p := cl.do(memdx.NewNoop()); p.Status != memdx.StatusSuccess {
		t.Fatalf("NOOP after auth: %s", p.Status)
	}
}
