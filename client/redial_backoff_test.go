package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// redialClient is a one-node mock cluster whose node answers EINTERNAL
// (conn-state-invalidated in its error map: the client drops the
// connection) to every GET of "bad", and a client on it with a fake clock
// whose only other timer is the config poll's, an hour away.
func redialClient(t *testing.T) (*mockcluster.Cluster, *Client, *retry.FakeClock) {
	t.Helper()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, KVTimeout: time.Hour, ConfigPollInterval: time.Hour})
	ctl := mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{Key: "bad", OpCodes: []memdx.OpCode{memdx.OpGet}},
		Action: mockcluster.Action{Status: memdx.StatusInternalError}})
	t.Cleanup(ctl.Remove)
	return mc, c, fc
}

// nodeSettles waits until the client's one node has a live connection
// (returned) or waits on the client's clock to redial (returned: how long
// it still waits). The minute bounds a broken client (a node that does
// neither), not a healthy one.
func nodeSettles(t *testing.T, c *Client, fc *retry.FakeClock) (*conn.Conn, time.Duration) {
	t.Helper()
	end := time.Now().Add(time.Minute)
	for time.Now().Before(end) {
		changed := c.cl.HealthChanged()
		for _, cn := range c.cl.Topology().Nodes()[0].Conns() {
			if !isDoneConn(cn) {
				return cn, 0
			}
		}
		for _, due := range fc.Timers() {
			if d := due.Sub(fc.Now()); d < time.Minute { // not the config poll's
				return nil, d
			}
		}
		select { // a connection made or ended; a timer armed shows at the next look
		case <-changed:
		case <-time.After(time.Millisecond):
		}
	}
	t.Fatal("the node neither connected nor armed a wait on the client's clock within a minute")
	return nil, 0
}

func isDoneConn(cn *conn.Conn) bool {
	select {
	case <-cn.Done():
		return true
	default:
		return false
	}
}

// readBad reads "bad" on live, the node's one live connection: the read
// fails with EINTERNAL and the connection is dropped.
func readBad(t *testing.T, c *Client, live *conn.Conn) {
	t.Helper()
	_, err := c.DefaultCollection().Get(context.Background(), "bad", nil)
	require.ErrorIs(t, err, ErrServerFailure)
	select {
	case <-live.Done():
	case <-time.After(time.Minute):
		t.Fatal("the connection that answered EINTERNAL is still open")
	}
}

