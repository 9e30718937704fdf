//go:build !(linux && (amd64 || 386 || arm || arm64 || riscv64 || loong64 || s390x))

package conn

import "net"

// socketUnsent: only Linux tells the unacknowledged byte count
// (outq_linux.go, on the architectures where SIOCOUTQ is 0x5411); elsewhere the health check goes by the bytes read and
// written alone.
func socketUnsent(net.Conn) func() (int, bool) { return nil }
