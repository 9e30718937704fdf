// Package kverr declares the module's sentinel errors, each once. Every
// package of kvwire that returns an error a caller may test with errors.Is
// wraps one of these with its own context (node, opcode, status, key,
// attempts, reasons); package client re-exports each one a user can see
// under the same name. Names follow gocb's where the meaning is the same.
//
// A sentinel is declared here and nowhere else: TestSentinelsDeclaredOnce
// fails when another package declares an error with the text of one of
// these, or when two package-level errors of the module share a text.
package kverr

import "errors"

// Outcomes of a key-value operation, most of them a server status (client's
// status policy, client/status.go, says which status gives which).
var (
	// ErrDocumentNotFound: the document does not exist.
	ErrDocumentNotFound = errors.New("document not found")
	// ErrDocumentUnretrievable: a read of the copies of a document (any
	// copy or all) found it on none (RFC 0058's DocumentUnretrievable).
	ErrDocumentUnretrievable = errors.New("document unretrievable")
	// ErrDocumentExists: the document already exists.
	ErrDocumentExists = errors.New("document exists")
	// ErrCasMismatch: the document's CAS is not the one the request gave.
	ErrCasMismatch = errors.New("CAS mismatch")
	// ErrDocumentLocked: the document is locked.
	ErrDocumentLocked = errors.New("document locked")
	// ErrDocumentNotLocked: unlock of a document that is not locked.
	ErrDocumentNotLocked = errors.New("document not locked")
	// ErrNotStored: the server did not store the value.
	ErrNotStored = errors.New("not stored")
	// ErrValueTooLarge: the value exceeds the server's limit.
	ErrValueTooLarge = errors.New("value too large")
	// ErrDeltaInvalid: increment or decrement of a value that is not a
	// number, or a sub-document counter's delta that is 0 or no int64.
	ErrDeltaInvalid = errors.New("delta invalid")
	// ErrInvalidArgument: the server refused the request as invalid, or
	// the caller passed an argument refused before anything was sent.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrTemporaryFailure: the server cannot serve the request for now.
	ErrTemporaryFailure = errors.New("temporary failure")
	// ErrNoAccess: the user may not perform the operation.
	ErrNoAccess = errors.New("no access")
	// ErrFeatureNotAvailable: the server does not support what was asked.
	ErrFeatureNotAvailable = errors.New("feature not available")
	// ErrServerFailure: a failure the server reported that has no sentinel
	// of its own.
	ErrServerFailure = errors.New("server failure")
	// ErrDurabilityAmbiguous: a synchronous write's outcome is unknown.
	ErrDurabilityAmbiguous = errors.New("durability ambiguous")
	// ErrDurabilityImpossible: the durability requirement cannot be met.
	ErrDurabilityImpossible = errors.New("durability impossible")
	// ErrDurabilityLevelNotAvailable: the durability level is not
	// supported.
	ErrDurabilityLevelNotAvailable = errors.New("durability level not available")
	// ErrDurableWriteInProgress: a synchronous write to the document is
	// pending.
	ErrDurableWriteInProgress = errors.New("durable write in progress")
	// ErrDurableWriteReCommitInProgress: a synchronous write to the
	// document is being re-committed.
	ErrDurableWriteReCommitInProgress = errors.New("durable write re-commit in progress")
	// ErrScopeNotFound: the collection manifest has no such scope.
	ErrScopeNotFound = errors.New("scope not found")
	// ErrCollectionNotFound: the collection manifest has no such
	// collection.
	ErrCollectionNotFound = errors.New("collection not found")
)

// Connections and their bootstrap.
var (
	// ErrAuthenticationFailure: the credentials were refused, by the
	// server or by a local check no retry gets past.
	ErrAuthenticationFailure = errors.New("authentication failure")
	// ErrPlainAuthRefused: the server needs SASL PLAIN and the options do
	// not allow it; nothing was sent.
	ErrPlainAuthRefused = errors.New("SASL PLAIN not allowed")
	// ErrBucketNotFound: SELECT_BUCKET was refused: no such bucket, or no
	// access to it (the server does not say which).
	ErrBucketNotFound = errors.New("bucket not found or not accessible")
	// ErrTLS: the TLS handshake failed for a reason of TLS's own.
	ErrTLS = errors.New("TLS handshake failed")
	// ErrBootstrap: a connection's bootstrap (HELLO, SASL, error map,
	// SELECT_BUCKET, config) failed.
	ErrBootstrap = errors.New("bootstrap failed")
	// ErrConnectionClosed: the connection ended (closed, a network error,
	// a protocol violation) with the request on it.
	ErrConnectionClosed = errors.New("connection closed")
	// ErrOverloaded: the connection has its maximum of requests in
	// flight; the request was not written.
	ErrOverloaded = errors.New("too many requests in flight on the connection")
	// ErrProtocol: the server broke the protocol's framing.
	ErrProtocol = errors.New("protocol violation")
	// ErrUnresponsive: the node stopped answering and its connection was
	// closed.
	ErrUnresponsive = errors.New("node stopped answering")
	// ErrNoNodeAvailable: no connection could carry the request.
	ErrNoNodeAvailable = errors.New("no node available")
	// ErrInvalidConnStr: the connection string cannot be parsed.
	ErrInvalidConnStr = errors.New("invalid connection string")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("client closed")
)

