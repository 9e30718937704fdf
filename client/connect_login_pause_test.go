package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A node of the config that stops answering during its first dial's login
// (its SASL answer never comes: kv_engine is silent while it checks an
// LDAP user, so the login is bounded by ConnectTimeout alone) does not
// hold Connect: the other nodes are connected, and Connect returns once
// the node has been dialing for the probe timeout (as the cluster counts
// it unreachable then), not after ConnectTimeout. It used to wait for
// every node's first dial for up to ConnectTimeout: 10 s by default, an
// hour here. Operations on the other nodes work; the node's dial goes on,
// and WaitUntilReady waits for it until Close ends the wait (ErrClosed).
func TestConnectNotHeldByANodePausedInItsLogin(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 3})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	held := make(chan struct{}, 16)
	mc.Control(mockcluster.Match{Nodes: []int{2}, OpCodes: []memdx.OpCode{memdx.OpSASLAuth, memdx.OpSASLStep}}, 0,
		func(*mockcluster.Request) (mockcluster.Action, bool) {
			select {
			case held <- struct{}{}:
			default:
			}
			return mockcluster.Action{Hold: release}, true
		})
	o := &Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Bucket: mockcluster.DefaultBucket,
		ConnectTimeout: time.Hour, HealthCheck: HealthCheckOptions{ProbeTimeout: 100 * time.Millisecond}}
	type result struct {
		c   *Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := Connect(context.Background(), mc.ConnString(), o)
		done <- result{c, err}
	}()
	var c *Client
	select {
	case r := <-done:
		require.NoError(t, r.err)
		c = r.c
		t.Cleanup(func() { _ = c.Close() })
	case <-time.After(closeHookWaits):
		t.Fatalf("Connect did not return within %v with one node of three paused in its login", closeHookWaits)
	}
	select {
	case <-held:
	default:
		t.Fatal("node 2 was not dialed: the test paused no login")
	}
	// Keys of the other nodes are written.
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), closeHookWaits)
	defer cancel()
	for _, n := range []int{0, 1} {
		_, err := col.Upsert(ctx, keyOn(t, c, mc.Node(n).Addr()), []byte("v"), nil)
		require.NoError(t, err)
	}
	// WaitUntilReady waits for node 2 (online is every node connected)
	// until Close ends the wait.
	ready := make(chan error, 1)
	go func() { ready <- c.WaitUntilReady(ctx, nil) }()
	require.NoError(t, c.Close())
	select {
	case err := <-ready:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(closeHookWaits):
		t.Fatal("WaitUntilReady still waits after Close")
	}
}
