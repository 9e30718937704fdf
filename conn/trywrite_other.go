//go:build !unix

package conn

import (
	"errors"
	"net"
)

var errWouldBlock = errors.New("write would block")

type rawWriter interface {
	tryWrite(b []byte) (int, error)
}

// newRawWriter: only the writer goroutine writes on this platform.
func newRawWriter(net.Conn) rawWriter { return nil }
