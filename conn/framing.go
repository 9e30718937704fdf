package conn

import (
	"fmt"

	"github.com/kvwire/kvwire/memdx"
)

// checkFollowing checks what was read after a packet, before the packet is
// delivered. A body length that claims more than the server wrote for it
// swallows the start of what comes next (the next response's header and
// part of its value), and the bytes after the claimed end are then the
// middle of something: the next step of the read loop would find them no
// header and close the connection, but only after the packet, with the
// foreign bytes appended to its value, had been delivered. Checked here,
// the connection closes first and the packet's request ends with the
// connection's error (a read is retried, a write is ambiguous), never with
// a value that is not its own. Except when the header's one fault is a body
// over Options.MaxBodyLength and it answers a request in flight that the
// packet does not end (Conn.boundaryProven): the header is then where the
// packet says it ends, the packet is delivered, and the connection closes
// at the header, the next step.
//
// It checks only what the read loop checks next anyway (a magic a server
// sends; with a whole header, the header as memdx.PacketSize checks it), so
// it closes no connection that would have stayed open: a stray answer
// after a response is a header, and is dropped as before. It costs one
// header check per packet followed by more bytes in the same read. When
// nothing follows the packet in the buffer, nothing can be checked without
// waiting for the next read, which would hold back every response that
// ends a read (the last one in flight may have no successor for as long as
// the connection lives): the packet is delivered, and a lie that ends
// exactly at the end of a read closes the connection at the next read,
// after its value went out.
func checkFollowing(b []byte, maxBody uint32) *ProtocolError {
	if len(b) == 0 {
		return nil
	}
	switch memdx.Magic(b[0]) {
	case memdx.MagicRes, memdx.MagicResExt, memdx.MagicServerReq:
	default:
		return &ProtocolError{What: fmt.Sprintf("the %d bytes read after a packet do not start a packet (magic 0x%02x): "+
			"its body length claims bytes that are not its own; it is not delivered", len(b), b[0])}
	}
	if len(b) >= memdx.HeaderSize {
		if _, err := memdx.PacketSize(b, maxBody); err != nil {
			pe := &ProtocolError{What: "the bytes read after a packet are not a packet header: " +
				"its body length claims bytes that are not its own; it is not delivered", Err: err, following: true}
			pe.answerTooLarge(b, err)
			return pe
		}
	}
	return nil
}
