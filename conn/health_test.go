package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// abandonOne sends GET key with a deadline ProbeAfter... away, lets the
// peer read it and the fake clock pass the deadline, and returns the
// request the peer read. It returns once the writer has counted the
// request's bytes written (Stats.BytesWritten, the offset a probe's
// snapshot takes), as it has seconds before any real probe: the writer
// counts a Write when it holds mu again, which the test and the monitor
// can keep from it through every step here, and a count that lags would
// move under the test's later snapshots (the probe's acknowledged offset,
// a byte count to wait for). And, with a health check, once the monitor
// has made the health timer the tombstone asked for (healthTimerMade).
func abandonOne(t *testing.T, c *Conn, p *peer, fc *fakeClock, key string) memdx.Packet {
	t.Helper()
	before := c.Stats().Abandoned
	ch := doDeadline(c, key, fc.Now().Add(2500*time.Millisecond))
	req := p.read()
	fc.Advance(2500 * time.Millisecond)
	expectDeadline(t, key, recv(t, ch))
	waitFor(t, "the tombstone", func() bool { return c.Stats().Abandoned == before+1 })
	waitFor(t, "the abandoned request counted written", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		cl := callOf(c, req.Opaque)
		return cl != nil && c.writer.written >= cl.end
	})
	if c.opts.ProbeAfter >= 0 {
		healthTimerMade(t, c)
	}
	return req
}

// A node that stops answering: a written request is abandoned at its
// deadline; ProbeAfter later the connection sends a NOOP; the NOOP gets no
// answer and nothing else arrives for ProbeTimeout, so the connection is
// closed as unresponsive, and the request still waiting fails as written
// (kverr.ErrConnectionClosed, kverr.ErrUnresponsive).
func TestUnresponsiveNodeClosedAfterProbe(t *testing.T) {
	fc := newFakeClock()
	var logs logBuffer
	c, p := dialPipe(t, Options{clock: fc, Logger: logs.logger()}, nil)
	waiting := goGet(testCtx(t), c, "waiting") // no deadline: it waits for the connection
	p.read()
	abandonOne(t, c, p, fc, "a")

	fc.Advance(DefaultProbeAfter)
	if probe := p.read(); probe.OpCode != memdx.OpNoop {
		t.Fatalf("after ProbeAfter the node got %s, want the NOOP probe", probe.OpCode)
	}
	waitFor(t, "the probe's timer", func() bool { return fc.armedWithin(DefaultProbeTimeout) })
	select {
	case <-c.Done():
		t.Fatalf("closed before the probe timed out: %v", c.Err())
	default:
	}
	go drain(p.nc)
	// The first check may still count the probe's own bytes, accepted by
	// the socket in that window, as progress; the next cannot.
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
	r := recv(t, waiting)
	if re := requestError(t, r.err); !re.Written || !errors.Is(r.err, kverr.ErrConnectionClosed) || !errors.Is(r.err, kverr.ErrUnresponsive) {
		t.Fatalf("waiting request: %v; want written, kverr.ErrConnectionClosed, kverr.ErrUnresponsive", r.err)
	}
	if st := c.Stats(); st.Probes != 1 {
		t.Fatalf("stats %+v; want one probe", st)
	}
	// Logged by the monitor once the connection has ended (its requests'
	// failures may come first).
	waitFor(t, "the warning about the node that stopped answering", func() bool {
		l := logs.String()
		return strings.Contains(l, "level=WARN") && strings.Contains(l, "stopped answering")
	})
}

// A slow node is not mistaken for a dead one: the probe is answered, the
// connection stays, and the tombstones abandoned before it do not cause
// another probe however long they wait. A tombstone abandoned after the
// probe is due in its turn.
func TestSlowNodeAnswersProbe(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{clock: fc}, nil)
	ra := abandonOne(t, c, p, fc, "a")
	fc.Advance(DefaultProbeAfter)
	probe := p.read()
	if probe.OpCode != memdx.OpNoop {
		t.Fatalf("got %s, want the NOOP probe", probe.OpCode)
	}
	p.write(ok(probe, ""))
	waitFor(t, "the probe's answer taken and no timer armed", func() bool {
		return c.Pending() == 1 && !fc.armedWithin(time.Hour)
	})
	fc.Advance(10 * DefaultProbeAfter)
	if st := c.Stats(); st.Probes != 1 || c.Err() != nil {
		t.Fatalf("stats %+v, err %v; want one probe and the connection up", st, c.Err())
	}
	// The slow answer comes in the end; a new tombstone is probed for.
	p.write(ok(ra, "slow"))
	waitFor(t, "the late answer", func() bool { return c.Stats().LateResponses == 1 })
	abandonOne(t, c, p, fc, "b")
	fc.Advance(DefaultProbeAfter)
	if probe := p.read(); probe.OpCode != memdx.OpNoop {
		t.Fatalf("got %s, want a second probe", probe.OpCode)
	}
	if c.Stats().Probes != 2 {
		t.Fatalf("stats %+v", c.Stats())
	}
}

