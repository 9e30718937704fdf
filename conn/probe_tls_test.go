package conn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// testServerTLS is a TLS 1.3 server configuration with a fresh
// self-signed certificate.
func testServerTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "node"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		MinVersion:   tls.VersionTLS13,
	}
}

// writeCounter is the client's end of a pipe: it counts the Writes begun
// on it. The TLS layer's Writes under a connection are sequential, so the
// (k+1)th begun means the kth returned. Like some connection types a
// DialContext returns, it ignores write deadlines: a Write waits until the
// node reads or the connection is closed.
type writeCounter struct {
	net.Conn
	begun atomic.Int64
}

func (w *writeCounter) Write(b []byte) (int, error) {
	w.begun.Add(1)
	return w.Conn.Write(b)
}

func (w *writeCounter) SetWriteDeadline(time.Time) error { return nil }

func (w *writeCounter) SetDeadline(t time.Time) error { return w.Conn.SetReadDeadline(t) }

// dialTLSPipe dials a memcached-mode Conn over TLS over net.Pipe (the
// bootstrap is answered through TLS) and returns it with the server's TLS
// end, its raw pipe end (what a test reads after the bootstrap to take
// ciphertext without decrypting it) and the client's pipe end.
func dialTLSPipe(t *testing.T, opts Options) (*Conn, *peer, net.Conn, *writeCounter) {
	t.Helper()
	var wc *writeCounter
	dial, servers := pipeDialer(func(nc net.Conn) net.Conn {
		wc = &writeCounter{Conn: nc}
		return wc
	})
	opts.DialContext = dial
	opts.Memcached = true
	opts.TLSConfig = &tls.Config{InsecureSkipVerify: true}
	scfg := testServerTLS(t)
	var p *peer
	var raw net.Conn
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		raw = <-servers
		p = newPeer(t, tls.Server(raw, scfg))
		serveMemcachedBoot(p)
	}()
	c, err := Dial(testCtx(t), "pipe:11207", opts)
	wg.Wait()
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() {
		raw.Close() // first: the TLS layer's Close would wait to send its alert
		c.Close()
	})
	return c, p, raw, wc
}

// readRecord reads one TLS record, undecrypted, from the raw end of the
// pipe.
func readRecord(t *testing.T, raw net.Conn) int {
	t.Helper()
	var h [5]byte
	if _, err := io.ReadFull(raw, h[:]); err != nil {
		t.Fatalf("a record's header: %v", err)
	}
	n := int(h[3])<<8 | int(h[4])
	if _, err := io.CopyN(io.Discard, raw, int64(n)); err != nil {
		t.Fatalf("a record's %d bytes: %v", n, err)
	}
	return len(h) + n
}

// Over TLS the writer hands the TLS layer up to 64 KiB at a time, and the
// TLS layer's Write returns only once the socket took all of it. A live
// node reading a large value slowly (here one 16 KiB record per
// ProbeTimeout, steadily, while the probe waits behind the value) must not
// be closed as unresponsive: the bytes the TLS layer hands the socket are
// progress, as a plain TCP socket's partial writes are. Once the node
// stops reading, the connection is closed as unresponsive.
func TestProbeTLSSlowReaderKeepsConnection(t *testing.T) {
	fc := newFakeClock()
	var q fakeUnsent
	q.n.Store(256 << 10) // the socket's queue: full, and refilled as it drains
	c, p, raw, wc := dialTLSPipe(t, Options{clock: fc, unsentOf: q.of})
	abandonOne(t, c, p, fc, "a")

	before := wc.begun.Load()
	value := make([]byte, 2<<20)
	setDone := make(chan error, 1)
	go func() {
		req := memdx.NewStore(memdx.OpSet, []byte("big"), value, 0, 0)
		setDone <- c.Do(context.Background(), &req, func(*memdx.Packet) error { return nil })
	}()
	// The writer is inside the TLS layer's Write of the value's first
	// chunk, blocked on the pipe.
	waitFor(t, "the value's first record's Write", func() bool { return wc.begun.Load() > before })
	begun := wc.begun.Load()
	fc.Advance(DefaultProbeAfter)
	waitFor(t, "the probe queued", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.monitor.probe != nil
	})
	waitFor(t, "the probe's timer", func() bool { return fc.armedWithin(DefaultProbeTimeout) })
	for i := 0; i < 10; i++ {
		readRecord(t, raw) // the node reads one record per check
		begun++
		waitFor(t, "the next record's Write", func() bool { return wc.begun.Load() >= begun })
		nextCheck(t, fc, closed(c))
		if err := c.Err(); err != nil {
			t.Fatalf("closed after %v while the node read a record per probe timeout: %v", time.Duration(i+1)*DefaultProbeTimeout, err)
		}
	}
	// The node stops reading: nothing moves.
	for i := 0; c.Err() == nil; i++ {
		if i == 2 {
			t.Fatal("still open two probe timeouts after the node stopped reading")
		}
		nextCheck(t, fc, closed(c))
	}
	if !errors.Is(c.Err(), kverr.ErrUnresponsive) {
		t.Fatalf("connection error %v; want kverr.ErrUnresponsive", c.Err())
	}
	if err := recv(t, setDone); err == nil {
		t.Fatal("SET succeeded on a closed connection")
	}
}

