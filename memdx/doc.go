// Package memdx is the wire codec of the memcached binary protocol as
// Couchbase Server speaks it: framing for every magic (classic, flexible
// framing and server-initiated), opcodes, status codes, HELLO features, frame
// infos, datatypes, snappy, collection-id key prefixes and the client and
// server steps of SASL PLAIN and SCRAM.
//
// memdx does no I/O, starts no goroutines and does not log. Encoders append to
// a caller's []byte (AppendPacket, Request.AppendTo) and never allocate when
// the buffer has room; encoding the same request twice gives the same bytes.
// Decoders read from a []byte (DecodeHeader, DecodePacket, the Decode*
// response helpers) and check every length against the buffer and against a
// caller-chosen body limit before anything is sliced or allocated.
//
// Slices in a decoded Packet alias the buffer they were decoded from: they are
// valid until the caller reuses that buffer. The layer that hands a value to a
// user copies it, once.
//
// Errors: malformed input yields a *DecodeError naming the field that was
// wrong (errors.Is(err, ErrMalformed) holds); a non-success response becomes a
// *StatusError, which errors.Is matches against the Status constants
// (errors.Is(err, memdx.StatusKeyNotFound)).
package memdx
