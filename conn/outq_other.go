//go:build !linux

package conn

import "net"

// socketUnsent: only Linux tells the unacknowledged byte count
// (outq_linux.go); elsewhere the health check goes by the bytes read and
// written alone.
func socketUnsent(net.Conn) func() (int, bool) { return nil }
