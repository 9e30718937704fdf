package memdx

import "fmt"

// Magic is the first byte of every packet: it says who sent the packet and
// how the header is laid out.
type Magic uint8

// The magics of kv_engine's docs/BinaryProtocol.md.
const (
	// MagicReq is a classic client request.
	MagicReq Magic = 0x80
	// MagicRes is a classic server response.
	MagicRes Magic = 0x81
	// MagicReqExt is a client request with flexible framing extras (the
	// "alternative request" of HELLO feature AltRequestSupport).
	MagicReqExt Magic = 0x08
	// MagicResExt is a server response with flexible framing extras.
	MagicResExt Magic = 0x18
	// MagicServerReq is a request the server sends to the client (duplex).
	MagicServerReq Magic = 0x82
	// MagicServerRes is the client's response to a server request.
	MagicServerRes Magic = 0x83
)

// Valid reports whether m is one of the six magics.
func (m Magic) Valid() bool {
	switch m {
	case MagicReq, MagicRes, MagicReqExt, MagicResExt, MagicServerReq, MagicServerRes:
		return true
	}
	return false
}

// IsRequest reports whether a packet with this magic is a request (the header
// carries a vbucket) rather than a response (the header carries a status).
func (m Magic) IsRequest() bool {
	return m == MagicReq || m == MagicReqExt || m == MagicServerReq
}

// IsResponse reports whether a packet with this magic is a response.
func (m Magic) IsResponse() bool {
	return m == MagicRes || m == MagicResExt || m == MagicServerRes
}

// IsServerInitiated reports whether the magic belongs to the server-initiated
// exchange (0x82/0x83), whose opcodes are ServerOpCodes.
func (m Magic) IsServerInitiated() bool {
	return m == MagicServerReq || m == MagicServerRes
}

// HasFramingExtras reports whether header byte 2 is the framing-extras length
// (and byte 3 a one-byte key length) for this magic.
func (m Magic) HasFramingExtras() bool {
	return m == MagicReqExt || m == MagicResExt
}

func (m Magic) String() string {
	switch m {
	case MagicReq:
		return "REQ"
	case MagicRes:
		return "RES"
	case MagicReqExt:
		return "REQ_EXT"
	case MagicResExt:
		return "RES_EXT"
	case MagicServerReq:
		return "SERVER_REQ"
	case MagicServerRes:
		return "SERVER_RES"
	}
	return fmt.Sprintf("MAGIC(0x%02x)", uint8(m))
}
