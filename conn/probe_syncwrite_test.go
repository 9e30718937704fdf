package conn

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// syncWriteNode starts a two-node mock (a majority write needs its replica)
// whose synchronous writes stay pending (until the test ends), and dials the
// node active for key with UnorderedExecution, as the cluster layer does,
// on a fake clock. NOOP is a barrier on such a connection (kv_engine's
// is_reorder_supported): it runs only after every earlier command.
func syncWriteNode(t *testing.T, key string) (*mockcluster.Cluster, *Conn, *fakeClock, uint16) {
	t.Helper()
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	mc.SetSyncWriteDelay(time.Hour)
	t.Cleanup(mc.CommitSyncWrites) // before the cluster closes
	b := mc.Bucket(mockcluster.DefaultBucket)
	vb := b.VbucketForKey([]byte(key))
	fc := newFakeClock()
	o := adminOpts(mockcluster.DefaultBucket)
	o.clock = fc
	o.Features = []memdx.HelloFeature{memdx.FeatureUnorderedExecution, memdx.FeatureSyncReplication, memdx.FeatureAltRequests}
	c := dialMemcached(t, mc.Node(b.VbucketMap()[vb][0]).Addr(), o)
	if !c.Features().Has(memdx.FeatureUnorderedExecution) {
		t.Fatal("UnorderedExecution not granted")
	}
	return mc, c, fc, vb
}

// goDurable sends a majority SET of key with a durability timeout of ms
// and returns its outcome's channel once the node holds the write pending.
func goDurable(t *testing.T, ctx context.Context, mc *mockcluster.Cluster, c *Conn, vb uint16, key string, ms uint16) <-chan error {
	t.Helper()
	before := mc.PendingSyncWrites()
	req := memdx.NewStore(memdx.OpSet, []byte(key), []byte("v"), 0, 0)
	req.Vbucket = vb
	req.Durability, req.DurabilityTimeout = memdx.DurabilityMajority, ms
	ch := make(chan error, 1)
	go func() { ch <- c.Do(ctx, &req, nil) }()
	waitFor(t, "the node holding the synchronous write", func() bool { return mc.PendingSyncWrites() == before+1 })
	return ch
}

// healthChecked waits until the health check that the clock's last move
// made due has run: it re-arms its timer for a later time.
func healthChecked(t *testing.T, c *Conn, fc *fakeClock) {
	t.Helper()
	waitFor(t, "the health check", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.monitor.at.After(fc.Now())
	})
}

// healthTimerMade waits until the monitor goroutine has made the health
// timer that the connection's first tombstone asked for (healthArm's
// armKick, makeHealthTimer). It reads the clock, then arms the timer for
// the time left: a test moving the clock in between leaves the timer that
// much later than monitor.at, and the check due at the move runs only
// when the clock moves again. A test moves the clock once it is made.
func healthTimerMade(t *testing.T, c *Conn) {
	t.Helper()
	waitFor(t, "the health timer", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.monitor.timer != nil
	})
}

// A caller gives up on a durable write that waits for slow replication:
// the server answers it only at its durability timeout (a minute here),
// so its tombstone is no sign of a dead node before then. No probe goes
// out ProbeAfter later: under unordered execution the NOOP would wait
// behind the pending write, every later request behind the NOOP, and the
// silence would close the live connection as unresponsive, failing
// everything in flight. Requests after it are answered, the connection
// stays up.
func TestProbeNotSentBehindAbandonedSyncWrite(t *testing.T) {
	mc, c, fc, vb := syncWriteNode(t, "durable")
	ctx, cancel := context.WithCancel(context.Background())
	ch := goDurable(t, ctx, mc, c, vb, "durable", 60000)
	cancel()
	if err := recv(t, ch); !errors.Is(err, context.Canceled) || !requestError(t, err).Written {
		t.Fatalf("cancelled durable write: %v; want written, context.Canceled", err)
	}
	waitFor(t, "the tombstone", func() bool { return c.Stats().Abandoned == 1 })
	healthTimerMade(t, c)

	fc.Advance(DefaultProbeAfter)
	healthChecked(t, c, fc)
	if st := c.Stats(); st.Probes != 0 {
		t.Fatalf("a probe was sent behind the pending synchronous write (stats %+v)", st)
	}
	for range 3 {
		fc.Advance(DefaultProbeTimeout)
	}
	get := memdx.NewGet([]byte("other"))
	get.Vbucket = vb
	err := c.Do(testCtx(t), &get, func(p *memdx.Packet) error { return nil })
	if err != nil || c.Err() != nil {
		t.Fatalf("a GET after the abandoned durable write: %v (connection: %v)", err, c.Err())
	}
}

