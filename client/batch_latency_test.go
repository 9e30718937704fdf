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

// A GetMany key that ends without being sent, after waiting in the batch
// for room in flight, ended when the batch ended it, not when the batch
// began: its latency on the meter and its span's end are the time it
// waited. Here one key is in flight (the connection takes one at a time)
// and held by a proxy, the other waits for room; the fake Clock moves
// 3 s, and the context is cancelled: both keys took 3 s. (The key never
// sent was timed from the batch's start to the batch's start: 0.)
func TestGetManyKeyEndedUnsentIsTimedToItsEnd(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	p, err := faultnode.NewProxy(mc.Node(0).Addr())
	require.NoError(t, err)
	t.Cleanup(p.Close)
	p.RewritePorts(map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(p.Addr())})
	held := make(chan struct{}, 4)
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		if req.OpCode != memdx.OpGet || !strings.Contains(string(req.Key), "held-") { // the key may carry a collection id
			return faultnode.Action{}
		}
		held <- struct{}{}
		return faultnode.Action{Drop: true}
	})

	fc := retry.NewFakeClock(reportEpoch)
	m := &countingMeter{}
	tr := &treeTracer{}
	o := fakeClockOptions(fc)
	o.Username, o.Password = mockcluster.DefaultUser, mockcluster.DefaultPassword
	o.Meter, o.Tracer = m, tr
	o.MaxPendingPerConnection = 2 // one key of a batch in flight at a time
	connCtx, connCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer connCancel()
	c, err := Connect(connCtx, "couchbase://"+p.Addr()+"/"+mockcluster.DefaultBucket, testOptions(o))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan []GetManyResult, 1)
	go func() { done <- c.DefaultCollection().GetMany(ctx, []string{"held-1", "held-2"}, nil) }()
	select {
	case <-held: // one key in flight, the other waiting for room
	case <-time.After(time.Minute):
		t.Fatal("no key of the GetMany reached the node within a minute")
	}
	fc.Advance(3 * time.Second)
	cancel()
	res := <-done
	for _, r := range res {
		require.ErrorIs(t, r.Err, ErrRequestCanceled, r.Key)
	}
	require.Len(t, held, 0, "the second key was never sent")

	m.mu.Lock()
	assert.Equal(t, []uint64{3_000_000, 3_000_000}, m.values["get/RequestCanceled"], "each key's latency, in µs")
	m.mu.Unlock()
	var gets int
	for _, s := range tr.take() {
		if s.name == "get" {
			gets++
			assert.Equal(t, reportEpoch.Add(3*time.Second), s.end, "the get span ends when the key ended")
		}
	}
	assert.Equal(t, 2, gets)
}
