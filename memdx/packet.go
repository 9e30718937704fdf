package memdx

import (
	"encoding/binary"
	"math"
	"strconv"
)

// HeaderSize is the size of every packet header.
const HeaderSize = 24

// DefaultMaxBodyLength is the body limit decoders use when the caller passes
// 0: 20 MiB value (Couchbase's document limit) plus room for key, extras and
// framing extras.
const DefaultMaxBodyLength = 20<<20 + 1<<16

// Header is a decoded packet header. VbucketOrStatus is the vbucket of a
// request or the status of a response (see Magic.IsRequest).
type Header struct {
	Magic            Magic
	Opcode           uint8
	FramingExtrasLen uint8
	KeyLen           uint16
	ExtrasLen        uint8
	Datatype         Datatype
	VbucketOrStatus  uint16
	BodyLen          uint32
	Opaque           uint32
	Cas              uint64
}

// PacketLen is the total size of the packet: header plus body.
func (h *Header) PacketLen() int { return HeaderSize + int(h.BodyLen) }

// DecodeHeader decodes and checks the 24-byte header at the start of b.
//
// It rejects an unknown magic, a body longer than maxBody (0 means
// DefaultMaxBodyLength), and framing extras + extras + key that do not fit in
// the body. It returns ErrShortBuffer (wrapped) when b is shorter than 24
// bytes. The body itself need not be in b.
func DecodeHeader(b []byte, maxBody uint32) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, &shortError{need: HeaderSize, have: len(b)}
	}
	h.Magic = Magic(b[0])
	if !h.Magic.Valid() {
		return h, malformed("header", "magic", "0x%02x is not a memcached binary protocol magic", b[0])
	}
	h.Opcode = b[1]
	if h.Magic.HasFramingExtras() {
		h.FramingExtrasLen = b[2]
		h.KeyLen = uint16(b[3])
	} else {
		h.KeyLen = binary.BigEndian.Uint16(b[2:4])
	}
	h.ExtrasLen = b[4]
	h.Datatype = Datatype(b[5])
	h.VbucketOrStatus = binary.BigEndian.Uint16(b[6:8])
	h.BodyLen = binary.BigEndian.Uint32(b[8:12])
	h.Opaque = binary.BigEndian.Uint32(b[12:16])
	h.Cas = binary.BigEndian.Uint64(b[16:24])
	if maxBody == 0 {
		maxBody = DefaultMaxBodyLength
	}
	if h.BodyLen > maxBody {
		return h, bodyTooLarge(h.BodyLen, maxBody)
	}
	if fixed := uint32(h.FramingExtrasLen) + uint32(h.ExtrasLen) + uint32(h.KeyLen); fixed > h.BodyLen {
		field := "key length"
		switch {
		case uint32(h.FramingExtrasLen) > h.BodyLen:
			field = "framing extras length"
		case uint32(h.FramingExtrasLen)+uint32(h.ExtrasLen) > h.BodyLen:
			field = "extras length"
		}
		return h, malformed("header", field,
			"framing extras (%d) + extras (%d) + key (%d) exceed the body length (%d)",
			h.FramingExtrasLen, h.ExtrasLen, h.KeyLen, h.BodyLen)
	}
	return h, nil
}

// PacketSize returns the total size of the packet that starts at b, after
// checking its header as DecodeHeader does. A stream reader calls it once it
// has 24 bytes, then waits for that many.
func PacketSize(b []byte, maxBody uint32) (int, error) {
	h, err := DecodeHeader(b, maxBody)
	if err != nil {
		return 0, err
	}
	return h.PacketLen(), nil
}

// Packet is one decoded packet, or one to encode. Which of the overlapping
// fields count depends on Magic: OpCode for client magics, ServerOpCode for
// 0x82/0x83; Vbucket for requests, Status for responses.
//
// After DecodePacket the slices alias the decoded buffer.
type Packet struct {
	Magic        Magic
	OpCode       OpCode
	ServerOpCode ServerOpCode
	Datatype     Datatype
	Vbucket      uint16
	Status       Status
	Opaque       uint32
	Cas          uint64

	FramingExtras []byte
	Extras        []byte
	Key           []byte
	Value         []byte
}

// DecodePacket decodes the packet at the start of b and returns it with the
// number of bytes it took. It checks the header as DecodeHeader does and
// returns ErrShortBuffer (wrapped) when b ends before the packet does. The
// frame infos themselves are not parsed here; see FrameInfos.
func DecodePacket(b []byte, maxBody uint32) (Packet, int, error) {
	var p Packet
	n, err := DecodePacketInto(&p, b, maxBody)
	return p, n, err
}

