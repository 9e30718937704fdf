package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/retry"
)

// nodeOf returns c's node for addr.
func nodeOf(t *testing.T, c *Client, addr string) *cluster.Node {
	t.Helper()
	for _, n := range c.cl.Topology().Nodes() {
		if n.Addr() == addr {
			return n
		}
	}
	t.Fatalf("no node %s", addr)
	return nil
}

// settles waits until n has a live connection (returned) or a wait on fc
// shorter than a minute is armed (returned: how long it still waits). The
// minute bounds a broken client, not a healthy one.
func settles(t *testing.T, c *Client, n *cluster.Node, fc *retry.FakeClock) (*conn.Conn, time.Duration) {
	t.Helper()
	end := time.Now().Add(time.Minute)
	for time.Now().Before(end) {
		changed := c.cl.HealthChanged()
		for _, cn := range n.Conns() {
			if !isDoneConn(cn) {
				return cn, 0
			}
		}
		for _, due := range fc.Timers() {
			if d := due.Sub(fc.Now()); d < time.Minute {
				return nil, d
			}
		}
		select {
		case <-changed:
		case <-time.After(time.Millisecond):
		}
	}
	t.Fatalf("%s neither connected nor armed a wait on the client's clock within a minute", n.Addr())
	return nil, 0
}

// A memcached server whose connections end soon after they are made (here
// reset by a proxy in front of a real memcached) waits the node's back-off
// before each redial after the first. While it waits it has no connection
// and, as for a server whose dial failed (README: "A server that refuses
// connections fails its keys at once"; an early end "counts as a failed
// dial"), its keys fail at once with ErrNoNodeAvailable, not after
// retrying until their timeout. The wait is on a fake clock the test
// moves; when it ends the server is redialed and serves its keys again.
func TestMemcachedEarlyEndingServerFailsItsKeysAtOnceDuringBackOff(t *testing.T) {
	live := memcachedAddr(t, false)
	p := startProxy(t, live)
	fc := retry.NewFakeClock(time.Now())
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+live+","+p.addr,
		testOptions(&Options{Clock: fakeClock{fc}, KVTimeout: time.Hour, ConfigPollInterval: time.Hour}))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	key := keyOn(t, c, p.addr)
	_, err = col.Upsert(ctx, key, []byte("v"), nil)
	require.NoError(t, err)
	n := nodeOf(t, c, p.addr)

	cn, _ := settles(t, c, n, fc)
	var d time.Duration
	require.NotNil(t, cn)
	p.Reset() // the first early end: redialed at once
	<-cn.Done()
	cn, d = settles(t, c, n, fc)
	require.Zero(t, d, "the first early end is redialed at once")
	p.Reset() // the second: the node waits its back-off
	<-cn.Done()
	_, d = settles(t, c, n, fc)
	require.Equal(t, cluster.ReconnectMin, d, "the second early end waits the back-off")

	got := make(chan error, 1)
	go func() {
		_, err := col.Get(ctx, key, nil)
		got <- err
	}()
	select {
	case err = <-got:
	case <-time.After(time.Minute):
		t.Error("a Get of a key on a server waiting to redial did not fail at once: it retries until its timeout")
		fc.Advance(time.Hour)
		<-got
		return
	}
	require.ErrorIs(t, err, ErrNoNodeAvailable)
	assert.NotErrorIs(t, err, ErrTimeout)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, p.addr, kv.Node)
	assert.Zero(t, kv.RetryAttempts, "not retried")
	assert.Contains(t, err.Error(), "connections end soon after they are made", "says why the server has none")
	assert.Error(t, n.Down(), "Down while the node waits to redial")

	_, err = col.Upsert(ctx, key, []byte("w"), nil)
	require.ErrorIs(t, err, ErrNoNodeAvailable)
	assert.NotErrorIs(t, err, ErrAmbiguous, "never sent")

	fc.Advance(d)
	_, d = settles(t, c, n, fc)
	require.Zero(t, d, "redialed when the wait ends")
	assert.NoError(t, n.Down())
	g, err := col.Get(ctx, key, nil)
	require.NoError(t, err)
	assert.Equal(t, "v", string(g.Value))
}
