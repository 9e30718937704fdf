package client

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// proxiedClient starts a one-node mock cluster with a fault proxy in front
// of it, and a client with default options (credentials aside; the health
// check's, DefaultProbeAfter and DefaultProbeTimeout, set explicitly) that
// bootstraps through the proxy and stays on it.
func proxiedClient(t *testing.T) (*mockcluster.Cluster, *faultnode.Proxy, *Client) {
	t.Helper()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	p, err := faultnode.NewProxy(mc.Node(0).Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	p.RewritePorts(map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(p.Addr())})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, "couchbase://"+p.Addr()+"/"+mockcluster.DefaultBucket,
		&Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword,
			HealthCheck: HealthCheckOptions{ProbeAfter: DefaultProbeAfter, ProbeTimeout: DefaultProbeTimeout}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return mc, p, c
}

// A node that answers nothing (a paused process, a black hole: what is
// sent meanwhile is lost for good) through its health check's probe and
// two redials, and then recovers: operations on it that start after the
// recovery succeed again, with default options. During the black hole a
// burst of 4200 operations with a 4 s timeout (more than MaxPending, all
// sent before the first times out) is abandoned, beside a steady workload
// of operations with 10 ms and with default timeouts. The node is healed
// only after the health check closed the connection as unresponsive (a
// probe whose answer the black hole swallowed) and at least two redials'
// bootstraps followed. The probe that closes it may be one already in flight
// when the black hole begins (on a busy machine, 10 ms operations whose
// answers came late call for one): the test waits for the connection's end,
// not for a NOOP sent after the black hole began, which then never comes
// (no redial gets past its bootstrap). How soon the node is redialed is
// TestUnresponsiveNodeRedialedWithoutBackoff's, on a fake clock; this test
// times nothing: its minute-long waits bound a broken client.
func TestUnresponsiveNodeRecovers(t *testing.T) {
	t.Parallel()
	_, p, c := proxiedClient(t)
	col := c.DefaultCollection()
	if _, err := col.Upsert(context.Background(), "k", []byte(`"v"`), nil); err != nil {
		t.Fatal(err)
	}
	var healed atomic.Bool
	short, dflt := make(chan struct{}, 1), make(chan struct{}, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// get runs one Get and reports on first a success of an operation that
	// started after the recovery.
	get := func(timeout time.Duration, first chan struct{}) {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if timeout > 0 {
			ctx, cancel = context.WithTimeout(ctx, timeout)
		}
		defer cancel()
		after := healed.Load()
		_, err := col.Get(ctx, "k", nil)
		if err == nil && after {
			select {
			case first <- struct{}{}:
			default:
			}
		}
	}
	worker := func(timeout time.Duration, first chan struct{}) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			get(timeout, first)
		}
	}
	for range 16 {
		wg.Add(1)
		go worker(10*time.Millisecond, short)
	}
	for range 4 {
		wg.Add(1)
		go worker(0, dflt)
	}
	defer func() { close(stop); wg.Wait() }()

	// The node's connection (one, by default), which the black hole makes
	// silent: the health check is to close it.
	silent, _, err := c.cl.Topology().Nodes()[0].Pick()
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	var burst sync.WaitGroup
	for range 4200 {
		burst.Add(1)
		go func() { defer burst.Done(); get(4*time.Second, nil) }()
	}
	burst.Wait()
	// The recovery below is the health check's doing only if a probe went
	// unanswered and closed the silent connection: wait for its end, then
	// for the HELLOs of two redials (bootstraps into the black hole, which
	// go on until it ends: those after the wait began are redials after the
	// end), however long a busy machine makes them take.
	select {
	case <-silent.Done():
	case <-time.After(time.Minute):
		t.Fatalf("the silent connection still open a minute after the black hole began (stats %+v)", silent.Stats())
	}
	if err := silent.Err(); !errors.Is(err, ErrUnresponsive) || silent.Stats().Probes == 0 {
		t.Fatalf("the silent connection ended with %v after %d probes; want the health check's ErrUnresponsive", err, silent.Stats().Probes)
	}
	for _, what := range []string{"first", "second"} {
		select {
		case <-p.NextRequest(memdx.OpHello):
		case <-time.After(time.Minute):
			t.Fatalf("no %s redial within a minute of the connection's end", what)
		}
	}
	t.Logf("%d packets dropped in the black hole, %d connections accepted", p.Dropped(), p.Accepted())
	p.Blackhole(false)
	healed.Store(true)
	for name, ch := range map[string]chan struct{}{"10 ms operations": short, "default-timeout operations": dflt} {
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatalf("%s: none that started after the recovery succeeded within a minute", name)
		}
	}
}

