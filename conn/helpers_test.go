package conn

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/leakcheck"
	"github.com/kvwire/kvwire/memdx"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// testTimeout bounds every wait in these tests; it is generous: tests end as
// soon as the condition holds.
const testTimeout = 10 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds (or fails the test after testTimeout).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// peer is the server side of a scripted connection: it reads requests with
// memdx and writes whatever the test tells it to.
type peer struct {
	t   testing.TB
	nc  net.Conn
	buf []byte
}

func newPeer(t testing.TB, nc net.Conn) *peer { return &peer{t: t, nc: nc} }

// read returns the next request, its slices copied. It fails the test on
// error.
func (p *peer) read() memdx.Packet {
	p.t.Helper()
	p.nc.SetReadDeadline(time.Now().Add(testTimeout))
	defer p.nc.SetReadDeadline(time.Time{})
	pkt, err := p.tryRead()
	if err != nil {
		p.t.Errorf("peer: read: %v", err)
		return memdx.Packet{}
	}
	return pkt
}

func (p *peer) tryRead() (memdx.Packet, error) {
	for {
		if len(p.buf) >= memdx.HeaderSize {
			size, err := memdx.PacketSize(p.buf, 0)
			if err != nil {
				return memdx.Packet{}, err
			}
			if len(p.buf) >= size {
				pkt, _, err := memdx.DecodePacket(p.buf[:size], 0)
				if err != nil {
					return memdx.Packet{}, err
				}
				pkt = clonePacket(pkt)
				p.buf = append(p.buf[:0], p.buf[size:]...)
				return pkt, nil
			}
		}
		var b [4096]byte
		n, err := p.nc.Read(b[:])
		p.buf = append(p.buf, b[:n]...)
		if err != nil && n == 0 {
			return memdx.Packet{}, err
		}
	}
}

func clonePacket(p memdx.Packet) memdx.Packet {
	cl := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		return append([]byte(nil), b...)
	}
	p.FramingExtras, p.Extras, p.Key, p.Value = cl(p.FramingExtras), cl(p.Extras), cl(p.Key), cl(p.Value)
	return p
}

// encode returns the bytes of pkts.
func encode(t testing.TB, pkts ...memdx.Packet) []byte {
	t.Helper()
	var b []byte
	for i := range pkts {
		var err error
		b, err = memdx.AppendPacket(b, &pkts[i])
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
	}
	return b
}

// write sends pkts in one write.
func (p *peer) write(pkts ...memdx.Packet) {
	p.t.Helper()
	p.writeRaw(encode(p.t, pkts...))
}

func (p *peer) writeRaw(b []byte) {
	p.t.Helper()
	if _, err := p.nc.Write(b); err != nil {
		p.t.Errorf("peer: write: %v", err)
	}
}

// res builds the response to req.
func res(req memdx.Packet, status memdx.Status, value string) memdx.Packet {
	r := memdx.Packet{Magic: memdx.MagicRes, OpCode: req.OpCode, Status: status, Opaque: req.Opaque}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

// ok is a success response to req with value.
func ok(req memdx.Packet, value string) memdx.Packet { return res(req, memdx.StatusSuccess, value) }

// pipeOverTCP (KVWIRE_CONN_TCP=1, which scripts/test.sh sets for a second
// run of this package) has pipeDialer hand out loopback TCP pairs instead of
// net.Pipe when it wraps nothing: the same scripted tests then run where the
// reader goroutine lends the read role to lone callers (readrole.go), which
// it cannot do on a pipe.
var pipeOverTCP = os.Getenv("KVWIRE_CONN_TCP") != ""

// pipeDialer returns a DialContext that hands out the client ends of
// net.Pipe pairs (or loopback TCP pairs: pipeOverTCP); the server ends
// arrive on the returned channel.
func pipeDialer(wrap func(net.Conn) net.Conn) (func(context.Context, string, string) (net.Conn, error), chan net.Conn) {
	servers := make(chan net.Conn, 4)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c, s net.Conn
		if pipeOverTCP && wrap == nil {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			defer ln.Close()
			if c, err = net.Dial("tcp", ln.Addr().String()); err != nil {
				return nil, err
			}
			if s, err = ln.Accept(); err != nil {
				c.Close()
				return nil, err
			}
		} else {
			c, s = net.Pipe()
		}
		servers <- s
		if wrap != nil {
			return wrap(c), nil
		}
		return c, nil
	}, servers
}

// serveMemcachedBoot answers a memcached-mode bootstrap without
// credentials as memcached does: VERSION, the probe's GET (a miss), NOOP.
func serveMemcachedBoot(p *peer) {
	v := p.read()
	g := p.read()
	n := p.read()
	if v.OpCode != memdx.OpVersion || g.OpCode != memdx.OpGet || n.OpCode != memdx.OpNoop {
		p.t.Errorf("memcached bootstrap: got %s, %s, %s; want VERSION, GET, NOOP", v.OpCode, g.OpCode, n.OpCode)
	}
	p.write(ok(v, "1.6.18"), res(g, memdx.StatusKeyNotFound, "Not found"), ok(n, ""))
}

