//go:build linux

package mockcluster

import (
	"net"
	"syscall"
)

// pauseListener stops a listener accepting without giving up its port:
// shutdown(2) on a listening socket takes it out of the LISTEN state (new
// connections are refused, a blocked Accept fails) while the socket stays
// bound, so no outgoing connection can take the port as its ephemeral port
// before Restart listens again. It reports false when that did not work;
// the caller then closes the listener.
func pauseListener(ln *net.TCPListener) bool {
	rc, err := ln.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Shutdown(int(fd), syscall.SHUT_RD) }); err != nil || serr != nil {
		return false
	}
	return true
}

// resumeListener makes a paused listener listen again.
func resumeListener(ln *net.TCPListener) error {
	rc, err := ln.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = syscall.Listen(int(fd), syscall.SOMAXCONN) }); err != nil {
		return err
	}
	return lerr
}