// While a probe waits, progress keeps the connection: the node still sends
// (answers to other requests, here), so it is alive, however late the NOOP
// answer is.
func TestProbeWaitsWhileNodeSends(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{clock: fc}, nil)
	other := goGet(testCtx(t), c, "other")
	ro := p.read()
	abandonOne(t, c, p, fc, "a")
	fc.Advance(DefaultProbeAfter)
	probe := p.read()
	waitFor(t, "the probe's timer", func() bool { return fc.armedWithin(DefaultProbeTimeout) })
	p.write(ok(ro, "O"))
	if r := recv(t, other); r.err != nil || r.value != "O" {
		t.Fatalf("other: %+v", r)
	}
	fc.Advance(DefaultProbeTimeout) // something arrived meanwhile: wait on
	waitFor(t, "the probe's timer re-armed", func() bool { return fc.armedWithin(DefaultProbeTimeout) })
	if c.Err() != nil {
		t.Fatalf("closed although the node sent: %v", c.Err())
	}
	p.write(ok(probe, ""))
	waitFor(t, "the probe answered", func() bool { return !fc.armedWithin(time.Hour) })
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
}

// Tombstones piling up (half of MaxAbandoned) trigger a probe at once,
// without waiting ProbeAfter.
func TestTombstonePileUpProbes(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{clock: fc, MaxAbandoned: 4}, nil)
	for _, k := range []string{"a", "b"} {
		ctx, cancel := context.WithCancel(context.Background())
		ch := goGet(ctx, c, k)
		p.read()
		cancel()
		if r := recv(t, ch); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("%s: %v", k, r.err)
		}
	}
	if probe := p.read(); probe.OpCode != memdx.OpNoop {
		t.Fatalf("got %s, want the NOOP probe", probe.OpCode)
	}
	if st := c.Stats(); st.Probes != 1 || st.Abandoned != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// A node that accepts the connection but answers nothing fails Dial after
// ProbeTimeout of silence, not after the whole connect timeout.
func TestBootstrapUnresponsiveNodeFailsDial(t *testing.T) {
	fc := newFakeClock()
	dial, servers := pipeDialer(nil)
	got := make(chan error, 1)
	go func() {
		_, err := Dial(testCtx(t), "pipe:11210", Options{Memcached: true, DialContext: dial, clock: fc})
		got <- err
	}()
	p := newPeer(t, <-servers)
	defer p.nc.Close()
	p.read() // VERSION: the bootstrap waits for its answer
	go drain(p.nc)
	fc.Advance(DefaultProbeTimeout)
	err := recv(t, got)
	if !errors.Is(err, kverr.ErrUnresponsive) || !errors.Is(err, kverr.ErrBootstrap) {
		t.Fatalf("Dial: %v; want kverr.ErrBootstrap and kverr.ErrUnresponsive", err)
	}
}

// A negative ProbeAfter turns the health check off: neither an abandoned
// request unanswered for an hour nor a pile of them makes the connection
// send a probe, and it stays open; the next request the node reads is
// the caller's.
func TestNegativeProbeAfterSendsNoProbe(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{clock: fc, ProbeAfter: -1, MaxAbandoned: 4}, nil)
	abandonOne(t, c, p, fc, "a")
	for _, k := range []string{"b", "c"} {
		ctx, cancel := context.WithCancel(context.Background())
		ch := goGet(ctx, c, k)
		p.read()
		cancel()
		if r := recv(t, ch); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("%s: %v", k, r.err)
		}
	}
	fc.Advance(time.Hour)
	ch := goGet(testCtx(t), c, "after")
	req := p.read()
	if req.OpCode != memdx.OpGet || string(req.Key) != "after" {
		t.Fatalf("the node read %s %q, want the caller's GET", req.OpCode, req.Key)
	}
	p.write(ok(req, "v"))
	if r := recv(t, ch); r.err != nil {
		t.Fatalf("GET after an hour of tombstones: %v", r.err)
	}
	if st := c.Stats(); st.Probes != 0 || c.Err() != nil {
		t.Fatalf("stats %+v, err %v; want no probe and an open connection", st, c.Err())
	}
}

