package optrace

import (
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// sentinelType is RFC 0058's name of a sentinel.
type sentinelType struct {
	err  error
	name string
}

// endTypes name what ended an operation before its outcome: a timeout or
// a cancellation, tried first (its cause may match another sentinel, or
// be a status statusTypes names).
var endTypes = []sentinelType{
	{kverr.ErrAmbiguousTimeout, "AmbiguousTimeout"},
	{kverr.ErrUnambiguousTimeout, "UnambiguousTimeout"},
	{kverr.ErrTimeout, "Timeout"}, // RFC 0058's base of the two
	{kverr.ErrRequestCanceled, "RequestCanceled"},
	// The client shut down (Close), ending the operation in flight or
	// waiting to retry: RequestCanceled, as the other SDKs cancel theirs
	// on shutdown.
	{kverr.ErrClosed, "RequestCanceled"},
}

// errorTypes name the other sentinels RFC 0058 names (SDK 3 error
// handling), in the order they are tried, after endTypes and statusTypes.
var errorTypes = []sentinelType{
	{kverr.ErrDocumentNotFound, "DocumentNotFound"},
	{kverr.ErrDocumentUnretrievable, "DocumentUnretrievable"},
	{kverr.ErrDocumentExists, "DocumentExists"},
	{kverr.ErrCasMismatch, "CasMismatch"},
	{kverr.ErrDocumentLocked, "DocumentLocked"},
	{kverr.ErrDocumentNotLocked, "DocumentNotLocked"},
	{kverr.ErrValueTooLarge, "ValueTooLarge"},
	{kverr.ErrDurabilityAmbiguous, "DurabilityAmbiguous"},
	{kverr.ErrDurabilityImpossible, "DurabilityImpossible"},
	{kverr.ErrDurabilityLevelNotAvailable, "DurabilityLevelNotAvailable"},
	{kverr.ErrDurableWriteInProgress, "DurableWriteInProgress"},
	{kverr.ErrDurableWriteReCommitInProgress, "DurableWriteReCommitInProgress"},
	{kverr.ErrPathNotFound, "PathNotFound"},
	{kverr.ErrPathMismatch, "PathMismatch"},
	{kverr.ErrPathInvalid, "PathInvalid"},
	{kverr.ErrPathTooBig, "PathTooBig"},
	{kverr.ErrPathTooDeep, "PathTooDeep"},
	{kverr.ErrPathExists, "PathExists"},
	{kverr.ErrValueTooDeep, "ValueTooDeep"},
	{kverr.ErrValueInvalid, "ValueInvalid"},
	{kverr.ErrDocumentNotJSON, "DocumentNotJson"},
	{kverr.ErrNumberTooBig, "NumberTooBig"},
	{kverr.ErrDeltaInvalid, "DeltaInvalid"},
	{kverr.ErrXattrUnknownMacro, "XattrUnknownMacro"},
	{kverr.ErrXattrInvalidKeyCombo, "XattrInvalidKeyCombo"},
	{kverr.ErrXattrUnknownVirtualAttribute, "XattrUnknownVirtualAttribute"},
	{kverr.ErrXattrCannotModifyVirtualAttribute, "XattrCannotModifyVirtualAttribute"},
	{kverr.ErrXattrInvalidOrder, "XattrInvalidOrder"},
	{kverr.ErrXattrInvalidFlagCombo, "XattrInvalidFlagCombo"},
	{kverr.ErrDocumentAlreadyAlive, "DocumentAlreadyAlive"},
	{kverr.ErrScopeNotFound, "ScopeNotFound"},
	{kverr.ErrCollectionNotFound, "CollectionNotFound"},
	{kverr.ErrBucketNotFound, "BucketNotFound"},
	{kverr.ErrAuthenticationFailure, "AuthenticationFailure"},
	// RFC 0058's AuthenticationFailure is KV's EACCESS (0x24) too: the
	// user may not do what it asked.
	{kverr.ErrNoAccess, "AuthenticationFailure"},
	{kverr.ErrPlainAuthRefused, "AuthenticationFailure"},
	{kverr.ErrTemporaryFailure, "TemporaryFailure"},
	{kverr.ErrEncodingFailure, "EncodingFailure"},
	{kverr.ErrDecodingFailure, "DecodingFailure"},
	{kverr.ErrFeatureNotAvailable, "FeatureNotAvailable"},
	{kverr.ErrInvalidArgument, "InvalidArgument"},
	{kverr.ErrInvalidConnStr, "InvalidArgument"},
	{kverr.ErrServerFailure, "InternalServerFailure"},
	{kverr.ErrNoNodeAvailable, "ServiceNotAvailable"},
	// Last, so that a more specific name wins (DurabilityAmbiguous, the
	// timeouts): a request written whose connection ended before a
	// definite answer, RFC 0058's RequestCanceled ("the request is
	// in-flight on the socket and the socket gets closed").
	{kverr.ErrAmbiguous, "RequestCanceled"},
	// The same for a request that was not a mutation (nothing ambiguous):
	// its connection ended with it in flight (closed, unresponsive, or
	// its server broke the framing) and it was not retried.
	{kverr.ErrConnectionClosed, "RequestCanceled"},
	{kverr.ErrUnresponsive, "RequestCanceled"},
	{kverr.ErrProtocol, "RequestCanceled"},
}

// statusTypes name the server statuses RFC 0058 gives a name of their own
// that kvwire's sentinel of them does not carry: KV 0x81 and 0x83
// (ErrFeatureNotAvailable) are UnsupportedOperation, the rate limits
// (0x30-0x33) RateLimited, SCOPE_SIZE_LIMIT_EXCEEDED (0x34) QuotaLimited,
// NOT_INITIALIZED (0x25) TemporaryFailure (ErrServerFailure, all four).
// They are tried after endTypes and before errorTypes.
var statusTypes = []struct {
	status error // a memdx.Status, held as an error once
	name   string
}{
	{memdx.StatusUnknownCommand, "UnsupportedOperation"},
	{memdx.StatusNotSupported, "UnsupportedOperation"},
	{memdx.StatusRateLimitedIngress, "RateLimited"},
	{memdx.StatusRateLimitedEgress, "RateLimited"},
	{memdx.StatusRateLimitedMaxConnections, "RateLimited"},
	{memdx.StatusRateLimitedMaxCommands, "RateLimited"},
	{memdx.Status(0x34), "QuotaLimited"}, // SCOPE_SIZE_LIMIT_EXCEEDED
	{memdx.StatusNotInitialized, "TemporaryFailure"},
}

// ErrorType is RFC 0058's name of err's sentinel (the client's
// AttributeErrorType), other for an error without one. It allocates
// nothing for an error whose tree the client's SetErrorParts can split
// (its *KeyValueError, whose Unwrap() []error builds a slice for an error
// the caller made or changed: errors.Is would then allocate one per name
// tried, on every failed operation the default logging meter records).
func ErrorType(err error, other string) string {
	for _, e := range endTypes {
		if is(err, e.err) {
			return e.name
		}
	}
	if is(err, kverr.ErrDocumentNotFound) { // the common miss, before the look for a status
		if is(err, kverr.ErrDocumentUnretrievable) { // a replica read, which wraps a copy's miss
			return "DocumentUnretrievable"
		}
		return "DocumentNotFound"
	}
	for _, s := range statusTypes { // a *memdx.StatusError unwraps to its Status
		if is(err, s.status) {
			return s.name
		}
	}
	for _, e := range errorTypes {
		if is(err, e.err) {
			return e.name
		}
	}
	return other
}

// errorParts splits an error that wraps two (the client's
// *KeyValueError: its sentinel and its cause); nil: none.
var errorParts func(err error) (a, b error, ok bool)

// SetErrorParts sets how ErrorType splits an error that wraps two errors
// without calling its Unwrap() []error: f returns them (either may be nil)
// and true, or false for an error it does not know. The client sets it
// once, at its package's init, before any operation.
func SetErrorParts(f func(err error) (a, b error, ok bool)) { errorParts = f }

// is is errors.Is(err, target) for a comparable target (a sentinel, a
// memdx.Status), walking an error errorParts splits without Unwrap.
func is(err, target error) bool {
	for err != nil {
		if err == target { // target's type is comparable: err == target cannot panic
			return true
		}
		if x, ok := err.(interface{ Is(error) bool }); ok && x.Is(target) {
			return true
		}
		if errorParts != nil {
			if a, b, ok := errorParts(err); ok {
				return is(a, target) || is(b, target)
			}
		}
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				if is(e, target) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
