package optrace

import (
	"errors"

	"github.com/kvwire/kvwire/internal/kverr"
)

// errorTypes name the sentinels RFC 0058 names (SDK 3 error handling), in
// the order they are tried: the timeouts first (a timeout's cause may
// match another).
var errorTypes = []struct {
	err  error
	name string
}{
	{kverr.ErrAmbiguousTimeout, "AmbiguousTimeout"},
	{kverr.ErrUnambiguousTimeout, "UnambiguousTimeout"},
	{kverr.ErrRequestCanceled, "RequestCanceled"},
	// The client shut down (Close), ending the operation in flight or
	// waiting to retry: RequestCanceled, as the other SDKs cancel theirs
	// on shutdown.
	{kverr.ErrClosed, "RequestCanceled"},
	{kverr.ErrDocumentNotFound, "DocumentNotFound"},
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
	{kverr.ErrTemporaryFailure, "TemporaryFailure"},
	{kverr.ErrEncodingFailure, "EncodingFailure"},
	{kverr.ErrDecodingFailure, "DecodingFailure"},
	{kverr.ErrFeatureNotAvailable, "FeatureNotAvailable"},
	{kverr.ErrInvalidArgument, "InvalidArgument"},
	{kverr.ErrServerFailure, "InternalServerFailure"},
	{kverr.ErrNoNodeAvailable, "ServiceNotAvailable"},
	// Last, so that a more specific name wins (DurabilityAmbiguous, the
	// timeouts): a request written whose connection ended before a
	// definite answer, RFC 0058's RequestCanceled ("the request is
	// in-flight on the socket and the socket gets closed").
	{kverr.ErrAmbiguous, "RequestCanceled"},
}

// ErrorType is RFC 0058's name of err's sentinel (the client's
// AttributeErrorType), other for an error without one.
func ErrorType(err error, other string) string {
	for _, e := range errorTypes {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	return other
}
