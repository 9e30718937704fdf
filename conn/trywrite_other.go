//go:build !unix

package conn

import "net"

// newRawWriter: only the writer goroutine writes on this platform.
func newRawWriter(net.Conn) rawWriter { return nil }
