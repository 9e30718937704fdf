package memdx

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ErrMalformed is matched (errors.Is) by every *DecodeError: the bytes are not
// a valid packet, frame info, LEB128 value or SASL message.
var ErrMalformed = errors.New("memdx: malformed input")

// ErrShortBuffer is returned (wrapped) when a buffer ends before the packet
// it starts: more bytes may still arrive on the stream.
var ErrShortBuffer = errors.New("memdx: buffer ends before the packet does")

// ErrInvalidRequest is matched by errors from the encoders when a request
// cannot be framed (a key too long for its header field, say).
var ErrInvalidRequest = errors.New("memdx: request cannot be encoded")

// ErrBodyTooLarge is matched (errors.Is) by the *DecodeError of a header
// whose body length is over the limit the decoder was given: the packet may
// be well formed, only larger than the reader accepts.
var ErrBodyTooLarge = errors.New("memdx: body length over the limit")

// DecodeError says which field of the input was wrong and why.
type DecodeError struct {
	// What was being decoded: "header", "packet", "frame info", ...
	What string
	// Field is the field that was wrong: "magic", "body length", ...
	Field string
	// Reason says what was wrong with it.
	Reason string
	// Err is a more specific sentinel, when there is one
	// (ErrBodyTooLarge); nil otherwise.
	Err error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("memdx: malformed %s: %s: %s", e.What, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrMalformed) true.
func (e *DecodeError) Is(target error) bool { return target == ErrMalformed }

// Unwrap returns Err.
func (e *DecodeError) Unwrap() error { return e.Err }

func malformed(what, field, format string, args ...any) error {
	return &DecodeError{What: what, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// bodyTooLarge is the error of a header whose body length n is over max.
func bodyTooLarge(n, max uint32) error {
	return &DecodeError{What: "header", Field: "body length", Err: ErrBodyTooLarge,
		Reason: fmt.Sprintf("%d bytes exceeds the limit of %d", n, max)}
}

// EncodeError says why a request could not be encoded.
type EncodeError struct {
	Field  string
	Reason string
}

func (e *EncodeError) Error() string {
	return fmt.Sprintf("memdx: cannot encode request: %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidRequest) true.
func (e *EncodeError) Is(target error) bool { return target == ErrInvalidRequest }

func badRequest(field, format string, args ...any) error {
	return &EncodeError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// StatusError is a response whose status was not success.
//
// errors.Is(err, memdx.StatusKeyNotFound) is true for a *StatusError with that
// status, through Unwrap.
type StatusError struct {
	Status Status
	OpCode OpCode
	Opaque uint32
	// Context and Ref come from the error body a server sends when XERROR was
	// negotiated: {"error":{"context":"...","ref":"..."}}. Empty otherwise.
	Context string
	Ref     string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s failed with status %s (0x%02x)", e.OpCode.String(), e.Status.String(), uint16(e.Status))
	if e.Context != "" {
		s += ": " + e.Context
	}
	if e.Ref != "" {
		s += " (ref " + e.Ref + ")"
	}
	return s
}

// Unwrap returns the Status, which is itself an error.
func (e *StatusError) Unwrap() error { return e.Status }

// NewStatusError builds the error for a non-success response, reading the
// server's error context from the value when it is a JSON object (servers
// send it without the JSON datatype bit; a snappy-compressed value is not
// read).
// It returns nil for a success status. Context strings are copied.
func NewStatusError(p *Packet) error {
	if p.Status == StatusSuccess {
		return nil
	}
	e := &StatusError{Status: p.Status, OpCode: p.OpCode, Opaque: p.Opaque}
	if ec, ok := DecodeErrorContext(p.Datatype, p.Value); ok {
		e.Context, e.Ref = ec.Context, ec.Ref
	}
	return e
}

// ErrorContext is the body of an error response from a server that
// negotiated XERROR.
type ErrorContext struct {
	Context string `json:"context"`
	Ref     string `json:"ref"`
}

// DecodeErrorContext reads {"error":{"context":..,"ref":..}} from an error
// response's value. It reports false when the value is not such a body.
func DecodeErrorContext(dt Datatype, value []byte) (ErrorContext, bool) {
	b, _ := DecodeErrorBody(dt, value)
	return b.ErrorContext, b.HasContext
}

// ErrorBody is what an error response's JSON value says: its error context
// and, on UNKNOWN_COLLECTION and UNKNOWN_SCOPE, the manifest uid the
// server decided by ({"manifest_uid":"1f"}, hex as in the manifest, at the
// body's root).
type ErrorBody struct {
	ErrorContext
	HasContext  bool
	ManifestUID uint64
	HasManifest bool
}

// DecodeErrorBody reads an error response's value in one pass. It reports
// false when the value is not a JSON object (servers send it without the
// JSON datatype bit; a snappy-compressed value is not read).
func DecodeErrorBody(dt Datatype, value []byte) (ErrorBody, bool) {
	if len(value) < 2 || value[0] != '{' || dt.Has(DatatypeSnappy) {
		return ErrorBody{}, false
	}
	var body struct {
		Error *ErrorContext `json:"error"`
		UID   *string       `json:"manifest_uid"`
	}
	if err := json.Unmarshal(value, &body); err != nil {
		return ErrorBody{}, false
	}
	var b ErrorBody
	if body.Error != nil {
		b.ErrorContext, b.HasContext = *body.Error, true
	}
	if body.UID != nil {
		uid, err := strconv.ParseUint(*body.UID, 16, 64)
		b.ManifestUID, b.HasManifest = uid, err == nil
	}
	return b, true
}
