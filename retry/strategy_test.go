package retry

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

const ms = time.Millisecond

func TestAction(t *testing.T) {
	d, ok := RetryAfter(5 * ms).Duration()
	assert.True(t, ok)
	assert.Equal(t, 5*ms, d)
	d, ok = RetryAfter(-5 * ms).Duration()
	assert.True(t, ok)
	assert.Equal(t, time.Duration(0), d)
	_, ok = NoRetry().Duration()
	assert.False(t, ok)
	assert.NoError(t, NoRetry().Err())
	_, ok = Action{}.Duration()
	assert.False(t, ok, "the zero Action refuses")
	boom := errors.New("boom")
	_, ok = FailWith(boom).Duration()
	assert.False(t, ok)
	assert.Equal(t, boom, FailWith(boom).Err())
}

// TestControlledBackoff: RFC 0049's controlled backoff, by retries so far.
func TestControlledBackoff(t *testing.T) {
	want := []time.Duration{1 * ms, 10 * ms, 50 * ms, 100 * ms, 500 * ms, 1000 * ms, 1000 * ms, 1000 * ms}
	for n, w := range want {
		assert.Equal(t, w, ControlledBackoff(n), "retries=%d", n)
	}
	assert.Equal(t, 1000*ms, ControlledBackoff(math.MaxInt))
	assert.Equal(t, 1*ms, ControlledBackoff(-1))
}

// TestDefaultBackoff: BestEffort's exponential backoff between 1 ms and 500 ms.
func TestDefaultBackoff(t *testing.T) {
	want := []time.Duration{1 * ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms, 32 * ms, 64 * ms, 128 * ms, 256 * ms,
		500 * ms, 500 * ms, 500 * ms}
	for n, w := range want {
		assert.Equal(t, w, DefaultBackoff(n), "retries=%d", n)
	}
	assert.Equal(t, 500*ms, DefaultBackoff(1<<20))
	assert.Equal(t, 500*ms, DefaultBackoff(math.MaxInt))
	assert.Equal(t, 1*ms, DefaultBackoff(-3))
}

func TestExponentialBackoffEdges(t *testing.T) {
	// factor below 1 (or NaN) counts as 1: constant.
	for _, f := range []float64{0, 0.5, math.NaN()} {
		b := ExponentialBackoff(3*ms, time.Second, f)
		assert.Equal(t, 3*ms, b(0))
		assert.Equal(t, 3*ms, b(10))
	}
	// first above limit: limit.
	b := ExponentialBackoff(time.Second, 10*ms, 2)
	assert.Equal(t, 10*ms, b(0))
	assert.Equal(t, 10*ms, b(5))
	// negative first: 0.
	assert.Equal(t, time.Duration(0), ExponentialBackoff(-ms, time.Second, 2)(4))
	// factor 3.
	b = ExponentialBackoff(ms, time.Second, 3)
	assert.Equal(t, []time.Duration{1 * ms, 3 * ms, 9 * ms, 27 * ms, 81 * ms, 243 * ms, 729 * ms, time.Second},
		[]time.Duration{b(0), b(1), b(2), b(3), b(4), b(5), b(6), b(7)})
}

func newState(op memdx.OpCode, s Strategy) *State {
	st := new(State)
	st.Init(context.Background(), op, s, time.Time{})
	return st
}

// TestBestEffortSequence: the delays BestEffort asks for as retries accumulate,
// for an idempotent and a non-idempotent operation.
func TestBestEffortSequence(t *testing.T) {
	s := BestEffort(nil)
	for _, op := range []memdx.OpCode{memdx.OpGet, memdx.OpSet} {
		st := newState(op, s)
		var got []time.Duration
		for st.attempts = 0; st.attempts < 12; st.attempts++ {
			d, ok := s.RetryAfter(st, ReasonKVTemporaryFailure).Duration()
			require.True(t, ok)
			got = append(got, d)
		}
		assert.Equal(t, []time.Duration{1 * ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms, 32 * ms, 64 * ms, 128 * ms,
			256 * ms, 500 * ms, 500 * ms, 500 * ms}, got, "%s", op)
	}
}

// TestBestEffortEligibility: idempotent, or the reason allows a
// non-idempotent retry; every reason, both kinds of operation.
func TestBestEffortEligibility(t *testing.T) {
	s := BestEffort(nil)
	for _, r := range Reasons() {
		for _, op := range []memdx.OpCode{memdx.OpGet, memdx.OpSet} {
			st := newState(op, s)
			_, ok := s.RetryAfter(st, r).Duration()
			assert.Equal(t, IsIdempotent(op) || r.AllowsNonIdempotentRetry(), ok, "%s %s", op, r)
		}
	}
	// SOCKET_CLOSED_WHILE_IN_FLIGHT: a GET is retried, a SET is not.
	_, ok := s.RetryAfter(newState(memdx.OpGet, s), ReasonSocketClosedWhileInFlight).Duration()
	assert.True(t, ok)
	_, ok = s.RetryAfter(newState(memdx.OpSet, s), ReasonSocketClosedWhileInFlight).Duration()
	assert.False(t, ok)
	// A SetIdempotent override is what counts.
	st := newState(memdx.OpSet, s)
	st.SetIdempotent(true)
	_, ok = s.RetryAfter(st, ReasonSocketClosedWhileInFlight).Duration()
	assert.True(t, ok)
}

