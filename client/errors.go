package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// Sentinels for every outcome a caller acts on. Test with errors.Is; the
// error itself is usually a *KeyValueError carrying the details.
var (
	// ErrDocumentNotFound: the document does not exist (KEY_ENOENT; for
	// Append/Prepend, NOT_STORED).
	ErrDocumentNotFound = errors.New("document not found")
	// ErrDocumentExists: Insert found the document already there.
	ErrDocumentExists = errors.New("document exists")
	// ErrCasMismatch: the document changed since the CAS the caller gave
	// (or, for Unlock, the CAS is not the lock's).
	ErrCasMismatch = errors.New("CAS mismatch")
	// ErrDocumentLocked: the document is locked (returned only when the
	// retry strategy refused to wait for the lock; usually the operation
	// retries until the lock is released or it times out).
	ErrDocumentLocked = errors.New("document locked")
	// ErrDocumentNotLocked: Unlock of a document that is not locked.
	ErrDocumentNotLocked = errors.New("document not locked")
	// ErrNotStored: the server did not store the value (NOT_STORED).
	ErrNotStored = errors.New("not stored")
	// ErrValueTooLarge: the value exceeds the server's limit (E2BIG).
	ErrValueTooLarge = errors.New("value too large")
	// ErrDeltaInvalid: Increment/Decrement of a value that is not a number.
	ErrDeltaInvalid = errors.New("document value is not a number")
	// ErrInvalidArgument: the request was refused as invalid (EINVAL), or
	// the caller passed an argument kvwire refuses before sending.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrTemporaryFailure: the server is temporarily unable to serve the
	// request (TMPFAIL, ENOMEM, EBUSY, or a status the node's error map
	// marks "temp") and the strategy did not retry.
	ErrTemporaryFailure = errors.New("temporary failure")
	// ErrAuthenticationFailure: the server refused the credentials.
	ErrAuthenticationFailure = errors.New("authentication failure")
	// ErrBucketNotFound: SELECT_BUCKET was refused: the bucket does not
	// exist or the user may not access it (the server does not say which).
	ErrBucketNotFound = errors.New("bucket not found or not accessible")
	// ErrPlainAuthRefused: memcached:// with a Username, whose servers offer
	// only SASL PLAIN, which would send the password in clear, and no
	// opt-in (AllowPlainAuthWithoutTLS, allow_plain_auth=true). Nothing was
	// sent. Connect's error matches it and ErrAuthenticationFailure.
	ErrPlainAuthRefused = conn.ErrPlainAuthRefused
	// ErrTLS: the TLS handshake or certificate verification failed.
	ErrTLS = errors.New("TLS handshake failed")
	// ErrNoAccess: the user may not perform this operation (EACCESS).
	ErrNoAccess = errors.New("no access")
	// ErrScopeNotFound and ErrCollectionNotFound: the collection manifest
	// has no such scope or collection.
	ErrScopeNotFound      = errors.New("scope not found")
	ErrCollectionNotFound = errors.New("collection not found")
	// ErrTimeout matches every timeout; ErrAmbiguousTimeout and
	// ErrUnambiguousTimeout say whether the request may have been applied.
	ErrTimeout            = retry.ErrTimeout
	ErrAmbiguousTimeout   = retry.ErrAmbiguousTimeout
	ErrUnambiguousTimeout = retry.ErrUnambiguousTimeout
	// ErrAmbiguous matches every error after which a mutation may have been
	// applied (written, then no definite answer): ambiguous timeouts, a
	// connection that died with the request in flight, SYNC_WRITE_AMBIGUOUS.
	ErrAmbiguous = retry.ErrAmbiguous
	// ErrRequestCanceled: the caller's context was canceled.
	ErrRequestCanceled = errors.New("request canceled")
	// ErrDurabilityAmbiguous: a synchronous write's outcome is unknown
	// (SYNC_WRITE_AMBIGUOUS); it also matches ErrAmbiguous.
	ErrDurabilityAmbiguous = errors.New("durability ambiguous")
	// ErrDurabilityImpossible and ErrDurabilityLevelNotAvailable: the
	// durability requirement cannot be met / is not supported.
	ErrDurabilityImpossible         = errors.New("durability impossible")
	ErrDurabilityLevelNotAvailable  = errors.New("durability level not available")
	ErrDurableWriteInProgress       = errors.New("durable write in progress")
	ErrDurableWriteReCommitProgress = errors.New("durable write re-commit in progress")
	// ErrFeatureNotAvailable: the server does not support what was asked
	// (UNKNOWN_COMMAND, NOT_SUPPORTED, or a feature HELLO did not grant).
	ErrFeatureNotAvailable = errors.New("feature not available")
	// ErrServerFailure: any other failure the server reported.
	ErrServerFailure = errors.New("server failure")
	// ErrNoNodeAvailable: no connection could carry the request (returned
	// once the strategy stops retrying).
	ErrNoNodeAvailable = errors.New("no node available")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("client closed")
)

