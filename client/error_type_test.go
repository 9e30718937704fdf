package client

import (
	"testing"

	"github.com/kvwire/kvwire/internal/optrace"
	"github.com/kvwire/kvwire/memdx"
)

// Every exported sentinel has the error.type RFC 0067 asks for: RFC
// 0058's name of the error (EACCESS is its AuthenticationFailure, KV code
// 0x24), _OTHER for one RFC 0058 does not name. A new sentinel fails the
// test until it is given its name here.
func TestErrorTypeOfEverySentinel(t *testing.T) {
	const other = ErrorTypeOther
	want := map[string]struct {
		err  error
		name string
	}{
		"ErrDocumentNotFound":                  {ErrDocumentNotFound, "DocumentNotFound"},
		"ErrDocumentUnretrievable":             {ErrDocumentUnretrievable, "DocumentUnretrievable"},
		"ErrDocumentExists":                    {ErrDocumentExists, "DocumentExists"},
		"ErrCasMismatch":                       {ErrCasMismatch, "CasMismatch"},
		"ErrDocumentLocked":                    {ErrDocumentLocked, "DocumentLocked"},
		"ErrDocumentNotLocked":                 {ErrDocumentNotLocked, "DocumentNotLocked"},
		"ErrNotStored":                         {ErrNotStored, other},
		"ErrValueTooLarge":                     {ErrValueTooLarge, "ValueTooLarge"},
		"ErrDeltaInvalid":                      {ErrDeltaInvalid, "DeltaInvalid"},
		"ErrInvalidArgument":                   {ErrInvalidArgument, "InvalidArgument"},
		"ErrTemporaryFailure":                  {ErrTemporaryFailure, "TemporaryFailure"},
		"ErrNoAccess":                          {ErrNoAccess, "AuthenticationFailure"},
		"ErrFeatureNotAvailable":               {ErrFeatureNotAvailable, "FeatureNotAvailable"},
		"ErrServerFailure":                     {ErrServerFailure, "InternalServerFailure"},
		"ErrDurabilityAmbiguous":               {ErrDurabilityAmbiguous, "DurabilityAmbiguous"},
		"ErrDurabilityImpossible":              {ErrDurabilityImpossible, "DurabilityImpossible"},
		"ErrDurabilityLevelNotAvailable":       {ErrDurabilityLevelNotAvailable, "DurabilityLevelNotAvailable"},
		"ErrDurableWriteInProgress":            {ErrDurableWriteInProgress, "DurableWriteInProgress"},
		"ErrDurableWriteReCommitInProgress":    {ErrDurableWriteReCommitInProgress, "DurableWriteReCommitInProgress"},
		"ErrScopeNotFound":                     {ErrScopeNotFound, "ScopeNotFound"},
		"ErrCollectionNotFound":                {ErrCollectionNotFound, "CollectionNotFound"},
		"ErrAuthenticationFailure":             {ErrAuthenticationFailure, "AuthenticationFailure"},
		"ErrPlainAuthRefused":                  {ErrPlainAuthRefused, "AuthenticationFailure"},
		"ErrBucketNotFound":                    {ErrBucketNotFound, "BucketNotFound"},
		"ErrTLS":                               {ErrTLS, other},
		"ErrBootstrap":                         {ErrBootstrap, other},
		"ErrConnectionClosed":                  {ErrConnectionClosed, "RequestCanceled"},
		"ErrOverloaded":                        {ErrOverloaded, other},
		"ErrProtocol":                          {ErrProtocol, "RequestCanceled"},
		"ErrUnresponsive":                      {ErrUnresponsive, "RequestCanceled"},
		"ErrNoNodeAvailable":                   {ErrNoNodeAvailable, "ServiceNotAvailable"},
		"ErrInvalidConnStr":                    {ErrInvalidConnStr, "InvalidArgument"},
		"ErrClosed":                            {ErrClosed, "RequestCanceled"},
		"ErrTimeout":                           {ErrTimeout, "Timeout"},
		"ErrAmbiguousTimeout":                  {ErrAmbiguousTimeout, "AmbiguousTimeout"},
		"ErrUnambiguousTimeout":                {ErrUnambiguousTimeout, "UnambiguousTimeout"},
		"ErrAmbiguous":                         {ErrAmbiguous, "RequestCanceled"},
		"ErrRequestCanceled":                   {ErrRequestCanceled, "RequestCanceled"},
		"ErrNotRetried":                        {ErrNotRetried, other},
		"ErrErrorMapMaxDuration":               {ErrErrorMapMaxDuration, other},
		"ErrEncodingFailure":                   {ErrEncodingFailure, "EncodingFailure"},
		"ErrDecodingFailure":                   {ErrDecodingFailure, "DecodingFailure"},
		"ErrPathNotFound":                      {ErrPathNotFound, "PathNotFound"},
		"ErrPathMismatch":                      {ErrPathMismatch, "PathMismatch"},
		"ErrPathInvalid":                       {ErrPathInvalid, "PathInvalid"},
		"ErrPathTooBig":                        {ErrPathTooBig, "PathTooBig"},
		"ErrPathTooDeep":                       {ErrPathTooDeep, "PathTooDeep"},
		"ErrPathExists":                        {ErrPathExists, "PathExists"},
		"ErrValueInvalid":                      {ErrValueInvalid, "ValueInvalid"},
		"ErrValueTooDeep":                      {ErrValueTooDeep, "ValueTooDeep"},
		"ErrDocumentNotJSON":                   {ErrDocumentNotJSON, "DocumentNotJson"},
		"ErrNumberTooBig":                      {ErrNumberTooBig, "NumberTooBig"},
		"ErrXattrInvalidFlagCombo":             {ErrXattrInvalidFlagCombo, "XattrInvalidFlagCombo"},
		"ErrXattrInvalidKeyCombo":              {ErrXattrInvalidKeyCombo, "XattrInvalidKeyCombo"},
		"ErrXattrUnknownMacro":                 {ErrXattrUnknownMacro, "XattrUnknownMacro"},
		"ErrXattrUnknownVirtualAttribute":      {ErrXattrUnknownVirtualAttribute, "XattrUnknownVirtualAttribute"},
		"ErrXattrCannotModifyVirtualAttribute": {ErrXattrCannotModifyVirtualAttribute, "XattrCannotModifyVirtualAttribute"},
		"ErrXattrInvalidOrder":                 {ErrXattrInvalidOrder, "XattrInvalidOrder"},
		"ErrDocumentAlreadyAlive":              {ErrDocumentAlreadyAlive, "DocumentAlreadyAlive"},
	}
	for name := range packageVars(t, ".", "Err") {
		if _, ok := want[name]; !ok {
			t.Errorf("%s has no error.type in this test: give it RFC 0058's name, or _OTHER", name)
		}
	}
	for name, w := range want {
		if got := optrace.ErrorType(&KeyValueError{Err: w.err}, other); got != w.name {
			t.Errorf("%s: error.type %q, want %q", name, got, w.name)
		}
	}

	// The statuses RFC 0058 names on their own, whatever kvwire's sentinel
	// of them; a timeout or a cancel still names the timeout or cancel.
	for _, c := range []struct {
		sentinel error
		status   memdx.Status
		name     string
	}{
		{ErrNoAccess, memdx.StatusNoAccess, "AuthenticationFailure"},
		{ErrAuthenticationFailure, memdx.StatusAuthError, "AuthenticationFailure"},
		{ErrAuthenticationFailure, memdx.StatusAuthStale, "AuthenticationFailure"},
		{ErrFeatureNotAvailable, memdx.StatusUnknownCommand, "UnsupportedOperation"},
		{ErrFeatureNotAvailable, memdx.StatusNotSupported, "UnsupportedOperation"},
		{ErrServerFailure, memdx.StatusRateLimitedIngress, "RateLimited"},
		{ErrServerFailure, memdx.StatusRateLimitedEgress, "RateLimited"},
		{ErrServerFailure, memdx.StatusRateLimitedMaxConnections, "RateLimited"},
		{ErrServerFailure, memdx.StatusRateLimitedMaxCommands, "RateLimited"},
		{ErrServerFailure, memdx.Status(0x34), "QuotaLimited"}, // SCOPE_SIZE_LIMIT_EXCEEDED
		{ErrServerFailure, memdx.StatusNotInitialized, "TemporaryFailure"},
		{ErrServerFailure, memdx.StatusInternalError, "InternalServerFailure"},
		{ErrUnambiguousTimeout, memdx.StatusRateLimitedMaxCommands, "UnambiguousTimeout"},
		{ErrRequestCanceled, memdx.StatusNotInitialized, "RequestCanceled"},
	} {
		err := &KeyValueError{Err: c.sentinel, Cause: &memdx.StatusError{Status: c.status, OpCode: memdx.OpGet}}
		if got := optrace.ErrorType(err, other); got != c.name {
			t.Errorf("%v (%s): error.type %q, want %q", c.sentinel, c.status, got, c.name)
		}
	}
}