// A caller gives up on a GET the node is slow to answer while a durable
// write, still waited for, is pending for replication: the GET's tombstone
// calls for a probe ProbeAfter later, but the NOOP would wait behind the
// write (a barrier under unordered execution), and every later request
// behind the NOOP, until the write's durability timeout. The probe waits
// for that bound instead; meanwhile the connection serves other requests.
func TestProbeHeldWhileSyncWriteInFlight(t *testing.T) {
	mc, c, fc, vb := syncWriteNode(t, "durable")
	ch := goDurable(t, testCtx(t), mc, c, vb, "durable", 60000)
	start := fc.Now()
	release := make(chan struct{})
	defer close(release)
	f := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "slow"},
		Action: mockcluster.Action{Hold: release}, Times: 1})
	defer f.Remove()
	ctx, cancel := context.WithCancel(context.Background())
	get := memdx.NewGet([]byte("slow"))
	get.Vbucket = vb
	gch := make(chan error, 1)
	go func() { gch <- c.Do(ctx, &get, func(*memdx.Packet) error { return nil }) }()
	waitFor(t, "the slow GET written", func() bool { return c.Stats().Writes >= 1 && c.Pending() == 2 })
	waitFor(t, "the slow GET held by the node", func() bool { return f.Hits() == 1 })
	cancel()
	if err := recv(t, gch); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled GET: %v", err)
	}
	waitFor(t, "the tombstone", func() bool { return c.Stats().Abandoned == 1 })

	fc.Advance(DefaultProbeAfter)
	healthChecked(t, c, fc)
	c.mu.Lock()
	at := c.monitor.at
	c.mu.Unlock()
	if st := c.Stats(); st.Probes != 0 || !at.Equal(start.Add(time.Minute)) {
		t.Fatalf("stats %+v, health check next at %v after the write; want no probe before its durability timeout, a minute after it", st, at.Sub(start))
	}
	for range 3 {
		fc.Advance(DefaultProbeTimeout)
	}
	other := memdx.NewGet([]byte("other"))
	other.Vbucket = vb
	if err := c.Do(testCtx(t), &other, func(*memdx.Packet) error { return nil }); err != nil || c.Err() != nil {
		t.Fatalf("a GET meanwhile: %v (connection: %v)", err, c.Err())
	}
	mc.CommitSyncWrites()
	if err := recv(t, ch); err != nil {
		t.Fatalf("the durable write: %v", err)
	}
}

// goDurablePipe sends a majority SET of key with a durability timeout of
// ms on a scripted connection and returns its outcome's channel.
func goDurablePipe(ctx context.Context, c *Conn, key string, ms uint16) <-chan error {
	req := memdx.NewStore(memdx.OpSet, []byte(key), []byte("v"), 0, 0)
	req.Durability, req.DurabilityTimeout = memdx.DurabilityMajority, ms
	ch := make(chan error, 1)
	go func() { ch <- c.Do(ctx, &req, nil) }()
	return ch
}

// wireEmpty reports whether the socket took every request queued on c (the
// writer's accept ran for each: a bound counts from then).
func wireEmpty(c *Conn) func() bool {
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.writer.wire.head == nil
	}
}

