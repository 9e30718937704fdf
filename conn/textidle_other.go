//go:build !unix

package conn

import "net"

// idlePeeker: the idle check is not made on this platform.
type idlePeeker struct{}

func newIdlePeeker(net.Conn) *idlePeeker { return nil }

func (*idlePeeker) waiting() (data, ended bool, err error) { return false, false, nil }
