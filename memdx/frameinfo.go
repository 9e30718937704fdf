package memdx

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Frame infos are the elements of the flexible framing extras. Each starts
// with a byte whose high nibble is the id and low nibble the length of its
// data; a nibble of 15 is an escape, and the real value is 15 plus the next
// byte (the id's escape byte comes before the length's). Ids and lengths go up
// to 15+255 = 270.
const maxFrameField = 15 + math.MaxUint8

// RequestFrameID identifies a frame info in a request (magic 0x08).
type RequestFrameID uint16

// Request frame info ids (kv_engine docs/BinaryProtocol.md, "Request header
// with flexible framing extras").
const (
	// FrameBarrier (no data) orders the command on a connection that
	// negotiated UnorderedExecution: the server finishes every earlier
	// command before starting it, and starts no later one until it is done.
	FrameBarrier RequestFrameID = 0
	// FrameDurability carries a durability level and optional timeout.
	FrameDurability RequestFrameID = 1
	// FrameDcpStreamID carries a DCP stream id (2 bytes).
	FrameDcpStreamID RequestFrameID = 2
	// FrameOpenTracingContext carries a tracing context (non-empty) that the
	// server stores with the request; kv_engine still defines it.
	FrameOpenTracingContext RequestFrameID = 3
	// FrameImpersonateUser runs the command as the named user.
	FrameImpersonateUser RequestFrameID = 4
	// FramePreserveTTL keeps the document's expiry on a mutation (no data).
	FramePreserveTTL RequestFrameID = 5
	// FrameImpersonateUserExtraPrivilege adds a privilege to an impersonated
	// user's set.
	FrameImpersonateUserExtraPrivilege RequestFrameID = 6
	// FrameImpersonateTokenAuthID impersonates the user of a registered auth
	// token (a 2-byte token id).
	FrameImpersonateTokenAuthID RequestFrameID = 7
)

// ResponseFrameID identifies a frame info in a response (magic 0x18).
type ResponseFrameID uint16

// Response frame info ids.
const (
	// FrameServerDuration is the time the server spent on the request,
	// 2 bytes in its variable-precision encoding (DecodeServerDuration).
	FrameServerDuration ResponseFrameID = 0
	// FrameReadUnits is the read units the command used (2 bytes).
	FrameReadUnits ResponseFrameID = 1
	// FrameWriteUnits is the write units the command used (2 bytes).
	FrameWriteUnits ResponseFrameID = 2
	// FrameThrottleDuration is the time the command was throttled, 2 bytes
	// in the same encoding as FrameServerDuration.
	FrameThrottleDuration ResponseFrameID = 3
)

// AppendFrameInfo appends one frame info with the given id and data.
func AppendFrameInfo(dst []byte, id uint16, data []byte) ([]byte, error) {
	if id > maxFrameField {
		return dst, badRequest("frame info id", "%d exceeds %d", id, maxFrameField)
	}
	if len(data) > maxFrameField {
		return dst, badRequest("frame info length", "%d bytes exceed %d", len(data), maxFrameField)
	}
	var hdr [3]byte
	n := 1
	idNib, lenNib := byte(id), byte(len(data))
	if id >= 15 {
		idNib = 15
		hdr[n] = byte(id - 15)
		n++
	}
	if len(data) >= 15 {
		lenNib = 15
		hdr[n] = byte(len(data) - 15)
		n++
	}
	hdr[0] = idNib<<4 | lenNib
	dst = append(dst, hdr[:n]...)
	return append(dst, data...), nil
}

