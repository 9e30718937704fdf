//go:build linux

package faultnode

import (
	"fmt"
	"syscall"
)

// ClosedPort is an address on 127.0.0.1 that refuses connections at once,
// as a node that is down does, for as long as it is open: a socket bound to
// the port that never listens. Holding the port (the socket is bound
// without SO_REUSEADDR) keeps any other socket, of this process or another,
// from binding it: a port merely opened and closed again may be handed to
// the next listener that asks for any port (a test's seed, another test's
// mock node), which then answers the connections meant to be refused.
type ClosedPort struct {
	fd   int
	addr string
}

// NewClosedPort opens a ClosedPort.
func NewClosedPort() (*ClosedPort, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("faultnode: ClosedPort: socket: %w", err)
	}
	p := &ClosedPort{fd: fd}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		p.Close()
		return nil, fmt.Errorf("faultnode: ClosedPort: bind: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("faultnode: ClosedPort: getsockname: %w", err)
	}
	p.addr = fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	return p, nil
}

// Addr is the address that refuses connections ("127.0.0.1:port").
func (p *ClosedPort) Addr() string { return p.addr }

// Close frees the port, which any socket may then bind.
func (p *ClosedPort) Close() { _ = syscall.Close(p.fd) }
