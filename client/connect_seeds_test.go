package client

import (
	"context"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// mutedListener accepts TCP connections and never answers on them (a node
// whose process is paused). Each accepted connection is reported on the
// returned channel (capacity 16; further ones are not reported).
func mutedListener(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan struct{}, 16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return ln.Addr().String(), accepted
}

// A seed that accepts the connection and answers nothing costs Connect
// that seed's bootstrap (HealthCheck.ProbeTimeout of silence), not the
// connect: Connect goes on to the next seed and bootstraps from it.
//
// The silent seed's dial must end by the silence watch (ErrUnresponsive),
// not by its share of ConnectTimeout (half of it: the next seed would
// then still be reached, and the test pass, with no watch at all). The
// watch runs on real time (a socket's), so the healthy seed may be judged
// silent too on a loaded machine: that costs a round of dials within
// ConnectTimeout, which nothing here counts.
func TestConnectSkipsUnresponsiveSeed(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	muted, accepted := mutedListener(t)
	logs := newLogWatch()
	const connectTimeout = time.Minute // a bound no healthy run comes near
	ctx, cancel := context.WithTimeout(context.Background(), 2*connectTimeout)
	defer cancel()
	c, err := Connect(ctx, "couchbase://"+muted+","+mc.Node(0).Addr()+"/"+mockcluster.DefaultBucket,
		&Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Logger: logs.logger(),
			ConnectTimeout: connectTimeout, HealthCheck: HealthCheckOptions{ProbeTimeout: 200 * time.Millisecond}})
	require.NoError(t, err, "the second seed answers")
	t.Cleanup(func() { _ = c.Close() })
	// The seed's dial failed, so it was made: its accept is reported,
	// if not yet, soon (the bound is for a broken test only).
	select {
	case <-accepted:
	case <-time.After(20 * time.Second):
		t.Fatal("the unresponsive seed, first in the list, was not dialed")
	}
	at := logs.wait(t, 0, "kvwire: bootstrap from a seed failed", muted)
	require.ErrorIs(t, logs.errAt(at), ErrUnresponsive, "the silence watch ended the seed's bootstrap")
	_, err = c.DefaultCollection().Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
}

// The only seed accepts connections but answers nothing for a while (a
// paused node), then answers: Connect dials it again after each bootstrap
// that heard nothing for HealthCheck.ProbeTimeout, and connects once it
// answers, within ConnectTimeout, instead of failing with the first
// unanswered bootstrap.
//
// Events, not times, order the test: each bootstrap's HELLO reaching the
// silent seed. The silence watch runs on real time (a socket's): once the
// seed answers again, a loaded machine may still make a bootstrap hear
// nothing for ProbeTimeout, which costs one more dial within
// ConnectTimeout, which nothing here counts; a Connect that did not redial
// fails the test (it returns before the second HELLO).
func TestConnectRedialsUnresponsiveSeed(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	p, err := faultnode.NewProxy(mc.Node(0).Addr())
	require.NoError(t, err)
	t.Cleanup(p.Close)
	p.RewritePorts(map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(p.Addr())})
	p.Blackhole(true)
	hello := p.NextRequest(memdx.OpHello)

	const connectTimeout = time.Minute // a bound no healthy run comes near
	type result struct {
		c   *Client
		err error
	}
	done := make(chan result, 1)
	logs := newLogWatch()
	go func() {
		c, err := Connect(context.Background(), "couchbase://"+p.Addr()+"/"+mockcluster.DefaultBucket,
			&Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Logger: logs.logger(),
				ConnectTimeout: connectTimeout, HealthCheck: HealthCheckOptions{ProbeTimeout: 100 * time.Millisecond}})
		done <- result{c, err}
	}()
	// Two bootstraps into the silence: the first failed unanswered, and
	// Connect dialed again.
	for i := range 2 {
		select {
		case <-hello:
		case r := <-done:
			if r.c != nil {
				_ = r.c.Close()
			}
			t.Fatalf("Connect returned (%v) before bootstrap %d reached the silent seed", r.err, i+1)
		case <-time.After(connectTimeout):
			t.Fatalf("bootstrap %d did not reach the seed", i+1)
		}
		hello = p.NextRequest(memdx.OpHello)
	}
	at := logs.wait(t, 0, "kvwire: bootstrap from a seed failed", p.Addr())
	require.ErrorIs(t, logs.errAt(at), ErrUnresponsive, "the silence watch ended the first bootstrap")
	p.Blackhole(false)
	r := <-done
	require.NoError(t, r.err, "the seed answers again within ConnectTimeout")
	t.Cleanup(func() { _ = r.c.Close() })
	assert.GreaterOrEqual(t, p.Accepted(), 2, "the seed was dialed again")
	_, err = r.c.DefaultCollection().Upsert(context.Background(), "k", []byte("v"), nil)
	require.NoError(t, err)
}

