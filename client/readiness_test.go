package client

import (
	"context"
	"encoding/json"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// awaitDiagnostics returns the first report in which the endpoint of node
// is in state (and, when err is set, its error matches it), waiting on
// the cluster's change signal between reports.
func awaitDiagnostics(t *testing.T, c *Client, node string, state EndpointState, err error) *DiagnosticsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		changed := c.cl.HealthChanged()
		d := c.Diagnostics(nil)
		for _, e := range d.Endpoints {
			if e.Node == node && e.State == state && (err == nil || errors.Is(e.Err, err)) {
				return d
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			b, _ := json.Marshal(d)
			t.Fatalf("node %s never %s (%v): %s", node, state, err, b)
		}
	}
}

// redialWait returns how long from now the node's redial timer fires,
// once one is armed on fc (the back-off after a failed dial: at most
// 2 s; the config poll's timer is an hour away).
func redialWait(t *testing.T, fc *retry.FakeClock) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for n := 1; ; n++ {
		for _, due := range fc.Timers() {
			if d := due.Sub(fc.Now()); d > 0 && d <= 2*time.Second {
				return d
			}
		}
		require.NoError(t, fc.BlockUntilTimers(ctx, n), "no redial armed")
	}
}

// Diagnostics follows a connection its node resets (the node stops):
// connected, then reconnecting with why (the node refuses connections),
// then connected again once the node is back. WaitUntilReady returns as
// soon as the node's next dial connects (one back-off on the client's
// fake clock after the restart, nothing more), and, with the node kept
// down, fails at its timeout naming that node and its error.
func TestReadinessFollowsANodeThatStopsAndRestarts(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	fc := retry.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour})
	ctx := context.Background()
	require.NoError(t, c.WaitUntilReady(ctx, nil), "every node connected")
	down := mc.Node(1).Addr()

	d := c.Diagnostics(&DiagnosticsOptions{ReportID: "r1"})
	require.Equal(t, ClusterOnline, d.State)
	require.Len(t, d.Endpoints, 2)
	for _, e := range d.Endpoints {
		assert.Equal(t, EndpointConnected, e.State, e.Node)
		assert.Equal(t, e.Node, e.Remote)
		assert.Regexp(t, `^127\.0\.0\.1:\d+$`, e.Local)
		assert.Regexp(t, localID, e.LocalID)
		assert.Equal(t, mockcluster.DefaultBucket, e.Bucket)
		assert.False(t, e.LastActivity.IsZero())
	}
	checkDiagnosticsJSON(t, d, "r1", down)

	mc.Node(1).Stop()
	d = awaitDiagnostics(t, c, down, EndpointReconnecting, syscall.ECONNREFUSED)
	assert.Equal(t, ClusterDegraded, d.State)
	require.NoError(t, c.WaitUntilReady(ctx, &WaitUntilReadyOptions{DesiredState: ClusterDegraded}), "one node is enough for degraded")

	ready := make(chan error, 1)
	go func() { ready <- c.WaitUntilReady(ctx, &WaitUntilReadyOptions{Timeout: time.Minute}) }()
	wait := redialWait(t, fc)
	require.NoError(t, mc.Node(1).Restart())
	select {
	case err := <-ready:
		t.Fatalf("WaitUntilReady returned %v before the node's next dial", err)
	default:
	}
	fc.Advance(wait) // the node's next dial: it connects
	select {
	case err := <-ready:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("WaitUntilReady did not return once the node connected")
	}
	d = awaitDiagnostics(t, c, down, EndpointConnected, nil)
	assert.Equal(t, ClusterOnline, d.State)

	mc.Node(1).Stop()
	awaitDiagnostics(t, c, down, EndpointReconnecting, syscall.ECONNREFUSED)
	go func() { ready <- c.WaitUntilReady(ctx, &WaitUntilReadyOptions{Timeout: 5 * time.Second}) }()
	timerIn(t, fc, 5*time.Second) // the wait's deadline is armed
	for range 5 {
		fc.Advance(time.Second) // the node keeps refusing: each redial fails
	}
	err := <-ready
	var nr *NotReadyError
	require.ErrorAs(t, err, &nr)
	assert.ErrorIs(t, err, ErrUnambiguousTimeout)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.Equal(t, down, nr.Node)
	assert.Equal(t, EndpointReconnecting, nr.NodeState)
	assert.Equal(t, ClusterDegraded, nr.State)
	assert.Equal(t, 5*time.Second, nr.Waited)
	assert.Contains(t, err.Error(), "node "+down+" is reconnecting")

	assert.ErrorIs(t, c.WaitUntilReady(ctx, &WaitUntilReadyOptions{DesiredState: ClusterOffline}), ErrInvalidArgument)
}

