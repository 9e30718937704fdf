//go:build !unix

package conn

import "net"

// rawReader: on this platform the read role is never lent.
type rawReader struct{}

func newRawReader(net.Conn) *rawReader { return nil }

func (*rawReader) read([]byte) (int, error) { panic("conn: no raw reads on this platform") }

func (*rawReader) tryRead([]byte) (int, error) { panic("conn: no raw reads on this platform") }

func (*rawReader) readNet([]byte) (int, error) { panic("conn: no raw reads on this platform") }
