package conn

import "errors"

// errWouldBlock: the socket took nothing without blocking.
var errWouldBlock = errors.New("write would block")

// rawWriter makes one non-blocking write on a socket (writeInline);
// direct: the write may be a direct system call (sysio_linux.go).
type rawWriter interface {
	tryWrite(b []byte, direct bool) (int, error)
}
