package conn

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// Errors this package returns match the module's sentinels (package
// internal/kverr, re-exported by package client under the same names):
//
//   - kverr.ErrConnectionClosed: a *RequestError whose request ended because
//     its connection ended, whatever the cause (Close, a network error, a
//     protocol violation); its Written field says whether the request may
//     have reached the server. Conn.Err after Close is the sentinel itself.
//   - kverr.ErrOverloaded: a *RequestError of a request Do refused because
//     the connection already had Options.MaxPending requests in flight. The
//     request was not written; retry it later or elsewhere.
//   - kverr.ErrProtocol: a *ProtocolError: the server broke the framing of
//     the protocol (a bad or client-only magic, a body over the limit,
//     lengths that do not add up). The connection is closed. A well-framed
//     response that answers nothing in flight is not a violation: it is
//     dropped as a stray (see Stats).
//   - kverr.ErrUnresponsive: the connection's error when it was closed
//     because its node stopped answering: a health probe got no answer while
//     the connection made no progress (see Options.ProbeAfter). Its
//     requests' errors match kverr.ErrConnectionClosed, as for any ended
//     connection.
//   - kverr.ErrAuthenticationFailure: an *AuthError, and only it: an explicit
//     authentication refusal that retrying with the same credentials and
//     options will not get past. That is the server answering AUTH_ERROR to
//     SASL (or, on plain memcached with SASL, to a request made without
//     credentials), the server refusing or failing to prove the password in
//     SCRAM (an e= attribute, a server signature that does not verify), or
//     a permanent local refusal: no mechanism both sides allow, PLAIN needed
//     but not allowed (not in SASLMechanisms, or neither TLS nor
//     AllowPlainAuthWithoutTLS), credentials SASL cannot carry (a NUL). A
//     malformed SASL message from the server or any other SASL status is a
//     protocol problem, a *BootstrapError, and does not match it.
//   - kverr.ErrPlainAuthRefused: the Err of the *AuthError Dial returns when
//     the server needs SASL PLAIN (plain memcached offers nothing else) and
//     the options do not allow it: PLAIN is not among SASLMechanisms, or
//     there is neither TLS nor AllowPlainAuthWithoutTLS. The password was
//     not sent (in memcached mode only SASL_LIST_MECHS, which carries no
//     secret, was).
//   - kverr.ErrBucketNotFound: a *BucketAccessError.
//   - kverr.ErrTLS: a *TLSError.
//   - kverr.ErrBootstrap: every error Dial returns except a failure to
//     connect (a net error, a network failure during the TLS handshake, or
//     the context ending before the handshake completed): *AuthError,
//     *BucketAccessError, *TLSError and *BootstrapError, whose Err may be a
//     context error when the context ended during the bootstrap.

// RequestError is the error Do returns when a request ended without a
// response: the connection ended, the context was done, the connection was
// overloaded, or the request could not be encoded.
//
// Written is exact in one direction: false means the server cannot have
// received the complete request (it was never handed to the socket, or the
// write that carried it failed before its last byte), so it is safe to send
// it again, here or elsewhere. true means the request may have been received
// and applied: the outcome is unknown.
type RequestError struct {
	Op     memdx.OpCode
	Opaque uint32
	Addr   string
	// Written: the request's bytes may have reached the server.
	Written bool
	// Err is the cause: the connection's error (see Conn.Err), a context
	// error, kverr.ErrOverloaded, or an encoding error
	// (memdx.ErrInvalidRequest).
	Err error

	connEnded bool
}

func (e *RequestError) Error() string {
	w := "not written"
	if e.Written {
		w = "written, outcome unknown"
	}
	return fmt.Sprintf("conn %s: %s (opaque %d, %s): %v", e.Addr, e.Op, e.Opaque, w, e.Err)
}

// Unwrap returns Err.
func (e *RequestError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, kverr.ErrConnectionClosed) true for a request
// that ended because its connection ended.
func (e *RequestError) Is(target error) bool {
	return target == kverr.ErrConnectionClosed && e.connEnded
}

