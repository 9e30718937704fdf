//go:build unix

package conn

import (
	"net"
	"syscall"
)

// sysWriter writes a TCP socket through its RawConn: a caller's inline
// write (tryWrite, one attempt) and the writer goroutine's (writeNet,
// which waits in the poller for room). Through RawConn its writes can be
// direct system calls (sysio_linux.go). Its callback is bound once: a
// closure per write would be an allocation per write. The writer
// goroutine and a caller's inline write exclude each other
// (writer.inWrite), so one sysWriter serves both.
type sysWriter struct {
	rc  syscall.RawConn
	fn  func(fd uintptr) bool
	b   []byte
	n   int
	err error // the write's own error (EAGAIN: the socket took nothing)
	// direct: the socket is non-blocking, so a write of at most
	// directMax bytes is made directly (sysio_linux.go).
	direct bool
	wait   bool // the write in progress waits for room (writeNet)
	// laddr, raddr: the socket's ends, for writeNet's errors.
	laddr, raddr net.Addr
}

// newRawWriter returns a rawWriter for a TCP connection, nil for anything
// else (TLS, a pipe).
func newRawWriter(nc net.Conn) rawWriter {
	rc := tcpRawConn(nc)
	if rc == nil {
		return nil
	}
	w := &sysWriter{rc: rc, direct: directIO && nonBlocking(rc), laddr: nc.LocalAddr(), raddr: nc.RemoteAddr()}
	w.fn = w.write
	return w
}

// write makes one write; writeNet's waits (false on EAGAIN: RawConn
// waits for the socket to be writable, and calls it again), tryWrite's
// do not.
func (w *sysWriter) write(fd uintptr) bool {
	for {
		if w.direct && len(w.b) <= directMax {
			w.n, w.err = directWrite(fd, w.b)
		} else {
			w.n, w.err = syscall.Write(int(fd), w.b)
		}
		if !w.wait {
			return true // one attempt: never wait for the socket
		}
		if w.err != syscall.EINTR {
			return w.err != syscall.EAGAIN
		}
	}
}

// writeNet is the writer goroutine's write: it waits until the socket
// takes some of b (a part: the writer writes the rest next), with the
// errors net.Conn's Write returns (an *net.OpError "write" around the
// system call's error or the poller's: a closed socket).
func (w *sysWriter) writeNet(b []byte) (int, error) {
	w.b, w.wait = b, true
	err := w.rc.Write(w.fn)
	n, werr := w.n, w.err
	w.b, w.n, w.err, w.wait = nil, 0, nil, false
	if err == nil && werr == nil {
		return n, nil
	}
	if err == nil {
		err = werr
	}
	return 0, netError("write", err, w.laddr, w.raddr)
}

// tryWrite writes what the socket takes of b at once: errWouldBlock when
// it takes nothing.
func (w *sysWriter) tryWrite(b []byte) (int, error) {
	w.b = b
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