// Diagnostics shows a connection the node resets, while it keeps
// listening, as reconnecting, then connected once the redial succeeds. The
// first redial's HELLO is refused (the mock closes the connection), so
// that the endpoint stays reconnecting, with why, until the back-off on
// the client's fake clock is over: nothing depends on how fast the redial
// would otherwise have been.
func TestDiagnosticsShowsAResetConnectionReconnecting(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	fc := retry.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour})
	require.NoError(t, c.WaitUntilReady(context.Background(), nil))
	node := mc.Node(0).Addr()
	before := awaitDiagnostics(t, c, node, EndpointConnected, nil).Endpoints[0].LocalID

	hello := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpHello}},
		Action: mockcluster.Action{Close: mockcluster.CloseBeforeApply}, Times: 1})
	t.Cleanup(hello.Remove)
	mc.DropConnections()
	d := awaitDiagnostics(t, c, node, EndpointReconnecting, nil)
	assert.Equal(t, ClusterOffline, d.State)
	<-hello.Done() // the redial's HELLO was refused: a back-off follows
	d = awaitDiagnostics(t, c, node, EndpointReconnecting, nil)
	require.Error(t, d.Endpoints[0].Err, "why it has no connection")
	assert.Empty(t, d.Endpoints[0].Local)

	fc.Advance(redialWait(t, fc))
	d = awaitDiagnostics(t, c, node, EndpointConnected, nil)
	assert.Equal(t, ClusterOnline, d.State)
	assert.NoError(t, d.Endpoints[0].Err)
	assert.NotEqual(t, before, d.Endpoints[0].LocalID, "a new connection")
}

// checkDiagnosticsJSON checks d's JSON (RFC 0061's report) for a cluster
// of two connected nodes, the second being second.
func checkDiagnosticsJSON(t *testing.T, d *DiagnosticsResult, id, second string) {
	t.Helper()
	var js struct {
		Version  int    `json:"version"`
		ID       string `json:"id"`
		SDK      string `json:"sdk"`
		State    string `json:"state"`
		Services map[string][]struct {
			ID, Remote, Local, State, Namespace string
		} `json:"services"`
	}
	b, err := json.Marshal(d)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &js))
	assert.Equal(t, 2, js.Version)
	assert.Equal(t, id, js.ID)
	assert.Equal(t, "kvwire", js.SDK)
	assert.Equal(t, "online", js.State)
	require.Len(t, js.Services["kv"], 2)
	assert.Equal(t, "connected", js.Services["kv"][1].State)
	assert.Equal(t, second+"/0", js.Services["kv"][1].ID)
}

// timerIn waits until a timer of fc is due d from now.
func timerIn(t *testing.T, fc *retry.FakeClock, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for n := 1; ; n++ {
		for _, due := range fc.Timers() {
			if due.Sub(fc.Now()) == d {
				return
			}
		}
		require.NoError(t, fc.BlockUntilTimers(ctx, n), "no timer armed %v on", d)
	}
}

// On memcached:// every server is an endpoint: with one server refusing
// connections the cluster is degraded, WaitUntilReady for online fails
// naming it, and a closed client's endpoints are disconnected.
func TestReadinessOnMemcached(t *testing.T) {
	live := memcachedAddr(t, false)
	c, dead := connectWithDeadServer(t, live)
	ctx := context.Background()
	d := awaitDiagnostics(t, c, dead, EndpointReconnecting, syscall.ECONNREFUSED)
	assert.Equal(t, ClusterDegraded, d.State)
	for _, e := range d.Endpoints {
		assert.Empty(t, e.Bucket)
		if e.Node == live {
			assert.Equal(t, EndpointConnected, e.State)
		}
	}
	require.NoError(t, c.WaitUntilReady(ctx, &WaitUntilReadyOptions{DesiredState: ClusterDegraded}))
	err := c.WaitUntilReady(ctx, &WaitUntilReadyOptions{Timeout: 100 * time.Millisecond})
	var nr *NotReadyError
	require.ErrorAs(t, err, &nr)
	assert.Equal(t, dead, nr.Node)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)

	require.NoError(t, c.Close())
	for _, e := range c.Diagnostics(nil).Endpoints {
		assert.Equal(t, EndpointDisconnected, e.State, e.Node)
	}
	assert.ErrorIs(t, c.WaitUntilReady(ctx, nil), ErrClosed)
}