// healthNextAt returns when the health check's timer fires next.
func healthNextAt(c *Conn) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.monitor.at
}

// A node that stops answering is still found when the request abandoned
// is a durable write: no probe before its durability timeout, but once
// that has passed unanswered, ProbeAfter later the probe goes out, and the
// silence closes the connection as unresponsive.
func TestProbeAfterAbandonedSyncWriteBound(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{clock: fc}, nil)
	start := fc.Now()
	ctx, cancel := context.WithCancel(context.Background())
	ch := goDurablePipe(ctx, c, "durable", 5000)
	if req := p.read(); req.OpCode != memdx.OpSet {
		t.Fatalf("got %s", req.OpCode)
	}
	waitFor(t, "the write counted written", func() bool { return c.Stats().BytesWritten > 0 && c.Pending() == 1 })
	waitFor(t, "the write accepted", wireEmpty(c)) // its bound counts from then
	cancel()
	if err := recv(t, ch); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	waitFor(t, "the tombstone", func() bool { return c.Stats().Abandoned == 1 })
	fc.Advance(DefaultProbeAfter)
	healthChecked(t, c, fc)
	if at := healthNextAt(c); c.Stats().Probes != 0 || !at.Equal(start.Add(5*time.Second+DefaultProbeAfter)) {
		t.Fatalf("probes %d, next check %v after the write; want none before ProbeAfter past its durability timeout (6s)", c.Stats().Probes, at.Sub(start))
	}
	fc.Advance(5 * time.Second)
	if probe := p.read(); probe.OpCode != memdx.OpNoop {
		t.Fatalf("got %s, want the probe", probe.OpCode)
	}
	go drain(p.nc)
	for i := 0; ; i++ {
		if i == 2 {
			t.Fatal("still open two probe timeouts after the probe was written")
		}
		nextCheck(t, fc, closed(c))
		if c.Err() != nil {
			break
		}
	}
	if !errors.Is(c.Err(), kverr.ErrUnresponsive) {
		t.Fatalf("connection error %v; want kverr.ErrUnresponsive", c.Err())
	}
}

// A probe held for a durable write in flight goes out at that write's
// durability timeout even if another durable write came meanwhile (a node
// that stopped answering is found, whatever the traffic), and then waits
// behind the later write: silence counts only from the later write's
// durability timeout. Here the node answers nothing: the connection is
// closed ProbeTimeout after that.
func TestProbeBehindLaterSyncWriteWaitsForItsBound(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{clock: fc}, nil)
	start := fc.Now()
	w1 := goDurablePipe(testCtx(t), c, "w1", 2000) // bound: start+2s
	p.read()
	ctx, cancel := context.WithCancel(context.Background())
	g := goGet(ctx, c, "g")
	p.read()
	waitFor(t, "both written", func() bool { return c.Pending() == 2 })
	cancel()
	if r := recv(t, g); !errors.Is(r.err, context.Canceled) {
		t.Fatal(r.err)
	}
	waitFor(t, "the tombstone", func() bool { return c.Stats().Abandoned == 1 })
	fc.Advance(DefaultProbeAfter) // the GET's tombstone is due; w1 holds the probe
	healthChecked(t, c, fc)
	if at := healthNextAt(c); c.Stats().Probes != 0 || !at.Equal(start.Add(2*time.Second)) {
		t.Fatalf("probes %d, next check %v after the start; want the probe held until w1's durability timeout (2s)", c.Stats().Probes, at.Sub(start))
	}
	fc.Advance(500 * time.Millisecond)
	w2 := goDurablePipe(testCtx(t), c, "w2", 10000) // bound: start+11.5s
	p.read()
	waitFor(t, "w2 written", func() bool { return c.Pending() == 3 })
	waitFor(t, "w2 taken by the socket", wireEmpty(c)) // its bound counts from then
	fc.Advance(500 * time.Millisecond)
	if probe := p.read(); probe.OpCode != memdx.OpNoop {
		t.Fatalf("got %s, want the probe at w1's bound", probe.OpCode)
	}
	go drain(p.nc)
	until := start.Add(11500*time.Millisecond + DefaultProbeTimeout)
	for {
		at := healthNextAt(c)
		if !at.Before(until) {
			break
		}
		fc.Advance(at.Sub(fc.Now()))
		waitFor(t, "the check", func() bool { return healthNextAt(c).After(fc.Now()) || c.Err() != nil })
		if c.Err() != nil {
			t.Fatalf("closed %v after the start, before w2's durability timeout and ProbeTimeout (12.5s): %v", fc.Now().Sub(start), c.Err())
		}
	}
	if at := healthNextAt(c); !at.Equal(until) {
		t.Fatalf("next check %v after the start; want 12.5s", at.Sub(start))
	}
	fc.Advance(until.Sub(fc.Now()))
	waitFor(t, "the close", closed(c))
	if !errors.Is(c.Err(), kverr.ErrUnresponsive) {
		t.Fatalf("connection error %v; want kverr.ErrUnresponsive", c.Err())
	}
	for _, ch := range []<-chan error{w1, w2} {
		if err := recv(t, ch); !requestError(t, err).Written || !errors.Is(err, kverr.ErrUnresponsive) {
			t.Fatalf("durable write: %v", err)
		}
	}
}

