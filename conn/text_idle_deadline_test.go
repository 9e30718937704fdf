//go:build unix

package conn

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
)

// A text connection sits idle in its node's pool long after the deadline
// of the multi-get it last served (the operation's timeout). Its idle
// check must find it as the server left it: usable, when nothing arrived
// and the server did not close it. The read deadline of that last
// multi-get, long passed, is not the connection's end.
//
// The multi-get reads with a deadline no machine reaches; its passing is
// then acted out on the socket, as the read left it (the read's deadline
// stays set after it: watch sets it, nothing clears it), by moving that
// deadline into the past. A deadline of a real 200 ms, waited out, failed
// the read itself on a machine that stalled that long.
func TestTextConnCheckIdleAfterTheLastReadDeadline(t *testing.T) {
	f := newFakeText(t)
	c := f.dial(t, Options{})
	require.NotNil(t, c.idle, "a TCP connection is peeked at")
	keys := textKeys("k1")
	deadline := time.Now().Add(testTimeout)
	require.NoError(t, c.SendGets(deadline, keys))
	f.request(t)
	f.answers <- sentinelOK + "VALUE k1 0 1\r\nx\r\nEND\r\n"
	hits := 0
	require.NoError(t, c.ReadGets(context.Background(), deadline, keys, func(int, *memdx.TextValue) { hits++ }))
	require.Equal(t, 1, hits)
	// The connection is idle now; the multi-get's deadline passes.
	require.NoError(t, c.nc.SetReadDeadline(time.Now().Add(-time.Second)))
	require.NoError(t, c.CheckIdle(), "an idle connection nothing arrived on, which the server did not close")
	require.NoError(t, c.SendGets(time.Now().Add(testTimeout), keys), "usable")
}