// A second answer to a GET_COLLECTION_ID already answered (some servers
// send two) reaches the client while an Upsert is in flight on the same
// connection: it is dropped, and the Upsert gets its own answer.
func TestDuplicateAnswerDoesNotFailUpsertInFlight(t *testing.T) {
	mc, p, c := proxiedClient(t)
	b := mc.Bucket(mockcluster.DefaultBucket)
	if _, err := b.AddScope("app"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddCollection("app", "c"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var cidAnswer *memdx.Packet
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		mu.Lock()
		defer mu.Unlock()
		switch resp.OpCode {
		case memdx.OpCollectionsGetID:
			cp := *resp
			cp.Extras = append([]byte(nil), resp.Extras...)
			cp.Value = append([]byte(nil), resp.Value...)
			cp.Key = append([]byte(nil), resp.Key...)
			cp.FramingExtras = append([]byte(nil), resp.FramingExtras...)
			cidAnswer = &cp
		case memdx.OpSet:
			if cidAnswer != nil { // the duplicate, just before the SET's own answer
				return faultnode.Action{Send: []memdx.Packet{*cidAnswer, *resp}}
			}
		}
		return faultnode.Action{}
	})
	col := c.Scope("app").Collection("c")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := col.Upsert(ctx, "k", []byte(`"v"`), nil); err != nil {
		t.Fatalf("Upsert with a duplicate GET_COLLECTION_ID answer in flight: %v", err)
	}
	mu.Lock()
	got := cidAnswer != nil
	mu.Unlock()
	if !got || p.Requests(memdx.OpSet) != 1 {
		t.Fatalf("the proxy saw a GET_COLLECTION_ID answer: %v, %d SETs; want one SET after it", got, p.Requests(memdx.OpSet))
	}
}

// A node that stops answering (a black hole: what is sent is lost for
// good) is redialed without back-off: each redial whose bootstrap hears
// nothing for ProbeTimeout is followed by the next cluster.ReconnectMin later on
// the client's clock, however many went unanswered before it, so the first
// redial after the node answers again connects (that operations then
// succeed is TestUnresponsiveNodeRecovers's). The test moves the fake
// clock by cluster.ReconnectMin at a time and checks each wait the node arms when
// it is armed: a longer one fails the test at once.
func TestUnresponsiveNodeRedialedWithoutBackoff(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	p, err := faultnode.NewProxy(mc.Node(0).Addr())
	require.NoError(t, err)
	t.Cleanup(p.Close)
	p.RewritePorts(map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(p.Addr())})
	fc := retry.NewFakeClock(time.Now())
	logs := newLogWatch()
	connectVia(t, p.Addr(), &Options{Clock: fakeClock{fc}, KVTimeout: time.Hour, ConfigPollInterval: time.Hour,
		Logger: logs.logger(), HealthCheck: HealthCheckOptions{ProbeTimeout: 250 * time.Millisecond}})
	// The config poll's timer is the one armed while the node is connected
	// and idle; the node's wait between two redials is one more.
	armCtx, armCancel := context.WithTimeout(context.Background(), time.Minute)
	defer armCancel()
	require.NoError(t, fc.BlockUntilTimers(armCtx, 1), "the config poll's timer")
	const idle = 1
	const ready = "connection ready" // logged by every connection that bootstraps
	readyBefore, _ := logs.count(ready, "")

	// dialEnded waits until the node's dial in flight ends: true when it
	// connected, false when it failed and the node armed its wait. The
	// minute bounds a broken client (a dial that neither connects nor
	// makes the node wait on the client's clock), not a healthy one, whose
	// dial ends within ProbeTimeout.
	dialEnded := func() bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		armed := make(chan error, 1)
		go func() { armed <- fc.BlockUntilTimers(ctx, idle+1) }()
		defer func() { cancel(); <-armed }()
		for {
			n, next := logs.count(ready, "")
			if n > readyBefore {
				readyBefore = n
				return true
			}
			select {
			case err := <-armed:
				armed <- err // for the deferred wait
				require.NoError(t, err, "the node's dial neither connected nor armed a wait on the client's clock within a minute")
				return false
			case <-next:
			}
		}
	}

	const unanswered = 3 // redials into the black hole before the node answers again
	p.Blackhole(true)
	p.Reset() // the connection ends; the node redials at once, into the black hole
	for i := 0; ; i++ {
		if dialEnded() {
			require.GreaterOrEqual(t, i, unanswered, "a redial connected through the black hole")
			break
		}
		var waits []time.Duration
		for _, due := range fc.Timers() {
			if d := due.Sub(fc.Now()); d < time.Minute { // not the config poll's, an hour after the start
				waits = append(waits, d)
			}
		}
		require.Equal(t, []time.Duration{cluster.ReconnectMin}, waits, "the node's wait after unanswered redial %d", i+1)
		if i+1 == unanswered {
			p.Blackhole(false)
		}
		fc.Advance(cluster.ReconnectMin)
	}
}

