package retry

import (
	"context"
	"time"

	"github.com/kvwire/kvwire/errmap"
	"github.com/kvwire/kvwire/memdx"
)

// Request is the read-only view of an operation that a Strategy receives:
// RFC 0049's Request with its retry annotations and its context. *State
// implements it; strategies must not keep it after RetryAfter returns.
//
// Methods may be added to this interface. To test a strategy, pass it a
// *State prepared with Init.
type Request interface {
	// OpCode is the operation's opcode.
	OpCode() memdx.OpCode
	// Idempotent reports whether the operation may be sent again after it
	// was written without an answer (IsIdempotent, unless the client said
	// otherwise).
	Idempotent() bool
	// Attempts is the number of retries already made (0 while deciding on
	// the first retry). It counts every retry, whatever its reason.
	Attempts() int
	// Reasons is the set of reasons of the retries already made (those
	// Attempts counts); the reason being decided is passed to RetryAfter
	// separately.
	Reasons() ReasonSet
	// InDoubt reports whether an earlier attempt was written without a
	// definite answer (the request may have been applied).
	InDoubt() bool
	// Strategy is the operation's strategy.
	Strategy() Strategy
	// Deadline is when the operation times out; the zero Time means never.
	Deadline() time.Time
	// Context is the operation's context, for values the caller put there.
	Context() context.Context
	// ErrorMap describes the error-map retry in progress when the reason
	// is KV_ERROR_MAP_RETRY_INDICATED and the client recorded the entry
	// (State.SetErrorMapEntry); false otherwise.
	ErrorMap() (ErrorMapRetry, bool)
}

// ErrorMapRetry is the state of a run of error-map retries: consecutive
// KV_ERROR_MAP_RETRY_INDICATED decisions for the same status.
type ErrorMapRetry struct {
	// Entry is the error-map entry of the status; Entry.Retry is its retry
	// spec, nil when the map gives none.
	Entry errmap.Entry
	// Retry numbers the retry being decided within the run: 1 for the
	// first retry after this status came back. It restarts at 1 when a
	// different status came back in between (RFC 0013: "the retry count
	// should be reset when a new, different error code is received"):
	// another error-map status, or one the client retries by its own
	// reason (LOCKED, TMPFAIL, SYNC_WRITE_IN_PROGRESS,
	// SYNC_WRITE_RE_COMMIT_IN_PROGRESS). NOT_MY_VBUCKET and
	// UNKNOWN_COLLECTION (the reasons always retried), and failures with
	// no status (no connection, a connection closed), do not end the run:
	// they say where the request goes, not what the vbucket's node made
	// of it.
	Retry int
	// Since is when the first decision of the run was made.
	Since time.Time
	// Elapsed is the time from Since to the decision being made.
	Elapsed time.Duration
}

// State is the retry record of one operation: what the orchestrator needs to
// decide (idempotency, deadline, strategy, attempts, reasons) and what the
// client tells it about the attempts (MarkInDoubt, MarkRouteChanged,
// SetErrorMapEntry). The client embeds one in its per-operation record and
// calls Init before the first attempt; a State can be reused for another
// operation after Init, or pooled after Reset.
//
// A State belongs to one operation and is not safe for concurrent use: the
// client calls it, and the orchestrator's methods, from the operation's
// goroutine. Its zero value is ready for Init.
type State struct {
	ctx        context.Context
	strategy   Strategy
	deadline   time.Time
	op         memdx.OpCode
	name       string
	idempotent bool

	attempts int
	reasons  ReasonSet
	// reasonsBefore is reasons before the last counted retry added its
	// reason: what reasons goes back to when that retry is not sent.
	reasonsBefore ReasonSet
	inDoubt       bool
	routeChanged  bool
	awaitWake     bool

	em    ErrorMapRetry
	emSet bool
	// emOther: the decision being made (or the last one made) is on
	// another reason than KV_ERROR_MAP_RETRY_INDICATED, so ErrorMap
	// reports no run, although em's run goes on.
	emOther bool

	// timer is reused across the waits of the operation (and of later
	// operations using this State) when the orchestrator runs on the real
	// clock, so that a wait does not allocate after the first.
	timer *time.Timer
}