// NextFrameInfo decodes the frame info at the start of b and returns its id,
// its data (aliasing b) and the rest of b.
func NextFrameInfo(b []byte) (id uint16, data, rest []byte, err error) {
	if len(b) == 0 {
		return 0, nil, nil, malformed("frame info", "header", "empty input")
	}
	id = uint16(b[0] >> 4)
	l := int(b[0] & 0x0f)
	off := 1
	if id == 15 {
		if len(b) <= off {
			return 0, nil, nil, malformed("frame info", "id", "escape byte missing")
		}
		id += uint16(b[off])
		off++
	}
	if l == 15 {
		if len(b) <= off {
			return 0, nil, nil, malformed("frame info", "length", "escape byte missing")
		}
		l += int(b[off])
		off++
	}
	if len(b)-off < l {
		return 0, nil, nil, malformed("frame info", "length",
			"id %d says %d bytes of data but only %d remain", id, l, len(b)-off)
	}
	return id, b[off : off+l : off+l], b[off+l:], nil
}

// FrameInfos calls fn for each frame info in framing extras, in order,
// stopping at the first error (from decoding or from fn).
func FrameInfos(framing []byte, fn func(id uint16, data []byte) error) error {
	for len(framing) > 0 {
		id, data, rest, err := NextFrameInfo(framing)
		if err != nil {
			return err
		}
		if err := fn(id, data); err != nil {
			return err
		}
		framing = rest
	}
	return nil
}

// DurabilityLevel is the level of a synchronous write.
type DurabilityLevel uint8

// Durability levels.
const (
	DurabilityNone                       DurabilityLevel = 0
	DurabilityMajority                   DurabilityLevel = 1
	DurabilityMajorityAndPersistOnMaster DurabilityLevel = 2
	DurabilityPersistToMajority          DurabilityLevel = 3
)

func (l DurabilityLevel) String() string {
	switch l {
	case DurabilityNone:
		return "none"
	case DurabilityMajority:
		return "majority"
	case DurabilityMajorityAndPersistOnMaster:
		return "majorityAndPersistActive"
	case DurabilityPersistToMajority:
		return "persistToMajority"
	}
	return fmt.Sprintf("DurabilityLevel(%d)", uint8(l))
}

// AppendDurabilityFrame appends a durability-requirement frame info. A
// timeout of 0 leaves it out (the server's default applies); 0xffff is
// reserved by the protocol and refused.
func AppendDurabilityFrame(dst []byte, level DurabilityLevel, timeoutMillis uint16) ([]byte, error) {
	if level < DurabilityMajority || level > DurabilityPersistToMajority {
		return dst, badRequest("durability level", "%d is not a durability level", level)
	}
	if timeoutMillis == math.MaxUint16 {
		return dst, badRequest("durability timeout", "0xffff is reserved")
	}
	if timeoutMillis == 0 {
		return append(dst, byte(FrameDurability)<<4|1, byte(level)), nil
	}
	return append(dst, byte(FrameDurability)<<4|3, byte(level), byte(timeoutMillis>>8), byte(timeoutMillis)), nil
}

// DecodeDurabilityFrame decodes a durability frame info's data (1 or 3 bytes).
func DecodeDurabilityFrame(data []byte) (DurabilityLevel, uint16, error) {
	if len(data) != 1 && len(data) != 3 {
		return 0, 0, malformed("durability frame info", "length", "%d bytes, want 1 or 3", len(data))
	}
	level := DurabilityLevel(data[0])
	if level < DurabilityMajority || level > DurabilityPersistToMajority {
		return 0, 0, malformed("durability frame info", "level", "%d is not a durability level", data[0])
	}
	var timeout uint16
	if len(data) == 3 {
		timeout = binary.BigEndian.Uint16(data[1:])
		if timeout == 0 || timeout == math.MaxUint16 {
			return 0, 0, malformed("durability frame info", "timeout", "%d is reserved", timeout)
		}
	}
	return level, timeout, nil
}

// maxServerDurationMicros is the longest duration the server-duration
// frame info carries: kv_engine's Tracer::encodeMicros clamps to it
// (2 minutes 125042 microseconds), which encodes as 0xffff.
const maxServerDurationMicros = 120125042

