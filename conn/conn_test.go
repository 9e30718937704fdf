package conn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

func TestDoRoundTrip(t *testing.T) {
	c, p := dialPipe(t, Options{}, nil)
	ch := goGet(testCtx(t), c, "k1")
	req := p.read()
	if req.OpCode != memdx.OpGet || string(req.Key) != "k1" {
		t.Fatalf("server got %s %q, want GET k1", req.OpCode, req.Key)
	}
	p.write(ok(req, "v1"))
	r := recv(t, ch)
	if r.err != nil || r.value != "v1" || r.calls != 1 {
		t.Fatalf("got %+v, want v1 with one handle call", r)
	}

	// A non-success status goes to handle; handle's error is Do's.
	errMine := errors.New("mine")
	done := make(chan error, 1)
	go func() {
		req := memdx.NewGet([]byte("k2"))
		done <- c.Do(testCtx(t), &req, func(p *memdx.Packet) error {
			if p.Status != memdx.StatusKeyNotFound {
				return fmt.Errorf("status %s", p.Status)
			}
			return errMine
		})
	}()
	p.write(res(p.read(), memdx.StatusKeyNotFound, ""))
	if err := recv(t, done); err != errMine {
		t.Fatalf("Do returned %v, want handle's error", err)
	}

	// A nil handle turns a status into a *memdx.StatusError.
	go func() {
		req := memdx.NewGet([]byte("k3"))
		done <- c.Do(testCtx(t), &req, nil)
	}()
	p.write(res(p.read(), memdx.StatusLocked, ""))
	if err := recv(t, done); !errors.Is(err, memdx.StatusLocked) {
		t.Fatalf("Do with nil handle returned %v, want StatusLocked", err)
	}
	if c.Err() != nil {
		t.Fatalf("connection ended: %v", c.Err())
	}
}

// Responses arrive one byte per read, and with packet boundaries anywhere
// inside a read.
func TestResponsesSplitAcrossReads(t *testing.T) {
	c, p := dialPipe(t, Options{}, nil)
	const n = 5
	chs := make([]<-chan result, n)
	for i := range chs {
		chs[i] = goGet(testCtx(t), c, fmt.Sprint("key", i))
	}
	reqs := map[string]memdx.Packet{}
	for range n {
		r := p.read()
		reqs[string(r.Key)] = r
	}
	var stream []byte
	for i := range n {
		k := fmt.Sprint("key", i)
		resp := ok(reqs[k], strings.Repeat(k, i*100))
		resp.Extras = []byte{0, 0, 0, byte(i)}
		stream = append(stream, encode(t, resp)...)
	}
	// First response a byte at a time, the rest in chunks of 7 that cut
	// through headers and bodies alike.
	first := len(encode(t, ok(reqs["key0"], "")))
	first += 4 // its extras
	for i := 0; i < first; i++ {
		p.writeRaw(stream[i : i+1])
	}
	for i := first; i < len(stream); i += 7 {
		p.writeRaw(stream[i:min(i+7, len(stream))])
	}
	for i, ch := range chs {
		r := recv(t, ch)
		k := fmt.Sprint("key", i)
		if r.err != nil || r.value != strings.Repeat(k, i*100) {
			t.Fatalf("%s: got err %v, value of %d bytes", k, r.err, len(r.value))
		}
	}
}

func TestOutOfOrderResponses(t *testing.T) {
	c, p := dialPipe(t, Options{}, nil)
	const n = 16
	chs := map[string]<-chan result{}
	for i := range n {
		k := fmt.Sprint("k", i)
		chs[k] = goGet(testCtx(t), c, k)
	}
	var reqs []memdx.Packet
	for range n {
		reqs = append(reqs, p.read())
	}
	var resps []memdx.Packet
	for i := len(reqs) - 1; i >= 0; i-- { // reverse order, one write
		resps = append(resps, ok(reqs[i], "value-of-"+string(reqs[i].Key)))
	}
	p.write(resps...)
	for k, ch := range chs {
		if r := recv(t, ch); r.err != nil || r.value != "value-of-"+k {
			t.Fatalf("%s: got %+v", k, r)
		}
	}
}

