package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A successful UNLOCK_KEY answers CAS 0: kv_engine's UnlockCommandContext
// (daemon/protocol/mcbp/unlock_context.cc) sends a bare success
// (Cookie::sendResponse(Status::Success)), whose header carries the
// cookie's CAS (Connection::formatResponseHeaders), which nothing set for
// this command. The document keeps the lock's CAS, which a GET shows. The
// mock answered the lock's CAS, which a client such as gocbcore hands to
// its caller as the unlock's result.
func TestUnlockAnswersCasZero(t *testing.T) {
	e := newKVEnv(t, Options{}, nil)
	k := "unlock-cas"
	e.expect("set", e.do(set(k, `{"a":1}`)), memdx.StatusSuccess)
	l := e.expect("getl", e.do(memdx.NewGetLocked([]byte(k), 10)), memdx.StatusSuccess)
	if p := e.expect("unlock", e.do(memdx.NewUnlock([]byte(k), l.Cas)), memdx.StatusSuccess); p.Cas != 0 {
		t.Fatalf("UNLOCK answered CAS %x, want 0", p.Cas)
	}
	if g := e.expect("get", e.do(memdx.NewGet([]byte(k))), memdx.StatusSuccess); g.Cas != l.Cas {
		t.Fatalf("GET after the unlock: CAS %x, want the lock's %x", g.Cas, l.Cas)
	}
}
