package client

import (
	"context"
	"iter"
	"time"

	"github.com/kvwire/kvwire/retry"
)

// RetryReason says why an operation is retried: the RetryReason of RFC
// 0049 (the Couchbase SDKs' retry specification). Every reason knows
// whether it allows a mutation to be retried and whether it is always
// retried, whatever the strategy. String gives the RFC's name
// (KV_NOT_MY_VBUCKET, ...).
//
// The zero value is RetryReasonUnknown, which is never retried.
type RetryReason uint8

// The reasons of RFC 0049 revision 16, in the order of its table.
// AllRetryReasons lists them.
const (
	// RetryReasonUnknown: an unexpected failure. Never retried.
	RetryReasonUnknown RetryReason = iota
	// RetryReasonSocketNotAvailable: no connection to the node was up;
	// nothing was sent.
	RetryReasonSocketNotAvailable
	// RetryReasonServiceNotAvailable: the KV service is not available on
	// the node.
	RetryReasonServiceNotAvailable
	// RetryReasonNodeNotAvailable: the node the request is routed to is not
	// available.
	RetryReasonNodeNotAvailable
	// RetryReasonKVNotMyVbucket: the node answered NOT_MY_VBUCKET (the
	// cluster map changed). Always retried.
	RetryReasonKVNotMyVbucket
	// RetryReasonKVCollectionOutdated: the node answered UNKNOWN_COLLECTION
	// (the collection manifest changed). Always retried.
	RetryReasonKVCollectionOutdated
	// RetryReasonKVErrorMapRetryIndicated: a status the client has no rule
	// for, whose entry in the node's error map says to retry.
	RetryReasonKVErrorMapRetryIndicated
	// RetryReasonKVLocked: the document is locked (LOCKED; on a
	// connection without XERROR, the KEY_EEXISTS and ETMPFAIL kv_engine
	// answers there for a lock: the package's error table, under
	// ErrDocumentLocked, says on which requests).
	RetryReasonKVLocked
	// RetryReasonKVTemporaryFailure: the node is temporarily unable to
	// serve the request (ETMPFAIL; not on UNLOCK_KEY, where it means the
	// document is not locked: ErrDocumentNotLocked, never retried; nor
	// where, without XERROR, it is a lock: RetryReasonKVLocked).
	RetryReasonKVTemporaryFailure
	// RetryReasonKVSyncWriteInProgress: a synchronous write to the document
	// is pending (SYNC_WRITE_IN_PROGRESS).
	RetryReasonKVSyncWriteInProgress
	// RetryReasonKVSyncWriteReCommitInProgress: a synchronous write to the
	// document is being re-committed (SYNC_WRITE_RE_COMMIT_IN_PROGRESS).
	RetryReasonKVSyncWriteReCommitInProgress
	// RetryReasonServiceResponseCodeIndicated: a service's response code
	// asks for a retry.
	RetryReasonServiceResponseCodeIndicated
	// RetryReasonSocketClosedWhileInFlight: the connection closed after the
	// request was written and before its answer came; it may have been
	// applied, so a mutation is not retried.
	RetryReasonSocketClosedWhileInFlight
	// RetryReasonCircuitBreakerOpen: the node's circuit breaker is open;
	// nothing was sent.
	RetryReasonCircuitBreakerOpen
	// RetryReasonQueryPreparedStatementFailure and the four reasons after
	// it belong to the query, analytics, search and views services; RFC
	// 0049 lists them and the key-value client never gives them.
	RetryReasonQueryPreparedStatementFailure
	RetryReasonQueryIndexNotFound
	RetryReasonAnalyticsTemporaryFailure
	RetryReasonSearchTooManyRequests
	RetryReasonViewsTemporaryFailure
	// RetryReasonViewsNoActivePartition: views only. Always retried.
	RetryReasonViewsNoActivePartition
	// RetryReasonAuthenticationError: the node refused the credentials and
	// has not accepted them since.
	RetryReasonAuthenticationError
	// RetryReasonTLSError: the TLS handshake with the node failed and has
	// not succeeded since.
	RetryReasonTLSError
	// RetryReasonBucketAccessError: the node refused the bucket (missing,
	// or no rights on it) and has not accepted it since.
	RetryReasonBucketAccessError
	// RetryReasonScopeNotFound: the collection manifest has no such scope.
	RetryReasonScopeNotFound
	// RetryReasonCollectionNotFound: the collection manifest has no such
	// collection.
	RetryReasonCollectionNotFound

	numRetryReasons = iota
)