func notification(rev int64, bucket, config string) memdx.Packet {
	ext := make([]byte, 16)
	binary.BigEndian.PutUint64(ext[0:8], 1)
	binary.BigEndian.PutUint64(ext[8:16], uint64(rev))
	return memdx.Packet{Magic: memdx.MagicServerReq, ServerOpCode: memdx.ServerOpClustermapChangeNotification,
		Extras: ext, Key: []byte(bucket), Value: []byte(config)}
}

func TestServerPacketsInterleaved(t *testing.T) {
	var mu sync.Mutex
	var got []string
	var other []memdx.ServerOpCode
	opts := Options{
		OnClustermapNotification: func(n memdx.ClustermapNotification) {
			mu.Lock()
			got = append(got, fmt.Sprintf("%d/%d %s %s", n.Version.Epoch, n.Version.Revision, n.Bucket, n.Config))
			mu.Unlock()
		},
		OnServerRequest: func(p *memdx.Packet) {
			mu.Lock()
			other = append(other, p.ServerOpCode)
			mu.Unlock()
		},
	}
	c, p := dialPipe(t, opts, nil)
	a, b := goGet(testCtx(t), c, "a"), goGet(testCtx(t), c, "b")
	r1, r2 := p.read(), p.read()
	auth := memdx.Packet{Magic: memdx.MagicServerReq, ServerOpCode: memdx.ServerOpAuthenticate, Opaque: 99}
	stream := encode(t, notification(7, "default", `{"rev":7}`), ok(r1, "one"),
		notification(8, "default", ""), auth, ok(r2, "two"), notification(9, "travel", `{"rev":9}`))
	// Split in the middle of the second notification.
	cut := len(encode(t, notification(7, "default", `{"rev":7}`), ok(r1, "one"))) + 10
	p.writeRaw(stream[:cut])
	p.writeRaw(stream[cut:])
	want := map[string]string{string(r1.Key): "one", string(r2.Key): "two"}
	for k, ch := range map[string]<-chan result{"a": a, "b": b} {
		if r := recv(t, ch); r.err != nil || r.value != want[k] {
			t.Fatalf("%s: %+v, want %q", k, r, want[k])
		}
	}
	// The reader delivers in stream order; the last notification follows the
	// last response, so wait for it.
	waitFor(t, "three notifications", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 })
	mu.Lock()
	defer mu.Unlock()
	wantN := []string{`1/7 default {"rev":7}`, `1/8 default `, `1/9 travel {"rev":9}`}
	for i := range wantN {
		if got[i] != wantN[i] {
			t.Errorf("notification %d: got %q, want %q", i, got[i], wantN[i])
		}
	}
	if len(other) != 1 || other[0] != memdx.ServerOpAuthenticate {
		t.Errorf("OnServerRequest got %v, want [AUTHENTICATE]", other)
	}
}

// protocolCase ends a connection that has two requests in flight with a bad
// packet, and checks both fail once as written and the connection's error
// names the problem.
func protocolCase(t *testing.T, opts Options, bad func(r1, r2 memdx.Packet) []byte, want string) {
	t.Helper()
	c, p := dialPipe(t, opts, nil)
	a, b := goGet(testCtx(t), c, "a"), goGet(testCtx(t), c, "b")
	r1, r2 := p.read(), p.read()
	go drain(p.nc)
	if _, err := p.nc.Write(bad(r1, r2)); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatal(err)
	}
	for _, ch := range []<-chan result{a, b} {
		r := recv(t, ch)
		re := requestError(t, r.err)
		if r.calls != 0 || !re.Written || !errors.Is(r.err, kverr.ErrConnectionClosed) || !errors.Is(r.err, kverr.ErrProtocol) {
			t.Fatalf("got calls=%d err=%v; want no handle call, written, kverr.ErrConnectionClosed and kverr.ErrProtocol", r.calls, r.err)
		}
	}
	<-c.Done()
	err := c.Err()
	var pe *ProtocolError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) {
		t.Fatalf("connection error %v; want a *ProtocolError saying %q", err, want)
	}
	// After the end, Do fails at once, not written.
	r := doGet(testCtx(t), c, "late")
	if re := requestError(t, r.err); re.Written || !errors.Is(r.err, kverr.ErrConnectionClosed) {
		t.Fatalf("Do after the end: %v", r.err)
	}
}

