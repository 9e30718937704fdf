package client

import (
	"net"
	"syscall"
	"testing"
	"unsafe"
)

// unacked is how many bytes nc (a TCP connection) has sent that its peer
// has not acknowledged (SIOCOUTQ): 0 once what was written has reached the
// peer's socket.
func unacked(t *testing.T, nc net.Conn) int {
	t.Helper()
	rc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil {
		t.Fatal(err)
	}
	if errno != 0 {
		t.Fatalf("SIOCOUTQ: %v", errno)
	}
	return int(n)
}
