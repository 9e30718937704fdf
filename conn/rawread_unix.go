//go:build unix

package conn

import (
	"io"
	"net"
	"os"
	"syscall"
)

// rawReader reads a TCP socket through its RawConn, for whoever holds the
// read role (readrole.go): the reader goroutine (readNet) or a caller that
// borrowed it (read, tryRead). Through RawConn its reads can be direct
// system calls (sysio_linux.go), and still wait in the poller when the
// socket has nothing; a read deadline ends them as net.Conn's. Its
// callback is bound once (a closure per read would be an allocation per
// read); the read role makes its reads exclusive.
type rawReader struct {
	rc   syscall.RawConn
	fn   func(fd uintptr) bool
	b    []byte
	n    int
	err  error
	once bool // tryRead: one attempt, no wait
	// direct: the socket is non-blocking, so a read of at most
	// directMax bytes is made directly (sysio_linux.go).
	direct bool
	// laddr, raddr: the socket's ends, for errors as net.Conn's
	// (readNet, tryRead).
	laddr, raddr net.Addr
}

// newRawReader returns a rawReader for a TCP connection, nil for anything
// else (TLS, a pipe): on those the read role is never lent.
func newRawReader(nc net.Conn) *rawReader {
	rc := tcpRawConn(nc)
	if rc == nil {
		return nil
	}
	r := &rawReader{rc: rc, direct: directIO && nonBlocking(rc), laddr: nc.LocalAddr(), raddr: nc.RemoteAddr()}
	r.fn = r.readFD
	return r
}

// readFD makes one read; false (EAGAIN) has RawConn wait for the socket
// to be readable, and call it again.
func (r *rawReader) readFD(fd uintptr) bool {
	for {
		if r.direct && len(r.b) <= directMax {
			r.n, r.err = directRead(fd, r.b)
		} else {
			r.n, r.err = syscall.Read(int(fd), r.b)
		}
		if r.err != syscall.EINTR {
			return r.once || r.err != syscall.EAGAIN
		}
	}
}

// tryRead is read without the wait: errWouldBlock when nothing is there,
// other errors as readNet's.
func (r *rawReader) tryRead(b []byte) (int, error) {
	r.once = true
	n, err := r.read(b)
	r.once = false
	if err == syscall.EAGAIN {
		return 0, errWouldBlock
	}
	if err != nil && err != io.EOF {
		err = netError("read", err, r.laddr, r.raddr)
	}
	return n, err
}

// read reads into b, waiting until the socket has bytes, its end, or an
// error (the read deadline passing: os.ErrDeadlineExceeded).
func (r *rawReader) read(b []byte) (int, error) {
	r.b = b
	err := r.rc.Read(r.fn)
	n, rerr := r.n, r.err
	r.b, r.n, r.err = nil, 0, nil
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readNet is read for the reader goroutine, with the errors net.Conn's
// Read returns: an *net.OpError "read" around the system call's error or
// the poller's (a closed socket, a deadline), io.EOF as it is.
func (r *rawReader) readNet(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil // as net.Conn's: nothing read is not the end
	}
	n, err := r.read(b)
	if err != nil && err != io.EOF {
		err = netError("read", err, r.laddr, r.raddr)
	}
	return n, err
}

// netError wraps err, the error of a RawConn's Read or Write or of the
// system call it made, as net.Conn's Read or Write (op) would have: an
// *net.OpError op around the poller's error (a closed socket, a deadline
// passed) or the system call's (*os.SyscallError).
func netError(op string, err error, laddr, raddr net.Addr) error {
	if oe, ok := err.(*net.OpError); ok { // RawConn's "raw-read", "raw-write"
		e := *oe
		e.Op = op
		return &e
	}
	if errno, ok := err.(syscall.Errno); ok {
		err = os.NewSyscallError(op, errno)
	}
	return &net.OpError{Op: op, Net: "tcp", Source: laddr, Addr: raddr, Err: err}
}