// Retries, timeouts and cancellation.
var (
	// ErrTimeout: the operation reached its deadline.
	ErrTimeout = errors.New("operation timed out")
	// ErrAmbiguousTimeout: a timeout after which the request may have been
	// applied.
	ErrAmbiguousTimeout = errors.New("ambiguous timeout: the request may have been applied")
	// ErrUnambiguousTimeout: a timeout after which the request changed no
	// data: no attempt was written and left without a definite answer (it
	// was never sent, or each attempt sent was answered), or the request
	// only reads or is a range scan's (one written and left unanswered may
	// have run, which changes no document). retry.State.Ambiguous decides.
	ErrUnambiguousTimeout = errors.New("unambiguous timeout: the request changed no data")
	// ErrAmbiguous: a request was written and no definite answer came for
	// it: it may have been applied.
	ErrAmbiguous = errors.New("the request may have been applied")
	// ErrRequestCanceled: the caller's context was canceled.
	ErrRequestCanceled = errors.New("request canceled")
	// ErrNotRetried: the retry strategy refused to retry.
	ErrNotRetried = errors.New("not retried")
	// ErrErrorMapMaxDuration: the error map's max-duration for the status
	// leaves no time for the next retry.
	ErrErrorMapMaxDuration = errors.New("the error map's max-duration for this status leaves no time for the next retry")
)

// Encoding and decoding of values (client's transcoders).
var (
	// ErrEncodingFailure: a value could not be encoded; nothing was sent.
	ErrEncodingFailure = errors.New("encoding failure")
	// ErrDecodingFailure: a value could not be decoded into the destination.
	ErrDecodingFailure = errors.New("decoding failure")
)

// Sub-document paths: a path's status in a lookup's result, or the failing
// path's in a mutation's error.
var (
	// ErrPathNotFound: the path does not exist in the document.
	ErrPathNotFound = errors.New("sub-document path not found")
	// ErrPathMismatch: the path and the document disagree on a value's
	// type.
	ErrPathMismatch = errors.New("sub-document path mismatch")
	// ErrPathInvalid: the path does not parse or does not suit the
	// operation.
	ErrPathInvalid = errors.New("sub-document path invalid")
	// ErrPathTooBig: the path has too many components.
	ErrPathTooBig = errors.New("sub-document path too big")
	// ErrPathTooDeep: the document is nested too deep for the server.
	ErrPathTooDeep = errors.New("sub-document path too deep")
	// ErrPathExists: the path already exists.
	ErrPathExists = errors.New("sub-document path exists")
	// ErrValueInvalid: the value cannot be inserted at the path.
	ErrValueInvalid = errors.New("sub-document value invalid")
	// ErrValueTooDeep: the value would nest the document too deep.
	ErrValueTooDeep = errors.New("sub-document value too deep")
	// ErrDocumentNotJSON: a path operation on a document that is not JSON.
	ErrDocumentNotJSON = errors.New("document is not JSON")
	// ErrNumberTooBig: a counter found a number outside int64.
	ErrNumberTooBig = errors.New("sub-document number too big")
	// ErrXattrInvalidFlagCombo: a path flag that needs the xattr flag
	// without it.
	ErrXattrInvalidFlagCombo = errors.New("invalid xattr flag combination")
	// ErrXattrInvalidKeyCombo: specs reaching more extended attributes than
	// the server allows in one command.
	ErrXattrInvalidKeyCombo = errors.New("invalid xattr key combination")
	// ErrXattrUnknownMacro: an expanded value that is no known macro.
	ErrXattrUnknownMacro = errors.New("unknown xattr macro")
	// ErrXattrUnknownVirtualAttribute: a virtual attribute the server does
	// not have.
	ErrXattrUnknownVirtualAttribute = errors.New("unknown virtual xattr")
	// ErrXattrCannotModifyVirtualAttribute: a mutation of a virtual
	// attribute.
	ErrXattrCannotModifyVirtualAttribute = errors.New("virtual xattrs cannot be modified")
	// ErrXattrInvalidOrder: an xattr spec after a body spec.
	ErrXattrInvalidOrder = errors.New("xattr specs must come before body specs")
	// ErrDocumentAlreadyAlive: revival of a document that is not deleted.
	ErrDocumentAlreadyAlive = errors.New("document is not deleted")
)
