package retry

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Orchestrator hands failed attempts to retry strategies and times the
// retries: RFC 0049's RetryOrchestrator (see the package documentation for
// the whole procedure). The zero Orchestrator is ready to use: real clock,
// slog.Default(), RFC 0049's controlled backoff after NOT_MY_VBUCKET.
//
// An Orchestrator is safe for concurrent use once its fields are set; it
// holds no per-operation state (that is in State) and starts no goroutines.
type Orchestrator struct {
	// Clock gives the time and the timers of waits; nil means the real
	// clock.
	Clock Clock
	// Logger receives a Debug record for every retry, every refusal and
	// every wait that runs into the deadline; nil means slog.Default().
	Logger *slog.Logger
	// NMVInterval chooses the wait after NOT_MY_VBUCKET. 0 (the default)
	// is RFC 0049's controlled backoff (1, 10, 50, 100, 500, then 1000 ms,
	// by the number of retries so far); a positive value is a fixed wait,
	// RFC 0005's behaviour with 100 ms. Either way a retry after
	// MarkRouteChanged goes at once.
	NMVInterval time.Duration
}

// MaxAwaitWake bounds the wait for a wake after MarkAwaitWake: the longest
// step of ControlledBackoff, should the news never come.
const MaxAwaitWake = time.Second

// decision is the orchestrator's verdict on a failed attempt: wait Delay,
// then send the request again if Retry is true, or fail with Err if it is
// false. Delay is 0 for a refusal and, for a wait that reaches the deadline,
// the time left until the deadline (Err is then a *TimeoutError).
type decision struct {
	Retry bool
	Delay time.Duration
	Err   error
}

func (o *Orchestrator) clock() Clock {
	if o.Clock == nil {
		return realClock{}
	}
	return o.Clock
}

func (o *Orchestrator) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.Default()
	}
	return o.Logger
}

// decide decides what follows a failed attempt of st's operation that failed
// for reason; cause is that attempt's error (nil if none), carried into the
// error of a refusal or a timeout. It does not wait. It updates st: a retry
// counts as an attempt and its reason is added to the set; a refusal or a
// timeout adds neither.
//
// The procedure:
//
//  1. SOCKET_CLOSED_WHILE_IN_FLIGHT marks st in doubt (MarkInDoubt).
//     UNKNOWN, and any reason once st is Ambiguous (a non-idempotent
//     request in doubt), are refused whatever the strategy says.
//  2. A reason that is always retried (reason.AlwaysRetry()) is retried
//     without asking the strategy: at once after MarkRouteChanged; after
//     MaxAwaitWake after MarkAwaitWake (a wait the wake ends early); else,
//     for NOT_MY_VBUCKET with NMVInterval > 0, after NMVInterval; else
//     after ControlledBackoff(st.Attempts()).
//  3. Any other reason goes to st's strategy. NoRetry or FailWith refuse:
//     the decision is to fail now with a *NotRetriedError (logged).
//  4. The delay is capped by the deadline: if now+delay is at or after the
//     deadline, the decision is to wait until the deadline (0 if it has
//     passed) and then fail with a *TimeoutError, without sending again
//     (logged; not counted as an attempt, its reason not added to the
//     set). A wait ending before the
//     deadline, even by 1ns, is a retry: the attempt is then sent and ends
//     by its own deadline.
//  5. Otherwise: retry after the delay; the attempt count goes up by one,
//     the reason joins the set, and the retry is logged with the reason
//     and the new count.
//
// decide allocates nothing on a retry when logging at Debug is disabled;
// refusals and timeouts allocate their error.
func (o *Orchestrator) decide(st *State, reason Reason, cause error) decision {
	if reason == ReasonSocketClosedWhileInFlight {
		st.inDoubt = true
	}
	rerouted, awaitWake := st.routeChanged, st.awaitWake
	st.routeChanged, st.awaitWake = false, false
	clk := o.clock()

	st.emOther = reason != ReasonKVErrorMapRetryIndicated
	if st.emSet && endsErrorMapRun(reason) {
		st.em, st.emSet = ErrorMapRetry{}, false
	}
	if reason == ReasonKVErrorMapRetryIndicated && st.emSet {
		now := clk.Now()
		if st.em.Retry == 0 {
			st.em.Since = now
		}
		st.em.Retry++
		st.em.Elapsed = now.Sub(st.em.Since)
	}

	// Two refusals no strategy can override: RFC 0049 says UNKNOWN is never
	// retried, and a non-idempotent request written without a definite
	// answer is never sent again (a custom strategy returning RetryAfter
	// for it would apply a mutation twice; a range scan's create or
	// continue, which changes no data, would leave a scan open or skip a
	// batch: State.notResendable).
	if reason == ReasonUnknown || st.notResendable() {
		err := st.notRetriedError(reason, nil, cause)
		o.logRefusal(st, reason, err)
		return decision{Err: err}
	}

	var delay time.Duration
	switch {
	case reason.AlwaysRetry() && rerouted:
		delay = 0
	case reason.AlwaysRetry() && awaitWake:
		delay = MaxAwaitWake
	case reason.AlwaysRetry() && reason == ReasonKVNotMyVbucket && o.NMVInterval > 0:
		delay = o.NMVInterval
	case reason.AlwaysRetry():
		delay = ControlledBackoff(st.attempts)
	default:
		act := st.Strategy().RetryAfter(st, reason)
		d, ok := act.Duration()
		if !ok {
			err := st.notRetriedError(reason, act.Err(), cause)
			o.logRefusal(st, reason, err)
			return decision{Err: err}
		}
		delay = max(d, 0)
	}

	now := clk.Now()
	if !st.deadline.IsZero() && !now.Add(delay).Before(st.deadline) {
		left := max(st.deadline.Sub(now), 0)
		o.logTimeout(st, reason, delay, left)
		return decision{Delay: left, Err: st.TimeoutError(cause)}
	}
	st.countRetry(reason)
	o.logRetry(st, reason, delay)
	return decision{Retry: true, Delay: delay}
}