// dialPipe dials a memcached-mode Conn over net.Pipe (the bootstrap is
// answered) and returns it with the server's end. wrap, if set, wraps the
// client's end of the pipe.
func dialPipe(t *testing.T, opts Options, wrap func(net.Conn) net.Conn) (*Conn, *peer) {
	t.Helper()
	dial, servers := pipeDialer(wrap)
	opts.DialContext = dial
	opts.Memcached = true
	var p *peer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := <-servers
		p = newPeer(t, s)
		serveMemcachedBoot(p)
	}()
	c, err := Dial(testCtx(t), "pipe:11210", opts)
	wg.Wait()
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		p.nc.Close()
	})
	return c, p
}

// result is what one Do produced.
type result struct {
	value  string
	status memdx.Status
	calls  int
	err    error
}

// doGet runs Do(GET key) and reports its outcome.
func doGet(ctx context.Context, c *Conn, key string) result {
	var r result
	req := memdx.NewGet([]byte(key))
	r.err = c.Do(ctx, &req, func(p *memdx.Packet) error {
		r.calls++
		r.value = string(p.Value)
		r.status = p.Status
		return nil
	})
	return r
}

// goGet runs doGet on a goroutine; the result arrives on the channel.
func goGet(ctx context.Context, c *Conn, key string) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- doGet(ctx, c, key) }()
	return ch
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatal("timed out waiting for a result")
		panic("unreachable")
	}
}

// requestError asserts err is a *RequestError and returns it.
func requestError(t *testing.T, err error) *RequestError {
	t.Helper()
	var re *RequestError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *RequestError", err, err)
	}
	return re
}

// drain reads and discards everything from nc until it fails.
func drain(nc net.Conn) { io.Copy(io.Discard, nc) }

// fakeClock is a clock the test moves by hand: its timers fire only in
// Advance.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTimer() timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, ch: make(chan time.Time, 1)}
	f.timers = append(f.timers, t)
	return t
}

// Advance moves the time on by d and fires the timers now due.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	for _, t := range f.timers {
		t.fireIfDue()
	}
}

type fakeTimer struct {
	f     *fakeClock
	ch    chan time.Time
	at    time.Time
	armed bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Reset(d time.Duration) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.drain()
	t.at, t.armed = t.f.now.Add(d), true
	t.fireIfDue()
}

func (t *fakeTimer) Stop() {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.armed = false
	t.drain()
}

// drain drops a value not yet received, as a stopped or reset time.Timer
// does. Called with f.mu held.
func (t *fakeTimer) drain() {
	select {
	case <-t.ch:
	default:
	}
}

// fireIfDue sends on the channel when the timer is armed and due. Called
// with f.mu held.
func (t *fakeTimer) fireIfDue() {
	if t.armed && !t.at.After(t.f.now) {
		t.armed = false
		t.ch <- t.f.now
	}
}

// armed reports whether a timer of the clock is armed to fire at or before
// now+d.
func (f *fakeClock) armedWithin(d time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.timers {
		if t.armed && !t.at.After(f.now.Add(d)) {
			return true
		}
	}
	return false
}

// logBuffer is a slog handler's output the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// callOf returns the call in flight on c with opaque, nil if there is none.
// Called with c.mu held.
func callOf(c *Conn, opaque uint32) *call {
	cl, _ := c.inflight.get(opaque)
	return cl
}

// nextCheck moves fc on to the health check ProbeTimeout away and waits for
// its verdict: the next check armed (progress, or nothing to judge yet), or
// ended true (the connection closed, the Dial returned).
func nextCheck(t *testing.T, fc *fakeClock, ended func() bool) {
	t.Helper()
	fc.Advance(DefaultProbeTimeout)
	waitFor(t, "the check", func() bool { return ended() || fc.armedWithin(DefaultProbeTimeout) })
}

// closed reports whether c has ended, for nextCheck.
func closed(c *Conn) func() bool {
	return func() bool {
		select {
		case <-c.Done():
			return true
		default:
			return false
		}
	}
}

// arrived reports whether ch holds a value, leaving it there, for nextCheck.
func arrived[T any](ch chan T) func() bool {
	return func() bool {
		select {
		case v := <-ch:
			ch <- v
			return true
		default:
			return false
		}
	}
}

// answerAllSeen answers every GET with its key as the value, as answerAll,
// and sends each key it reads on seen first.
func answerAllSeen(seen chan<- string) func(p *peer) {
	return func(p *peer) {
		for {
			r, err := p.tryRead()
			if err != nil {
				return
			}
			seen <- string(r.Key)
			p.write(ok(r, string(r.Key)))
		}
	}
}

// queuedCalls counts the calls in flight on c still queued (no byte
// handed to a Write).
func queuedCalls(c *Conn) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for cl := range c.inflight.all() {
		if cl.state == reqQueued {
			n++
		}
	}
	return n
}
