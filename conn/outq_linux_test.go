//go:build linux && (amd64 || 386 || arm || arm64 || riscv64 || loong64 || s390x)

package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"unsafe"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// Over real loopback TCP: a probe written behind a value the node reads
// slowly keeps the connection while the socket's queue drains (SIOCOUTQ
// falls), and the connection closes once the node stops reading. The node
// (a server that reads only when told, with a small receive buffer, the
// client's socket with a small send buffer) decides how much drains; the
// test waits for the count to fall before each check, so nothing depends
// on the machine's speed.
func TestProbeWaitsWhileSocketQueueDrainsTCP(t *testing.T) {
	setBuf := func(opt, size int) func(string, string, syscall.RawConn) error {
		return func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, size) }); err != nil {
				return err
			}
			return serr
		}
	}
	lc := net.ListenConfig{Control: setBuf(syscall.SO_RCVBUF, 4096)} // inherited by the accepted socket
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan *peer, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		p := newPeer(t, nc)
		serveMemcachedBoot(p)
		served <- p
	}()
	fc := newFakeClock()
	c, err := Dial(testCtx(t), ln.Addr().String(), Options{Memcached: true, clock: fc,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := net.Dialer{Control: setBuf(syscall.SO_SNDBUF, 256<<10)}
			return d.DialContext(ctx, network, addr)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := recv(t, served)
	defer p.nc.Close()
	unsent := socketUnsent(c.nc)
	if unsent == nil {
		t.Fatal("no SIOCOUTQ reader for a TCP socket")
	}
	queued := func() int {
		n, ok := unsent()
		if !ok {
			t.Fatal("SIOCOUTQ failed")
		}
		return n
	}

	abandonOne(t, c, p, fc, "a")
	// A value the node does not read yet: it fills the node's receive
	// buffer and waits in the client's socket.
	set := memdx.NewStore(memdx.OpSet, []byte("big"), make([]byte, 48<<10), 0, 0)
	setSize := uint64(memdx.HeaderSize + 8 + len(set.Key) + len(set.Value)) // SET's extras: flags, expiry
	base := c.Stats().BytesWritten
	setDone := make(chan error, 1)
	go func() { setDone <- c.Do(testCtx(t), &set, nil) }()
	waitFor(t, "the value written", func() bool { return c.Stats().BytesWritten == base+setSize })
	fc.Advance(DefaultProbeAfter)
	waitFor(t, "the probe written", func() bool { return c.Stats().BytesWritten == base+setSize+memdx.HeaderSize })
	if c.Stats().Probes != 1 {
		t.Fatalf("stats %+v; want one probe", c.Stats())
	}
	// The probe's Write counted: the checks' acknowledged offset
	// (writer.written less the count) then moves only as the queue does.
	waitFor(t, "the probe's Write counted", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.writer.written == c.writer.queued
	})
	// q is read after the check it is compared with (here the probe's
	// baseline): the node's kernel takes what one read of the node makes
	// room for in steps (a read of 4 KiB can be two of 2 KiB, each
	// opening the window), so a q read before a check may be higher than
	// what the check saw, and a fall below it already seen by the check.
	q := queued()
	if q < 16<<10 {
		t.Fatalf("%d bytes queued in the socket; want the value's most", q)
	}
	waitFor(t, "the probe's timer", func() bool { return fc.armedWithin(DefaultProbeTimeout) })
	// The node reads on, slowly: each step it reads what its kernel
	// holds, emptying its receive buffer, so its kernel opens the window
	// and the client's socket must send more. (A fixed read, 4 KiB, need
	// not: a kernel holding more than that leaves the window shut.)
	nodeHolds := func() int {
		rc, err := p.nc.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var n int32
		var errno syscall.Errno
		if err := rc.Control(func(fd uintptr) {
			_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
		}); err != nil || errno != 0 {
			t.Fatalf("SIOCINQ: %v %v", err, errno)
		}
		return int(n)
	}
	for i := 0; i < 3; i++ {
		if _, err := io.ReadFull(p.nc, make([]byte, max(nodeHolds(), 1))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the socket's queue to drain", func() bool { return queued() < q })
		nextCheck(t, fc, closed(c))
		if err := c.Err(); err != nil {
			t.Fatalf("closed after %d checks while the socket's queue drained: %v", i+1, err)
		}
		q = queued()
	}
	// The node stops reading. The steps of its last read may still reach
	// the socket after the last check, and a check seeing one waits on;
	// but once the queue stands still from one check to the next (each
	// q read after its check, so no fall can hide between them), the
	// check after those finds nothing new and closes the connection.
	for still := 0; c.Err() == nil; {
		if still == 2 {
			t.Fatalf("still open a probe timeout after the queue stopped draining (%d bytes queued)", q)
		}
		nextCheck(t, fc, closed(c))
		if c.Err() != nil {
			break
		}
		if n := queued(); n < q {
			q, still = n, 0
		} else {
			still++
		}
	}
	if !errors.Is(c.Err(), kverr.ErrUnresponsive) {
		t.Fatalf("connection error %v; want kverr.ErrUnresponsive", c.Err())
	}
	if err := recv(t, setDone); !errors.Is(err, kverr.ErrUnresponsive) {
		t.Fatalf("SET: %v; want it failed with the connection", err)
	}
}

// The unacknowledged count is read from the TCP socket under a TLS
// connection too; a connection with no socket (a pipe) has none.
func TestSocketUnsentUnderTLS(t *testing.T) {
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
	tc := tls.Client(&watchedConn{Conn: nc}, &tls.Config{InsecureSkipVerify: true})
	unsent := socketUnsent(tc)
	if unsent == nil {
		t.Fatal("no reader for the TCP socket under TLS")
	}
	if n, ok := unsent(); !ok || n != 0 {
		t.Fatalf("unsent %d, %v; want 0, true", n, ok)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if socketUnsent(a) != nil {
		t.Fatal("a reader for a pipe")
	}
}
