//go:build unix

package conn

import (
	"net"
	"syscall"
)

// sysWriter makes non-blocking writes through the socket's RawConn. Its
// callback is bound once: a closure per write would be an allocation per
// write. The writer goroutine and a caller's inline write exclude each
// other (writer.inWrite), so one sysWriter serves both.
type sysWriter struct {
	rc  syscall.RawConn
	fn  func(fd uintptr) bool
	b   []byte
	n   int
	err error // the write's own error (EAGAIN: the socket took nothing)
	// direct: the socket is non-blocking, so a write of at most
	// directMax bytes is made directly (sysio_linux.go).
	direct bool
	now    bool // the write in progress may be direct
}

// newRawWriter returns a rawWriter for a TCP connection, nil for anything
// else (TLS, a pipe).
func newRawWriter(nc net.Conn) rawWriter {
	rc := tcpRawConn(nc)
	if rc == nil {
		return nil
	}
	w := &sysWriter{rc: rc, direct: directIO && nonBlocking(rc)}
	w.fn = w.write
	return w
}

func (w *sysWriter) write(fd uintptr) bool {
	if w.now && len(w.b) <= directMax {
		w.n, w.err = directWrite(fd, w.b)
	} else {
		w.n, w.err = syscall.Write(int(fd), w.b)
	}
	return true // one attempt: never wait for the socket
}

// tryWrite writes what the socket takes of b at once: errWouldBlock when
// it takes nothing.
func (w *sysWriter) tryWrite(b []byte, direct bool) (int, error) {
	w.b, w.now = b, direct && w.direct
	err := w.rc.Write(w.fn)
	n, werr := w.n, w.err
	w.b, w.err = nil, nil
	if err != nil {
		return 0, err
	}
	switch {
	case werr == syscall.EAGAIN || werr == syscall.EINTR:
		return 0, errWouldBlock
	case werr != nil:
		return 0, werr
	}
	return n, nil
}

// tcpRawConn is a TCP connection's RawConn, nil for anything else (TLS, a
// pipe): the raw reads, writes and peeks are for plain TCP only.
func tcpRawConn(nc net.Conn) syscall.RawConn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
