package conn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
)

// tcpPair is a connected pair of loopback TCP sockets.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close(); sc.Close() })
	return nc.(*net.TCPConn), sc.(*net.TCPConn)
}

// A socket of package net is non-blocking, so its reads and writes are
// direct where the platform makes them so (sysio_linux.go); they read and
// write as before: nothing there is EAGAIN, a buffer over directMax is
// read the usual way, the peer's close is the end.
func TestDirectReadsAndWrites(t *testing.T) {
	cl, sv := tcpPair(t)
	rd := newRawReader(cl)
	wr := newRawWriter(sv).(*sysWriter)
	if !nonBlocking(rd.rc) {
		t.Fatal("a socket of package net is not non-blocking")
	}
	if rd.direct != directIO || wr.direct != directIO {
		t.Fatalf("direct: reader %v, writer %v, want %v", rd.direct, wr.direct, directIO)
	}
	buf := make([]byte, 160<<10) // over directMax (64 KiB)
	if n, err := rd.tryRead(buf[:64]); !errors.Is(err, errWouldBlock) {
		t.Fatalf("tryRead of an empty socket: %d, %v", n, err)
	}
	if n, err := wr.tryWrite([]byte("hello"), true); n != 5 || err != nil {
		t.Fatalf("tryWrite: %d, %v", n, err)
	}
	if n, err := rd.read(buf[:64]); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read: %q, %v", buf[:n], err)
	}
	// A write that may not be direct (an inline write by a caller that
	// did not borrow the read role) writes as well, the usual way.
	if n, err := wr.tryWrite([]byte("world"), false); n != 5 || err != nil || wr.now {
		t.Fatalf("tryWrite, not direct: %d, %v, direct %v", n, err, wr.now)
	}
	if n, err := rd.read(buf[:64]); err != nil || string(buf[:n]) != "world" {
		t.Fatalf("read: %q, %v", buf[:n], err)
	}
	// More than directMax each way, the writer on another goroutine.
	want := bytes.Repeat([]byte("0123456789abcdef"), (96<<10)/16)
	done := make(chan error, 1)
	go func() {
		for b := want; len(b) > 0; {
			n, err := wr.tryWrite(b, true)
			if err != nil && !errors.Is(err, errWouldBlock) {
				done <- err
				return
			}
			b = b[n:]
		}
		done <- sv.CloseWrite()
	}()
	var got []byte
	for {
		n, err := rd.read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want the %d written", len(got), len(want))
	}
}

// A socket a caller's DialContext made blocking is read and written the
// usual way: a direct call on it could block the thread without the
// runtime knowing.
func TestNoDirectCallsOnABlockingSocket(t *testing.T) {
	cl, sv := tcpPair(t)
	rc, err := cl.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	defer rc.Control(func(fd uintptr) { syscall.SetNonblock(int(fd), true) })
	if nonBlocking(rc) {
		t.Fatal("a blocking socket taken for non-blocking")
	}
	if rd, wr := newRawReader(cl), newRawWriter(cl).(*sysWriter); rd.direct || wr.direct {
		t.Fatalf("direct calls on a blocking socket: reader %v, writer %v", rd.direct, wr.direct)
	}
	if _, err := sv.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	if n, err := newRawReader(cl).read(b); n != 1 || err != nil {
		t.Fatalf("read: %d, %v", n, err)
	}
}
