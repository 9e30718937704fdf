package retry

import (
	"math"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
)

// Action is a strategy's answer: retry after a duration, or do not retry
// (optionally failing with a given error). It is RFC 0049's RetryAction.
//
// The zero Action is NoRetry(): a strategy that forgets to answer refuses.
type Action struct {
	delay time.Duration
	retry bool
	err   error
}

// RetryAfter returns the action "retry after d". A negative d counts as 0.
// The orchestrator caps d to the operation's deadline.
func RetryAfter(d time.Duration) Action { return Action{delay: max(d, 0), retry: true} }

// NoRetry returns the action "do not retry": the operation fails with a
// *NotRetriedError carrying the reason and the attempt's error.
func NoRetry() Action { return Action{} }

// FailWith returns the action "do not retry, and fail with err": err becomes
// the Err of the *NotRetriedError, so that errors.Is(result, err) holds.
func FailWith(err error) Action { return Action{err: err} }

// Duration returns the delay and true when the action is a retry; 0 and false
// otherwise (RFC 0049's Optional<Duration> duration()).
func (a Action) Duration() (time.Duration, bool) { return a.delay, a.retry }

// Err returns the error of a FailWith action, nil otherwise.
func (a Action) Err() error { return a.err }

// Strategy decides whether, and after how long, an operation is retried: RFC
// 0049's RetryStrategy. The orchestrator asks it for every reason that is not
// always retried.
//
// RetryAfter runs on the goroutine of the operation, between its attempts. It
// must be safe for concurrent use (one strategy serves many operations) and
// should return quickly; it may read the operation's context
// (req.Context()), for instance for values a caller put there. It must not
// keep req after it returns: the request view is reused.
type Strategy interface {
	RetryAfter(req Request, reason Reason) Action
}

// StrategyFunc adapts a function to the Strategy interface.
type StrategyFunc func(req Request, reason Reason) Action

// RetryAfter calls f(req, reason).
func (f StrategyFunc) RetryAfter(req Request, reason Reason) Action { return f(req, reason) }

// Backoff gives the delay before a retry from the number of retries the
// operation already had (0 before the first retry). It must be safe for
// concurrent use.
type Backoff func(retries int) time.Duration

// ExponentialBackoff returns a Backoff that waits first, then first*factor,
// first*factor², ..., never more than limit: retries n waits
// min(first*factor^n, limit). A factor below 1 counts as 1; first and limit
// below 0 count as 0. There is no jitter: the delay is a pure function of n.
func ExponentialBackoff(first, limit time.Duration, factor float64) Backoff {
	first, limit = max(first, 0), max(limit, 0)
	if factor < 1 || math.IsNaN(factor) {
		factor = 1
	}
	return func(retries int) time.Duration {
		if retries <= 0 || first == 0 {
			// first 0 is 0 for every n: 0*factor^n would be NaN once
			// factor^n is +Inf, and a NaN Duration is negative.
			return min(first, limit)
		}
		d := float64(first) * math.Pow(factor, float64(retries))
		if d >= float64(limit) { // also +Inf
			return limit
		}
		return time.Duration(d)
	}
}

// DefaultBackoff is BestEffort's backoff, RFC 0049's "exponential delay ...
// between 1ms and 500ms": 1, 2, 4, 8, 16, 32, 64, 128, 256 ms, then 500 ms
// for every further retry. No jitter: a retry's timing already depends on
// when its own operation started and failed, and a deterministic sequence is
// what the RFC's reference calculator gives. Pass BestEffort another Backoff
// for jitter.
var DefaultBackoff Backoff = ExponentialBackoff(time.Millisecond, 500*time.Millisecond, 2)

// ControlledBackoff is RFC 0049's delay for reasons that are always retried,
// indexed by the number of retries the operation already had: 1, 10, 50,
// 100, 500 ms, then 1000 ms.
func ControlledBackoff(retries int) time.Duration {
	switch {
	case retries <= 0:
		return time.Millisecond
	case retries == 1:
		return 10 * time.Millisecond
	case retries == 2:
		return 50 * time.Millisecond
	case retries == 3:
		return 100 * time.Millisecond
	case retries == 4:
		return 500 * time.Millisecond
	}
	return 1000 * time.Millisecond
}