// Each shape of request with a bound of the server's own makes its
// tombstone due ProbeAfter after that bound: a durability frame info given
// raw in FramingExtras, and a RANGE_SCAN_CONTINUE's time limit; a
// synchronous write with the server's default timeout has no known bound.
func TestProbeDueAfterServerBound(t *testing.T) {
	frame, err := memdx.AppendDurabilityFrame(nil, memdx.DurabilityMajority, 4000)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  memdx.Request
		due  time.Duration // after the request was sent
	}{
		{"raw durability frame", func() memdx.Request {
			r := memdx.NewStore(memdx.OpSet, []byte("k"), []byte("v"), 0, 0)
			r.FramingExtras = frame
			return r
		}(), 5 * time.Second},
		{"range scan continue", memdx.NewRangeScanContinue(memdx.RangeScanContinue{ItemLimit: 10, TimeLimitMs: 3000}), 4 * time.Second},
		{"server's default durability timeout", func() memdx.Request {
			r := memdx.NewStore(memdx.OpSet, []byte("k"), []byte("v"), 0, 0)
			r.Durability = memdx.DurabilityMajority
			return r
		}(), DefaultProbeAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFakeClock()
			c, p := dialPipe(t, Options{clock: fc}, nil)
			start := fc.Now()
			ctx, cancel := context.WithCancel(context.Background())
			ch := make(chan error, 1)
			go func() { ch <- c.Do(ctx, &tc.req, func(*memdx.Packet) error { return nil }) }()
			p.read()
			waitFor(t, "the request written", func() bool { return c.Pending() == 1 && c.Stats().BytesWritten > 0 })
			waitFor(t, "the request accepted", wireEmpty(c)) // its bound counts from then
			cancel()
			if err := recv(t, ch); !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			waitFor(t, "the tombstone", func() bool { return c.Stats().Abandoned == 1 })
			fc.Advance(DefaultProbeAfter)
			healthChecked(t, c, fc)
			if tc.due == DefaultProbeAfter {
				if c.Stats().Probes != 1 {
					t.Fatalf("stats %+v; want the probe ProbeAfter after the request", c.Stats())
				}
				return
			}
			if at := healthNextAt(c); c.Stats().Probes != 0 || !at.Equal(start.Add(tc.due)) {
				t.Fatalf("probes %d, the tombstone due %v after it was sent; want none, due %v", c.Stats().Probes, at.Sub(start), tc.due)
			}
		})
	}
}

