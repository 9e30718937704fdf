//go:build unix

package conn

import (
	"net"
	"syscall"
)

type sysWriter struct{ rc syscall.RawConn }

// newRawWriter returns a rawWriter for a TCP connection, nil for anything
// else (TLS, a pipe), whose writes only the writer goroutine makes.
func newRawWriter(nc net.Conn) rawWriter {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return sysWriter{rc}
}

// tryWrite writes what the socket takes of b at once: errWouldBlock when
// it takes nothing.
func (w sysWriter) tryWrite(b []byte) (int, error) {
	var n int
	var werr error
	if err := w.rc.Write(func(fd uintptr) bool {
		n, werr = syscall.Write(int(fd), b)
		return true // one attempt: never wait for the socket
	}); err != nil {
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
