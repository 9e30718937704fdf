package mockcluster

import (
	"bytes"
	"net"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A connection the node hangs up on (a status a client without XERROR
// cannot know: kv_engine disconnects it) first writes the answers it had
// buffered. That write happened while the request was handled, which, with
// a fault registered, is under the cluster's fault lock: a client that did
// not read its answers stalled every other connection of the cluster, each
// waiting for the fault lock to judge its next request.
func TestHangUpWriteDoesNotStallOtherConnections(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: []User{
		{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}},
		{Name: "app", Password: "secret", Buckets: []string{DefaultBucket}},
	}})
	b := c.Bucket(DefaultBucket)
	const key = "big"
	if _, err := b.Set("", "", key, bytes.Repeat([]byte("x"), 1<<20), 0, 0); err != nil {
		t.Fatal(err)
	}
	seen := make(chan struct{})
	c.Control(Match{OpCodes: []memdx.OpCode{memdx.OpVerbosity}}, 0, func(*Request) (Action, bool) {
		close(seen)
		return Action{}, false
	})

	// A client without XERROR that does not read: many large answers, then
	// a command the user may not run (hung up on).
	stuck := dialRaw(t, c.Node(0).Addr())
	if err := stuck.nc.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if st := stuck.authPlain("app", "secret"); st != memdx.StatusSuccess {
		t.Fatalf("auth: %s", st)
	}
	if st := stuck.selectBucket(DefaultBucket); st != memdx.StatusSuccess {
		t.Fatalf("select: %s", st)
	}
	var pipe []byte
	for i := 0; i < 32; i++ {
		stuck.opaque++
		r := keyReq(stuck, b, memdx.NewGet([]byte(key)))
		pipe, _ = r.AppendTo(pipe, stuck.opaque)
	}
	stuck.opaque++
	verbosity := memdx.Request{OpCode: memdx.OpVerbosity, Extras: []byte{0, 0, 0, 1}}
	pipe, _ = verbosity.AppendTo(pipe, stuck.opaque)
	stuck.write(pipe)
	<-seen

	other := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	if p := other.do(keyReq(other, b, memdx.NewGet([]byte(key)))); p.Status != memdx.StatusSuccess {
		t.Fatalf("GET on another connection: %s", p.Status)
	}
}