// Wait decides what follows a failed attempt (the procedure in the package
// documentation) and carries the decision out on the calling goroutine: it
// waits the decision's delay on the orchestrator's clock and returns nil
// when the request should be sent again now, or the error the
// operation fails with:
//
//   - *NotRetriedError: the strategy refused (returned at once);
//   - *TimeoutError: the wait reached the deadline, returned at the deadline
//     (the request is not sent again), or st's context's deadline passed;
//   - *CanceledError: st's context was canceled during the wait, or before
//     a retry that needed no wait.
//
// When the context ends a retry's wait, that retry is not sent and no longer
// counts in st.Attempts().
//
// Wait starts no goroutine; on the real clock it reuses st's timer, so that
// only the first wait of a State allocates.
func (o *Orchestrator) Wait(st *State, reason Reason, cause error) error {
	return o.WaitOrWake(st, reason, cause, nil)
}

// WaitOrWake is Wait, except that the wait also ends when wake is closed
// (a nil wake never is): the caller learnt something that may change where
// the request goes (the client closes wake when it installs a new cluster
// config), so the request is sent again at once instead of after the rest
// of its delay. That holds for a wait that was to end at the deadline too
// (a timeout decision): woken before the deadline, it becomes a retry,
// counted and logged as one, and the attempt ends by the deadline as any
// other. A refusal is returned at once, woken or not. A wake that is
// already closed when WaitOrWake is called ends the wait at once.
//
// Waiting on wake allocates nothing.
func (o *Orchestrator) WaitOrWake(st *State, reason Reason, cause error, wake <-chan struct{}) error {
	p := o.Plan(st, reason, cause)
	var woken bool
	var ctxErr error
	if p.d.Delay > 0 {
		woken, ctxErr = o.sleep(st.Context(), st, p.d.Delay, wake)
	}
	return o.Resume(st, p, woken, ctxErr)
}

// Plan is a decision on a failed attempt that its caller carries out
// itself: it waits Delay (or less, when woken) and then calls Resume. It
// is how one goroutine drives the retries of many operations, each with
// its own State and its own wait, without a goroutine or a timer per
// operation (the client's batches keep one timer for all their waits).
type Plan struct {
	d      decision
	reason Reason
	cause  error
}

// Delay is how long the wait lasts: until the retry, or, when the
// decision is to fail, until the failure is due (0 for a refusal, the time
// left for a timeout).
func (p Plan) Delay() time.Duration { return p.d.Delay }

// Retry reports whether the request is to be sent again after the wait.
func (p Plan) Retry() bool { return p.d.Retry }