// TestRedialBacksOffAfterConnectionsEndingEarly: a node that answers
// EINTERNAL (conn-state-invalidated: the client drops the connection) to
// every read of one document, read in a loop, must not be redialed (HELLO,
// SASL, SELECT_BUCKET, error map) once per read. A connection that ends
// within cluster.ConnMinLife of being made counts as a failed dial: the
// first such end in a row redials at once, each later one waits the node's
// back-off on the client's clock, doubling from cluster.ReconnectMin to
// cluster.ReconnectMax, so the node is dialed at most once per
// ReconnectMax however fast it is read. No dial happens during a wait; a
// read that comes meanwhile (no connection) retries with
// NODE_NOT_AVAILABLE and fails at its timeout.
func TestRedialBacksOffAfterConnectionsEndingEarly(t *testing.T) {
	t.Parallel()
	mc, c, fc := redialClient(t)
	hellos := func() uint64 { return mc.RequestCount(memdx.OpHello) }

	const reads = 12
	var waits []time.Duration
	timedOut := false
	live, d := nodeSettles(t, c, fc)
	require.Zero(t, d)
	for i := range reads {
		readBad(t, c, live)
		dialed := hellos()
		live, d = nodeSettles(t, c, fc)
		if d == 0 {
			require.Zero(t, i, "read %d: the node redialed at once after its connection %d in a row that ended early (%d dials)", i+1, i+1, hellos())
			continue
		}
		waits = append(waits, d)
		assert.Equal(t, dialed, hellos(), "read %d: no dial before the wait ends", i+1)
		if !timedOut && d >= 200*time.Millisecond {
			// A read while the node waits: it has no connection, retries
			// with NODE_NOT_AVAILABLE and fails at its timeout (a quarter
			// of the wait), on the client's clock.
			timedOut = true
			deadline := fc.Now().Add(d / 4)
			got := make(chan error, 1)
			go func() {
				_, err := c.DefaultCollection().Get(context.Background(), "k", &GetOptions{Timeout: d / 4})
				got <- err
			}()
			// The read's wait, due by its deadline (the node's redial
			// wait is due later), not any timer.
			awaitTimerBy(t, fc, deadline, "the read waits on the client's clock")
			fc.Advance(d / 4)
			select {
			case err := <-got:
				require.ErrorIs(t, err, ErrTimeout)
				var kv *KeyValueError
				require.ErrorAs(t, err, &kv)
				assert.True(t, kv.RetryReasons.Has(RetryReasonNodeNotAvailable), "%v", err)
				assert.Contains(t, err.Error(), "connections end soon after they are made", "says why the node has none")
				assert.Contains(t, err.Error(), "EINTERNAL", "names what the last one ended with")
			case <-time.After(time.Minute):
				t.Fatal("a read while the node waits to redial outlived its timeout")
			}
			assert.Equal(t, dialed, hellos(), "read %d: no dial before the wait ends", i+1)
			d -= d / 4
		}
		fc.Advance(d)
		live, d = nodeSettles(t, c, fc)
		require.Zero(t, d, "read %d: the node redials when its wait ends", i+1)
	}
	require.True(t, timedOut)
	var want []time.Duration
	for w := cluster.ReconnectMin; len(want) < reads-1; w = min(2*w, cluster.ReconnectMax) {
		want = append(want, w)
	}
	assert.Equal(t, want, waits, "the waits before each redial after the first early end")
	assert.Equal(t, uint64(1+reads), hellos(), "one dial per connection ended")
}

// TestRedialAtOnceAfterLongLivedConnection: a connection that lived
// cluster.ConnMinLife or longer is redialed at once when it ends, however
// long the node's back-off had grown, and resets it: the next early end is
// again redialed at once, and the one after it waits cluster.ReconnectMin.
func TestRedialAtOnceAfterLongLivedConnection(t *testing.T) {
	t.Parallel()
	_, c, fc := redialClient(t)

	live, _ := nodeSettles(t, c, fc)
	for range 4 { // back-off: at once, then 10, 20, 40 ms
		readBad(t, c, live)
		var d time.Duration
		if live, d = nodeSettles(t, c, fc); d > 0 {
			fc.Advance(d)
			live, d = nodeSettles(t, c, fc)
			require.Zero(t, d)
		}
	}
	fc.Advance(cluster.ConnMinLife)
	readBad(t, c, live)
	live, d := nodeSettles(t, c, fc)
	require.Zero(t, d, "a connection that lived ConnMinLife is redialed at once")
	readBad(t, c, live)
	live, d = nodeSettles(t, c, fc)
	require.Zero(t, d, "the first early end after it is redialed at once")
	readBad(t, c, live)
	_, d = nodeSettles(t, c, fc)
	require.Equal(t, cluster.ReconnectMin, d, "the back-off starts again")
	fc.Advance(d)
	_, d = nodeSettles(t, c, fc)
	require.Zero(t, d)
}

// TestCloseDuringRedialBackOff: Close does not wait for a node's back-off
// before its next redial (a wait on the client's clock that the test never
// moves), and leaves no goroutine behind (TestMain's leak check).
func TestCloseDuringRedialBackOff(t *testing.T) {
	t.Parallel()
	_, c, fc := redialClient(t)
	live, _ := nodeSettles(t, c, fc)
	readBad(t, c, live) // the first early end: redialed at once
	live, _ = nodeSettles(t, c, fc)
	readBad(t, c, live)
	_, d := nodeSettles(t, c, fc)
	require.Equal(t, cluster.ReconnectMin, d, "the node waits to redial")
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("Close waits for the node's back-off")
	}
}
