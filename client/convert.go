package client

import (
	"context"
	"time"

	"github.com/kvwire/kvwire/errmap"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// The one place where client's public types meet the internal packages'.
// The numeric types share their values with the codec's and retry's
// (types_test.go checks every constant), so each conversion is a cast.

func (s Status) wire() memdx.Status                         { return memdx.Status(s) }
func statusOf(s memdx.Status) Status                        { return Status(s) }
func (o OpCode) wire() memdx.OpCode                         { return memdx.OpCode(o) }
func opCodeOf(o memdx.OpCode) OpCode                        { return OpCode(o) }
func (l DurabilityLevel) wire() memdx.DurabilityLevel       { return memdx.DurabilityLevel(l) }
func (v ConfigVersion) wire() vbmap.Version                 { return vbmap.Version{Epoch: v.Epoch, Rev: v.Rev} }
func configVersionOf(v vbmap.Version) ConfigVersion         { return ConfigVersion{Epoch: v.Epoch, Rev: v.Rev} }
func (r RetryReason) internal() retry.Reason                { return retry.Reason(r) }
func retryReasonOf(r retry.Reason) RetryReason              { return RetryReason(r) }
func (s RetryReasons) internal() retry.ReasonSet            { return retry.ReasonSet(s) }
func retryReasonsOf(s retry.ReasonSet) RetryReasons         { return RetryReasons(s) }
func endpointStateOf(s cluster.EndpointState) EndpointState { return EndpointState(s) }

func (a RetryAction) internal() retry.Action   { return a.a }
func retryActionOf(a retry.Action) RetryAction { return RetryAction{a} }

// builtinStrategy is a RetryStrategy implemented by package retry. The
// client hands its retry.Strategy to the operation as it is, so a built-in
// strategy costs nothing per decision.
type builtinStrategy struct{ s retry.Strategy }

func (b *builtinStrategy) RetryAfter(req RetryRequest, reason RetryReason) RetryAction {
	return retryActionOf(b.s.RetryAfter(internalRequest(req), reason.internal()))
}

var defaultRetryStrategy RetryStrategy = &builtinStrategy{retry.DefaultStrategy()}

func bestEffort(b Backoff) RetryStrategy { return &builtinStrategy{retry.BestEffort(retry.Backoff(b))} }

func failFastOnTerminalErrors(b Backoff) RetryStrategy {
	return &builtinStrategy{retry.FailFastOnTerminalErrors(retry.Backoff(b))}
}

func followErrorMap(fallback RetryStrategy) RetryStrategy {
	var fb retry.Strategy
	if fallback != nil {
		fb = internalStrategy(fallback, nil)
	}
	return &builtinStrategy{retry.FollowErrorMap(fb)}
}

// strategyAdapter runs a caller's RetryStrategy for package retry. An
// operation keeps one in its record (op.userStrategy), so that adapting a
// per-operation strategy does not allocate.
type strategyAdapter struct{ s RetryStrategy }

func (a *strategyAdapter) RetryAfter(req retry.Request, reason retry.Reason) retry.Action {
	return a.s.RetryAfter(publicRequest(req), retryReasonOf(reason)).internal()
}

// internalStrategy gives the retry.Strategy that runs s: a built-in's own,
// or s adapted, in slot when one is given (nil: a new adapter). nil stays
// nil (the caller's default applies).
func internalStrategy(s RetryStrategy, slot *strategyAdapter) retry.Strategy {
	switch s := s.(type) {
	case nil:
		return nil
	case *builtinStrategy:
		return s.s
	}
	if slot == nil {
		slot = new(strategyAdapter)
	}
	slot.s = s
	return slot
}

// stateRequest is the RetryRequest the client passes to a strategy: the
// operation's retry.State seen through client's types. Converting the
// State's pointer allocates nothing.
type stateRequest retry.State

func publicRequest(req retry.Request) RetryRequest {
	if st, ok := req.(*retry.State); ok {
		return (*stateRequest)(st)
	}
	return internalRequestView{req}
}

func (r *stateRequest) st() *retry.State         { return (*retry.State)(r) }
func (r *stateRequest) Operation() string        { return r.st().Operation() }
func (r *stateRequest) Idempotent() bool         { return r.st().Idempotent() }
func (r *stateRequest) Attempts() int            { return r.st().Attempts() }
func (r *stateRequest) Reasons() RetryReasons    { return retryReasonsOf(r.st().Reasons()) }
func (r *stateRequest) InDoubt() bool            { return r.st().InDoubt() }
func (r *stateRequest) Deadline() time.Time      { return r.st().Deadline() }
func (r *stateRequest) Context() context.Context { return r.st().Context() }
func (r *stateRequest) ErrorMapRetry() (ErrorMapRetry, bool) {
	em, ok := r.st().ErrorMap()
	if !ok {
		return ErrorMapRetry{}, false
	}
	return errorMapRetryOf(em), true
}

// internalRequestView is a retry.Request that is not a State (package
// retry's own tests build such requests) seen through client's types.
type internalRequestView struct{ r retry.Request }

func (v internalRequestView) Operation() string        { return v.r.OpCode().String() }
func (v internalRequestView) Idempotent() bool         { return v.r.Idempotent() }
func (v internalRequestView) Attempts() int            { return v.r.Attempts() }
func (v internalRequestView) Reasons() RetryReasons    { return retryReasonsOf(v.r.Reasons()) }
func (v internalRequestView) InDoubt() bool            { return v.r.InDoubt() }
func (v internalRequestView) Deadline() time.Time      { return v.r.Deadline() }
func (v internalRequestView) Context() context.Context { return v.r.Context() }
func (v internalRequestView) ErrorMapRetry() (ErrorMapRetry, bool) {
	em, ok := v.r.ErrorMap()
	if !ok {
		return ErrorMapRetry{}, false
	}
	return errorMapRetryOf(em), true
}

// internalRequest gives the retry.Request for a RetryRequest a built-in
// strategy is asked about: the State itself when the client made req, a
// view of the caller's own implementation otherwise.
func internalRequest(req RetryRequest) retry.Request {
	switch r := req.(type) {
	case *stateRequest:
		return r.st()
	case internalRequestView:
		return r.r
	}
	return publicRequestView{req}
}

// publicRequestView is a caller's RetryRequest seen by package retry.
type publicRequestView struct{ r RetryRequest }

func (v publicRequestView) OpCode() memdx.OpCode     { return memdx.OpInvalid }
func (v publicRequestView) Idempotent() bool         { return v.r.Idempotent() }
func (v publicRequestView) Attempts() int            { return v.r.Attempts() }
func (v publicRequestView) Reasons() retry.ReasonSet { return v.r.Reasons().internal() }
func (v publicRequestView) InDoubt() bool            { return v.r.InDoubt() }
func (v publicRequestView) Strategy() retry.Strategy { return retry.DefaultStrategy() }
func (v publicRequestView) Deadline() time.Time      { return v.r.Deadline() }
func (v publicRequestView) Context() context.Context {
	if ctx := v.r.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
func (v publicRequestView) ErrorMap() (retry.ErrorMapRetry, bool) {
	em, ok := v.r.ErrorMapRetry()
	if !ok {
		return retry.ErrorMapRetry{}, false
	}
	e := errmap.Entry{Status: em.Status.wire(), Name: em.Name, Desc: em.Description}
	if em.HasSpec {
		spec := em.Spec.internal()
		e.Retry = &spec
	}
	return retry.ErrorMapRetry{Entry: e, Retry: em.Retry, Since: em.Since, Elapsed: em.Elapsed}, true
}

func errorMapRetryOf(em retry.ErrorMapRetry) ErrorMapRetry {
	out := ErrorMapRetry{
		Status:      statusOf(em.Entry.Status),
		Name:        em.Entry.Name,
		Description: em.Entry.Desc,
		Retry:       em.Retry,
		Since:       em.Since,
		Elapsed:     em.Elapsed,
	}
	if s := em.Entry.Retry; s != nil {
		out.HasSpec = true
		out.Spec = ErrorMapRetrySpec{Strategy: s.Strategy.String(), After: s.After,
			Interval: s.Interval, Ceil: s.Ceil, MaxDuration: s.MaxDuration}
	}
	return out
}

func (s ErrorMapRetrySpec) internal() errmap.RetrySpec {
	st, _ := errmap.ParseStrategy(s.Strategy)
	return errmap.RetrySpec{Strategy: st, After: s.After, Interval: s.Interval, Ceil: s.Ceil, MaxDuration: s.MaxDuration}
}