// KeyValueError is the error of a failed key-value operation: it says what
// was asked, where it went, what the server answered and how often it was
// tried. errors.Is matches its Err (one of the sentinels above) and
// everything its Cause wraps (a *memdx.StatusError, a *retry.TimeoutError,
// a *conn.RequestError...).
type KeyValueError struct {
	// Op is the operation ("Get", "Upsert", ...); OpCode its last opcode.
	Op     string
	OpCode memdx.OpCode
	Key    string
	// Bucket, Scope and Collection name where the document lives.
	Bucket, Scope, Collection string
	// Vbucket and Node are those of the last attempt ("" when none was
	// dispatched); Opaque its request id on that connection.
	Vbucket uint16
	Node    string
	Opaque  uint32
	// Status is the last status the server answered (0 when none), with
	// the node's error-map name and description when the map had them.
	Status           memdx.Status
	ErrorName        string
	ErrorDescription string
	ServerContext    string
	ServerErrorRef   string
	Attempts         int
	RetryReasons     retry.ReasonSet
	// Ambiguous is true when the request may have been applied.
	Ambiguous bool
	// Err is the sentinel; Cause the underlying error.
	Err   error
	Cause error
}

func (e *KeyValueError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q", e.Op, e.Key)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Status != 0 {
		name := e.ErrorName
		if name == "" {
			name = e.Status.String()
		}
		fmt.Fprintf(&b, " (status 0x%02x %s", uint16(e.Status), name)
		if e.ErrorDescription != "" {
			b.WriteString(": " + e.ErrorDescription)
		}
		b.WriteByte(')')
	}
	if e.ServerContext != "" {
		b.WriteString(" [server: " + e.ServerContext + "]")
	}
	if e.Node != "" {
		fmt.Fprintf(&b, " node=%s vb=%d", e.Node, e.Vbucket)
	}
	if e.Attempts > 0 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts+1)
		if e.RetryReasons.Len() > 0 {
			b.WriteString(" (retried for " + e.RetryReasons.String() + ")")
		}
	}
	if e.Ambiguous {
		b.WriteString("; the request may have been applied")
	}
	var se *memdx.StatusError
	if e.Cause != nil && !(errors.As(e.Cause, &se) && se.Status == e.Status && e.Cause == error(se)) &&
		(e.Err == nil || !strings.Contains(e.Cause.Error(), e.Err.Error())) {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	return b.String()
}

// Unwrap returns the sentinel and the cause, so errors.Is and errors.As see
// both.
func (e *KeyValueError) Unwrap() []error {
	out := make([]error, 0, 2)
	if e.Err != nil {
		out = append(out, e.Err)
	}
	if e.Cause != nil {
		out = append(out, e.Cause)
	}
	return out
}

// Is makes a KeyValueError marked Ambiguous match ErrAmbiguous even when
// its cause does not say so itself.
func (e *KeyValueError) Is(target error) bool { return target == ErrAmbiguous && e.Ambiguous }

// reasonSentinel maps the reason a retry was refused for (or a timeout
// happened after) to a sentinel, for errors that carry no status.
func reasonSentinel(err error) error {
	switch {
	case errors.Is(err, retry.ErrAuthenticationFailure), errors.Is(err, conn.ErrAuthFailed):
		return ErrAuthenticationFailure
	case errors.Is(err, retry.ErrBucketAccess), errors.Is(err, conn.ErrBucketAccess):
		return ErrBucketNotFound
	case errors.Is(err, retry.ErrTLS), errors.Is(err, conn.ErrTLS):
		return ErrTLS
	case errors.Is(err, retry.ErrScopeNotFound):
		return ErrScopeNotFound
	case errors.Is(err, retry.ErrCollectionNotFound):
		return ErrCollectionNotFound
	case errors.Is(err, retry.ErrTimeout):
		return nil // the cause already matches ErrTimeout and its variant
	case errors.Is(err, retry.ErrCanceled):
		return ErrRequestCanceled
	}
	var le *lookupError
	if errors.As(err, &le) {
		return le.outcome.sentinel
	}
	return nil
}