// A node that accepts the TCP connection and then sends nothing (a paused
// process: the kernel still accepts) fails a TLS Dial as it fails a plain
// one: the handshake waits ProbeTimeout of silence, not the whole of ctx,
// and the error matches kverr.ErrUnresponsive (the client redials at once).
func TestTLSHandshakeUnresponsiveNodeFailsDial(t *testing.T) {
	fc := newFakeClock()
	dial, servers := pipeDialer(nil)
	got := make(chan error, 1)
	go func() {
		_, err := Dial(testCtx(t), "pipe:11207", Options{TLSConfig: &tls.Config{InsecureSkipVerify: true},
			DialContext: dial, clock: fc})
		got <- err
	}()
	s := <-servers
	defer s.Close()
	s.Read(make([]byte, 1)) // the ClientHello: the handshake waits for the node
	go drain(s)
	fc.Advance(DefaultProbeTimeout)
	err := recv(t, got)
	if !errors.Is(err, kverr.ErrUnresponsive) || !strings.Contains(err.Error(), "TLS handshake") {
		t.Fatalf("Dial: %v; want kverr.ErrUnresponsive naming the TLS handshake", err)
	}
}

// serveToLogin answers a Couchbase bootstrap's first write (HELLO, its NOOP
// padding, GET_ERROR_MAP, SASL_LIST_MECHS offering PLAIN) and
// returns the SASL_AUTH that follows, unanswered.
func serveToLogin(p *peer) memdx.Packet {
	for {
		req := p.read()
		switch req.OpCode {
		case memdx.OpHello, memdx.OpNoop, memdx.OpVersion:
			p.write(ok(req, ""))
		case memdx.OpGetErrorMap:
			p.write(res(req, memdx.StatusUnknownCommand, ""))
		case memdx.OpSASLListMechs:
			p.write(ok(req, memdx.MechPlain))
		case memdx.OpSASLAuth:
			return req
		default:
			p.t.Errorf("bootstrap: unexpected %s", req.OpCode)
			return req
		}
	}
}

// A login that takes longer than ProbeTimeout (PLAIN for an external user,
// which kv_engine checks through ns_server's saslauthd against LDAP,
// answering nothing on the connection meanwhile) does not fail the Dial
// with kverr.ErrUnresponsive; the Dial's context bounds it. A node that
// never answers still fails after ProbeTimeout
// (TestBootstrapUnresponsiveNodeFailsDial), and so does one that goes
// silent after the login (TestBootstrapSilentAfterLoginFailsDial).
func TestBootstrapSlowLoginAfterAnswer(t *testing.T) {
	fc := newFakeClock()
	var logs logBuffer
	dial, servers := pipeDialer(nil)
	type dialed struct {
		c   *Conn
		err error
	}
	got := make(chan dialed, 1)
	go func() {
		c, err := Dial(testCtx(t), "pipe:11210", Options{DialContext: dial, clock: fc, Logger: logs.logger(),
			Username: "ldapuser", Password: "pw", SASLMechanisms: []string{memdx.MechPlain},
			AllowPlainAuthWithoutTLS: true, NoClusterConfig: true})
		got <- dialed{c, err}
	}()
	p := newPeer(t, <-servers)
	defer p.nc.Close()
	auth := serveToLogin(p)
	// The node answered, then sits on SASL_AUTH for several probe
	// timeouts: each check finds the login waiting and arms the next;
	// without the fix, the first fails the Dial.
	for i := range 4 {
		nextCheck(t, fc, arrived(got))
		select {
		case d := <-got:
			t.Fatalf("Dial while SASL_AUTH waited %v: %v; want it to wait for the answer", time.Duration(i+1)*DefaultProbeTimeout, d.err)
		default:
		}
	}
	fc.Advance(time.Minute) // the login takes its time
	p.write(ok(auth, ""))
	if req := p.read(); req.OpCode != memdx.OpVersion {
		t.Fatalf("after the login the node read %s, want VERSION", req.OpCode)
	} else {
		p.write(ok(req, "7.6.2"))
	}
	d := recv(t, got)
	if d.err != nil {
		t.Fatalf("Dial after a slow login: %v", d.err)
	}
	d.c.Close()
}

