package conn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
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
	if n, err := wr.tryWrite([]byte("hello")); n != 5 || err != nil {
		t.Fatalf("tryWrite: %d, %v", n, err)
	}
	if n, err := rd.read(buf[:64]); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read: %q, %v", buf[:n], err)
	}
	// A second write on the same writer (its callback is bound once).
	if n, err := wr.tryWrite([]byte("world")); n != 5 || err != nil {
		t.Fatalf("tryWrite, again: %d, %v", n, err)
	}
	if n, err := rd.read(buf[:64]); err != nil || string(buf[:n]) != "world" {
		t.Fatalf("read: %q, %v", buf[:n], err)
	}
	// More than directMax each way, the writer on another goroutine.
	want := bytes.Repeat([]byte("0123456789abcdef"), (96<<10)/16)
	done := make(chan error, 1)
	go func() {
		for b := want; len(b) > 0; {
			n, err := wr.tryWrite(b)
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

// resetBy makes the peer's close a reset (SO_LINGER 0) and closes it.
func resetBy(t *testing.T, sc *net.TCPConn) {
	t.Helper()
	if err := sc.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	sc.Close()
}

// The reader goroutine's reads (readNet) and the writer goroutine's writes
// (writeNet) go through the socket's RawConn, yet fail with the errors
// net.Conn's Read and Write return, which the connection's error wraps:
// the same text, the same *net.OpError and system call error beneath.
func TestNetErrorsOfRawReadsAndWrites(t *testing.T) {
	// A reset: each way, on a pair read by net.Conn and one read raw.
	viaNet, viaRaw := make([]error, 2), make([]error, 2)
	for _, raw := range []bool{false, true} {
		errs := viaNet
		if raw {
			errs = viaRaw
		}
		cl, sv := tcpPair(t)
		resetBy(t, sv)
		b := make([]byte, 16)
		var err error
		if raw {
			_, err = newRawReader(cl).readNet(b)
		} else {
			_, err = cl.Read(b)
		}
		errs[0] = err
		cl2, sv2 := tcpPair(t)
		resetBy(t, sv2)
		// The first write after a reset may be taken (and answered by
		// another reset); write until the socket fails.
		for range 100 {
			if raw {
				_, err = newRawWriter(cl2).writeNet(b)
			} else {
				_, err = cl2.Write(b)
			}
			if err != nil {
				break
			}
		}
		errs[1] = err
	}
	for i, what := range []string{"read", "write"} {
		want, got := viaNet[i], viaRaw[i]
		if want == nil || got == nil {
			t.Fatalf("%s after a reset: net.Conn %v, raw %v", what, want, got)
		}
		wantText := strings.NewReplacer(addrsOf(want)...).Replace(want.Error())
		gotText := strings.NewReplacer(addrsOf(got)...).Replace(got.Error())
		if gotText != wantText {
			t.Errorf("%s after a reset: raw %q, net.Conn %q", what, gotText, wantText)
		}
		var oe *net.OpError
		var se *os.SyscallError
		if !errors.As(got, &oe) || oe.Op != what || !errors.As(got, &se) || se.Syscall != what {
			t.Errorf("%s after a reset: %#v is not an *net.OpError %q around the system call's error", what, got, what)
		}
	}
	// A closed socket: the poller's error, as net.Conn says it.
	cl, _ := tcpPair(t)
	rd, wr := newRawReader(cl), newRawWriter(cl)
	cl.Close()
	_, rerr := rd.readNet(make([]byte, 16))
	_, werr := wr.writeNet([]byte("x"))
	_, nerr := cl.Read(make([]byte, 16))
	_, nwerr := cl.Write([]byte("x"))
	if rerr == nil || werr == nil || rerr.Error() != nerr.Error() || werr.Error() != nwerr.Error() {
		t.Errorf("a closed socket: raw read %v, write %v; net.Conn read %v, write %v", rerr, werr, nerr, nwerr)
	}
	if !errors.Is(rerr, net.ErrClosed) || !errors.Is(werr, net.ErrClosed) {
		t.Errorf("a closed socket's errors are not net.ErrClosed: %v, %v", rerr, werr)
	}
	// The peer's close is io.EOF, unwrapped, as net.Conn's.
	cl, sv := tcpPair(t)
	sv.Close()
	if _, err := newRawReader(cl).readNet(make([]byte, 16)); err != io.EOF {
		t.Errorf("read after the peer's close: %v, want io.EOF", err)
	}
}

// addrsOf returns replacements of an error's addresses by placeholders,
// so that two pairs' errors compare.
func addrsOf(err error) []string {
	var oe *net.OpError
	if !errors.As(err, &oe) {
		return nil
	}
	var r []string
	if oe.Source != nil {
		r = append(r, oe.Source.String(), "LOCAL")
	}
	if oe.Addr != nil {
		r = append(r, oe.Addr.String(), "REMOTE")
	}
	return r
}