// A seed that refuses the credentials ends Connect at once, without
// dialing it, or the next seeds, again.
func TestConnectDoesNotRedialRefusedCredentials(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	p, err := faultnode.NewProxy(mc.Node(0).Addr())
	require.NoError(t, err)
	t.Cleanup(p.Close)
	muted, accepted := mutedListener(t)
	_, err = Connect(context.Background(), "couchbase://"+p.Addr()+","+muted+"/"+mockcluster.DefaultBucket,
		testOptions(&Options{Username: mockcluster.DefaultUser, Password: "wrong", ConnectTimeout: time.Minute}))
	require.ErrorIs(t, err, ErrAuthenticationFailure)
	assert.Equal(t, 1, p.Accepted(), "the refusing seed was dialed once")
	select {
	case <-accepted:
		t.Fatal("the seed after the one that refused the credentials was dialed")
	default:
	}
}

// A seed that refuses the connection (nothing listens there) is an
// answer: Connect dials it once, not again, and fails with the refusal as
// the cause as soon as that dial has failed. Each dial of a seed that
// fails is logged; the test counts them while Connect runs, so a second
// dial fails it as soon as it is logged. ConnectTimeout is an hour: a
// Connect that waited it out instead of returning would hang the test
// until go test's -timeout.
func TestConnectDoesNotRedialRefusedSeed(t *testing.T) {
	dead := closedPort(t)
	logs := newLogWatch()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		c, err := Connect(ctx, "couchbase://"+dead+"/"+mockcluster.DefaultBucket,
			testOptions(&Options{ConnectTimeout: time.Hour, Logger: logs.logger()}))
		if c != nil {
			_ = c.Close()
		}
		done <- err
	}()
	defer func() { cancel(); <-done }()
	const failed = "kvwire: bootstrap from a seed failed"
	for {
		dials, next := logs.count(failed, dead)
		require.LessOrEqual(t, dials, 1, "the refused seed was dialed again")
		select {
		case err := <-done:
			done <- err // for the deferred wait
			require.ErrorIs(t, err, ErrNoNodeAvailable)
			assert.ErrorIs(t, err, syscall.ECONNREFUSED)
			dials, _ = logs.count(failed, dead)
			assert.Equal(t, 1, dials, "dials of the refused seed")
			return
		case <-next:
		}
	}
}

// The only memcached:// server accepts connections but answers nothing
// for a while, then answers: Connect dials it again, as it does a
// Couchbase seed, instead of failing with its first silent bootstrap.
// As in TestConnectRedialsUnresponsiveSeed, events order the test, and a
// bootstrap a loaded machine makes wait ProbeTimeout after the server
// answers again costs a dial, not the test.
func TestConnectRedialsUnresponsiveMemcached(t *testing.T) {
	t.Parallel()
	p, err := faultnode.NewProxy(memcachedtest.Start(t))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	p.Blackhole(true)
	// A memcached:// bootstrap is one NOOP (memcached has no HELLO).
	noop := p.NextRequest(memdx.OpNoop)
	type result struct {
		c   *Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := Connect(context.Background(), "memcached://"+p.Addr(),
			&Options{ConnectTimeout: time.Minute, HealthCheck: HealthCheckOptions{ProbeTimeout: 100 * time.Millisecond}})
		done <- result{c, err}
	}()
	for i := range 2 {
		select {
		case <-noop:
		case r := <-done:
			if r.c != nil {
				_ = r.c.Close()
			}
			t.Fatalf("Connect returned (%v) before bootstrap %d reached the silent server", r.err, i+1)
		case <-time.After(time.Minute):
			t.Fatalf("bootstrap %d did not reach the server", i+1)
		}
		noop = p.NextRequest(memdx.OpNoop)
	}
	p.Blackhole(false)
	r := <-done
	require.NoError(t, r.err, "the server answers again within ConnectTimeout")
	t.Cleanup(func() { _ = r.c.Close() })
	_, err = r.c.DefaultCollection().Upsert(context.Background(), "k", []byte("v"), nil)
	require.NoError(t, err)
}
