package conn

import "errors"

// errWouldBlock: the socket took nothing without blocking.
var errWouldBlock = errors.New("write would block")

// rawWriter makes one non-blocking write on a socket (writeInline), a
// direct system call where it can be (sysio_linux.go). writeNet: the writer goroutine's write, which waits for the socket to
// take some of b.
type rawWriter interface {
	tryWrite(b []byte) (int, error)
	writeNet(b []byte) (int, error)
}