// AllRetryReasons returns every reason, in the order of RFC 0049's table
// (the order of their values, from 0). The caller owns the slice.
func AllRetryReasons() []RetryReason {
	out := make([]RetryReason, numRetryReasons)
	for i := range out {
		out[i] = RetryReason(i)
	}
	return out
}

// String gives RFC 0049's name of the reason (KV_LOCKED, ...), or
// REASON(n) for a value that is not a reason.
func (r RetryReason) String() string { return r.internal().String() }

// AllowsNonIdempotentRetry reports whether a mutation may be retried for
// this reason: true when the request was not sent, or was answered with a
// status saying it was not applied.
func (r RetryReason) AllowsNonIdempotentRetry() bool { return r.internal().AllowsNonIdempotentRetry() }

// AlwaysRetry reports whether the client retries this reason without asking
// the strategy (NOT_MY_VBUCKET, UNKNOWN_COLLECTION), after a short
// controlled backoff (ControlledBackoff).
func (r RetryReason) AlwaysRetry() bool { return r.internal().AlwaysRetry() }

// Terminal reports whether the reason is one of the five that
// FailFastOnTerminalErrors fails on at once: authentication, TLS, bucket
// access, missing scope, missing collection.
func (r RetryReason) Terminal() bool { return r.internal().Terminal() }

// RetryReasons is a set of reasons: those an operation was retried for. It is
// a value; copying it copies the set.
type RetryReasons uint64

// Has reports whether r is in the set.
func (s RetryReasons) Has(r RetryReason) bool { return retry.ReasonSet(s).Has(retry.Reason(r)) }

// With returns the set with r added; a value that is not a reason is not
// added.
func (s RetryReasons) With(r RetryReason) RetryReasons {
	return RetryReasons(retry.ReasonSet(s).With(retry.Reason(r)))
}

// Len is the number of reasons in the set.
func (s RetryReasons) Len() int { return retry.ReasonSet(s).Len() }

// All yields the reasons in the set, in the order of their values.
func (s RetryReasons) All() iter.Seq[RetryReason] {
	return func(yield func(RetryReason) bool) {
		for r := range retry.ReasonSet(s).All() {
			if !yield(RetryReason(r)) {
				return
			}
		}
	}
}

// String lists the set like "[KV_NOT_MY_VBUCKET KV_LOCKED]".
func (s RetryReasons) String() string { return retry.ReasonSet(s).String() }

// RetryStrategy decides whether, and after how long, an operation is
// retried: RFC 0049's RetryStrategy. The client asks it for every reason
// that is not always retried (RetryReason.AlwaysRetry), and caps the delay
// it answers to the operation's deadline: a retry that could not start
// before the deadline ends the operation with a timeout instead.
//
// RetryAfter runs on the operation's goroutine, between its attempts. It
// must be safe for concurrent use (one strategy serves many operations) and
// return quickly. It must not keep req after it returns.
//
// The built-in strategies are FailFastOnTerminalErrors (the default),
// BestEffort and FollowErrorMap. A strategy with exceptions answers the
// cases it cares about and hands the rest to a built-in one:
//
//	base := client.BestEffort(nil)
//	s := client.RetryStrategyFunc(func(req client.RetryRequest, r client.RetryReason) client.RetryAction {
//		if r == client.RetryReasonKVLocked {
//			return client.NoRetry() // fail with ErrDocumentLocked at once
//		}
//		return base.RetryAfter(req, r)
//	})
//	// A write meets locks (a Get reads a locked document: see GetResult.Cas).
//	if _, err := client.UpsertJSON(ctx, users, "u:1", User{Name: "Ada"}, &client.UpsertOptions{RetryStrategy: s}); err != nil { // or Options.RetryStrategy
//		return err
//	}
type RetryStrategy interface {
	RetryAfter(req RetryRequest, reason RetryReason) RetryAction
}

