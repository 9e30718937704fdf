//go:build unix

package conn

import (
	"net"
	"syscall"
)

// idlePeeker looks at a TCP socket's receive queue without reading it.
type idlePeeker struct {
	rc syscall.RawConn
	b  [1]byte
	n  int
	// err is the peek's: syscall.EAGAIN when nothing is there.
	err error
	f   func(fd uintptr) bool // peek, bound once: RawConn.Read allocates no closure
}

// newIdlePeeker returns a peeker for a TCP connection, nil for anything
// else (TLS, whose records the socket holds are not the server's answer;
// a pipe).
func newIdlePeeker(nc net.Conn) *idlePeeker {
	rc := tcpRawConn(nc)
	if rc == nil {
		return nil
	}
	p := &idlePeeker{rc: rc}
	p.f = p.peek
	return p
}

func (p *idlePeeker) peek(fd uintptr) bool {
	p.n, _, p.err = syscall.Recvfrom(int(fd), p.b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true // one attempt: never wait for the socket
}

// waiting reports what the socket holds unread: data (some bytes wait),
// ended (the peer closed it, or it failed: err says how), or neither.
// One non-blocking recv with MSG_PEEK: nothing is taken from the socket.
func (p *idlePeeker) waiting() (data, ended bool, err error) {
	if err := p.rc.Read(p.f); err != nil {
		return false, true, err
	}
	switch {
	case p.err == syscall.EAGAIN || p.err == syscall.EWOULDBLOCK || p.err == syscall.EINTR:
		return false, false, nil
	case p.err != nil:
		return false, true, p.err
	case p.n == 0:
		return false, true, nil // the server closed it
	}
	return true, false, nil
}
