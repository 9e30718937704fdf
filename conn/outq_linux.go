//go:build linux && (amd64 || 386 || arm || arm64 || riscv64 || loong64 || s390x)

package conn

import (
	"net"
	"syscall"
	"unsafe"
)

// siocoutq is SIOCOUTQ (TIOCOUTQ): the bytes a TCP socket holds that the
// peer has not acknowledged, sent or not (tcp(7)). 0x5411 on the
// architectures of this file's build constraint; mips, ppc64 and sparc64
// number it otherwise and use outq_other.go.
const siocoutq = 0x5411

// socketUnsent returns a reader of the unacknowledged byte count of the TCP
// socket under nc (under TLS too), nil when there is no such socket (a
// pipe, a DialContext's own connection type). The reader is the monitor's:
// it is called at most once per health check, under the connection's lock,
// never per request.
func socketUnsent(nc net.Conn) func() (int, bool) {
	rc := tcpRawConn(underlyingConn(nc))
	if rc == nil {
		return nil
	}
	var n int32
	var errno syscall.Errno
	ioctl := func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, siocoutq, uintptr(unsafe.Pointer(&n)))
	}
	return func() (int, bool) {
		if err := rc.Control(ioctl); err != nil || errno != 0 {
			return 0, false
		}
		return int(n), true
	}
}