// A ping to a node whose connection ended, while its redial is still
// under way, fails saying why the connection ended, as Diagnostics does,
// not that the node "has no connection yet", which tells of a node never
// connected.
func TestPingSaysWhyANodeLostItsConnection(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, &Options{ConnectTimeout: time.Hour})
	require.NoError(t, c.WaitUntilReady(context.Background(), nil))
	node := mc.Node(0).Addr()
	// The redial's HELLO is never answered: the redial stays under way.
	hello := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpHello}},
		Action: mockcluster.Action{Delay: time.Hour}})
	t.Cleanup(hello.Remove)
	mc.DropConnections()
	// The endpoint is reconnecting once its connection is done, and
	// says why once the connection's end is told (OnClose).
	why := awaitEndReason(t, c, node)

	res := c.Ping(context.Background())
	require.Len(t, res, 1)
	err := res[0].Err
	require.ErrorIs(t, err, ErrNoNodeAvailable)
	assert.NotContains(t, err.Error(), "has no connection yet")
	assert.Contains(t, err.Error(), why.Error())
}

// A Ping (and a Stats) whose request is in flight when the client closes
// fails with ErrClosed, as an operation that would retry does, not with a
// connection closed in flight that its strategy did not retry.
func TestPingInFlightWhenTheClientClosesFailsWithErrClosed(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, nil)
	held := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpNoop, memdx.OpStat},
		Bucket: mockcluster.DefaultBucket}, Action: mockcluster.Action{Delay: time.Hour}})
	t.Cleanup(held.Remove)
	errs := make(chan error, 2)
	go func() { errs <- c.Ping(context.Background())[0].Err }()
	go func() {
		_, err := c.Stats(context.Background(), "", nil)
		errs <- err
	}()
	// Both are written; the node holds the first and runs the second
	// only after it (NOOP and STAT are not reorderable: kv_engine runs
	// each after every earlier command).
	cn := c.cl.Topology().Nodes()[0].Conns()[0]
	require.Eventually(t, func() bool { return held.Hits() == 1 && cn.Pending() == 2 },
		time.Minute, time.Millisecond, "both requests reached the node")
	require.NoError(t, c.Close())
	for range 2 {
		err := <-errs
		assert.ErrorIs(t, err, ErrClosed)
	}
}

// A request that found no connection to its node, whose connection had
// ended and whose redial is still under way, was never written: its error
// must not match ErrConnectionClosed ("the connection that carried the
// request ended", which tells the caller a mutation may have gone out),
// only ErrNoNodeAvailable, naming why the node lost its connection in its
// message, as the node's wait before a redial (connections that ended
// early) says it. Here the connection was dropped for an EINTERNAL
// (conn-state-invalidated) answer: it ended with ErrConnectionClosed.
func TestNoConnectionIsNotAConnectionClosedWithTheRequest(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, &Options{ConnectTimeout: time.Hour})
	require.NoError(t, c.WaitUntilReady(context.Background(), nil))
	node := mc.Node(0).Addr()
	bad := mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{Key: "bad", OpCodes: []memdx.OpCode{memdx.OpGet}},
		Action: mockcluster.Action{Status: memdx.StatusInternalError}})
	t.Cleanup(bad.Remove)
	// The redial's HELLO is never answered: the redial stays under way.
	hello := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpHello}},
		Action: mockcluster.Action{Delay: time.Hour}})
	t.Cleanup(hello.Remove)
	_, err := c.DefaultCollection().Get(context.Background(), "bad", nil)
	require.ErrorIs(t, err, ErrServerFailure)
	why := awaitEndReason(t, c, node)
	require.ErrorIs(t, why, ErrConnectionClosed, "the ended connection's error, as Diagnostics shows it")

	res := c.Ping(context.Background())
	require.Len(t, res, 1)
	require.ErrorIs(t, res[0].Err, ErrNoNodeAvailable)
	assert.Contains(t, res[0].Err.Error(), "EINTERNAL", "says why the node has no connection")
	assert.NotErrorIs(t, res[0].Err, ErrConnectionClosed, "the ping was on no connection: %v", res[0].Err)

	// An upsert meanwhile retries (NODE_NOT_AVAILABLE) until its
	// timeout, never written.
	_, err = c.DefaultCollection().Upsert(context.Background(), "k", []byte("v"),
		&UpsertOptions{Timeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, ErrUnambiguousTimeout)
	assert.NotErrorIs(t, err, ErrConnectionClosed, "the upsert was never written: %v", err)
}

// awaitEndReason waits until node's endpoint is reconnecting and says why
// its connection ended (once the end is told, OnClose), and returns that.
func awaitEndReason(t *testing.T, c *Client, node string) error {
	t.Helper()
	for {
		changed := c.cl.HealthChanged()
		if e := awaitDiagnostics(t, c, node, EndpointReconnecting, nil).Endpoints[0]; e.Err != nil {
			return e.Err
		}
		select {
		case <-changed:
		case <-time.After(time.Minute):
			t.Fatal("the connection's end was never told")
		}
	}
}