// BestEffortStrategy is RFC 0049's BestEffortRetryStrategy: it retries every
// operation it safely can, until the deadline. An operation is retried when
// it is idempotent or when the reason allows a non-idempotent retry; the delay
// comes from its Backoff applied to req.Attempts().
//
// Users who want BestEffort with exceptions wrap it: answer the cases they
// care about and call BestEffortStrategy.RetryAfter for the rest.
type BestEffortStrategy struct {
	backoff Backoff
}

// BestEffort returns a best-effort strategy using backoff, or DefaultBackoff
// when backoff is nil.
func BestEffort(backoff Backoff) *BestEffortStrategy {
	if backoff == nil {
		backoff = DefaultBackoff
	}
	return &BestEffortStrategy{backoff: backoff}
}

// RetryAfter retries after backoff(req.Attempts()) when req is idempotent or
// reason.AllowsNonIdempotentRetry(), and refuses otherwise.
func (s *BestEffortStrategy) RetryAfter(req Request, reason Reason) Action {
	if req.Idempotent() || reason.AllowsNonIdempotentRetry() {
		b := s.backoff
		if b == nil { // the zero BestEffortStrategy
			b = DefaultBackoff
		}
		return RetryAfter(b(req.Attempts()))
	}
	return NoRetry()
}

// FailFastOnTerminalErrorsStrategy is RFC 0049 revision 16's
// FastFailOnTerminalErrorRetryStrategy, the default strategy of this package
// (the RFC: "any new SDKs should default to it"). It fails at once, in this
// order of checks, on
//
//	AUTHENTICATION_ERROR   with kverr.ErrAuthenticationFailure
//	TLS_ERROR              with kverr.ErrTLS
//	BUCKET_ACCESS_ERROR    with kverr.ErrBucketNotFound
//	SCOPE_NOT_FOUND        with kverr.ErrScopeNotFound
//	COLLECTION_NOT_FOUND   with kverr.ErrCollectionNotFound
//
// and behaves as its BestEffortStrategy for every other reason. Like the
// RFC's, the set of terminal reasons may grow in later versions; copy the
// strategy to pin its behaviour.
type FailFastOnTerminalErrorsStrategy struct {
	best BestEffortStrategy
}

// FailFastOnTerminalErrors returns the strategy, with backoff (DefaultBackoff
// when nil) for the reasons it does not fail fast on.
func FailFastOnTerminalErrors(backoff Backoff) *FailFastOnTerminalErrorsStrategy {
	return &FailFastOnTerminalErrorsStrategy{best: *BestEffort(backoff)}
}

// RetryAfter implements the table on FailFastOnTerminalErrorsStrategy.
func (s *FailFastOnTerminalErrorsStrategy) RetryAfter(req Request, reason Reason) Action {
	switch reason {
	case ReasonAuthenticationError:
		return FailWith(kverr.ErrAuthenticationFailure)
	case ReasonTLSError:
		return FailWith(kverr.ErrTLS)
	case ReasonBucketAccessError:
		return FailWith(kverr.ErrBucketNotFound)
	case ReasonScopeNotFound:
		return FailWith(kverr.ErrScopeNotFound)
	case ReasonCollectionNotFound:
		return FailWith(kverr.ErrCollectionNotFound)
	}
	return s.best.RetryAfter(req, reason)
}

var defaultStrategy = FailFastOnTerminalErrors(nil)

// DefaultStrategy returns the strategy a State uses when given none: a shared
// FailFastOnTerminalErrors with DefaultBackoff. Strategies are immutable, so
// sharing it is safe.
func DefaultStrategy() Strategy { return defaultStrategy }

// ResendsIdempotent reports whether s sends an idempotent request again
// whatever its connection did to it: refused it before it was written
// (SOCKET_NOT_AVAILABLE) or ended after (SOCKET_CLOSED_WHILE_IN_FLIGHT).
// The package's BestEffort and FailFastOnTerminalErrors do, and so does
// FollowErrorMap over one of them; any other strategy may tell the two
// apart, and s is then reported not to.
func ResendsIdempotent(s Strategy) bool {
	switch s := s.(type) {
	case *BestEffortStrategy, *FailFastOnTerminalErrorsStrategy:
		return true
	case *FollowErrorMapStrategy:
		return s.fallback == nil || ResendsIdempotent(s.fallback)
	}
	return false
}
