package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
)

// A memcached GetMany reads a server's keys as one group (quiet gets and
// the NOOP that settles them); a group abandoned after it was written (its
// context cancelled) whose NOOP is answered late is an orphan of the
// GetMany's gets: the orphan report names it "get", not "ping" (the NOOP's
// opcode: no Ping was made). So is the NOOP that settles a batch's quiet
// gets when the keys are not read by groups (an Observer sees each key's
// attempts).
func TestMemcachedGetManyGroupOrphanIsAGet(t *testing.T) {
	t.Run("group", func(t *testing.T) { testMemcachedGetManyNoopOrphan(t, nil) })
	t.Run("fence", func(t *testing.T) { testMemcachedGetManyNoopOrphan(t, nopObserver{}) })
}

func testMemcachedGetManyNoopOrphan(t *testing.T, obs Observer) {
	p := proxied(t)
	held := make(chan memdx.Packet, 4)
	var armed atomic.Bool
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		if !armed.Load() || req.OpCode != memdx.OpNoop {
			return faultnode.Action{}
		}
		held <- memdx.Packet{OpCode: req.OpCode, Opaque: req.Opaque}
		return faultnode.Action{Drop: true}
	})
	logger, logs := newReportLog()
	c := memcachedClient(t, p.Addr(), &Options{Logger: logger, Observer: obs,
		OrphanReporting: OrphanReportingOptions{Interval: 10 * time.Millisecond}})
	armed.Store(true) // after the connection's bootstrap

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan []GetManyResult, 1)
	go func() { done <- c.DefaultCollection().GetMany(ctx, []string{"absent-1", "absent-2"}, nil) }()
	var req memdx.Packet
	select {
	case req = <-held: // the group is written, its NOOP held back
	case <-time.After(time.Minute):
		t.Fatal("the GetMany's group did not reach the server within a minute")
	}
	cancel()
	for _, r := range <-done {
		require.ErrorIs(t, r.Err, ErrRequestCanceled, r.Key)
	}
	_, err := p.InjectResponse(faultnode.Reply(&req, memdx.StatusSuccess, nil))
	require.NoError(t, err)

	rep := logs.next(t, OrphanReportMessage)
	require.EqualValues(t, 1, rep.KV.TotalCount)
	e := rep.KV.TopRequests[0]
	t.Logf("orphan report's entry: %v", e)
	assert.Equal(t, "get", e["operation_name"])
}