// ProtocolError says what the server sent that broke the protocol. The
// connection is closed when one is reported.
type ProtocolError struct {
	Addr string
	// What describes the violation.
	What string
	// Err is the decoder's error, if the violation was found by memdx
	// (errors.Is(err, memdx.ErrMalformed)).
	Err error
	// following: found in the header after a packet, before that packet
	// was delivered (checkFollowing): Err is about the next packet.
	following bool
	// tooLarge: the violation is a response whose body is over
	// Options.MaxBodyLength, answering the request with this opaque and
	// opcode (op), in flight when it came (Conn.ownTooLarge).
	tooLarge bool
	opaque   uint32
	op       memdx.OpCode
}

// AnswerTooLarge reports whether the violation is the answer to the
// request with this opaque (a RequestError's; the answer has its opcode) being longer than
// Options.MaxBodyLength (errors.Is(e, memdx.ErrBodyTooLarge)): a value
// larger than the client reads, which the server would send again if the
// request were resent.
func (e *ProtocolError) AnswerTooLarge(opaque uint32) bool { return e.tooLarge && e.opaque == opaque }

// answerTooLarge notes the request h, the header whose decoding failed
// with err, answers when err is a response's body over the limit (a value
// memcached -I allows): that request would get it again if resent.
func (e *ProtocolError) answerTooLarge(h []byte, err error) {
	if len(h) >= memdx.HeaderSize && errors.Is(err, memdx.ErrBodyTooLarge) &&
		(memdx.Magic(h[0]) == memdx.MagicRes || memdx.Magic(h[0]) == memdx.MagicResExt) {
		e.tooLarge, e.opaque, e.op = true, binary.BigEndian.Uint32(h[12:16]), memdx.OpCode(h[1])
	}
}