// RetryStrategyFunc adapts a function to the RetryStrategy interface.
type RetryStrategyFunc func(req RetryRequest, reason RetryReason) RetryAction

// RetryAfter calls f(req, reason).
func (f RetryStrategyFunc) RetryAfter(req RetryRequest, reason RetryReason) RetryAction {
	return f(req, reason)
}

// RetryRequest is what a RetryStrategy may read about the operation being
// decided. The client passes its own implementation; to test a strategy,
// implement it. Methods may be added to this interface.
type RetryRequest interface {
	// Operation is the operation's name: "Get", "Upsert", ...
	Operation() string
	// Idempotent reports whether the operation may be sent again after it
	// was written without an answer: RFC 0049's idempotent list (reads,
	// but not Exists, whose GET_META the list leaves out); mutations are
	// not.
	Idempotent() bool
	// Attempts is the number of retries already made (0 while deciding on
	// the first retry), whatever their reasons.
	Attempts() int
	// Reasons is the set of reasons of the earlier retries (those
	// Attempts counts); the reason being decided is RetryAfter's second
	// argument.
	Reasons() RetryReasons
	// InDoubt reports whether an earlier attempt was written without a
	// definite answer (the operation may have been applied).
	InDoubt() bool
	// Deadline is when the operation times out; the zero Time means never.
	Deadline() time.Time
	// Context is the operation's context, for values the caller put there.
	Context() context.Context
	// ErrorMapRetry describes the run of retries the node's error map asked
	// for, when the reason is RetryReasonKVErrorMapRetryIndicated; false
	// otherwise.
	ErrorMapRetry() (ErrorMapRetry, bool)
}

// ErrorMapRetry is a run of retries the node's error map asked for:
// consecutive RetryReasonKVErrorMapRetryIndicated decisions for one status.
type ErrorMapRetry struct {
	// Status is the status the node answered; Name and Description are
	// its entry's in the node's error map.
	Status      Status
	Name        string
	Description string
	// HasSpec says whether the entry has a retry spec; Spec is it.
	HasSpec bool
	Spec    ErrorMapRetrySpec
	// Retry numbers the retry being decided within the run: 1 for the
	// first retry after the status came back. It restarts at 1 when the
	// node answers a different status (LOCKED, TMPFAIL, another error-map
	// status, ...; NOT_MY_VBUCKET and UNKNOWN_COLLECTION, which only
	// re-route the request, aside).
	Retry int
	// Since is when the run's first decision was made; Elapsed the time
	// from Since to this decision.
	Since   time.Time
	Elapsed time.Duration
}

// ErrorMapRetrySpec is an error-map entry's retry spec (RFC 0013): how long
// to wait before each retry, and for how long to retry at all.
type ErrorMapRetrySpec struct {
	// Strategy is how the delay grows: "constant", "linear" or
	// "exponential".
	Strategy string
	// After is the wait before the first retry; Interval the base delay;
	// Ceil caps the linear and exponential delays (0: no cap);
	// MaxDuration bounds the whole run, After included (0: none).
	After, Interval, Ceil, MaxDuration time.Duration
}

// Delay returns how long to wait before retry number retry of the run (1 is
// the first): After for the first, then Interval (constant),
// min(Interval*r, Ceil) (linear) or min(Interval^r in milliseconds, Ceil)
// (exponential), r being the retries already made.
func (s ErrorMapRetrySpec) Delay(retry int) time.Duration {
	return s.internal().Delay(retry)
}