// A durable write given up on stays pending on the node until its
// durability timeout even once its tombstone is forgotten past
// MaxAbandoned: a flood of abandoned requests (a slow node, callers timing
// out) evicts it within a second of the last probe. The probe their
// tombstones call for must still wait for the write's bound: sent behind
// it, the NOOP (a barrier under unordered execution) would be answered
// only at the write's durability timeout, and its silence would close the
// live connection.
func TestProbeHeldForEvictedSyncWrite(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{clock: fc, MaxAbandoned: 4}, nil)
	abandonGet := func(key string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		before := c.Stats().BytesWritten
		g := goGet(ctx, c, key)
		p.read()
		waitFor(t, "the GET written", func() bool { return c.Stats().BytesWritten > before })
		cancel()
		if r := recv(t, g); !errors.Is(r.err, context.Canceled) {
			t.Fatal(r.err)
		}
	}
	// A first probe, answered: the next ones do not come from the pile of
	// tombstones before ProbeAfter has passed.
	abandonGet("g0")
	waitFor(t, "the health check armed for g0's tombstone", func() bool {
		at := healthNextAt(c)
		return !at.IsZero() && !at.After(fc.Now().Add(DefaultProbeAfter))
	})
	fc.Advance(DefaultProbeAfter)
	probe := p.read()
	if probe.OpCode != memdx.OpNoop {
		t.Fatalf("got %s, want the probe", probe.OpCode)
	}
	p.write(ok(probe, ""))
	waitFor(t, "the probe answered", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.monitor.probe == nil
	})
	fc.Advance(time.Millisecond)
	start := fc.Now()

	ctx, cancel := context.WithCancel(context.Background())
	before := c.Stats().BytesWritten
	w := goDurablePipe(ctx, c, "durable", 5000) // pending on the node until start+5s
	if req := p.read(); req.OpCode != memdx.OpSet {
		t.Fatalf("got %s", req.OpCode)
	}
	waitFor(t, "the write counted written", func() bool { return c.Stats().BytesWritten > before })
	waitFor(t, "the write accepted", wireEmpty(c))
	cancel()
	if err := recv(t, w); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	forgotten := c.Stats().Forgotten
	for _, k := range []string{"g1", "g2", "g3", "g4"} {
		abandonGet(k)
	}
	if st := c.Stats(); st.Forgotten != forgotten+2 {
		t.Fatalf("stats %+v; want the write's tombstone forgotten", st)
	}
	fc.Advance(DefaultProbeAfter)
	healthChecked(t, c, fc)
	if at := healthNextAt(c); c.Stats().Probes != 1 || !at.Equal(start.Add(5*time.Second)) {
		t.Fatalf("probes %d, next check %v after the write; want no probe before its durability timeout (5s)", c.Stats().Probes, at.Sub(start))
	}
}

// The node counts a durable write's timeout from when it reads the write,
// not from when the caller queued it: a write queued behind what the
// socket does not take yet (a node reading a large value slowly) is
// answered that much later. The probe a tombstone calls for meanwhile
// waits until the durability timeout counted from when the socket took
// the write; counted from its queueing, it went out while the write was
// still pending, waited behind it on the node (NOOP is a barrier under
// unordered execution), and its silence closed the live connection.
func TestProbeHeldForSyncWriteCountsFromItsWrite(t *testing.T) {
	fc := newFakeClock()
	// net.Pipe even under KVWIRE_CONN_TCP: its Write returns only once the
	// node read it.
	c, p := dialPipe(t, Options{clock: fc}, func(nc net.Conn) net.Conn { return nc })
	start := fc.Now()
	before := c.Stats().BytesWritten
	w := goDurablePipe(testCtx(t), c, "durable", 5000)
	waitFor(t, "the write queued", func() bool { return c.Pending() == 1 })
	fc.Advance(3 * time.Second) // the node reads it only now
	if req := p.read(); req.OpCode != memdx.OpSet {
		t.Fatalf("got %s", req.OpCode)
	}
	waitFor(t, "the write taken by the socket", func() bool { return c.Stats().BytesWritten > before })
	waitFor(t, "the write accepted", wireEmpty(c))

	ctx, cancel := context.WithCancel(context.Background())
	before = c.Stats().BytesWritten
	g := goGet(ctx, c, "g")
	p.read()
	waitFor(t, "the GET written", func() bool { return c.Stats().BytesWritten > before })
	cancel()
	if r := recv(t, g); !errors.Is(r.err, context.Canceled) {
		t.Fatal(r.err)
	}
	waitFor(t, "the tombstone", func() bool { return c.Stats().Abandoned == 1 })
	fc.Advance(DefaultProbeAfter) // the GET's tombstone is due
	healthChecked(t, c, fc)
	if at := healthNextAt(c); c.Stats().Probes != 0 || !at.Equal(start.Add(8*time.Second)) {
		t.Fatalf("probes %d, next check %v after the write was queued; want the probe held until its durability timeout counted from its write (8s)", c.Stats().Probes, at.Sub(start))
	}
	select {
	case err := <-w:
		t.Fatalf("the durable write ended: %v", err)
	default:
	}
}