// A node that answered the bootstrap's first requests and then goes silent
// while one that is not a login waits (a node paused mid-bootstrap) fails
// the Dial with kverr.ErrUnresponsive after ProbeTimeout, not at the end
// of the Dial's context: only a login may take longer.
func TestBootstrapSilentAfterLoginFailsDial(t *testing.T) {
	fc := newFakeClock()
	dial, servers := pipeDialer(nil)
	got := make(chan error, 1)
	go func() {
		_, err := Dial(testCtx(t), "pipe:11210", Options{DialContext: dial, clock: fc,
			Username: "u", Password: "pw", SASLMechanisms: []string{memdx.MechPlain},
			AllowPlainAuthWithoutTLS: true, NoClusterConfig: true, Bucket: "b"})
		got <- err
	}()
	p := newPeer(t, <-servers)
	defer p.nc.Close()
	auth := serveToLogin(p)
	p.write(ok(auth, ""))
	if req := p.read(); req.OpCode != memdx.OpVersion {
		t.Fatalf("after the login the node read %s, want VERSION", req.OpCode)
	} else {
		p.write(ok(req, "7.6.2"))
	}
	if req := p.read(); req.OpCode != memdx.OpSelectBucket {
		t.Fatalf("after the login the node read %s, want SELECT_BUCKET", req.OpCode)
	}
	go drain(p.nc)
	// A check may come before the login's answer is read (the login still
	// waits) and the next see it arrive: the Dial fails at the first
	// check after those, within a few probe timeouts, not at its context.
	var err error
	for i := 0; ; i++ {
		if i == 5 {
			t.Fatalf("the Dial still waits after %d probe timeouts of silence", i)
		}
		nextCheck(t, fc, arrived(got))
		select {
		case err = <-got:
		default:
			continue
		}
		break
	}
	if !errors.Is(err, kverr.ErrUnresponsive) || !errors.Is(err, kverr.ErrBootstrap) {
		t.Fatalf("Dial: %v; want kverr.ErrBootstrap and kverr.ErrUnresponsive", err)
	}
}

// The TLS handshake's watch follows the bootstrap's rule: a node that has
// sent something is alive, and the rest of the handshake is bounded by the
// Dial's context, not by ProbeTimeout. Here the node sends one byte of its
// answer and then nothing for several ProbeTimeouts before it goes away:
// the Dial fails with the network's error, not kverr.ErrUnresponsive.
func TestTLSHandshakeWatchEndsOnceNodeAnswers(t *testing.T) {
	fc := newFakeClock()
	var logs logBuffer
	dial, servers := pipeDialer(func(c net.Conn) net.Conn { return c }) // a pipe: a Write returns once read
	got := make(chan error, 1)
	go func() {
		_, err := Dial(testCtx(t), "pipe:11207", Options{TLSConfig: &tls.Config{InsecureSkipVerify: true},
			DialContext: dial, clock: fc, Logger: logs.logger()})
		got <- err
	}()
	s := <-servers
	defer s.Close()
	go drain(s) // the ClientHello
	// A handshake record begins, a byte at a time: the second Write
	// returns once the client reads again, after it counted the first.
	for _, b := range []byte{0x16, 0x03} {
		if _, err := s.Write([]byte{b}); err != nil {
			t.Fatal(err)
		}
	}
	const ended = "silence watch ends"
	for i := 0; !strings.Contains(logs.String(), ended); i++ {
		if i == 3 {
			t.Fatalf("no end of the watch after %d probe timeouts; log %q", i, logs.String())
		}
		fc.Advance(DefaultProbeTimeout)
		waitFor(t, "the check", func() bool {
			select {
			case err := <-got:
				got <- err
				return true
			default:
				return fc.armedWithin(DefaultProbeTimeout) || strings.Contains(logs.String(), ended)
			}
		})
		select {
		case err := <-got:
			t.Fatalf("Dial while the handshake waited %v after the node's first byte: %v; want it to wait on",
				time.Duration(i+1)*DefaultProbeTimeout, err)
		default:
		}
	}
	fc.Advance(time.Minute)
	s.Close()
	if err := recv(t, got); err == nil || errors.Is(err, kverr.ErrUnresponsive) {
		t.Fatalf("Dial: %v; want the network's error (the node went away), not kverr.ErrUnresponsive", err)
	}
}