// Over TLS too, the probe's own bytes acknowledged by the node's kernel
// (a paused node's kernel takes an idle connection's probe whole) are no
// sign of life: the connection is closed at the first check.
func TestProbeTLSOwnBytesAcknowledgedAreNoProgress(t *testing.T) {
	fc := newFakeClock()
	var q fakeUnsent // 0: the node's kernel takes everything at once
	c, p, raw, _ := dialTLSPipe(t, Options{clock: fc, unsentOf: q.of})
	abandonOne(t, c, p, fc, "a")
	fc.Advance(DefaultProbeAfter)
	readRecord(t, raw) // the probe's record
	waitFor(t, "the probe's timer", func() bool { return fc.armedWithin(DefaultProbeTimeout) })
	waitFor(t, "the probe written", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.monitor.probe != nil && c.writer.written >= c.monitor.probe.end
	})
	nextCheck(t, fc, closed(c))
	if !errors.Is(c.Err(), kverr.ErrUnresponsive) {
		t.Fatalf("connection error %v after a probe timeout; want kverr.ErrUnresponsive", c.Err())
	}
}

// Over TLS, once the probe is in the socket behind a large value, the
// socket's queue draining (in the socket's terms: ciphertext) up to the
// probe is progress; once it stops draining, the connection is closed.
func TestProbeTLSWaitsWhileSocketQueueDrains(t *testing.T) {
	fc := newFakeClock()
	var q fakeUnsent
	q.n.Store(8 << 20)
	c, p, raw, _ := dialTLSPipe(t, Options{clock: fc, unsentOf: q.of})
	abandonOne(t, c, p, fc, "a")
	fc.Advance(DefaultProbeAfter)
	readRecord(t, raw) // the probe's record, "taken by the socket"
	waitFor(t, "the probe's timer", func() bool { return fc.armedWithin(DefaultProbeTimeout) })
	for i := 0; i < 5; i++ {
		q.n.Add(-1 << 20) // the node read another MiB
		nextCheck(t, fc, closed(c))
		if err := c.Err(); err != nil {
			t.Fatalf("closed after %v while the socket's queue drained: %v", time.Duration(i+1)*DefaultProbeTimeout, err)
		}
	}
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

// The socket under a TLS connection counts what a TCP socket takes per
// system call, while the Write that hands it a large buffer still waits
// for room: the health check sees a slow node drain it.
func TestWatchedConnCountsPartialWrites(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Small buffers (no autotuning): the Write below waits for the reader.
	nc.(*net.TCPConn).SetWriteBuffer(64 << 10)
	s.(*net.TCPConn).SetReadBuffer(64 << 10)
	wc := &watchedConn{Conn: nc, raw: newRawWriter(nc)}
	if wc.raw == nil {
		t.Skip("no raw writes on this platform")
	}
	const size = 16 << 20
	done := make(chan error, 1)
	go func() {
		n, err := wc.Write(make([]byte, size))
		if err == nil && n != size {
			err = io.ErrShortWrite
		}
		done <- err
	}()
	waitFor(t, "the socket's first bytes counted", func() bool { return wc.out.Load() > 0 })
	seen := wc.out.Load()
	select {
	case err := <-done:
		t.Fatalf("the Write of %d bytes returned before the reader read (%v)", size, err)
	default:
	}
	if _, err := io.CopyN(io.Discard, s, 1<<20); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "more counted as the reader reads", func() bool { return wc.out.Load() > seen })
	if _, err := io.CopyN(io.Discard, s, size-(1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, done); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if n := wc.out.Load(); n != size {
		t.Fatalf("counted %d bytes, want %d", n, size)
	}
}

// A TLS connection closed because its node stopped answering ends at
// once: its requests fail and its socket is closed without a TLS
// close_notify alert, which a paused node's full socket would hold (the
// TLS layer waits up to 5 s of real time to send it, and the requests in
// flight failed only then; here, where the socket ignores write deadlines,
// never).
func TestProbeTLSClosesWithoutWaitingToSendAlert(t *testing.T) {
	fc := newFakeClock()
	c, p, raw, _ := dialTLSPipe(t, Options{clock: fc})
	waiting := goGet(testCtx(t), c, "waiting") // no deadline: it waits for the connection
	p.read()
	abandonOne(t, c, p, fc, "a")
	fc.Advance(DefaultProbeAfter)
	readRecord(t, raw) // the probe's record; the node reads nothing more
	waitFor(t, "the probe's timer", func() bool { return fc.armedWithin(DefaultProbeTimeout) })
	waitFor(t, "the probe written", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.monitor.probe != nil && c.writer.written >= c.monitor.probe.end
	})
	nextCheck(t, fc, closed(c))
	if !errors.Is(c.Err(), kverr.ErrUnresponsive) {
		t.Fatalf("connection error %v; want kverr.ErrUnresponsive", c.Err())
	}
	if r := recv(t, waiting); !errors.Is(r.err, kverr.ErrUnresponsive) {
		t.Fatalf("the request in flight: %v; want it failed with the connection", r.err)
	}
	aborted := make(chan struct{})
	go func() {
		c.Close()
		close(aborted)
	}()
	recv(t, aborted)
}