func (e *ProtocolError) Error() string {
	s := "conn " + e.Addr + ": protocol violation: " + e.What
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (e *ProtocolError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, kverr.ErrProtocol) true.
func (e *ProtocolError) Is(target error) bool { return target == kverr.ErrProtocol }

// AuthError is an explicit authentication refusal during Dial (see
// kverr.ErrAuthenticationFailure above for the exact list): the server answered
// AUTH_ERROR (Status is then memdx.StatusAuthError), SCRAM's server-first or
// server-final message refused the credentials or did not prove the server
// knows the password (Err matches kverr.ErrAuthenticationFailure), or the
// client refused for a reason that will not change (no mechanism both sides
// allow, PLAIN not allowed, credentials SASL cannot carry). Retrying with the
// same credentials and options will fail the same way. A malformed SASL answer
// is not an AuthError but a *BootstrapError.
type AuthError struct {
	Addr string
	User string
	// Mechanism is the SASL mechanism tried, "" when none was.
	Mechanism string
	// Status is memdx.StatusAuthError when the server answered it, 0
	// otherwise (a refusal inside a SCRAM message, or a local one).
	Status memdx.Status
	// Reason says what went wrong, in words.
	Reason string
	// Err is the underlying error, if any: a memdx SCRAM error matching
	// kverr.ErrAuthenticationFailure, memdx.ErrInvalidRequest for credentials SASL
	// cannot carry, or kverr.ErrPlainAuthRefused.
	Err error
}

func (e *AuthError) Error() string {
	s := fmt.Sprintf("conn %s: authentication as %q", e.Addr, e.User)
	if e.Mechanism != "" {
		s += " with " + e.Mechanism
	}
	s += " failed: " + e.Reason
	if e.Status != 0 {
		s += fmt.Sprintf(" (status %s)", e.Status)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (e *AuthError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, kverr.ErrAuthenticationFailure) and
// errors.Is(err, kverr.ErrBootstrap) true; a server status also matches
// through errors.Is(err, memdx.StatusX).
func (e *AuthError) Is(target error) bool {
	return target == kverr.ErrAuthenticationFailure || target == kverr.ErrBootstrap ||
		(e.Status != 0 && target == e.Status)
}

// BucketAccessError is SELECT_BUCKET refused during Dial: the bucket does
// not exist (memdx.StatusKeyNotFound) or the user may not use it
// (memdx.StatusNoAccess).
type BucketAccessError struct {
	Addr   string
	Bucket string
	Status memdx.Status
	// NoLogin: the Dial gave no credentials (Options.Username empty), and
	// the node refused with EACCESS: Couchbase Server 7.x refuses every
	// request but the handshake before a login, so the likely cause is the
	// missing login rather than the bucket.
	NoLogin bool
	// HungUp, when set, is how the node refused: it has no status (Status
	// is 0). Without XERROR kv_engine closes the connection where
	// SELECT_BUCKET would answer EACCESS (Connection::remapErrorCode);
	// Dial says so when the node did that on two connections in a row,
	// after a login that succeeded on each: HungUp is the second one's
	// hang-up, whose Reason names the likely causes.
	HungUp *BootstrapError
}

func (e *BucketAccessError) Error() string {
	if e.HungUp != nil {
		return fmt.Sprintf("conn %s: select bucket %q, on two connections in a row: %s",
			e.Addr, e.Bucket, e.HungUp.Reason)
	}
	why := "access refused"
	if e.Status == memdx.StatusKeyNotFound {
		why = "no such bucket"
	}
	s := fmt.Sprintf("conn %s: select bucket %q: %s (status %s)", e.Addr, e.Bucket, why, e.Status)
	if e.NoLogin {
		s += ": no credentials were given, and Couchbase Server refuses every request before a login (set a username and password)"
	}
	return s
}

// Is makes errors.Is(err, kverr.ErrBucketNotFound), errors.Is(err,
// kverr.ErrBootstrap) and errors.Is(err, e.Status) true.
func (e *BucketAccessError) Is(target error) bool {
	return target == kverr.ErrBucketNotFound || target == kverr.ErrBootstrap || (e.Status != 0 && target == e.Status)
}

// Unwrap returns HungUp's cause (the connection's end), nil when the node
// answered.
func (e *BucketAccessError) Unwrap() error {
	if e.HungUp == nil {
		return nil
	}
	return e.HungUp.Err
}

// TLSError is a TLS handshake that failed for a reason of TLS's own: the
// certificate did not verify (*tls.CertificateVerificationError, x509
// errors), the server sent an alert, the peer does not speak TLS
// (tls.RecordHeaderError), or crypto/tls refused the handshake (no common
// version or cipher suite, a malformed message). A network failure during
// the handshake (EOF, a reset, a timeout) is not a TLSError: Dial returns
// it as a plain dial error. Err is the crypto/tls or crypto/x509 error
// (errors.As(err, &x509.UnknownAuthorityError{}) works through it).
// Hint, when set, says what the failure suggests: a peer that does not
// speak TLS is likely a plain port, to reach with couchbase://.
type TLSError struct {
	Addr string
	Err  error
	Hint string
}

func (e *TLSError) Error() string {
	s := "conn " + e.Addr + ": TLS handshake: " + e.Err.Error()
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// Unwrap returns Err.
func (e *TLSError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, kverr.ErrTLS) and errors.Is(err,
// kverr.ErrBootstrap) true.
func (e *TLSError) Is(target error) bool {
	return target == kverr.ErrTLS || target == kverr.ErrBootstrap
}

// BootstrapError is any other failure of a bootstrap step: the step's
// opcode, the server's status (0 when the step failed for another reason)
// and the cause.
type BootstrapError struct {
	Addr   string
	Step   memdx.OpCode
	Status memdx.Status
	// Reason says what went wrong, in words.
	Reason string
	// Err is the cause: a *RequestError when the connection failed or the
	// context ended during the step, a decode error, ...
	Err error
	// selectHangup: the node closed a connection without XERROR at
	// SELECT_BUCKET, after the login (hangupCause).
	selectHangup bool
}

func (e *BootstrapError) Error() string {
	s := fmt.Sprintf("conn %s: bootstrap %s: %s", e.Addr, e.Step, e.Reason)
	if e.Status != 0 {
		s += fmt.Sprintf(" (status %s)", e.Status)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (e *BootstrapError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, kverr.ErrBootstrap) and, when the server
// answered, errors.Is(err, e.Status) true.
func (e *BootstrapError) Is(target error) bool {
	return target == kverr.ErrBootstrap || (e.Status != 0 && target == e.Status)
}