// EncodeServerDuration encodes a duration the way kv_engine's
// Tracer::encodeMicros does (docs/BinaryProtocol.md, "ID:0 - Server
// Recv->Send duration"): whole microseconds, clamped to 120125042, then
// encoded = round((micros*2)^(1/1.74)). A negative duration encodes as 0.
func EncodeServerDuration(d time.Duration) uint16 {
	micros := d.Microseconds()
	if micros <= 0 {
		return 0
	}
	micros = min(micros, maxServerDurationMicros)
	return uint16(math.Round(math.Pow(float64(micros*2), 1/1.74)))
}

// DecodeServerDuration decodes the server duration frame info's value as
// kv_engine's Tracer::decodeMicros does: micros = encoded^1.74 / 2,
// truncated to whole microseconds.
func DecodeServerDuration(encoded uint16) time.Duration {
	micros := uint64(math.Pow(float64(encoded), 1.74) / 2)
	return time.Duration(micros) * time.Microsecond
}

// serverDurationFrameLen is the size of a server-duration frame info: its
// header byte (id 0, length 2) and the 2-byte value.
const serverDurationFrameLen = 3

// AppendServerDurationFrame appends a server-duration frame info (id 0,
// 2 bytes) carrying d, as the server puts it first in a response's framing
// extras when the connection negotiated HELLO Tracing.
func AppendServerDurationFrame(dst []byte, d time.Duration) []byte {
	v := EncodeServerDuration(d)
	return append(dst, byte(FrameServerDuration)<<4|2, byte(v>>8), byte(v))
}

// ServerDuration finds the first server-duration frame info in a response's
// framing extras. It reports false when there is none; frame infos after it
// are not checked.
func ServerDuration(framing []byte) (time.Duration, bool, error) {
	v, ok, err := serverDurationEncoded(framing)
	if !ok {
		return 0, false, err
	}
	return DecodeServerDuration(v), true, nil
}

// serverDurationEncoded is ServerDuration without the decoding: the frame
// info's 2-byte value.
func serverDurationEncoded(framing []byte) (uint16, bool, error) {
	// The server writes the duration first (kv_engine's
	// formatResponseHeaders): read it without walking the list.
	if len(framing) >= serverDurationFrameLen && framing[0] == byte(FrameServerDuration)<<4|2 {
		return binary.BigEndian.Uint16(framing[1:]), true, nil
	}
	for len(framing) > 0 {
		id, data, rest, err := NextFrameInfo(framing)
		if err != nil {
			return 0, false, err
		}
		if ResponseFrameID(id) == FrameServerDuration {
			if len(data) != 2 {
				return 0, false, malformed("server duration frame info", "length", "%d bytes, want 2", len(data))
			}
			return binary.BigEndian.Uint16(data), true, nil
		}
		framing = rest
	}
	return 0, false, nil
}

// ServerDuration returns the time the server spent on the request this
// response answers, from its server-duration frame info (kv_engine sends
// one in every response on a connection that negotiated HELLO Tracing). It
// reports false for a request, a response without one, or framing extras
// that do not decode (the function ServerDuration says what was wrong). It
// allocates nothing.
func (p *Packet) ServerDuration() (time.Duration, bool) {
	v, ok := p.ServerDurationEncoded()
	if !ok {
		return 0, false
	}
	return DecodeServerDuration(v), true
}

// ServerDurationEncoded is ServerDuration without the decoding: the frame
// info's 2-byte value, which DecodeServerDuration turns into the duration.
// Decoding costs a floating-point power (tens of nanoseconds); a response
// handler on a connection's reader keeps the value and leaves the decoding
// to whoever wants the duration. It allocates nothing.
func (p *Packet) ServerDurationEncoded() (uint16, bool) {
	if p.Magic != MagicResExt || len(p.FramingExtras) == 0 {
		return 0, false
	}
	v, ok, err := serverDurationEncoded(p.FramingExtras)
	return v, ok && err == nil
}
