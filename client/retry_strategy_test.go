package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/errmap"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// The built-in strategies are package retry's own: an operation using one
// runs retry's strategy with no adapter in between.
func TestBuiltinStrategiesAreRetrysOwn(t *testing.T) {
	assert.IsType(t, &retry.BestEffortStrategy{}, internalStrategy(BestEffort(nil), nil))
	assert.IsType(t, &retry.FailFastOnTerminalErrorsStrategy{}, internalStrategy(FailFastOnTerminalErrors(nil), nil))
	assert.IsType(t, &retry.FollowErrorMapStrategy{}, internalStrategy(FollowErrorMap(nil), nil))
	assert.Same(t, retry.DefaultStrategy(), internalStrategy(DefaultRetryStrategy(), nil))
	assert.Nil(t, internalStrategy(nil, nil), "no strategy: the client's default applies")

	var slot strategyAdapter
	own := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })
	assert.Same(t, &slot, internalStrategy(own, &slot), "a caller's strategy is adapted in the operation's slot")
}

// A retry decision made through a caller's strategy, which hands its
// request to a built-in one, allocates nothing: the request is the
// operation's State seen through client's types.
func TestCallerStrategyDecisionAllocatesNothing(t *testing.T) {
	best := BestEffort(nil)
	var asked int
	own := RetryStrategyFunc(func(req RetryRequest, r RetryReason) RetryAction {
		asked += req.Attempts() + req.Reasons().Len()
		return best.RetryAfter(req, r)
	})
	var slot strategyAdapter
	s := internalStrategy(own, &slot)
	var st retry.State
	st.Init(context.Background(), memdx.OpSet, s, time.Time{})
	allocs := testing.AllocsPerRun(100, func() {
		act := s.RetryAfter(&st, retry.ReasonKVTemporaryFailure)
		if d, ok := act.Duration(); !ok || d != DefaultBackoff(0) {
			t.Fatalf("BestEffort answered %v, %v", d, ok)
		}
	})
	assert.Zero(t, allocs)
}

// fakeRequest is a caller's own RetryRequest, as a strategy's test builds.
type fakeRequest struct {
	idempotent bool
	attempts   int
	em         *ErrorMapRetry
}

func (f fakeRequest) Operation() string        { return "Upsert" }
func (f fakeRequest) Idempotent() bool         { return f.idempotent }
func (f fakeRequest) Attempts() int            { return f.attempts }
func (f fakeRequest) Reasons() RetryReasons    { return 0 }
func (f fakeRequest) InDoubt() bool            { return false }
func (f fakeRequest) Deadline() time.Time      { return time.Time{} }
func (f fakeRequest) Context() context.Context { return nil }
func (f fakeRequest) ErrorMapRetry() (ErrorMapRetry, bool) {
	if f.em == nil {
		return ErrorMapRetry{}, false
	}
	return *f.em, true
}

// The built-in strategies decide a request the caller built as retry's
// decide the client's.
func TestBuiltinStrategiesDecideACallersRequest(t *testing.T) {
	best := BestEffort(ExponentialBackoff(time.Millisecond, time.Second, 10))
	d, ok := best.RetryAfter(fakeRequest{idempotent: true, attempts: 2}, RetryReasonSocketClosedWhileInFlight).Duration()
	assert.True(t, ok)
	assert.Equal(t, 100*time.Millisecond, d)
	_, ok = best.RetryAfter(fakeRequest{}, RetryReasonSocketClosedWhileInFlight).Duration()
	assert.False(t, ok, "a mutation whose connection closed in flight is not retried")

	act := FailFastOnTerminalErrors(nil).RetryAfter(fakeRequest{}, RetryReasonAuthenticationError)
	_, ok = act.Duration()
	assert.False(t, ok)
	assert.Error(t, act.Err())

	spec := ErrorMapRetrySpec{Strategy: "linear", After: 50 * time.Millisecond, Interval: 2 * time.Millisecond,
		Ceil: 50 * time.Millisecond, MaxDuration: time.Second}
	em := &ErrorMapRetry{Status: 0x7ff0, HasSpec: true, Spec: spec, Retry: 3}
	d, ok = FollowErrorMap(nil).RetryAfter(fakeRequest{idempotent: true, em: em}, RetryReasonKVErrorMapRetryIndicated).Duration()
	assert.True(t, ok)
	assert.Equal(t, 4*time.Millisecond, d)
	assert.Equal(t, spec.Delay(3), d)
	want := errmap.RetrySpec{Strategy: errmap.Linear, After: spec.After, Interval: spec.Interval, Ceil: spec.Ceil,
		MaxDuration: spec.MaxDuration}
	for n := 1; n < 30; n++ {
		assert.Equal(t, want.Delay(n), spec.Delay(n), "retry %d", n)
	}
}

// A caller's strategy sees the operation as it is (its name, whether it is
// idempotent, its retries so far) and its answer is the operation's: a
// retry, or a failure with the caller's error.
func TestCallerStrategySeesTheOperation(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	type seen struct {
		op         string
		idempotent bool
		attempts   int
		reasons    RetryReasons
		reason     RetryReason
		deadline   bool
	}
	var mu sync.Mutex
	var decisions []seen
	errGaveUp := errors.New("gave up")
	strategy := RetryStrategyFunc(func(req RetryRequest, r RetryReason) RetryAction {
		mu.Lock()
		defer mu.Unlock()
		decisions = append(decisions, seen{req.Operation(), req.Idempotent(), req.Attempts(), req.Reasons(), r,
			!req.Deadline().IsZero()})
		if req.Attempts() == 0 {
			return RetryAfter(0)
		}
		return FailWith(errGaveUp)
	})
	c := connect(t, mc, &Options{RetryStrategy: strategy})
	col := c.DefaultCollection()
	ctx := context.Background()
	tmpFail := func(times int) {
		mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"},
			Action: mockcluster.Action{Status: memdx.StatusTmpFail}, Times: times})
	}
	tmpFail(1)
	res, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	assert.Equal(t, 1, res.RetryAttempts)
	assert.True(t, res.RetryReasons.Has(RetryReasonKVTemporaryFailure))

	tmpFail(2)
	_, err = col.Get(ctx, "k", &GetOptions{RetryStrategy: strategy})
	require.Error(t, err)
	assert.ErrorIs(t, err, errGaveUp, "the strategy's error is the operation's")
	assert.ErrorIs(t, err, ErrTemporaryFailure)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, decisions, 3)
	assert.Equal(t, seen{"Upsert", false, 0, 0, RetryReasonKVTemporaryFailure, true}, decisions[0])
	assert.Equal(t, seen{"Get", true, 0, 0, RetryReasonKVTemporaryFailure, true}, decisions[1])
	assert.Equal(t, seen{"Get", true, 1, RetryReasons(0).With(RetryReasonKVTemporaryFailure),
		RetryReasonKVTemporaryFailure, true}, decisions[2])
}

// A caller's strategy may answer with a delay; the action's accessors say
// what it is.
func TestRetryActions(t *testing.T) {
	d, ok := RetryAfter(-time.Second).Duration()
	assert.True(t, ok)
	assert.Zero(t, d)
	_, ok = NoRetry().Duration()
	assert.False(t, ok)
	assert.Equal(t, NoRetry(), RetryAction{})
	e := errors.New("x")
	assert.Equal(t, e, FailWith(e).Err())
	assert.Equal(t, 10*time.Millisecond, ControlledBackoff(1))
	assert.Equal(t, 500*time.Millisecond, DefaultBackoff(20))
}
