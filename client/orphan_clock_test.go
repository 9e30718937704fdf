package client

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A late answer is timed on the client's Clock, as its request's send
// was: on a fake Clock moved 3 s between a Get's send and the answer that
// came after the Get was cancelled, the orphan report says 3 s, whatever
// the system clock did meanwhile. The proxy holds the request back and the
// test sends its answer, so nothing here depends on how fast either runs.
func TestOrphanReportTimedOnTheClientsClock(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	p, err := faultnode.NewProxy(mc.Node(0).Addr())
	require.NoError(t, err)
	t.Cleanup(p.Close)
	p.RewritePorts(map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(p.Addr())})
	held := make(chan memdx.Packet, 1)
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		if req.OpCode != memdx.OpGet || !strings.HasSuffix(string(req.Key), "late") { // the key may carry a collection id
			return faultnode.Action{}
		}
		held <- memdx.Packet{OpCode: req.OpCode, Opaque: req.Opaque}
		return faultnode.Action{Drop: true}
	})

	fc := retry.NewFakeClock(reportEpoch)
	logger, logs := newReportLog()
	o := fakeClockOptions(fc)
	o.Username, o.Password, o.Logger = mockcluster.DefaultUser, mockcluster.DefaultPassword, logger
	o.OrphanReporting = OrphanReportingOptions{Interval: 10 * time.Millisecond}
	connCtx, connCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer connCancel()
	c, err := Connect(connCtx, "couchbase://"+p.Addr()+"/"+mockcluster.DefaultBucket, testOptions(o))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Get(ctx, "late", nil)
		done <- err
	}()
	var req memdx.Packet
	select {
	case req = <-held: // written: cancelling now leaves a tombstone
	case err := <-done:
		t.Fatalf("the Get ended (%v) before its request reached the node", err)
	case <-time.After(time.Minute):
		t.Fatal("the Get's request did not reach the node within a minute")
	}
	fc.Advance(3 * time.Second)
	cancel()
	require.ErrorIs(t, <-done, ErrRequestCanceled)
	_, err = p.InjectResponse(faultnode.Reply(&req, memdx.StatusKeyNotFound, nil))
	require.NoError(t, err)

	rep := logs.next(t, OrphanReportMessage)
	require.EqualValues(t, 1, rep.KV.TotalCount)
	e := kvEntry(t, rep, "get")
	t.Logf("orphan report's get: %v", e)
	assert.Equal(t, 3*time.Second, us(e, "total_duration_us"), "from the send to the answer, on the client's clock")
	assert.Equal(t, 3*time.Second, us(e, "last_dispatch_duration_us"))
}