func TestProtocolViolations(t *testing.T) {
	t.Run("oversized body", func(t *testing.T) {
		protocolCase(t, Options{MaxBodyLength: 1000}, func(r1, _ memdx.Packet) []byte {
			return encode(t, ok(r1, strings.Repeat("x", 1001)))
		}, "1001 bytes exceeds the limit of 1000")
	})
	t.Run("bad magic", func(t *testing.T) {
		protocolCase(t, Options{}, func(_, _ memdx.Packet) []byte {
			return []byte("HTTP/1.1 400 Bad Request\r\n\r\n")
		}, "magic")
	})
	t.Run("client magic from the server", func(t *testing.T) {
		protocolCase(t, Options{}, func(r1, _ memdx.Packet) []byte {
			return encode(t, memdx.Packet{Magic: memdx.MagicReq, OpCode: memdx.OpGet, Opaque: r1.Opaque})
		}, "only a client sends")
	})
	t.Run("extras longer than the body", func(t *testing.T) {
		protocolCase(t, Options{}, func(r1, _ memdx.Packet) []byte {
			b := encode(t, ok(r1, "abc"))
			b[4] = 200 // extras length
			return b
		}, "extras length")
	})
}

// A response followed in the same read by garbage: nothing tells a good
// response with garbage after it from one whose body length swallowed the
// start of what followed (checkFollowing), so neither request gets an
// answer: both fail as written, with the protocol violation.
func TestGarbageAfterResponseFailsIt(t *testing.T) {
	c, p := dialPipe(t, Options{}, nil)
	a := goGet(testCtx(t), c, "a")
	r1 := p.read()
	b := goGet(testCtx(t), c, "b")
	p.read()
	go drain(p.nc)
	p.writeRaw(append(encode(t, ok(r1, "A")), "\x00garbage that is no header"...))
	for _, ch := range []<-chan result{a, b} {
		r := recv(t, ch)
		if re := requestError(t, r.err); !re.Written || !errors.Is(r.err, kverr.ErrProtocol) || r.calls != 0 {
			t.Fatalf("%+v; want no answer, written, a protocol violation", r)
		}
	}
}

func TestQuietOpcodeRefused(t *testing.T) {
	c, _ := dialPipe(t, Options{}, nil)
	req := memdx.Request{OpCode: memdx.OpGetQ, Key: []byte("k")}
	err := c.Do(testCtx(t), &req, nil)
	if re := requestError(t, err); re.Written || !errors.Is(err, memdx.ErrInvalidRequest) {
		t.Fatalf("Do(GETQ) = %v; want not written, ErrInvalidRequest", err)
	}
}

func TestEncodeErrorNotWritten(t *testing.T) {
	c, _ := dialPipe(t, Options{}, nil)
	req := memdx.NewGet(make([]byte, 70000)) // a key longer than 65535
	err := c.Do(testCtx(t), &req, nil)
	if re := requestError(t, err); re.Written || !errors.Is(err, memdx.ErrInvalidRequest) {
		t.Fatalf("Do(huge key) = %v; want not written, ErrInvalidRequest", err)
	}
	if c.Pending() != 0 || c.Err() != nil {
		t.Fatalf("pending %d, err %v after an encode error", c.Pending(), c.Err())
	}
}

func TestStatMultiResponse(t *testing.T) {
	c, p := dialPipe(t, Options{}, nil)
	got := map[string]string{}
	calls := 0
	done := make(chan error, 1)
	go func() {
		req := memdx.NewStat(nil)
		done <- c.Do(testCtx(t), &req, func(p *memdx.Packet) error {
			calls++
			if len(p.Key) > 0 {
				got[string(p.Key)] = string(p.Value)
			}
			return nil
		})
	}()
	req := p.read()
	stat := func(k, v string) memdx.Packet {
		r := ok(req, v)
		r.Key = []byte(k)
		return r
	}
	p.write(stat("pid", "42"), stat("uptime", "7"))
	p.write(stat("version", "1.6"), ok(req, ""))
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if calls != 4 || got["pid"] != "42" || got["version"] != "1.6" || len(got) != 3 {
		t.Fatalf("calls %d, stats %v", calls, got)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d pending after STAT", c.Pending())
	}
}

