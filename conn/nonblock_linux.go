//go:build linux

package conn

import "syscall"

// nonBlocking reports whether rc's socket is in non-blocking mode, which
// direct calls need. A socket of package net is; one a caller's
// DialContext made blocking is read and written the usual way.
func nonBlocking(rc syscall.RawConn) bool {
	ok := false
	err := rc.Control(func(fd uintptr) {
		fl, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		ok = e == 0 && fl&syscall.O_NONBLOCK != 0
	})
	return err == nil && ok
}