func TestBestEffortCustomBackoff(t *testing.T) {
	var seen []int
	s := BestEffort(func(n int) time.Duration { seen = append(seen, n); return time.Duration(n+1) * time.Second })
	st := newState(memdx.OpGet, s)
	st.attempts = 4
	d, ok := s.RetryAfter(st, ReasonKVLocked).Duration()
	assert.True(t, ok)
	assert.Equal(t, 5*time.Second, d)
	assert.Equal(t, []int{4}, seen)
	// The zero BestEffortStrategy uses the default backoff.
	d, _ = (&BestEffortStrategy{}).RetryAfter(st, ReasonKVLocked).Duration()
	assert.Equal(t, 16*ms, d)
}

// TestFailFastOnTerminalErrors: RFC 0049 rev 16's table; any other reason
// behaves as BestEffort.
func TestFailFastOnTerminalErrors(t *testing.T) {
	s := FailFastOnTerminalErrors(nil)
	terminal := []struct {
		reason Reason
		err    error
	}{
		{ReasonAuthenticationError, kverr.ErrAuthenticationFailure},
		{ReasonTLSError, kverr.ErrTLS},
		{ReasonBucketAccessError, kverr.ErrBucketNotFound},
		{ReasonScopeNotFound, kverr.ErrScopeNotFound},
		{ReasonCollectionNotFound, kverr.ErrCollectionNotFound},
	}
	for _, row := range terminal {
		for _, op := range []memdx.OpCode{memdx.OpGet, memdx.OpSet} {
			a := s.RetryAfter(newState(op, s), row.reason)
			_, ok := a.Duration()
			assert.False(t, ok, "%s %s", row.reason, op)
			assert.Same(t, row.err, a.Err(), "%s %s", row.reason, op)
		}
	}
	best := BestEffort(nil)
	for _, r := range Reasons() {
		if r.Terminal() {
			continue
		}
		for _, op := range []memdx.OpCode{memdx.OpGet, memdx.OpSet} {
			for _, n := range []int{0, 3, 12} {
				st := newState(op, s)
				st.attempts = n
				assert.Equal(t, best.RetryAfter(st, r), s.RetryAfter(st, r), "%s %s %d", r, op, n)
			}
		}
	}
	// Its backoff is the one given.
	s = FailFastOnTerminalErrors(func(int) time.Duration { return 7 * time.Second })
	d, _ := s.RetryAfter(newState(memdx.OpGet, s), ReasonKVLocked).Duration()
	assert.Equal(t, 7*time.Second, d)
}

// TestBestEffortOnTerminalReasons: with the chosen table values, BestEffort
// keeps retrying terminal conditions, for any operation.
func TestBestEffortOnTerminalReasons(t *testing.T) {
	s := BestEffort(nil)
	for _, r := range Reasons() {
		if !r.Terminal() {
			continue
		}
		_, ok := s.RetryAfter(newState(memdx.OpSet, s), r).Duration()
		assert.True(t, ok, "%s", r)
	}
}

func TestDefaultStrategy(t *testing.T) {
	assert.IsType(t, &FailFastOnTerminalErrorsStrategy{}, DefaultStrategy())
	assert.Same(t, DefaultStrategy(), DefaultStrategy())
	st := new(State)
	st.Init(context.Background(), memdx.OpGet, nil, time.Time{})
	assert.Same(t, DefaultStrategy(), st.Strategy())
	var zero State
	assert.Same(t, DefaultStrategy(), zero.Strategy())
}

// ResendsIdempotent holds for the package's strategies that retry an
// idempotent request alike whether its connection refused it or ended
// after writing it, and for no other: a strategy of its own may tell the
// two apart.
func TestResendsIdempotent(t *testing.T) {
	other := StrategyFunc(func(Request, Reason) Action { return NoRetry() })
	for _, tc := range []struct {
		s    Strategy
		want bool
	}{
		{BestEffort(nil), true}, {FailFastOnTerminalErrors(nil), true}, {DefaultStrategy(), true},
		{FollowErrorMap(nil), true}, {FollowErrorMap(BestEffort(nil)), true}, {&FollowErrorMapStrategy{}, true},
		{FollowErrorMap(other), false}, {other, false}, {nil, false},
	} {
		assert.Equal(t, tc.want, ResendsIdempotent(tc.s), "%T", tc.s)
	}
	// What "alike" means for the ones it holds for: an idempotent request
	// is retried for both reasons.
	var st State
	st.Init(context.Background(), memdx.OpGet, nil, time.Now().Add(time.Second))
	for _, s := range []Strategy{BestEffort(nil), FailFastOnTerminalErrors(nil), FollowErrorMap(nil)} {
		for _, r := range []Reason{ReasonSocketNotAvailable, ReasonSocketClosedWhileInFlight} {
			_, retried := s.RetryAfter(&st, r).Duration()
			assert.True(t, retried, "%T %v", s, r)
		}
	}
}

// TestExponentialBackoffZeroFirstNeverNegative: first 0 waits 0 for every
// retry, min(0*factor^n, limit), also once factor^n is +Inf (0*Inf is NaN,
// which a time.Duration conversion turns into a negative delay).
func TestExponentialBackoffZeroFirstNeverNegative(t *testing.T) {
	b := ExponentialBackoff(0, 500*ms, 2)
	for _, n := range []int{0, 1, 100, 1023, 1024, 5000, math.MaxInt} {
		assert.Equal(t, time.Duration(0), b(n), "retries %d", n)
	}
}