// The health check of a client's connections runs on the client's Clock:
// a Get given up after it was sent into a black hole leaves a tombstone
// whose probe is due HealthCheck.ProbeAfter later on that Clock, and the
// probe's silence closes the connection HealthCheck.ProbeTimeout after it,
// on that Clock too, with nothing waited for on the system clock (both are
// hours here). The connections ran their health check on the system
// clock, whatever the client's Clock said, so that a test of it could
// only compare real times.
func TestHealthCheckRunsOnClientsClock(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	p, err := faultnode.NewProxy(mc.Node(0).Addr())
	require.NoError(t, err)
	t.Cleanup(p.Close)
	p.RewritePorts(map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(p.Addr())})
	fc := retry.NewFakeClock(time.Now())
	const probeAfter, probeTimeout = time.Hour, 2 * time.Hour
	c := connectVia(t, p.Addr(), &Options{Clock: fakeClock{fc}, KVTimeout: time.Hour, ConfigPollInterval: 100 * time.Hour,
		HealthCheck: HealthCheckOptions{ProbeAfter: probeAfter, ProbeTimeout: probeTimeout}})
	col := c.DefaultCollection()
	_, err = col.Upsert(context.Background(), "k", []byte(`"v"`), nil)
	require.NoError(t, err)
	cn, _, err := c.cl.Topology().Nodes()[0].Pick()
	require.NoError(t, err)

	// within bounds a broken client's wait on ch.
	within := func(ch <-chan memdx.Packet, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatalf("no %s within a minute", what)
		}
	}
	// armedAt waits until a timer due at at is armed on the client's clock.
	armedAt := func(at time.Time, what string) {
		t.Helper()
		waitFor(t, what, func() bool { return slices.ContainsFunc(fc.Timers(), at.Equal) })
	}
	p.Blackhole(true)
	sent, probe := p.NextRequest(memdx.OpGet), p.NextRequest(memdx.OpNoop)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := col.Get(ctx, "k", nil); done <- err }()
	within(sent, "GET into the black hole")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	armedAt(fc.Now().Add(probeAfter), "the tombstone's probe due ProbeAfter later on the client's clock")
	fc.Advance(probeAfter)
	within(probe, "health probe (NOOP)")
	// The first check may see the probe's own write as progress (it was
	// not yet written when the probe was queued): the second cannot.
	for i := 0; ; i++ {
		armedAt(fc.Now().Add(probeTimeout), "the probe's timeout on the client's clock")
		require.Nil(t, cn.Err(), "the connection ended before the probe's timeout")
		if i == 2 {
			t.Fatalf("still open two probe timeouts after the probe (stats %+v)", cn.Stats())
		}
		fc.Advance(probeTimeout)
		ended := false
		waitFor(t, "the probe's check", func() bool {
			select {
			case <-cn.Done():
				ended = true
				return true
			default:
				return slices.ContainsFunc(fc.Timers(), fc.Now().Add(probeTimeout).Equal)
			}
		})
		if ended {
			break
		}
	}
	require.ErrorIs(t, cn.Err(), ErrUnresponsive)
}
