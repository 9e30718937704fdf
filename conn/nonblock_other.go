//go:build unix && !linux

package conn

import "syscall"

// nonBlocking: direct calls are made on Linux only (sysio_linux.go).
func nonBlocking(syscall.RawConn) bool { return false }