// DecodePacketInto is DecodePacket decoding into *p (every field is set, or
// p is left as it was on an error): a reader that decodes packet after
// packet into one Packet copies none.
func DecodePacketInto(p *Packet, b []byte, maxBody uint32) (int, error) {
	h, err := DecodeHeader(b, maxBody)
	if err != nil {
		return 0, err
	}
	n := h.PacketLen()
	if len(b) < n {
		return 0, &shortError{need: n, have: len(b)}
	}
	p.Magic = h.Magic
	p.ServerOpCode, p.OpCode, p.Vbucket, p.Status = 0, 0, 0, 0
	if h.Magic.IsServerInitiated() {
		p.ServerOpCode = ServerOpCode(h.Opcode)
	} else {
		p.OpCode = OpCode(h.Opcode)
	}
	p.Datatype = h.Datatype
	if h.Magic.IsRequest() {
		p.Vbucket = h.VbucketOrStatus
	} else {
		p.Status = Status(h.VbucketOrStatus)
	}
	p.Opaque = h.Opaque
	p.Cas = h.Cas
	// Three-index slices: appending to one section can never overwrite the
	// next. Empty sections are nil.
	off := HeaderSize
	p.FramingExtras, off = section(b, off, int(h.FramingExtrasLen))
	p.Extras, off = section(b, off, int(h.ExtrasLen))
	p.Key, off = section(b, off, int(h.KeyLen))
	p.Value, _ = section(b, off, n-off)
	return n, nil
}

// section returns b[off:off+l] with its capacity capped, or nil when l is 0,
// and the offset after it.
func section(b []byte, off, l int) ([]byte, int) {
	if l == 0 {
		return nil, off
	}
	return b[off : off+l : off+l], off + l
}

// AppendPacket appends the encoding of p to dst.
//
// A classic magic (0x80/0x81) with framing extras is sent as its flexible
// framing twin (0x08/0x18); framing extras on a server-initiated magic, a key
// longer than its header field, or extras or framing extras over 255 bytes
// are errors.
func AppendPacket(dst []byte, p *Packet) ([]byte, error) {
	magic := p.Magic
	if len(p.FramingExtras) > 0 {
		switch magic {
		case MagicReq:
			magic = MagicReqExt
		case MagicRes:
			magic = MagicResExt
		case MagicReqExt, MagicResExt:
		default:
			return dst, badRequest("framing extras", "magic %s cannot carry framing extras", magic)
		}
	}
	if !magic.Valid() {
		return dst, badRequest("magic", "0x%02x is not a valid magic", uint8(magic))
	}
	op := uint8(p.OpCode)
	if magic.IsServerInitiated() {
		op = uint8(p.ServerOpCode)
	}
	vbOrStatus := p.Vbucket
	if magic.IsResponse() {
		vbOrStatus = uint16(p.Status)
	}
	return appendFrame(dst, magic, op, p.Datatype, vbOrStatus, p.Opaque, p.Cas,
		p.FramingExtras, nil, p.Extras, nil, p.Key, nil, p.Value, 0)
}

// appendFrame writes a header and body. The body is framing + framing2,
// extras, keyPrefix + key, valuePrefix + value and then tail more bytes that
// the caller appends after appendFrame returns (the header already counts
// them). The split pieces let Request.AppendTo write frame infos, collection
// prefixes, sub-document paths and specs without building them in a buffer
// first. On error dst is returned unchanged.
func appendFrame(dst []byte, magic Magic, op uint8, dt Datatype, vbOrStatus uint16, opaque uint32,
	cas uint64, framing, framing2, extras, keyPrefix, key, valuePrefix, value []byte, tail int) ([]byte, error) {
	flen := len(framing) + len(framing2)
	klen := len(keyPrefix) + len(key)
	if flen > math.MaxUint8 {
		return dst, badRequest("framing extras", "%d bytes exceed 255", flen)
	}
	if len(extras) > math.MaxUint8 {
		return dst, badRequest("extras", "%d bytes exceed 255", len(extras))
	}
	if magic.HasFramingExtras() {
		if klen > math.MaxUint8 {
			return dst, badRequest("key", "%d bytes exceed the 255 a flexible-framing header allows", klen)
		}
	} else if klen > math.MaxUint16 {
		return dst, badRequest("key", "%d bytes exceed 65535", klen)
	}
	body := uint64(flen) + uint64(len(extras)) + uint64(klen) + uint64(len(valuePrefix)) +
		uint64(len(value)) + uint64(tail)
	if body > math.MaxUint32 {
		return dst, badRequest("value", "body of %d bytes exceeds 4 GiB", body)
	}
	var h [HeaderSize]byte
	h[0] = byte(magic)
	h[1] = op
	if magic.HasFramingExtras() {
		h[2] = byte(flen)
		h[3] = byte(klen)
	} else {
		binary.BigEndian.PutUint16(h[2:4], uint16(klen))
	}
	h[4] = byte(len(extras))
	h[5] = byte(dt)
	binary.BigEndian.PutUint16(h[6:8], vbOrStatus)
	binary.BigEndian.PutUint32(h[8:12], uint32(body))
	binary.BigEndian.PutUint32(h[12:16], opaque)
	binary.BigEndian.PutUint64(h[16:24], cas)
	dst = grow(dst, HeaderSize+int(body))
	dst = append(dst, h[:]...)
	dst = append(dst, framing...)
	dst = append(dst, framing2...)
	dst = append(dst, extras...)
	dst = append(dst, keyPrefix...)
	dst = append(dst, key...)
	dst = append(dst, valuePrefix...)
	dst = append(dst, value...)
	return dst, nil
}

// grow makes room for n more bytes with at most one allocation.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n+len(b)/2)
	copy(nb, b)
	return nb
}

type shortError struct{ need, have int }

func (e *shortError) Error() string {
	return "memdx: buffer ends before the packet does (" + strconv.Itoa(e.have) + " of " + strconv.Itoa(e.need) + " bytes)"
}

func (e *shortError) Is(target error) bool { return target == ErrShortBuffer }
