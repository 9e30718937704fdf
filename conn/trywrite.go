package conn

import "errors"

// errWouldBlock: the socket took nothing without blocking.
var errWouldBlock = errors.New("write would block")

// rawWriter makes one non-blocking write on a socket (writeInline).
type rawWriter interface {
	tryWrite(b []byte) (int, error)
}