// RetryAction is a strategy's answer: retry after a delay, or do not retry
// (optionally failing with a given error). The zero RetryAction is
// NoRetry().
type RetryAction struct{ a retry.Action }

// RetryAfter returns the action "retry after d"; a negative d counts as 0.
// The client caps d to the operation's deadline.
func RetryAfter(d time.Duration) RetryAction { return RetryAction{retry.RetryAfter(d)} }

// NoRetry returns the action "do not retry": the operation fails with the
// error of its last attempt.
func NoRetry() RetryAction { return RetryAction{} }

// FailWith returns the action "do not retry, and fail with err": the
// operation's error matches err (errors.Is) as well as the last attempt's
// error.
func FailWith(err error) RetryAction { return RetryAction{retry.FailWith(err)} }

// Duration returns the delay and true when the action is a retry; 0 and
// false otherwise.
func (a RetryAction) Duration() (time.Duration, bool) { return a.a.Duration() }

// Err returns the error of a FailWith action, nil otherwise.
func (a RetryAction) Err() error { return a.a.Err() }

// Backoff gives the delay before a retry from the number of retries the
// operation already had (0 before the first retry). It must be safe for
// concurrent use.
type Backoff func(retries int) time.Duration

// ExponentialBackoff returns a Backoff that waits first, then
// first*factor, first*factor², ..., never more than limit. A factor below 1
// counts as 1; first and limit below 0 count as 0. There is no jitter.
func ExponentialBackoff(first, limit time.Duration, factor float64) Backoff {
	return Backoff(retry.ExponentialBackoff(first, limit, factor))
}

// DefaultBackoff is the backoff of BestEffort and FailFastOnTerminalErrors
// when given none, RFC 0049's: 1, 2, 4, ... 256 ms, then 500 ms for every
// further retry.
func DefaultBackoff(retries int) time.Duration { return retry.DefaultBackoff(retries) }

// ControlledBackoff is RFC 0049's delay for the reasons that are always
// retried, by the number of retries already made: 1, 10, 50, 100, 500 ms,
// then 1000 ms.
func ControlledBackoff(retries int) time.Duration { return retry.ControlledBackoff(retries) }

// BestEffort returns RFC 0049's BestEffortRetryStrategy: it retries every
// operation it safely can, until the deadline: reads whatever the reason,
// mutations when the reason says nothing was applied
// (RetryReason.AllowsNonIdempotentRetry), after backoff(attempts)
// (DefaultBackoff when backoff is nil).
func BestEffort(backoff Backoff) RetryStrategy { return bestEffort(backoff) }

// FailFastOnTerminalErrors returns RFC 0049 revision 16's
// FastFailOnTerminalErrorRetryStrategy, the client's default: it fails at
// once on the terminal reasons (RetryReason.Terminal), with
// ErrAuthenticationFailure, ErrTLS, ErrBucketNotFound, ErrScopeNotFound or
// ErrCollectionNotFound, and decides every other reason as BestEffort with
// backoff (DefaultBackoff when nil).
func FailFastOnTerminalErrors(backoff Backoff) RetryStrategy {
	return failFastOnTerminalErrors(backoff)
}

// DefaultRetryStrategy returns the strategy an operation uses when neither
// it nor Options set one: a shared FailFastOnTerminalErrors(nil).
func DefaultRetryStrategy() RetryStrategy { return defaultRetryStrategy }

// FollowErrorMap returns a strategy that times the retries the node's error
// map asks for (RetryReasonKVErrorMapRetryIndicated) by the entry's retry
// spec (ErrorMapRetrySpec.Delay), and fails once the spec's MaxDuration
// would be passed; every other reason, and an entry without a spec, is
// decided by fallback (nil: DefaultRetryStrategy()). The shipped default
// does not follow the spec: RFC 0049 leaves the timing to the strategy;
// this one is for callers who want the server's.
func FollowErrorMap(fallback RetryStrategy) RetryStrategy { return followErrorMap(fallback) }