// gate wraps a connection so that the test decides, for each Write, how
// many bytes go through and whether it then fails.
type gate struct {
	net.Conn
	calls chan []byte    // each Write's buffer, as the writer passed it
	acts  chan gateWrite // the test's answer
	quit  chan struct{}  // closed at the end of the test: pass everything
}

type gateWrite struct {
	n   int // bytes to pass on; -1 for all
	err error
}

func newGate() (*gate, func(net.Conn) net.Conn) {
	g := &gate{calls: make(chan []byte), acts: make(chan gateWrite), quit: make(chan struct{})}
	return g, func(nc net.Conn) net.Conn { g.Conn = nc; return g }
}

func (g *gate) Write(b []byte) (int, error) {
	a := gateWrite{n: -1}
	select {
	case g.calls <- append([]byte(nil), b...):
		select {
		case a = <-g.acts:
		case <-g.quit:
		}
	case <-g.quit:
	}
	if a.n < 0 || a.n > len(b) {
		a.n = len(b)
	}
	n, err := g.Conn.Write(b[:a.n])
	if err != nil {
		return n, err
	}
	return n, a.err
}

// dialGated dials over a gate that lets the bootstrap through and then
// holds every write for the test.
func dialGated(t *testing.T, opts Options) (*Conn, *peer, *gate) {
	g, wrap := newGate()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-g.calls:
				g.acts <- gateWrite{n: -1}
			case <-stop:
				return
			}
		}
	}()
	c, p := dialPipe(t, opts, wrap)
	close(stop) // no write is pending now: the bootstrap is done
	<-stopped
	t.Cleanup(func() { close(g.quit) }) // runs before dialPipe's Close
	return c, p, g
}

// packets splits an encoded stream into its requests.
func packets(t *testing.T, b []byte) []memdx.Packet {
	t.Helper()
	var out []memdx.Packet
	for len(b) > 0 {
		p, n, err := memdx.DecodePacket(b, 0)
		if err != nil {
			t.Fatalf("decode written bytes: %v", err)
		}
		out = append(out, clonePacket(p))
		b = b[n:]
	}
	return out
}

// A connection reset with requests at every stage: answered-less but
// written, written in the failing write, cut by it, and never handed to the
// writer. Each fails once, Written exactly as far as its bytes got.
func TestResetWrittenAndNot(t *testing.T) {
	c, p, g := dialGated(t, Options{})
	go drain(p.nc) // the server reads everything and answers nothing

	ctx := testCtx(t)
	a := goGet(ctx, c, "a")
	if got := packets(t, <-g.calls); len(got) != 1 || string(got[0].Key) != "a" {
		t.Fatalf("first write: %v", got)
	}
	g.acts <- gateWrite{n: -1} // A written whole

	b := goGet(ctx, c, "b")
	<-g.calls // the writer now waits in Write([B])
	cc := goGet(ctx, c, "c")
	waitFor(t, "c queued", func() bool { return c.Pending() == 3 })
	d := goGet(ctx, c, "d")
	waitFor(t, "d queued", func() bool { return c.Pending() == 4 })
	g.acts <- gateWrite{n: -1} // B written whole

	cd := <-g.calls // Write([C D])
	reqs := packets(t, cd)
	if len(reqs) != 2 || string(reqs[0].Key) != "c" || string(reqs[1].Key) != "d" {
		t.Fatalf("second batch: %v", reqs)
	}
	e := goGet(ctx, c, "e") // queued behind the failing write
	waitFor(t, "e queued", func() bool { return c.Pending() == 5 })
	cLen := len(cd) / 2
	g.acts <- gateWrite{n: cLen + 10, err: syscall.ECONNRESET} // C whole, D cut

	want := map[string]bool{"a": true, "b": true, "c": true, "d": false, "e": false}
	for k, ch := range map[string]<-chan result{"a": a, "b": b, "c": cc, "d": d, "e": e} {
		r := recv(t, ch)
		re := requestError(t, r.err)
		if re.Written != want[k] || r.calls != 0 || !errors.Is(r.err, kverr.ErrConnectionClosed) || !errors.Is(r.err, syscall.ECONNRESET) {
			t.Errorf("%s: written=%v calls=%d err=%v; want written=%v, kverr.ErrConnectionClosed, ECONNRESET", k, re.Written, r.calls, r.err, want[k])
		}
	}
	if !errors.Is(c.Err(), syscall.ECONNRESET) {
		t.Fatalf("connection error %v, want ECONNRESET", c.Err())
	}
}

