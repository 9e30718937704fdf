// Package memdx is the wire codec of the memcached binary protocol as
// Couchbase Server speaks it: framing for every magic (classic, flexible
// framing and server-initiated), opcodes, status codes, HELLO features, frame
// infos, datatypes, snappy, collection-id key prefixes, sub-document specs and
// results, KV range scan requests and batches (rangescan.go), the client
// and server steps of SASL PLAIN and SCRAM, and memcached's text multi-get
// (text.go). The authority for every number is kv_engine's
// docs/BinaryProtocol.md, docs/SubDocument.md, docs/range_scans/ and
// include/mcbp/protocol/*.h, and for the text protocol memcached's
// doc/protocol.txt.
//
// memdx does no I/O, starts no goroutines and does not log. Encoders append to
// a caller's []byte (AppendPacket, Request.AppendTo, AppendFrameInfo, ...)
// and never allocate when the buffer has room; encoding the same request
// twice gives the same bytes, so a retry simply re-encodes. Decoders read
// from a []byte (DecodeHeader, DecodePacket, the Decode* response helpers)
// and check every length against the buffer and against a caller-chosen body
// limit before anything is sliced or allocated.
//
// # Ownership
//
// Slices in a decoded Packet (and in everything decoded from it) alias the
// buffer they were decoded from, with their capacity capped so that appending
// to one can never overwrite the next: they are valid until the caller
// reuses that buffer. The layer that hands a value to a user copies it, once.
// A Request reads, and never copies, the slices it is given (key, value,
// sub-document paths and specs): keep them unchanged while it may be encoded.
//
// # Framing
//
// DecodeHeader reads the flexible-framing magics (0x08, 0x18) with a one-byte
// framing-extras length in byte 2 and a one-byte key length in byte 3; every
// other magic has a two-byte key length. It rejects an unknown magic, a body
// over the limit, and framing extras + extras + key longer than the body,
// naming the field. A stream reader calls PacketSize once it has 24 bytes;
// ErrShortBuffer (never ErrMalformed) means more bytes are needed.
// AppendPacket sends a classic packet that carries framing extras with its
// flexible twin magic; Request.AppendTo chooses 0x08 exactly when there are
// frame infos.
//
// A connection that negotiated HELLO Tracing gets every response with a
// server-duration frame info (id 0, 2 bytes, kv_engine's variable-precision
// encoding, up to 2 minutes): Packet.ServerDuration reads it without
// allocating; EncodeServerDuration, DecodeServerDuration and
// AppendServerDurationFrame are kv_engine's encodeMicros/decodeMicros.
//
// # Names
//
// Status.String, OpCode.String and HelloFeature.String give the names logs
// use. Statuses use kv_engine's error-map names in UPPER_SNAKE form: the map
// spells a few differently (0x8d "DCP stream-ID invalid", 0xa0-0xa8 in
// CamelCase such as "DurabilityInvalidLevel"), and memdx writes those as
// DCP_STREAM_ID_INVALID, DURABILITY_INVALID_LEVEL and so on; a test checks
// every code of every kv_engine map against that rule. fmt prints a Status
// as its name with any verb.
//
// # Collections
//
// Collection ids prefix document keys as unsigned LEB128. DecodeULEB128 is
// strict: besides values that do not fit 32 bits or end within 5 bytes, it
// refuses non-canonical encodings (a redundant zero group such as 80 00 for
// 0). kv_engine's own decoder accepts them, but no correct client sends them,
// and accepting them would let two different keys name one document; the mock
// server therefore reports them as invalid rather than guessing.
//
// # SASL
//
// PLAIN and SCRAM-SHA1/SHA256/SHA512 are pure state machines (no I/O, nonces
// injectable). The SCRAM parser follows RFC 5802's grammar: attributes in
// order, mandatory extensions (m=) refused, trailing extensions ignored,
// iteration counts bounded by MaxScramIterations. Errors meaning "the peer
// failed to authenticate" match the module's ErrAuthenticationFailure
// (package internal/kverr, client.ErrAuthenticationFailure): on the client,
// a server signature that does not match or a server-final message
// carrying e=...; on the server, a wrong client proof or an unknown user.
// Malformed messages are *DecodeError.
//
// # Text protocol
//
// text.go speaks the one part of memcached's text protocol (memcached's
// doc/protocol.txt) that kvwire sends: a multi-key "gets k1 k2 ...\r\n"
// (AppendTextGets) and its answer, VALUE items then END or an error line
// (ParseTextGet). It exists for plain memcached, which takes a text multi-get
// as one request where it splits a run of binary GETQs across event-loop
// turns (memcached's -R, 20 requests per turn by default). Keys are checked
// with CheckTextKey (1 to 250 bytes, no space or control character); data
// blocks are found by their length, never by searching, and the same
// ownership and error rules as for binary packets hold; an error line is a
// *TextError.
//
// # Errors
//
// Malformed input yields a *DecodeError naming the field that was wrong
// (errors.Is(err, ErrMalformed) holds); a request that cannot be encoded
// yields an *EncodeError (errors.Is(err, ErrInvalidRequest)) and leaves the
// destination buffer unchanged; a non-success response becomes a
// *StatusError, which errors.Is matches against the Status constants
// (errors.Is(err, memdx.StatusKeyNotFound)).
package memdx
