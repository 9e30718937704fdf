package client

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
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
//
// The probe timeout is counted on a fake clock, moved once node 2's login
// is held: Connect cannot return before, nor node 2 reach its login too
// late, however loaded the machine. (On the real clock, a node 2 whose
// login came after the probe timeout under load was not waited for, and
// the test saw no login held.) The health check is off: its bootstrap
// silence watch keeps real time.
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
	start := time.Now()
	fc := retry.NewFakeClock(start)
	clock := graceClock{fakeClock{fc}, make(chan time.Duration, 16)}
	const probeTimeout = 100 * time.Millisecond
	o := &Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Bucket: mockcluster.DefaultBucket,
		ConnectTimeout: time.Hour, ConfigPollInterval: time.Hour, Clock: clock,
		HealthCheck: HealthCheckOptions{ProbeTimeout: probeTimeout, Disabled: true}}
	type result struct {
		c   *Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := Connect(context.Background(), mc.ConnString(), o)
		done <- result{c, err}
	}()
	within(t, held, "node 2's login held")
	// Nodes 0 and 1 connected, Connect waits until node 2, made at start,
	// has been dialing for the probe timeout. The config loop arms a
	// timer due then as well (when no node was connected yet, for
	// recovery's grace): a timer due then is not Connect's.
	armed := within(t, clock.armed, "Connect's wait for node 2's probe timeout armed")
	require.Equal(t, probeTimeout, armed, "Connect's wait for node 2, made at start, on a clock that has not moved")
	select {
	case r := <-done:
		if r.c != nil {
			_ = r.c.Close()
		}
		t.Fatalf("Connect returned (%v) before node 2 had been dialing for the probe timeout", r.err)
	default:
	}
	fc.Advance(probeTimeout)
	r := within(t, done, "Connect with one node of three paused in its login, past the probe timeout")
	require.NoError(t, r.err)
	c := r.c
	t.Cleanup(func() { _ = c.Close() })
	// Keys of the other nodes are written.
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), closeHookWaits)
	defer cancel()
	for _, n := range []int{0, 1} {
		_, err := col.Upsert(ctx, keyOn(t, c, mc.Node(n).Addr()), []byte("v"), nil)
		require.NoError(t, err)
	}
	// WaitUntilReady waits for node 2 (online is every node connected):
	// a wait bounded by a second ends after it, naming node 2.
	const bound = time.Second
	short := make(chan error, 1)
	go func() { short <- c.WaitUntilReady(ctx, &WaitUntilReadyOptions{Timeout: bound}) }()
	awaitTimerAt(t, fc, fc.Now().Add(bound), "WaitUntilReady's timeout")
	fc.Advance(bound)
	var nr *NotReadyError
	require.ErrorAs(t, within(t, short, "WaitUntilReady past its timeout"), &nr)
	assert.Equal(t, mc.Node(2).Addr(), nr.Node, "the node WaitUntilReady waited for")
	assert.Equal(t, EndpointConnecting, nr.NodeState)
	// One that waits is ended by Close.
	const long = 77 * time.Minute // no other timer of the client is due then
	ready := make(chan error, 1)
	go func() { ready <- c.WaitUntilReady(ctx, &WaitUntilReadyOptions{Timeout: long}) }()
	awaitTimerAt(t, fc, fc.Now().Add(long), "WaitUntilReady's timeout")
	require.NoError(t, c.Close())
	require.ErrorIs(t, within(t, ready, "WaitUntilReady ended by Close"), ErrClosed)
}

// graceClock is a fakeClock that sends on armed the duration of each timer
// Connect's wait for the first dials (cluster.awaitFirstDials) makes, once
// it is armed: the config loop arms one due at the same time, which the
// clock's due times cannot tell apart.
type graceClock struct {
	fakeClock
	armed chan time.Duration
}

func (c graceClock) NewTimer(d time.Duration) Timer {
	t := c.fakeClock.NewTimer(d)
	pc := make([]uintptr, 16)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, ".(*Cluster).awaitFirstDials") {
			select {
			case c.armed <- d:
			default: // the test reads the first only
			}
			return t
		}
		if !more {
			return t
		}
	}
}

// awaitTimerAt waits until fc has a timer armed due at exactly at (one
// the test knows no other timer of the client is due at), failing the
// test, saying what it waited for, when none is within failAfter.
func awaitTimerAt(t *testing.T, fc *retry.FakeClock, at time.Time, what string) {
	t.Helper()
	bound := time.After(failAfter)
	for !slices.ContainsFunc(fc.Timers(), at.Equal) {
		select {
		case <-bound:
			t.Fatalf("no timer due at %v (now %v) was armed in %v: %s; armed: %v", at, fc.Now(), failAfter, what, fc.Timers())
		case <-time.After(time.Millisecond): // look again
		}
	}
}
