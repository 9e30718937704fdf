package mockcluster

import (
	"net"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// On a connection with UnorderedExecution, kv_engine runs a command that
// may not be reordered (every opcode outside is_reorder_supported, such
// as HELLO, SELECT_BUCKET, NOOP, STAT or the quiet commands, and any
// command with the Barrier frame info) only after every earlier command
// finished, and starts no later command until it is done
// (Cookie::validateClientRequest sets the barrier;
// Connection::executeCommandPipeline and processAllReadyCookies hold it).
// So a SELECT_BUCKET sent while a GET is still being served is answered
// after that GET, and a GET sent after it after the SELECT_BUCKET. The
// mock ran the SELECT_BUCKET at once, answering it first.
func TestUnorderedBarrierWaitsForEarlierCommands(t *testing.T) {
	for _, tc := range []struct {
		name    string
		barrier func(cl *rawClient, b *Bucket) memdx.Request
		op      memdx.OpCode
	}{
		{"SELECT_BUCKET", func(*rawClient, *Bucket) memdx.Request { return memdx.NewSelectBucket(DefaultBucket) }, memdx.OpSelectBucket},
		{"HELLO", func(*rawClient, *Bucket) memdx.Request {
			return memdx.NewHello(memdx.HelloKey("mocktest", "2"), append(stdFeatures, memdx.FeatureUnorderedExecution))
		}, memdx.OpHello},
		{"GET with the Barrier frame", func(cl *rawClient, b *Bucket) memdx.Request {
			r := keyReq(cl, b, memdx.NewGet([]byte("other")))
			r.FramingExtras, _ = memdx.AppendFrameInfo(nil, uint16(memdx.FrameBarrier), nil)
			return r
		}, memdx.OpGet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, Options{Nodes: 1})
			b := c.Bucket(DefaultBucket)
			n := c.Node(0)
			cl := bootstrap(t, n.Addr(), DefaultBucket, append(stdFeatures, memdx.FeatureUnorderedExecution))
			release := make(chan struct{})
			f := c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "held"},
				Action: Action{Hold: release}, Times: 1})
			held := cl.send(keyReq(cl, b, memdx.NewGet([]byte("held"))))
			waitFor(t, "the held GET", func() bool { return f.Hits() == 1 })

			before := n.RequestCount(tc.op)
			barrier := cl.send(tc.barrier(cl, b))
			waitFor(t, "the barrier command to arrive", func() bool { return n.RequestCount(tc.op) == before+1 })
			after := cl.send(keyReq(cl, b, memdx.NewGet([]byte("after"))))
			close(release)

			var order []uint32
			for range 3 {
				p, err := cl.read(5e9)
				if err != nil {
					t.Fatal(err)
				}
				order = append(order, p.Opaque)
			}
			if order[0] != held || order[1] != barrier || order[2] != after {
				t.Fatalf("answers in order %v, want the held GET %d, the %s %d, the later GET %d",
					order, held, tc.name, barrier, after)
			}
		})
	}
}

// A command kv_engine refuses in its packet validation is answered at
// once, barrier or not: Connection::executeCommandPipeline sends a
// rejected packet's status (handleRejectCommand) without waiting for the
// commands in flight, and reads on. Only a valid command that may not be
// reordered waits.
func TestUnorderedRejectedBarrierDoesNotWait(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	b := c.Bucket(DefaultBucket)
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, append(stdFeatures, memdx.FeatureUnorderedExecution))
	release := make(chan struct{})
	f := c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "held"},
		Action: Action{Hold: release}, Times: 1})
	held := cl.send(keyReq(cl, b, memdx.NewGet([]byte("held"))))
	waitFor(t, "the held GET", func() bool { return f.Hits() == 1 })

	badHello := memdx.NewHello(memdx.HelloKey("mocktest", "3"), nil)
	badHello.Value = []byte{0, 1, 2} // odd length
	noopExtras := memdx.NewNoop()
	noopExtras.Extras = []byte{1}
	inUnknown := keyReq(cl, b, memdx.NewGetMeta([]byte("k")))
	inUnknown.CollectionID = 0x77
	for _, r := range []struct {
		name string
		req  memdx.Request
		st   memdx.Status
	}{
		{"HELLO of odd length", badHello, memdx.StatusInvalidArgs},
		{"NOOP with extras", noopExtras, memdx.StatusInvalidArgs},
		{"GET_META in an unknown collection", inUnknown, memdx.StatusUnknownCollection},
	} {
		p := cl.do(r.req)
		expectAnswer(t, r.name+" while a GET is held", p, r.st, "")
	}
	close(release)
	if p := cl.recv(held); p.Status != memdx.StatusKeyNotFound {
		t.Fatalf("held GET: %s", p.Status)
	}
}

// A client that resets its connection while a barrier (NOOP) waits for
// answers held back does not leave the connection served for good: once
// the held answers are released, the first one's write fails, and the
// node drops the connection. The node kept it (and its serve goroutine)
// until the cluster closed: the failed write marked the connection closed
// without ending the barrier's wait, and the other held answer, finding it
// closed, was never counted as sent.
func TestUnorderedBarrierEndsWhenTheClientResets(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	b := c.Bucket(DefaultBucket)
	n := c.Node(0)
	cl := bootstrap(t, n.Addr(), DefaultBucket, append(stdFeatures, memdx.FeatureUnorderedExecution))
	releaseA, releaseB := make(chan struct{}), make(chan struct{})
	fa := c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "a"}, Action: Action{Hold: releaseA}, Times: 1})
	fb := c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "b"}, Action: Action{Hold: releaseB}, Times: 1})
	cl.send(keyReq(cl, b, memdx.NewGet([]byte("a"))))
	cl.send(keyReq(cl, b, memdx.NewGet([]byte("b"))))
	waitFor(t, "the held GETs", func() bool { return fa.Hits() == 1 && fb.Hits() == 1 })
	noops := n.RequestCount(memdx.OpNoop)
	cl.send(memdx.NewNoop())
	waitFor(t, "the NOOP to arrive", func() bool { return n.RequestCount(memdx.OpNoop) == noops+1 })
	// Reset, not a clean close: the node's next write fails.
	if tc, ok := cl.nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	cl.nc.Close()
	close(releaseA)
	close(releaseB)
	waitFor(t, "the node to drop the connection", func() bool { return n.NumConnections() == 0 })
}
