package mockcluster

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// The statuses a synchronous write's execution ends with go through
// kv_engine's Connection::remapErrorCode too (SteppableCommandContext::drive
// calls handle_executor_status, daemon/protocol/mcbp/executors.cc), which
// lists durability_impossible and sync_write_ambiguous among those a
// client without XERROR cannot know: instead of answering them it closes
// the connection. The mock answered DURABILITY_IMPOSSIBLE and
// SYNC_WRITE_AMBIGUOUS to every client, so a client without XERROR (such
// as libcouchbase with enable_errmap=false) saw statuses a server never
// sends it.
func TestNoXerrorClientIsDisconnectedForSyncWriteStatuses(t *testing.T) {
	var noXerror []memdx.HelloFeature
	for _, f := range stdFeatures {
		if f != memdx.FeatureXerror {
			noXerror = append(noXerror, f)
		}
	}
	t.Run("DURABILITY_IMPOSSIBLE", func(t *testing.T) {
		// One node: a vbucket's chain lacks its replica.
		c := newCluster(t, Options{Nodes: 1})
		b := c.Bucket(DefaultBucket)
		x := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
		if p := x.do(keyReq(x, b, durable(set("k", "v")))); p.Status != memdx.StatusDurabilityImpossible {
			t.Fatalf("with XERROR: %s, want DURABILITY_IMPOSSIBLE", p.Status)
		}
		cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, noXerror)
		cl.send(keyReq(cl, b, durable(set("k", "v"))))
		expectHungUp(t, cl)
	})
	for _, unordered := range []bool{false, true} {
		name := "SYNC_WRITE_AMBIGUOUS, ordered"
		fs := noXerror
		if unordered {
			name = "SYNC_WRITE_AMBIGUOUS, unordered"
			fs = append([]memdx.HelloFeature{memdx.FeatureUnorderedExecution}, noXerror...)
		}
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, Options{})
			b := c.Bucket(DefaultBucket)
			k := "durable"
			cl := bootstrap(t, c.Node(ownerOf(b, k)).Addr(), DefaultBucket, fs)
			// The write could commit only after an hour; its durability
			// timeout (20 ms) aborts it first.
			c.SetSyncWriteDelay(time.Hour)
			r := durable(set(k, "v"))
			r.DurabilityTimeout = 20
			cl.send(keyReq(cl, b, r))
			expectHungUp(t, cl)
			if _, ok := b.Get("", "", k); ok {
				t.Fatal("the aborted write's document exists")
			}
		})
	}
	// The connection is gone from the node too, even with a barrier
	// (NOOP) waiting for an answer a fault holds back: the node does not
	// keep serving a connection it hung up on.
	t.Run("SYNC_WRITE_AMBIGUOUS behind a held answer and a barrier", func(t *testing.T) {
		c := newCluster(t, Options{})
		b := c.Bucket(DefaultBucket)
		k := "durable"
		n := c.Node(ownerOf(b, k))
		cl := bootstrap(t, n.Addr(), DefaultBucket, append([]memdx.HelloFeature{memdx.FeatureUnorderedExecution}, noXerror...))
		release := make(chan struct{})
		defer close(release)
		f := c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "held"},
			Action: Action{Hold: release}, Times: 1})
		cl.send(keyReq(cl, b, memdx.NewGet([]byte("held"))))
		waitFor(t, "the held GET", func() bool { return f.Hits() == 1 })
		c.SetSyncWriteDelay(time.Hour)
		r := durable(set(k, "v"))
		r.DurabilityTimeout = 20
		cl.send(keyReq(cl, b, r))
		cl.send(memdx.NewNoop())
		expectHungUp(t, cl)
		waitFor(t, "the node to drop the connection", func() bool { return n.NumConnections() == 0 })
	})
}

// expectHungUp checks that the server closes cl's connection without
// answering the request sent last.
func expectHungUp(t *testing.T, cl *rawClient) {
	t.Helper()
	p, err := cl.read(5 * time.Second)
	if err == nil {
		t.Fatalf("without XERROR: answered %s, want the connection closed", p.Status)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("without XERROR: neither answered nor closed after 5s")
	}
}

// Hanging up keeps the answers before it: a NOOP pipelined ahead of a GET
// that a client without XERROR may not be answered (NO_BUCKET) is
// answered, then the connection closes, also when a fault delays the GET's
// answer (the fault's bookkeeping of the answers buffered survives the
// hang-up).
func TestNoXerrorHangUpAfterPipelinedAnswers(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpGet}}, Action: Action{Delay: time.Millisecond}})
	cl := dialRaw(t, c.Node(0).Addr())
	if st := cl.authPlain(DefaultUser, DefaultPassword); st != memdx.StatusSuccess {
		t.Fatalf("auth: %s", st)
	}
	noop, get := memdx.NewNoop(), memdx.NewGet([]byte("k"))
	buf, _ := noop.AppendTo(nil, 7)
	buf, _ = get.AppendTo(buf, 8)
	cl.write(buf)
	got := cl.expectClosed()
	if len(got) != 1 || got[0].Opaque != 7 || got[0].Status != memdx.StatusSuccess {
		t.Fatalf("answers %v, want the NOOP's (opaque 7) alone before the close", got)
	}
}