// Init prepares s for a new operation and clears everything a previous
// operation left.
//
// ctx is the operation's context (nil counts as context.Background()); its
// cancellation ends a wait. strategy nil means DefaultStrategy(). deadline is
// when the operation times out; when ctx has an earlier deadline, or deadline
// is zero, ctx's deadline is used, and with neither the operation never
// times out here. Idempotency is IsIdempotent(op); SetIdempotent overrides
// it.
func (s *State) Init(ctx context.Context, op memdx.OpCode, strategy Strategy, deadline time.Time) {
	if ctx == nil {
		ctx = context.Background()
	}
	if strategy == nil {
		strategy = defaultStrategy
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	// Field by field rather than *s = State{...}: a client inits a State
	// per operation, and the error-map entry, most of the State's size,
	// is cleared only when an operation set it.
	s.ctx, s.strategy, s.deadline, s.op, s.name = ctx, strategy, deadline, op, ""
	s.idempotent = IsIdempotent(op)
	s.attempts, s.reasons, s.reasonsBefore = 0, 0, 0
	s.inDoubt, s.routeChanged, s.awaitWake, s.emOther = false, false, false, false
	if s.emSet {
		s.em, s.emSet = ErrorMapRetry{}, false
	}
}

// Reset drops everything s refers to (context, strategy, error-map entry)
// so that a pooled State keeps nothing alive. It keeps its timer.
func (s *State) Reset() {
	timer := s.timer
	*s = State{timer: timer}
}

// SetOperation names the operation ("Get", "Upsert", ...) for strategies
// that decide by it; Operation returns the name.
func (s *State) SetOperation(name string) { s.name = name }

// Operation is the name given with SetOperation, or the opcode's name when
// none was given.
func (s *State) Operation() string {
	if s.name == "" {
		return s.op.String()
	}
	return s.name
}

// SetIdempotent overrides the idempotency Init derived from the opcode.
func (s *State) SetIdempotent(v bool) { s.idempotent = v }

// MarkInDoubt records that the current attempt was written (or may have
// been) and no definite answer came: its connection failed after the write,
// or the deadline or a cancellation ended the wait for its response. The
// mark stays for the rest of the operation; it makes the final error of a
// non-idempotent operation ambiguous. The orchestrator also sets it itself
// when handed SOCKET_CLOSED_WHILE_IN_FLIGHT.
func (s *State) MarkInDoubt() { s.inDoubt = true }

// MarkRouteChanged records that the failed attempt brought information that
// changes where the next attempt goes (a NOT_MY_VBUCKET body with a newer
// config that moves the vbucket, a refreshed collection ID). The next
// decision on a reason that is always retried then retries at once instead
// of after the controlled backoff (or the fixed NMV interval); it is still
// counted, logged and bounded by the deadline. The mark is consumed by that
// decision; for other reasons it is ignored (the strategy's delay stands).
func (s *State) MarkRouteChanged() { s.routeChanged = true }

// MarkAwaitWake records that the failed attempt brought information that is
// still on its way to where the next attempt is routed (a NOT_MY_VBUCKET
// body with a config newer than the one the attempt was routed by, not yet
// installed). The next decision on a reason that is always retried then
// waits for the wake (WaitOrWake's channel: the config's install) rather
// than the controlled backoff, whose first steps are shorter than a
// config's parse: up to MaxAwaitWake, and never past the deadline, then it
// retries as after any wait. MarkRouteChanged wins over it. The mark is
// consumed by that decision.
func (s *State) MarkAwaitWake() { s.awaitWake = true }

// SetErrorMapEntry records the error-map entry of the status the current
// attempt failed with, before the client hands KV_ERROR_MAP_RETRY_INDICATED
// to the orchestrator, so that a strategy can follow the entry's retry spec
// (FollowErrorMap). A status different from the previous entry's starts a
// new run (the retry count restarts); the same status continues it, unless
// a status that ends a run came back in between (ErrorMapRetry.Retry).
func (s *State) SetErrorMapEntry(e errmap.Entry) {
	s.emOther = false
	if s.emSet && s.em.Entry.Status == e.Status {
		s.em.Entry = e
		return
	}
	s.em = ErrorMapRetry{Entry: e}
	s.emSet = true
}

// OpCode implements Request.
func (s *State) OpCode() memdx.OpCode { return s.op }

// Idempotent implements Request.
func (s *State) Idempotent() bool { return s.idempotent }

// Attempts implements Request.
func (s *State) Attempts() int { return s.attempts }

// Reasons implements Request.
func (s *State) Reasons() ReasonSet { return s.reasons }

// RetryNotSent takes the retry decided last off Attempts and its reason
// off Reasons (unless an earlier retry had it too): the caller will not
// send it after all (its client closed during the wait), so that the
// operation's error counts, and names the reasons of, only the retries
// that were made.
func (s *State) RetryNotSent() {
	if s.attempts > 0 {
		s.attempts--
		s.reasons = s.reasonsBefore
	}
}

// countRetry counts a retry made for reason.
func (s *State) countRetry(reason Reason) {
	s.attempts++
	s.reasonsBefore = s.reasons
	s.reasons = s.reasons.With(reason)
}

// InDoubt implements Request.
func (s *State) InDoubt() bool { return s.inDoubt }

// Strategy implements Request.
func (s *State) Strategy() Strategy {
	if s.strategy == nil {
		return defaultStrategy
	}
	return s.strategy
}

// Deadline implements Request.
func (s *State) Deadline() time.Time { return s.deadline }

// Context implements Request.
func (s *State) Context() context.Context {
	if s.ctx == nil {
		return context.Background()
	}
	return s.ctx
}

// ErrorMap implements Request. It reports no run while the reason being
// decided is another than KV_ERROR_MAP_RETRY_INDICATED: the run is not
// what that decision is about.
func (s *State) ErrorMap() (ErrorMapRetry, bool) {
	if !s.emSet || s.emOther {
		return ErrorMapRetry{}, false
	}
	return s.em, true
}

// Ambiguous reports whether the operation may have been applied: it is not
// idempotent, it may change data (memdx.OpCode.IsReadOnly: a read the
// RFC's list leaves out, GET_META say, is not resent, but it changed
// nothing; nor do the range-scan requests, scanChangesNoData), and some
// attempt was written without a definite answer. The errors this package
// builds carry this in their Ambiguous field.
func (s *State) Ambiguous() bool {
	return s.inDoubt && !s.idempotent && !s.op.IsReadOnly() && !scanChangesNoData(s.op)
}

// notResendable reports whether the request, written without a definite
// answer, is never sent again: it is not idempotent and not a read. A
// range-scan request is not Ambiguous (it changes no data) but is not
// resent either: a second create would leave the first's scan open, a
// second continue would skip the batch the first one took.
func (s *State) notResendable() bool { return s.inDoubt && !s.idempotent && !s.op.IsReadOnly() }

// scanChangesNoData reports whether op is a range-scan request: kv_engine's
// RANGE_SCAN_CREATE opens a scan (server state holding a snapshot of the
// vbucket, dropped by RANGE_SCAN_CANCEL or when it stays idle past its
// timeout), RANGE_SCAN_CONTINUE reads from it, RANGE_SCAN_CANCEL drops it:
// none changes a document, so none "may have been applied" as a mutation
// may. They are not memdx.OpCode.IsReadOnly, which conn counts as reads
// that leave the server as it was.
func scanChangesNoData(op memdx.OpCode) bool {
	switch op {
	case memdx.OpRangeScanCreate, memdx.OpRangeScanContinue, memdx.OpRangeScanCancel:
		return true
	}
	return false
}

// TimeoutError builds the error for an operation whose deadline passed. The
// client uses it when the deadline passes while an attempt is in flight
// (after MarkInDoubt, if the attempt was written); the orchestrator uses it
// when a wait reaches the deadline. lastErr is the last attempt's error, or
// nil.
func (s *State) TimeoutError(lastErr error) *TimeoutError {
	return &TimeoutError{
		Ambiguous: s.Ambiguous(),
		OpCode:    s.op,
		Attempts:  s.attempts,
		Reasons:   s.reasons,
		LastErr:   lastErr,
	}
}

// canceledError builds the error for a context canceled during a wait.
func (s *State) canceledError(ctxErr, cause, lastErr error) *CanceledError {
	return &CanceledError{
		Ambiguous: s.Ambiguous(),
		OpCode:    s.op,
		Attempts:  s.attempts,
		Reasons:   s.reasons,
		Err:       ctxErr,
		Cause:     cause,
		LastErr:   lastErr,
	}
}

func (s *State) notRetriedError(reason Reason, err, cause error) *NotRetriedError {
	return &NotRetriedError{
		Reason:    reason,
		Ambiguous: s.Ambiguous(),
		OpCode:    s.op,
		Attempts:  s.attempts,
		Reasons:   s.reasons,
		Err:       err,
		Cause:     cause,
	}
}
