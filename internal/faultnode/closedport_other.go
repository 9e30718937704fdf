//go:build !linux

package faultnode

import (
	"fmt"
	"net"
)

// ClosedPort is an address on 127.0.0.1 that refuses connections. Off
// Linux it is a port listened on and closed again, which the next listener
// asking for any port may be given (see the Linux ClosedPort, which holds
// its port).
type ClosedPort struct{ addr string }

// NewClosedPort opens a ClosedPort.
func NewClosedPort() (*ClosedPort, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultnode: ClosedPort: %w", err)
	}
	p := &ClosedPort{addr: ln.Addr().String()}
	if err := ln.Close(); err != nil {
		return nil, fmt.Errorf("faultnode: ClosedPort: %w", err)
	}
	return p, nil
}

// Addr is the address that refuses connections ("127.0.0.1:port").
func (p *ClosedPort) Addr() string { return p.addr }

// Close does nothing: the port is not held.
func (p *ClosedPort) Close() {}
