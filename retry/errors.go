package retry

import (
	"context"
	"strconv"
	"strings"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// The errors of this package are the structs below; each matches the
// module's sentinels (package internal/kverr, re-exported by package client
// under the same names) that its documentation names. The strategies fail
// with those sentinels too: FailFastOnTerminalErrors fails with
// kverr.ErrAuthenticationFailure, kverr.ErrTLS, kverr.ErrBucketNotFound,
// kverr.ErrScopeNotFound or kverr.ErrCollectionNotFound, one per terminal
// reason of RFC 0049 revision 16's table, inside a *NotRetriedError (its
// Err field).

// TimeoutError is returned when an operation reached its deadline while
// retrying: the orchestrator's wait reached the deadline (the request was not
// sent again), or the client reported that the deadline passed while an
// attempt was in flight (State.TimeoutError).
//
// errors.Is matches kverr.ErrTimeout, context.DeadlineExceeded, and either
// kverr.ErrAmbiguousTimeout and kverr.ErrAmbiguous (Ambiguous true) or
// kverr.ErrUnambiguousTimeout (Ambiguous false). It does not unwrap to LastErr: a
// timeout is not the error of its last attempt.
type TimeoutError struct {
	// Ambiguous is true when the request is not idempotent, may change
	// data (not a read), and at least one attempt was written without a
	// definite answer: it may have been applied (State.Ambiguous).
	Ambiguous bool
	// OpCode is the operation's opcode.
	OpCode memdx.OpCode
	// Attempts is the number of retries that were sent (0: only the first
	// try).
	Attempts int
	// Reasons are the reasons of the retries Attempts counts: not the one
	// whose wait ran into the deadline (LastErr says what failed last),
	// unless an earlier retry had it too.
	Reasons ReasonSet
	// LastErr is the error of the last failed attempt, when the client gave
	// one; for reading, not for matching.
	LastErr error
}

func (e *TimeoutError) Error() string {
	var b strings.Builder
	if e.Ambiguous {
		b.WriteString("retry: ambiguous timeout (the request may have been applied)")
	} else {
		b.WriteString("retry: unambiguous timeout (the request changed no data)")
	}
	writeSummary(&b, e.OpCode, e.Attempts, e.Reasons)
	if e.LastErr != nil {
		b.WriteString("; last error: ")
		b.WriteString(e.LastErr.Error())
	}
	return b.String()
}

// Is matches the sentinels listed on TimeoutError.
func (e *TimeoutError) Is(target error) bool {
	switch target {
	case kverr.ErrTimeout, context.DeadlineExceeded:
		return true
	case kverr.ErrAmbiguousTimeout, kverr.ErrAmbiguous:
		return e.Ambiguous
	case kverr.ErrUnambiguousTimeout:
		return !e.Ambiguous
	}
	return false
}

// NotRetriedError is returned when the strategy (or the error map) refused
// to retry: the operation fails at once with the reason it was handed over.
//
// errors.Is matches kverr.ErrNotRetried, kverr.ErrAmbiguous when Ambiguous, and
// whatever Err and Cause match (errors.Is(err, kverr.ErrAuthenticationFailure),
// errors.Is(err, memdx.StatusLocked), ...).
type NotRetriedError struct {
	// Reason is the reason that was not retried.
	Reason Reason
	// Ambiguous is true when the request is not idempotent, may change
	// data (not a read), and at least one attempt was written without a
	// definite answer: it may have been applied (State.Ambiguous). A SET whose connection closed in flight fails this way, with
	// Reason SOCKET_CLOSED_WHILE_IN_FLIGHT.
	Ambiguous bool
	// OpCode is the operation's opcode.
	OpCode memdx.OpCode
	// Attempts is the number of retries that were sent before this refusal.
	Attempts int
	// Reasons are the reasons of the earlier retries; Reason is not in it
	// unless an earlier retry had the same reason.
	Reasons ReasonSet
	// Err is the error the strategy failed with (FailWith), or nil.
	Err error
	// Cause is the error of the failed attempt, as the client gave it, or
	// nil.
	Cause error
}

func (e *NotRetriedError) Error() string {
	var b strings.Builder
	b.WriteString("retry: not retried after ")
	b.WriteString(e.Reason.String())
	if e.Ambiguous {
		b.WriteString(" (the request may have been applied)")
	}
	writeSummary(&b, e.OpCode, e.Attempts, e.Reasons)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Cause != nil && e.Cause != e.Err {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	return b.String()
}

// Is matches kverr.ErrNotRetried, and kverr.ErrAmbiguous when Ambiguous.
func (e *NotRetriedError) Is(target error) bool {
	switch target {
	case kverr.ErrNotRetried:
		return true
	case kverr.ErrAmbiguous:
		return e.Ambiguous
	}
	return false
}

// Unwrap returns Err and Cause, those that are set.
func (e *NotRetriedError) Unwrap() []error { return nonNil(e.Err, e.Cause) }

// CanceledError is returned when the operation's context was canceled while
// it waited to be retried. (A context whose deadline passed gives a
// *TimeoutError instead.)
//
// errors.Is matches kverr.ErrRequestCanceled, kverr.ErrAmbiguous when
// Ambiguous, Err (context.Canceled) and Cause.
type CanceledError struct {
	// Ambiguous: as for TimeoutError.
	Ambiguous bool
	// OpCode is the operation's opcode.
	OpCode memdx.OpCode
	// Attempts is the number of retries that were sent.
	Attempts int
	// Reasons are the reasons of the retries Attempts counts: not the one
	// whose wait was canceled, unless an earlier retry had it too.
	Reasons ReasonSet
	// Err is the context's error (context.Canceled).
	Err error
	// Cause is context.Cause of the context: the error given to its
	// CancelCauseFunc, or Err.
	Cause error
	// LastErr is the error of the last failed attempt, or nil; for reading.
	LastErr error
}

func (e *CanceledError) Error() string {
	var b strings.Builder
	b.WriteString("retry: canceled while waiting to retry")
	if e.Ambiguous {
		b.WriteString(" (the request may have been applied)")
	}
	writeSummary(&b, e.OpCode, e.Attempts, e.Reasons)
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	} else if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Is matches kverr.ErrRequestCanceled, and kverr.ErrAmbiguous when Ambiguous.
func (e *CanceledError) Is(target error) bool {
	switch target {
	case kverr.ErrRequestCanceled:
		return true
	case kverr.ErrAmbiguous:
		return e.Ambiguous
	}
	return false
}

// Unwrap returns Err and Cause, those that are set and distinct.
func (e *CanceledError) Unwrap() []error { return nonNil(e.Err, e.Cause) }

// nonNil returns err and cause, those that are set, and cause only once
// when it is err itself.
func nonNil(err, cause error) []error {
	switch {
	case err != nil && cause != nil && cause != err:
		return []error{err, cause}
	case err != nil:
		return []error{err}
	case cause != nil:
		return []error{cause}
	}
	return nil
}

func writeSummary(b *strings.Builder, op memdx.OpCode, attempts int, reasons ReasonSet) {
	b.WriteString(" [")
	b.WriteString(op.String())
	b.WriteString(", ")
	b.WriteString(strconv.Itoa(attempts))
	if attempts == 1 {
		b.WriteString(" retry")
	} else {
		b.WriteString(" retries")
	}
	if reasons != 0 {
		b.WriteString(", reasons ")
		b.WriteString(reasons.String())
	}
	b.WriteByte(']')
}