// The same over real TCP: a server that stops reading fills the socket
// buffers, a large request blocks part-way, and a reset fails it as not
// written while the small request before it was written.
func TestResetTCPFullBuffer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.TCPConn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		tc := nc.(*net.TCPConn)
		tc.SetReadBuffer(16 << 10)
		p := newPeer(t, tc)
		serveMemcachedBoot(p)
		accepted <- tc
	}()
	opts := Options{Memcached: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err == nil {
			nc.(*net.TCPConn).SetWriteBuffer(16 << 10)
		}
		return nc, err
	}}
	c, err := Dial(testCtx(t), ln.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := recv(t, accepted)

	ctx := testCtx(t)
	set := func(key string, size int) <-chan error {
		ch := make(chan error, 1)
		go func() {
			req := memdx.NewStore(memdx.OpSet, []byte(key), make([]byte, size), 0, 0)
			ch <- c.Do(ctx, &req, nil)
		}()
		return ch
	}
	small := set("small", 10)
	waitFor(t, "the small request written", func() bool { return c.Stats().BytesWritten > 0 && c.Stats().Writes >= 2 })
	big := set("big", 8<<20)
	waitFor(t, "the writer blocked on the big request", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.writer.flushed > c.writer.written && c.writer.queued == c.writer.flushed
	})
	after := set("after", 10)
	waitFor(t, "the request after it queued", func() bool { return c.Pending() == 3 })
	srv.SetLinger(0) // close with RST
	srv.Close()

	for name, tc := range map[string]struct {
		ch      <-chan error
		written bool
	}{"small": {small, true}, "big": {big, false}, "after": {after, false}} {
		err := recv(t, tc.ch)
		if re := requestError(t, err); re.Written != tc.written || !errors.Is(err, kverr.ErrConnectionClosed) {
			t.Errorf("%s: %v; want written=%v", name, err, tc.written)
		}
	}
}

func TestCancelBeforeWrite(t *testing.T) {
	c, p, g := dialGated(t, Options{})

	x := goGet(testCtx(t), c, "x")
	xw := <-g.calls // the writer waits in Write([X])
	ctx, cancel := context.WithCancel(context.Background())
	y := goGet(ctx, c, "y")
	z := goGet(testCtx(t), c, "z")
	waitFor(t, "y and z queued", func() bool { return c.Pending() == 3 })
	// Cancel y: still in the write buffer, it is cut out.
	cancel()
	ry := recv(t, y)
	if re := requestError(t, ry.err); re.Written || !errors.Is(ry.err, context.Canceled) || ry.calls != 0 {
		t.Fatalf("y: %+v; want not written, Canceled", ry)
	}
	g.acts <- gateWrite{n: -1}
	rx := p.read()
	zw := <-g.calls
	g.acts <- gateWrite{n: -1}
	rz := p.read()
	got := append(packets(t, xw), packets(t, zw)...)
	if len(got) != 2 || string(got[0].Key) != "x" || string(got[1].Key) != "z" {
		t.Fatalf("server was sent %d requests: %v; want x and z only", len(got), got)
	}
	if string(rx.Key) != "x" || string(rz.Key) != "z" {
		t.Fatalf("server read %q, %q", rx.Key, rz.Key)
	}
	p.write(ok(rz, "Z"), ok(rx, "X"))
	if r := recv(t, x); r.err != nil || r.value != "X" {
		t.Fatalf("x: %+v", r)
	}
	if r := recv(t, z); r.err != nil || r.value != "Z" {
		t.Fatalf("z: %+v", r)
	}
}

