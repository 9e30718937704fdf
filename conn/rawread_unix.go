//go:build unix

package conn

import (
	"io"
	"net"
	"syscall"
)

// rawReader reads a TCP socket through its RawConn for a caller that
// borrowed the read role (readrole.go): net.Conn's Read would do as well,
// but the reader goroutine may be the next to read, and a borrower's read
// must be one that a read deadline ends. Its callback is bound once (a
// closure per read would be an allocation per read); the read role makes
// its reads exclusive.
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
}

// newRawReader returns a rawReader for a TCP connection, nil for anything
// else (TLS, a pipe): on those the read role is never lent.
func newRawReader(nc net.Conn) *rawReader {
	rc := tcpRawConn(nc)
	if rc == nil {
		return nil
	}
	r := &rawReader{rc: rc, direct: directIO && nonBlocking(rc)}
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

// tryRead is read without the wait: errWouldBlock when nothing is there.
func (r *rawReader) tryRead(b []byte) (int, error) {
	r.once = true
	n, err := r.read(b)
	r.once = false
	if err == syscall.EAGAIN {
		return 0, errWouldBlock
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