// fakeUnsent is a socket's unacknowledged byte count the test sets.
type fakeUnsent struct{ n atomic.Int64 }

func (f *fakeUnsent) of(net.Conn) func() (int, bool) {
	return func() (int, bool) { return int(f.n.Load()), true }
}

// A probe that sits in the socket behind a large value a live node reads
// slowly (a 20 MiB value over a slow link: the kernel's send queue drains
// for seconds, and no answer can come before the value is read) does not
// close the connection while the queue drains: the node's kernel takes
// bytes, so it is alive. Once the queue stops draining and nothing arrives
// for ProbeTimeout, the connection is closed as unresponsive.
func TestProbeWaitsWhileSocketQueueDrains(t *testing.T) {
	fc := newFakeClock()
	var q fakeUnsent
	q.n.Store(8 << 20)
	c, p := dialPipe(t, Options{clock: fc, unsentOf: q.of}, nil)
	abandonOne(t, c, p, fc, "a")
	fc.Advance(DefaultProbeAfter)
	if probe := p.read(); probe.OpCode != memdx.OpNoop {
		t.Fatalf("got %s, want the NOOP probe", probe.OpCode)
	}
	waitFor(t, "the probe's timer", func() bool { return fc.armedWithin(DefaultProbeTimeout) })
	for i := 0; i < 5; i++ {
		q.n.Add(-1 << 20) // the node read another MiB
		nextCheck(t, fc, closed(c))
		if err := c.Err(); err != nil {
			t.Fatalf("closed after %v while the socket's queue drained: %v", time.Duration(i+1)*DefaultProbeTimeout, err)
		}
	}
	// The node stops: nothing drains, nothing arrives.
	for i := 0; c.Err() == nil; i++ {
		if i == 2 {
			t.Fatal("still open two probe timeouts after the queue stopped draining")
		}
		nextCheck(t, fc, closed(c))
	}
	if !errors.Is(c.Err(), kverr.ErrUnresponsive) {
		t.Fatalf("connection error %v; want kverr.ErrUnresponsive", c.Err())
	}
}

// Bytes the node's kernel takes after the probe are no sign of life: a
// paused node's kernel acknowledges what fits its receive buffer, and a
// proxy in front of a dead node all of it. Here the socket's queue is
// always empty (everything acknowledged at once) while callers go on
// writing requests the node never answers: the connection is closed as
// unresponsive all the same.
func TestProbeNotKeptByAcknowledgedWritesAfterIt(t *testing.T) {
	fc := newFakeClock()
	var q fakeUnsent // 0: the node's kernel takes everything
	c, p := dialPipe(t, Options{clock: fc, unsentOf: q.of}, nil)
	abandonOne(t, c, p, fc, "a")
	fc.Advance(DefaultProbeAfter)
	if probe := p.read(); probe.OpCode != memdx.OpNoop {
		t.Fatalf("got %s, want the NOOP probe", probe.OpCode)
	}
	waitFor(t, "the probe's timer", func() bool { return fc.armedWithin(DefaultProbeTimeout) })
	var waiting []<-chan result
	for i := 0; c.Err() == nil; i++ {
		if i == 2 {
			t.Fatal("still open two probe timeouts after the probe was taken, kept by the writes after it")
		}
		waiting = append(waiting, goGet(testCtx(t), c, fmt.Sprint("w", i)))
		p.read() // written and taken, never answered
		nextCheck(t, fc, closed(c))
	}
	if !errors.Is(c.Err(), kverr.ErrUnresponsive) {
		t.Fatalf("connection error %v; want kverr.ErrUnresponsive", c.Err())
	}
	for _, ch := range waiting {
		if r := recv(t, ch); !errors.Is(r.err, kverr.ErrUnresponsive) {
			t.Fatalf("a request written after the probe: %v; want it failed with the connection", r.err)
		}
	}
}
