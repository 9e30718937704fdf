package conn

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// A connection reset by the server fails the connection with the same
// error whoever reads the socket: the reader goroutine (readNet), a
// borrower reading for its request (readFor), or a borrower's catch-up
// read before it writes (catchUp, tryRead): the same text (addresses
// aside), an *net.OpError "read" around the system call's error, as
// net.Conn's Read returns. The callers' errors differ only in Written:
// the catch-up fails its request before it is written.
func TestBorrowedReadErrorsAreTheReaders(t *testing.T) {
	paths := []string{"reader goroutine", "borrower", "catch-up"}
	errs := make([]error, len(paths))
	for i, path := range paths {
		fc := newFakeClock()
		got, reset := make(chan struct{}), make(chan struct{})
		c := dialTCP(t, Options{clock: fc, ProbeAfter: -1}, func(p *peer) {
			r := p.read()
			p.write(ok(r, "first"))
			if path != "catch-up" {
				p.read() // held
				close(got)
			}
			<-reset
			resetBy(t, p.nc.(*net.TCPConn))
		})
		if r := doGet(context.Background(), c, "first"); r.err != nil {
			t.Fatal(r.err)
		}
		waitLent(t, c)
		var r result
		switch path {
		case "reader goroutine":
			// The role taken back after lendFor: the reader goroutine
			// reads for the next request.
			waitFor(t, "the lend timer", func() bool { return fc.armedWithin(lendFor) })
			fc.Advance(lendFor)
			waitFor(t, "the role back", func() bool { role, _ := c.roleState(); return role == roleReader })
			fallthrough
		case "borrower":
			out := goGet(context.Background(), c, "held")
			recv(t, got)
			if role, _ := c.roleState(); (role == roleBorrowed) != (path == "borrower") {
				t.Fatalf("%s: role %d while held waits", path, role)
			}
			close(reset)
			r = recv(t, out)
		case "catch-up":
			close(reset)
			waitFor(t, "the reset to reach the client's socket", func() bool { return tcpClosed(t, c.nc) })
			fc.Advance(catchUpAfter)
			r = doGet(context.Background(), c, "second")
		}
		recv(t, c.Done())
		re := requestError(t, r.err)
		if re.Written != (path != "catch-up") || !errors.Is(r.err, syscall.ECONNRESET) {
			t.Fatalf("%s: %+v (written %v); want the reset, written unless caught up", path, r, re.Written)
		}
		if !errors.Is(r.err, c.Err()) {
			t.Fatalf("%s: the caller's %v does not wrap the connection's %v", path, r.err, c.Err())
		}
		var oe *net.OpError
		var se *os.SyscallError
		if !errors.As(c.Err(), &oe) || oe.Op != "read" || !errors.As(c.Err(), &se) || se.Syscall != "read" {
			t.Errorf("%s: %#v is not an *net.OpError \"read\" around the system call's error", path, c.Err())
		}
		errs[i] = c.Err()
	}
	text := func(err error) string { return strings.NewReplacer(addrsOf(err)...).Replace(err.Error()) }
	for i := 1; i < len(paths); i++ {
		if got, want := text(errs[i]), text(errs[0]); got != want {
			t.Errorf("%s: %q; the reader goroutine's: %q", paths[i], got, want)
		}
	}
}

// tcpClosed reports whether the socket's TCP state is CLOSE (a reset
// received), without reading: a read, even a peek, would take the error.
func tcpClosed(t *testing.T, nc net.Conn) bool {
	rc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var state uint8
	if err := rc.Control(func(fd uintptr) {
		var info [256]byte // struct tcp_info, whose first byte is tcpi_state
		size := uint32(len(info))
		_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&size)), 0)
		if e == 0 {
			state = info[0]
		}
	}); err != nil {
		t.Fatal(err)
	}
	return state == 7 // TCP_CLOSE
}
