//go:build linux

package faultnode

import (
	"fmt"
	"net"
	"syscall"
	"time"
)

// SynHole is an address on 127.0.0.1 whose SYNs are dropped: a connection
// to it neither connects nor is refused; the kernel sends its SYN again
// (after 1, 3, 7 s ...) until the dialer gives up, as behind a firewall
// that drops packets or across a network partition. It is a listening
// socket with an accept queue of one, filled by a connection of its own
// that is never accepted: Linux drops a SYN that arrives at a listener
// whose accept queue is full. Nothing is ever sent or received on it.
type SynHole struct {
	fd     int
	filler net.Conn
	addr   string
}

// NewSynHole opens a SynHole.
func NewSynHole() (*SynHole, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("faultnode: SynHole: socket: %w", err)
	}
	h := &SynHole{fd: fd}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		h.Close()
		return nil, fmt.Errorf("faultnode: SynHole: bind: %w", err)
	}
	if err := syscall.Listen(fd, 0); err != nil { // an accept queue of one
		h.Close()
		return nil, fmt.Errorf("faultnode: SynHole: listen: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("faultnode: SynHole: getsockname: %w", err)
	}
	h.addr = fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// The filler connects (the kernel completes the handshake into the
	// queue) and fills it; no one accepts it.
	if h.filler, err = net.DialTimeout("tcp", h.addr, 10*time.Second); err != nil {
		h.Close()
		return nil, fmt.Errorf("faultnode: SynHole: filling the accept queue: %w", err)
	}
	return h, nil
}

// Addr is the address whose SYNs are dropped ("127.0.0.1:port").
func (h *SynHole) Addr() string { return h.addr }

// Close closes the listening socket and its filler.
func (h *SynHole) Close() {
	if h.filler != nil {
		_ = h.filler.Close()
	}
	_ = syscall.Close(h.fd)
}