// Plan decides what follows a failed attempt, as WaitOrWake does, without
// waiting. The caller waits p.Delay() on the orchestrator's clock (or
// until it is woken, or the context ends) and then calls Resume.
func (o *Orchestrator) Plan(st *State, reason Reason, cause error) Plan {
	return Plan{d: o.decide(st, reason, cause), reason: reason, cause: cause}
}

// Resume ends the wait of p: woken says the wait was ended early by what
// would close WaitOrWake's wake channel, ctxErr (non-nil) that st's
// context ended it. It returns what WaitOrWake would have: nil to send the
// request again now, or the operation's error. A wait ended by nothing
// (woken false, ctxErr nil) is taken to have lasted p.Delay().
func (o *Orchestrator) Resume(st *State, p Plan, woken bool, ctxErr error) error {
	d := p.d
	if d.Delay > 0 {
		if ctxErr != nil {
			return o.contextError(st, d, ctxErr, p.cause)
		}
		if woken && !d.Retry {
			// A timeout decision woken before the deadline: retry.
			st.countRetry(p.reason)
			o.logRetry(st, p.reason, 0)
			return nil
		}
	} else if d.Retry {
		if ctxErr == nil {
			ctxErr = st.Context().Err()
		}
		if ctxErr != nil {
			return o.contextError(st, d, ctxErr, p.cause)
		}
	}
	if !d.Retry {
		return d.Err
	}
	return nil
}

// contextError turns a context's error into the operation's error. A retry
// that was decided but will not be sent is taken off the attempt count and
// its reason off the reasons, so that the error counts, and names the
// reasons of, the retries actually sent.
func (o *Orchestrator) contextError(st *State, d decision, err, cause error) error {
	if d.Retry {
		st.RetryNotSent()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return st.TimeoutError(cause)
	}
	return st.canceledError(err, context.Cause(st.Context()), cause)
}

// sleep waits d, or until wake is closed (woken true), or until ctx is
// done (returning ctx.Err()).
func (o *Orchestrator) sleep(ctx context.Context, st *State, d time.Duration, wake <-chan struct{}) (woken bool, err error) {
	select {
	case <-wake:
		return true, nil
	default:
	}
	if _, real := o.clock().(realClock); real {
		if st.timer == nil {
			st.timer = time.NewTimer(d)
		} else {
			st.timer.Reset(d)
		}
		select {
		case <-st.timer.C:
			return false, nil
		case <-wake:
			st.timer.Stop()
			return true, nil
		case <-ctx.Done():
			st.timer.Stop()
			return false, ctx.Err()
		}
	}
	t := o.Clock.NewTimer(d)
	select {
	case <-t.C():
		return false, nil
	case <-wake:
		t.Stop()
		return true, nil
	case <-ctx.Done():
		t.Stop()
		return false, ctx.Err()
	}
}

func (o *Orchestrator) logRetry(st *State, reason Reason, delay time.Duration) {
	l := o.logger()
	ctx := st.Context()
	if !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	l.LogAttrs(ctx, slog.LevelDebug, "retrying operation",
		slog.String("op", st.op.String()),
		slog.String("reason", reason.String()),
		slog.Int("attempt", st.attempts),
		slog.Duration("delay", delay),
		slog.Bool("idempotent", st.idempotent))
}

func (o *Orchestrator) logRefusal(st *State, reason Reason, err *NotRetriedError) {
	l := o.logger()
	ctx := st.Context()
	if !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{
		slog.String("op", st.op.String()),
		slog.String("reason", reason.String()),
		slog.Int("attempt", st.attempts),
		slog.Bool("idempotent", st.idempotent),
		slog.Bool("ambiguous", err.Ambiguous),
	}
	if err.Err != nil {
		attrs = append(attrs, slog.String("error", err.Err.Error()))
	}
	l.LogAttrs(ctx, slog.LevelDebug, "not retrying operation", attrs...)
}

func (o *Orchestrator) logTimeout(st *State, reason Reason, wanted, left time.Duration) {
	l := o.logger()
	ctx := st.Context()
	if !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	l.LogAttrs(ctx, slog.LevelDebug, "retry wait reaches the deadline; operation will time out",
		slog.String("op", st.op.String()),
		slog.String("reason", reason.String()),
		slog.Int("attempt", st.attempts),
		slog.Duration("delay", wanted),
		slog.Duration("until_deadline", left),
		slog.Bool("ambiguous", st.Ambiguous()))
}
