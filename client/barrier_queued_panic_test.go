package client

import (
	"context"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// opPanicObserver panics in AttemptStart of the operations named op.
type opPanicObserver struct{ op string }

func (p opPanicObserver) AttemptStart(i AttemptInfo) {
	if i.Op == p.op {
		panic("observer")
	}
}
func (opPanicObserver) AttemptEnd(AttemptInfo, error) {}

// A barrier's AttemptStart runs once its connection has queued the
// request (conn.Origin.Queued). An Observer that panics there unwinds the
// operation while its request is on the connection: the connection must
// not keep waiting for it on behalf of a caller that is gone, with the
// operation's response handler and Origin (the pooled op's: Ping's is
// pooled by a deferred putOp as the panic goes by) still bound to the
// request, for its late answer to be written into whichever operation
// reuses the op. The request is given up (withdrawn unwritten, or
// abandoned, its late answer unneeded) before the panic goes on.
func TestBarrierObserverPanicOnceQueuedLeavesNothingAwaited(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   memdx.OpCode
		call func(c *Client)
	}{
		{"Exists", memdx.OpGetMeta, func(c *Client) {
			_, _ = c.DefaultCollection().Exists(context.Background(), "k", &ExistsOptions{Timeout: time.Minute})
		}},
		{"Ping", memdx.OpNoop, func(c *Client) { _ = c.Ping(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := newMock(t, oneNodeNoReplicas)
			release := make(chan struct{})
			t.Cleanup(func() { close(release) }) // before the cluster closes
			// The answer is held: the request is in flight when the
			// Observer panics.
			mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{tc.op}},
				Action: mockcluster.Action{Hold: release}})
			fc := retry.NewFakeClock(time.Now()) // no health probe comes in between
			c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour, ConnectionsPerNode: 1,
				Observer: opPanicObserver{tc.name}})
			var cn *conn.Conn
			waitUntil(t, "the node's connection", func() bool {
				if es := c.cl.Endpoints(); len(es) == 1 {
					cn = es[0].Conn
				}
				return cn != nil
			})
			var got any
			func() {
				defer func() { got = recover() }()
				tc.call(c)
			}()
			if got != "observer" {
				t.Fatalf("recovered %v, want the observer's panic", got)
			}
			if n := cn.Awaited(); n != 0 {
				t.Fatalf("%d requests awaited on the connection after the panic unwound %s; want 0: its caller is gone, and the late answer would go to the op's handler", n, tc.name)
			}
		})
	}
}