// A probe held for a durable write in flight goes out as soon as that
// write is answered, not at its durability timeout: once nothing the
// server answers by a bound of its own is pending, the NOOP would wait
// behind nothing. Held until the bound, a node that paused just after
// answering the write was found only after it. Here the node answers the
// write a second after it was sent (its bound is 5 s) and then nothing:
// the probe goes out at once, and its silence closes the connection.
func TestProbeHoldEndsWhenSyncWriteAnswered(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{clock: fc}, nil)
	start := fc.Now()
	w := goDurablePipe(testCtx(t), c, "w", 5000)
	wreq := p.read()
	waitFor(t, "the write accepted", func() bool { return c.Pending() == 1 && wireEmpty(c)() })
	ctx, cancel := context.WithCancel(context.Background())
	g := goGet(ctx, c, "g")
	p.read()
	waitFor(t, "both written", func() bool { return c.Pending() == 2 })
	cancel()
	if r := recv(t, g); !errors.Is(r.err, context.Canceled) {
		t.Fatal(r.err)
	}
	waitFor(t, "the tombstone", func() bool { return c.Stats().Abandoned == 1 })
	fc.Advance(DefaultProbeAfter) // the GET's tombstone is due; the write holds the probe
	healthChecked(t, c, fc)
	if at := healthNextAt(c); c.Stats().Probes != 0 || !at.Equal(start.Add(5*time.Second)) {
		t.Fatalf("probes %d, next check %v after the start; want the probe held until the write's durability timeout (5s)", c.Stats().Probes, at.Sub(start))
	}
	p.write(ok(wreq, ""))
	if err := recv(t, w); err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	waitFor(t, "the probe, once the write was answered", func() bool { return c.Stats().Probes == 1 })
	if probe := p.read(); probe.OpCode != memdx.OpNoop {
		t.Fatalf("got %s, want the probe", probe.OpCode)
	}
	go drain(p.nc)
	for i := 0; !closed(c)(); i++ {
		if i == 2 {
			t.Fatal("still open two probe timeouts after the probe was written")
		}
		nextCheck(t, fc, closed(c))
	}
	if !errors.Is(c.Err(), kverr.ErrUnresponsive) {
		t.Fatalf("connection error %v; want kverr.ErrUnresponsive", c.Err())
	}
	if d := fc.Now().Sub(start); d >= 5*time.Second {
		t.Fatalf("closed %v after the start; want before the write's durability timeout (5s)", d)
	}
}