// Close of a TLS connection whose node reads nothing more returns at
// once: the TLS close_notify alert is sent only if the socket takes it
// without waiting (here, a pipe that ignores write deadlines, it is not
// sent). The TLS layer would wait to send it up to 5 s of real time, or,
// on a connection that ignores write deadlines, until the node reads:
// Close, and the client's Close with it, waited as long.
func TestTLSCloseDoesNotWaitToSendAlert(t *testing.T) {
	c, p, _, _ := dialTLSPipe(t, Options{})
	got := goGet(testCtx(t), c, "k")
	p.read() // the node takes the request and reads nothing more
	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	recv(t, closed)
	if r := recv(t, got); !errors.Is(r.err, kverr.ErrConnectionClosed) {
		t.Fatalf("the request in flight: %v; want it failed by Close", r.err)
	}
}

// So does Close of a text connection over TLS (memcacheds://): the
// client's shutdown closes its idle ones.
func TestTLSTextCloseDoesNotWaitToSendAlert(t *testing.T) {
	dial, servers := pipeDialer(func(nc net.Conn) net.Conn { return &writeCounter{Conn: nc} })
	scfg := testServerTLS(t)
	handshaken := make(chan net.Conn, 1)
	go func() {
		raw := <-servers
		ts := tls.Server(raw, scfg)
		if err := ts.HandshakeContext(testCtx(t)); err != nil {
			t.Errorf("the server's handshake: %v", err)
		}
		handshaken <- raw
	}()
	tc, err := DialText(testCtx(t), "pipe:11207", Options{DialContext: dial, Memcached: true,
		TLSConfig: &tls.Config{InsecureSkipVerify: true}})
	raw := recv(t, handshaken)
	defer raw.Close() // first: without the fix, it ends the wait of the Close below
	if err != nil {
		t.Fatalf("DialText: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- tc.Close() }()
	if err := recv(t, closed); err != nil {
		t.Errorf("Close: %v; want nil (the alert left unsent is no failure)", err)
	}
}
