//go:build !linux

package mockcluster

import (
	"errors"
	"net"
)

// pauseListener cannot keep the port without listening on this platform:
// the caller closes the listener and Restart binds the port again (which
// fails if something took it meanwhile).
func pauseListener(*net.TCPListener) bool { return false }

func resumeListener(*net.TCPListener) error { return errors.ErrUnsupported }