// A probe sent behind a durable write counts its silence from that
// write's durability timeout only while the write is pending: once the
// node has answered every such request ahead of the probe, the NOOP waits
// behind nothing, and a node that then answers nothing is closed
// ProbeTimeout later, not ProbeTimeout after the answered write's bound.
func TestProbeSilenceCountsOnceWritesAheadAnswered(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{clock: fc}, nil)
	start := fc.Now()
	w1 := goDurablePipe(testCtx(t), c, "w1", 2000) // bound: start+2s
	r1 := p.read()
	ctx, cancel := context.WithCancel(context.Background())
	g := goGet(ctx, c, "g")
	p.read()
	waitFor(t, "both written", func() bool { return c.Pending() == 2 })
	cancel()
	if r := recv(t, g); !errors.Is(r.err, context.Canceled) {
		t.Fatal(r.err)
	}
	waitFor(t, "the tombstone", func() bool { return c.Stats().Abandoned == 1 })
	fc.Advance(DefaultProbeAfter) // the GET's tombstone is due; w1 holds the probe
	healthChecked(t, c, fc)
	fc.Advance(500 * time.Millisecond)
	w2 := goDurablePipe(testCtx(t), c, "w2", 10000) // bound: start+11.5s
	r2 := p.read()
	waitFor(t, "w2 written", func() bool { return c.Pending() == 3 })
	waitFor(t, "w2 taken by the socket", wireEmpty(c))
	fc.Advance(500 * time.Millisecond)
	if probe := p.read(); probe.OpCode != memdx.OpNoop {
		t.Fatalf("got %s, want the probe at w1's bound", probe.OpCode)
	}
	p.write(ok(r1, ""), ok(r2, ""))
	for _, ch := range []<-chan error{w1, w2} {
		if err := recv(t, ch); err != nil {
			t.Fatalf("durable write: %v", err)
		}
	}
	go drain(p.nc)
	for i := 0; !closed(c)(); i++ {
		if i == 3 {
			t.Fatalf("still open %v after the start, with nothing but the probe pending", fc.Now().Sub(start))
		}
		fc.Advance(DefaultProbeTimeout)
		waitFor(t, "the check", func() bool { return closed(c)() || healthNextAt(c).After(fc.Now()) })
	}
	if !errors.Is(c.Err(), kverr.ErrUnresponsive) {
		t.Fatalf("connection error %v; want kverr.ErrUnresponsive", c.Err())
	}
}

// A probe held for a durable write is sent once the write is answered only
// if something still calls for it. Here the abandoned GET that made the
// probe due is answered late while the write holds the probe: the node is
// alive and no tombstone is left, so when the write is answered no NOOP
// goes out (held until the write's bound, the probe was dropped then too;
// a NOOP is a barrier that every later request on the connection waits
// behind).
func TestProbeHoldEndsWithoutProbeOnceNothingCallsForIt(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{clock: fc}, nil)
	w := goDurablePipe(testCtx(t), c, "w", 5000)
	wreq := p.read()
	waitFor(t, "the write accepted", func() bool { return c.Pending() == 1 && wireEmpty(c)() })
	ctx, cancel := context.WithCancel(context.Background())
	g := goGet(ctx, c, "g")
	greq := p.read()
	waitFor(t, "both written", func() bool { return c.Pending() == 2 })
	cancel()
	if r := recv(t, g); !errors.Is(r.err, context.Canceled) {
		t.Fatal(r.err)
	}
	waitFor(t, "the tombstone", func() bool { return c.Stats().Abandoned == 1 })
	fc.Advance(DefaultProbeAfter) // the GET's tombstone is due; the write holds the probe
	healthChecked(t, c, fc)
	holding := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.monitor.holdTill.IsZero()
	}
	if c.Stats().Probes != 0 || !holding() {
		t.Fatalf("probes %d, held %v; want the probe held for the write", c.Stats().Probes, holding())
	}
	p.write(ok(greq, "late")) // the GET's late answer: its tombstone is dropped
	waitFor(t, "the tombstone's late answer", func() bool { return c.Stats().Abandoned == 0 })
	p.write(ok(wreq, ""))
	if err := recv(t, w); err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	waitFor(t, "the hold's end", func() bool { return !holding() })
	if n := c.Stats().Probes; n != 0 {
		t.Fatalf("%d probes sent once the write was answered; want none: nothing called for one any more", n)
	}
}