func TestCancelAfterWrite(t *testing.T) {
	c, p := dialPipe(t, Options{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	a := goGet(ctx, c, "a")
	ra := p.read() // written: the server has it
	cancel()
	r := recv(t, a)
	if re := requestError(t, r.err); !re.Written || !errors.Is(r.err, context.Canceled) || r.calls != 0 {
		t.Fatalf("a: %+v; want written, Canceled, no handle call", r)
	}
	if c.Pending() != 1 {
		t.Fatalf("pending %d; the abandoned opaque must stay until its response", c.Pending())
	}
	// The late response is dropped; the connection carries on.
	b := goGet(testCtx(t), c, "b")
	rb := p.read()
	p.write(ok(ra, "late"), ok(rb, "B"))
	if r := recv(t, b); r.err != nil || r.value != "B" {
		t.Fatalf("b: %+v", r)
	}
	if c.Err() != nil || c.Pending() != 0 {
		t.Fatalf("err %v pending %d after the late response", c.Err(), c.Pending())
	}
	// A second response to the abandoned opaque matches nothing in flight:
	// a stray, dropped like the late one; the connection carries on.
	p.write(ok(ra, "again"))
	d := goGet(testCtx(t), c, "d")
	p.write(ok(p.read(), "D"))
	if r := recv(t, d); r.err != nil || r.value != "D" {
		t.Fatalf("d: %+v", r)
	}
	if st := c.Stats(); c.Err() != nil || st.StrayResponses != 2 || st.LateResponses != 1 || st.Abandoned != 0 {
		t.Fatalf("err %v, stats %+v; want the connection up, 2 strays of which 1 late", c.Err(), st)
	}
}

// A STAT cancelled while its handle runs: Do returns only after handle has
// returned, and the rest of the series is dropped.
func TestCancelDuringMultiResponse(t *testing.T) {
	c, p := dialPipe(t, Options{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	entered, release := make(chan struct{}), make(chan struct{})
	var returned bool // written by handle, read by the test after Do
	var calls int
	done := make(chan error, 1)
	go func() {
		req := memdx.NewStat(nil)
		done <- c.Do(ctx, &req, func(p *memdx.Packet) error {
			calls++
			if calls == 1 {
				close(entered)
				<-release
				returned = true
			}
			return nil
		})
	}()
	req := p.read()
	first := ok(req, "1")
	first.Key = []byte("a")
	p.write(first)
	<-entered
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Do returned %v while handle was running", err)
	default:
	}
	close(release)
	err := recv(t, done)
	if re := requestError(t, err); !re.Written || !errors.Is(err, context.Canceled) || !returned {
		t.Fatalf("Do: %v (handle returned: %v)", err, returned)
	}
	second := ok(req, "2")
	second.Key = []byte("b")
	p.write(second, ok(req, ""))
	waitFor(t, "the series dropped", func() bool { return c.Pending() == 0 })
	if calls != 1 || c.Err() != nil {
		t.Fatalf("handle called %d times; err %v", calls, c.Err())
	}
}

func TestOverload(t *testing.T) {
	c, p := dialPipe(t, Options{MaxPending: 2}, nil)
	a, b := goGet(testCtx(t), c, "a"), goGet(testCtx(t), c, "b")
	ra, rb := p.read(), p.read()
	r := doGet(testCtx(t), c, "c")
	if re := requestError(t, r.err); re.Written || !errors.Is(r.err, kverr.ErrOverloaded) || errors.Is(r.err, kverr.ErrConnectionClosed) {
		t.Fatalf("third request: %v; want kverr.ErrOverloaded, not written", r.err)
	}
	p.write(ok(ra, "A"), ok(rb, "B"))
	recv(t, a)
	recv(t, b)
	d := goGet(testCtx(t), c, "d")
	p.write(ok(p.read(), "D"))
	if r := recv(t, d); r.err != nil || r.value != "D" {
		t.Fatalf("after the overload: %+v", r)
	}
}

func TestCloseFailsPending(t *testing.T) {
	closes := make(chan error, 2)
	c, p := dialPipe(t, Options{OnClose: func(err error) { closes <- err }}, nil)
	a := goGet(testCtx(t), c, "a")
	p.read()
	go drain(p.nc)
	select {
	case <-c.Done():
		t.Fatal("Done closed early")
	default:
	}
	c.Close()
	c.Close() // twice is fine
	r := recv(t, a)
	if re := requestError(t, r.err); !re.Written || !errors.Is(r.err, kverr.ErrConnectionClosed) {
		t.Fatalf("a: %v", r.err)
	}
	if c.Err() != kverr.ErrConnectionClosed {
		t.Fatalf("Err() = %v", c.Err())
	}
	if err := <-closes; err != kverr.ErrConnectionClosed {
		t.Fatalf("OnClose got %v", err)
	}
	select {
	case err := <-closes:
		t.Fatalf("OnClose called twice (%v)", err)
	default:
	}
}

func TestContextDoneBeforeDo(t *testing.T) {
	c, _ := dialPipe(t, Options{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := doGet(ctx, c, "k")
	if re := requestError(t, r.err); re.Written || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("%v", r.err)
	}
	if c.Pending() != 0 {
		t.Fatal("a request with a done context was queued")
	}
}

// The writer holds a batch while more requests are out than queued, but
// only for a bounded time: a request queued behind requests the server never
// answers is still written, and its answer still comes back.
func TestHeldBatchIsWrittenWithoutAnswers(t *testing.T) {
	c, p := dialPipe(t, Options{}, nil)
	ctx := testCtx(t)
	var unanswered []memdx.Packet
	var chans []<-chan result
	for i := range 3 {
		chans = append(chans, goGet(ctx, c, fmt.Sprintf("slow%d", i)))
		unanswered = append(unanswered, p.read())
	}
	// Three written and unanswered, one queued: the writer holds it, then
	// writes it although no answer arrived meanwhile.
	fast := goGet(ctx, c, "fast")
	req := p.read()
	if string(req.Key) != "fast" {
		t.Fatalf("server got %q, want the held request", req.Key)
	}
	p.write(ok(req, "v"))
	if r := recv(t, fast); r.err != nil || r.value != "v" {
		t.Fatalf("held request: %+v", r)
	}
	for i, req := range unanswered {
		p.write(ok(req, "late"))
		if r := recv(t, chans[i]); r.err != nil || r.value != "late" {
			t.Fatalf("request %d: %+v", i, r)
		}
	}
}

// A response whose request the socket has not taken cannot be the server's
// answer to it (the server has not seen it): it is dropped as a stray, and
// the request's own answer, once it is written, completes it.
func TestResponseToUnsentRequestIsStray(t *testing.T) {
	c, p, g := dialGated(t, Options{})
	x := goGet(testCtx(t), c, "x")
	xw := packets(t, recv(t, g.calls)) // the writer now waits in Write([X])
	y := goGet(testCtx(t), c, "y")
	waitFor(t, "Y queued behind X", func() bool { return c.Pending() == 2 })
	// Y's opaque is the one after X's.
	forged := memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpGet, Opaque: xw[0].Opaque + 1, Value: []byte("forged")}
	p.write(forged)
	waitFor(t, "the forged answer dropped", func() bool { return c.Stats().StrayResponses == 1 })
	g.acts <- gateWrite{n: -1} // X's write goes through
	rx := p.read()
	yw := packets(t, recv(t, g.calls))
	g.acts <- gateWrite{n: -1}
	ry := p.read()
	if len(yw) != 1 || ry.Opaque != forged.Opaque {
		t.Fatalf("second write %v", yw)
	}
	p.write(ok(ry, "Y"), ok(rx, "X"))
	for name, tc := range map[string]struct {
		ch   <-chan result
		want string
	}{"X": {x, "X"}, "Y": {y, "Y"}} {
		if r := recv(t, tc.ch); r.err != nil || r.value != tc.want || r.calls != 1 {
			t.Fatalf("%s: %+v; want %q", name, r, tc.want)
		}
	}
	if c.Err() != nil {
		t.Fatalf("connection ended: %v", c.Err())
	}
}
