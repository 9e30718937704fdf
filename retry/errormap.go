package retry

import (
	"fmt"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// ErrorMapMaxDurationError is the Err of the *NotRetriedError with which
// FollowErrorMap refuses a retry: waiting Wait more, with Elapsed already
// gone since the status first came back, would reach the entry's
// max-duration. Retry 1 with Elapsed 0 is a spec whose first wait (after)
// is not shorter than its max-duration: no retry was possible at all.
// errors.Is matches kverr.ErrErrorMapMaxDuration.
type ErrorMapMaxDurationError struct {
	Status      memdx.Status
	Retry       int
	Elapsed     time.Duration
	Wait        time.Duration
	MaxDuration time.Duration
}

func (e *ErrorMapMaxDurationError) Error() string {
	if e.Retry <= 1 {
		return fmt.Sprintf("retry: the error map's retry spec for %s puts its first retry %v after the response, not before its max-duration of %v: not retried",
			e.Status, e.Wait, e.MaxDuration)
	}
	return fmt.Sprintf("retry: the error map's max-duration of %v for %s leaves no time for retry %d: %v elapsed, %v to wait",
		e.MaxDuration, e.Status, e.Retry, e.Elapsed, e.Wait)
}

// Is matches kverr.ErrErrorMapMaxDuration.
func (e *ErrorMapMaxDurationError) Is(target error) bool {
	return target == kverr.ErrErrorMapMaxDuration
}

// FollowErrorMapStrategy is an opt-in strategy that times error-map retries
// by the entry's own retry spec (RFC 0013 "Retry Intervals"). RFC 0049 says
// the spec's values must not be used when the user's strategy decides, which
// is the case with the shipped strategies; this one is for users who want
// the server's timing.
//
// For KV_ERROR_MAP_RETRY_INDICATED with an entry that has a retry spec
// (State.SetErrorMapEntry), retry n of the current run (ErrorMapRetry.Retry)
// waits spec.Delay(n): spec.After for the first, then the constant, linear or
// exponential interval, capped by ceil. The run restarts, and the first wait
// is After again, when a different status comes back, or came back in
// between (ErrorMapRetry.Retry says which do). When the spec has a
// max-duration and the retry would go at or after Since+max-duration, it
// fails with an *ErrorMapMaxDurationError (kverr.ErrErrorMapMaxDuration) instead:
// at once, without waiting, as the orchestrator does with a deadline; a
// spec whose after is not shorter than its max-duration allows no retry.
// The operation's deadline bounds every wait as usual: the shorter limit
// wins.
//
// Every other reason, and an error-map reason without an entry or without a
// spec, is decided by the fallback strategy.
type FollowErrorMapStrategy struct {
	fallback Strategy
}

// FollowErrorMap returns the strategy, with fallback for the cases the
// error map does not time (nil: DefaultStrategy()).
func FollowErrorMap(fallback Strategy) *FollowErrorMapStrategy {
	if fallback == nil {
		fallback = defaultStrategy
	}
	return &FollowErrorMapStrategy{fallback: fallback}
}

// RetryAfter implements the rule on FollowErrorMapStrategy.
func (s *FollowErrorMapStrategy) RetryAfter(req Request, reason Reason) Action {
	fallback := s.fallback
	if fallback == nil {
		fallback = defaultStrategy
	}
	if reason != ReasonKVErrorMapRetryIndicated {
		return fallback.RetryAfter(req, reason)
	}
	em, ok := req.ErrorMap()
	if !ok || em.Entry.Retry == nil {
		return fallback.RetryAfter(req, reason)
	}
	if !req.Idempotent() && !reason.AllowsNonIdempotentRetry() {
		return NoRetry()
	}
	spec := em.Entry.Retry
	d := spec.Delay(em.Retry)
	// d >= MaxDuration-Elapsed rather than Elapsed+d >= MaxDuration: d
	// may be near the longest Duration (Delay saturates), and the sum
	// would overflow to a negative time that passes the check.
	if spec.MaxDuration > 0 && d >= spec.MaxDuration-em.Elapsed {
		return FailWith(&ErrorMapMaxDurationError{Status: em.Entry.Status, Retry: em.Retry,
			Elapsed: em.Elapsed, Wait: d, MaxDuration: spec.MaxDuration})
	}
	return RetryAfter(d)
}

// endsErrorMapRun reports whether a decision on reason ends the run of
// error-map retries in progress (ErrorMapRetry.Retry): reason is that of a
// status the vbucket's node answered, other than an error-map one (whose
// entry, SetErrorMapEntry, decides). RFC 0013 resets the count "when a new,
// different error code is received". The reasons always retried
// (NOT_MY_VBUCKET, UNKNOWN_COLLECTION) do not: they are routing, the request
// did not reach what gave the error-map status.
func endsErrorMapRun(reason Reason) bool {
	switch reason {
	case ReasonKVLocked, ReasonKVTemporaryFailure, ReasonKVSyncWriteInProgress,
		ReasonKVSyncWriteReCommitInProgress, ReasonServiceResponseCodeIndicated:
		return true
	}
	return false
}
