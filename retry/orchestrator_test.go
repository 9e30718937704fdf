package retry

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/errmap"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// fakeSetup returns an orchestrator on a fake clock at t0 and a State for op
// with the given strategy and a deadline timeout after t0.
func fakeSetup(op memdx.OpCode, s Strategy, timeout time.Duration) (*Orchestrator, *FakeClock, *State) {
	fc := NewFakeClock(t0)
	o := &Orchestrator{Clock: fc, Logger: quiet}
	st := new(State)
	var deadline time.Time
	if timeout > 0 {
		deadline = t0.Add(timeout)
	}
	st.Init(context.Background(), op, s, deadline)
	return o, fc, st
}

var errTmpFail = &memdx.StatusError{Status: memdx.StatusTmpFail, OpCode: memdx.OpGet}

// TestCappingExample is RFC 0049's example, decided: 2 s into a 2.5 s
// operation a strategy asks for 1 s; the wait is capped to 500 ms and the
// operation then times out instead of being sent again.
func TestCappingExample(t *testing.T) {
	o, fc, st := fakeSetup(memdx.OpGet, fixed(time.Second), 2500*ms)
	fc.Advance(2 * time.Second)

	d := o.decide(st, ReasonKVTemporaryFailure, errTmpFail)
	assert.False(t, d.Retry, "must not be sent again")
	assert.Equal(t, 500*ms, d.Delay)
	var te *TimeoutError
	require.ErrorAs(t, d.Err, &te)
	assert.ErrorIs(t, d.Err, kverr.ErrTimeout)
	assert.ErrorIs(t, d.Err, kverr.ErrUnambiguousTimeout)
	assert.ErrorIs(t, d.Err, context.DeadlineExceeded)
	assert.NotErrorIs(t, d.Err, kverr.ErrAmbiguous)
	assert.NotErrorIs(t, d.Err, memdx.StatusTmpFail, "a timeout is not its last attempt's error")
	assert.Equal(t, 0, te.Attempts, "the capped retry never happened")
	assert.Equal(t, ReasonSet(0), te.Reasons, "nor is its reason a retry's")
	assert.Equal(t, ReasonSet(0), st.Reasons())
	assert.Equal(t, errTmpFail, te.LastErr)
	assert.Equal(t, memdx.OpGet, te.OpCode)
	assert.Equal(t, 0, st.Attempts())
}

// TestCappingExampleWait runs the same example through Wait, with a client
// loop that counts sends, on a fake clock: the wait lasts exactly 500 ms and
// the operation fails with a timeout after one send.
func TestCappingExampleWait(t *testing.T) {
	o, fc, st := fakeSetup(memdx.OpGet, fixed(time.Second), 2500*ms)
	sends := 0
	done := make(chan error, 1)
	go func() {
		for {
			sends++
			fc.Advance(2 * time.Second) // the attempt takes 2 s and fails with TMPFAIL
			if err := o.Wait(st, ReasonKVTemporaryFailure, errTmpFail); err != nil {
				done <- err
				return
			}
		}
	}()
	require.NoError(t, fc.BlockUntilTimers(waitCtx(t), 1), "Wait must arm a timer")
	assert.Equal(t, []time.Time{t0.Add(2500 * ms)}, fc.Timers(), "the wait ends at the deadline: 500 ms")
	fc.Advance(499 * ms)
	select {
	case err := <-done:
		t.Fatalf("Wait returned before its 500 ms: %v", err)
	default:
	}
	fc.Advance(1 * ms)
	var err error
	select {
	case err = <-done:
	case <-waitCtx(t).Done():
		t.Fatal("Wait did not return when its timer fired")
	}
	assert.ErrorIs(t, err, kverr.ErrTimeout)
	assert.Equal(t, 1, sends, "the request must not be sent again")
	assert.Equal(t, t0.Add(2500*ms), fc.Now())
	assert.Empty(t, fc.Timers())
}

// TestCapBoundaries pins the cap rule: a wait ending before the deadline is a
// retry (even 1 ns before), at or after it a timeout at the deadline.
func TestCapBoundaries(t *testing.T) {
	cases := []struct {
		name      string
		elapsed   time.Duration // since t0; the deadline is t0+1s
		delay     time.Duration
		retry     bool
		wantDelay time.Duration
	}{
		{"ends 1ns before the deadline: sent again", 500 * ms, 500*ms - 1, true, 500*ms - 1},
		{"ends exactly at the deadline: timeout", 500 * ms, 500 * ms, false, 500 * ms},
		{"ends after the deadline: capped", 500 * ms, 2 * time.Second, false, 500 * ms},
		{"no wait, time left: sent at once", 999 * ms, 0, true, 0},
		{"no wait, at the deadline: timeout now", time.Second, 0, false, 0},
		{"deadline passed: timeout now", 3 * time.Second, 10 * ms, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, fc, st := fakeSetup(memdx.OpGet, fixed(c.delay), time.Second)
			fc.Advance(c.elapsed)
			d := o.decide(st, ReasonKVLocked, nil)
			assert.Equal(t, c.retry, d.Retry)
			assert.Equal(t, c.wantDelay, d.Delay)
			if c.retry {
				assert.NoError(t, d.Err)
				assert.Equal(t, 1, st.Attempts())
			} else {
				assert.ErrorIs(t, d.Err, kverr.ErrTimeout)
				assert.Equal(t, 0, st.Attempts())
			}
		})
	}
	// Without a deadline nothing is capped.
	o, _, st := fakeSetup(memdx.OpGet, fixed(24*time.Hour), 0)
	d := o.decide(st, ReasonKVLocked, nil)
	assert.True(t, d.Retry)
	assert.Equal(t, 24*time.Hour, d.Delay)
}

// recordingStrategy counts its calls and refuses.
type recordingStrategy struct{ calls []Reason }

func (s *recordingStrategy) RetryAfter(_ Request, r Reason) Action {
	s.calls = append(s.calls, r)
	return NoRetry()
}

// TestAlwaysRetryBypassesStrategy: always-retry reasons are retried with the
// controlled backoff indexed by the attempt count, even for a non-idempotent
// operation whose strategy refuses everything.
func TestAlwaysRetryBypassesStrategy(t *testing.T) {
	for _, r := range Reasons() {
		if !r.AlwaysRetry() {
			continue
		}
		t.Run(r.String(), func(t *testing.T) {
			rs := &recordingStrategy{}
			o, fc, st := fakeSetup(memdx.OpSet, rs, time.Hour)
			var got []time.Duration
			for i := range 8 {
				d := o.decide(st, r, nil)
				require.True(t, d.Retry)
				require.NoError(t, d.Err)
				assert.Equal(t, i+1, st.Attempts())
				got = append(got, d.Delay)
				fc.Advance(d.Delay)
			}
			assert.Equal(t, []time.Duration{1 * ms, 10 * ms, 50 * ms, 100 * ms, 500 * ms, 1000 * ms, 1000 * ms, 1000 * ms}, got)
			assert.Empty(t, rs.calls, "the strategy must not be asked")
			assert.Equal(t, ReasonSet(0).With(r), st.Reasons())
		})
	}
}

// TestAttemptCounterShared: one attempt count for all reasons; the strategy
// sees the count before the retry and every reason seen so far.
func TestAttemptCounterShared(t *testing.T) {
	var seen []int
	var seenReasons []ReasonSet
	s := StrategyFunc(func(req Request, r Reason) Action {
		seen = append(seen, req.Attempts())
		seenReasons = append(seenReasons, req.Reasons())
		return BestEffort(nil).RetryAfter(req, r)
	})
	o, _, st := fakeSetup(memdx.OpGet, s, time.Hour)
	assert.Equal(t, 1*ms, o.decide(st, ReasonKVTemporaryFailure, nil).Delay) // strategy, 0 retries
	assert.Equal(t, 2*ms, o.decide(st, ReasonKVLocked, nil).Delay)           // strategy, 1 retry
	assert.Equal(t, 50*ms, o.decide(st, ReasonKVNotMyVbucket, nil).Delay)    // controlled, 2 retries
	assert.Equal(t, 8*ms, o.decide(st, ReasonKVTemporaryFailure, nil).Delay) // strategy, 3 retries
	assert.Equal(t, []int{0, 1, 3}, seen)
	tmp := ReasonSet(0).With(ReasonKVTemporaryFailure)
	assert.Equal(t, []ReasonSet{0, tmp, tmp.With(ReasonKVLocked).With(ReasonKVNotMyVbucket)}, seenReasons)
	assert.Equal(t, 4, st.Attempts())
}

// TestNMVInterval: RFC 0005's fixed interval as an option, for NMV only.
func TestNMVInterval(t *testing.T) {
	o, _, st := fakeSetup(memdx.OpGet, nil, time.Hour)
	o.NMVInterval = 100 * ms
	for range 6 {
		assert.Equal(t, 100*ms, o.decide(st, ReasonKVNotMyVbucket, nil).Delay)
	}
	assert.Equal(t, 1000*ms, o.decide(st, ReasonKVCollectionOutdated, nil).Delay, "controlled backoff, 6 retries so far")
	// The default is RFC 0049's controlled backoff.
	o.NMVInterval = 0
	st.Init(context.Background(), memdx.OpGet, nil, t0.Add(time.Hour))
	assert.Equal(t, 1*ms, o.decide(st, ReasonKVNotMyVbucket, nil).Delay)
	assert.Equal(t, 10*ms, o.decide(st, ReasonKVNotMyVbucket, nil).Delay)
}

// TestRouteChanged: an NMV whose config moves the vbucket is retried at once,
// counted, logged and bounded by the deadline; the mark is used once.
func TestRouteChanged(t *testing.T) {
	rec, logger := newRecorder(slog.LevelDebug)
	for _, interval := range []time.Duration{0, 100 * ms} {
		o, fc, st := fakeSetup(memdx.OpSet, nil, time.Second)
		o.NMVInterval = interval
		o.Logger = logger
		o.decide(st, ReasonKVNotMyVbucket, nil) // one retry so far
		st.MarkRouteChanged()
		d := o.decide(st, ReasonKVNotMyVbucket, nil)
		assert.True(t, d.Retry)
		assert.Equal(t, time.Duration(0), d.Delay)
		assert.Equal(t, 2, st.Attempts())
		// Used once: the next NMV waits again.
		d = o.decide(st, ReasonKVNotMyVbucket, nil)
		assert.NotZero(t, d.Delay)
		// Ignored for a reason the strategy decides (and consumed).
		st.MarkRouteChanged()
		d = o.decide(st, ReasonKVTemporaryFailure, nil)
		assert.Equal(t, DefaultBackoff(3), d.Delay)
		d = o.decide(st, ReasonKVCollectionOutdated, nil)
		assert.Equal(t, ControlledBackoff(4), d.Delay)
		// Bounded by the deadline.
		fc.Set(t0.Add(time.Second))
		st.MarkRouteChanged()
		d = o.decide(st, ReasonKVNotMyVbucket, nil)
		assert.False(t, d.Retry)
		assert.ErrorIs(t, d.Err, kverr.ErrTimeout)
	}
	// The immediate retry was logged like any other.
	var immediate int
	for _, e := range rec.entries() {
		if e.Msg == "retrying operation" && e.Attrs["delay"] == time.Duration(0) {
			immediate++
			assert.Equal(t, "KV_NOT_MY_VBUCKET", e.Attrs["reason"])
			assert.Equal(t, int64(2), e.Attrs["attempt"])
		}
	}
	assert.Equal(t, 2, immediate)
}

// TestRefusal: the strategy's refusal fails the operation at once with the
// reason, the strategy's error and the attempt's error.
func TestRefusal(t *testing.T) {
	o, _, st := fakeSetup(memdx.OpGet, fixed(ms), time.Hour)
	o.decide(st, ReasonKVLocked, nil)
	st.strategy = neverRetry{}
	cause := &memdx.StatusError{Status: memdx.StatusLocked, OpCode: memdx.OpGet}
	d := o.decide(st, ReasonKVLocked, cause)
	assert.False(t, d.Retry)
	assert.Equal(t, time.Duration(0), d.Delay)
	var nr *NotRetriedError
	require.ErrorAs(t, d.Err, &nr)
	assert.Equal(t, ReasonKVLocked, nr.Reason)
	assert.Equal(t, 1, nr.Attempts)
	assert.Equal(t, ReasonSet(0).With(ReasonKVLocked), nr.Reasons)
	assert.False(t, nr.Ambiguous)
	assert.ErrorIs(t, d.Err, kverr.ErrNotRetried)
	assert.ErrorIs(t, d.Err, memdx.StatusLocked)
	assert.NotErrorIs(t, d.Err, kverr.ErrAmbiguous)
	assert.NotErrorIs(t, d.Err, kverr.ErrTimeout)
	assert.Equal(t, 1, st.Attempts(), "a refusal is not an attempt")
	assert.Contains(t, d.Err.Error(), "KV_LOCKED")

	// The default strategy's terminal errors.
	o, _, st = fakeSetup(memdx.OpGet, nil, time.Hour)
	d = o.decide(st, ReasonCollectionNotFound, nil)
	assert.ErrorIs(t, d.Err, kverr.ErrCollectionNotFound)
	assert.ErrorIs(t, d.Err, kverr.ErrNotRetried)
	require.ErrorAs(t, d.Err, &nr)
	assert.Equal(t, ReasonCollectionNotFound, nr.Reason)
	assert.Nil(t, nr.Cause)
}

// TestLogging: every retry, refusal and deadline-capped wait is logged at
// Debug with the reason and the attempt; nothing is logged when Debug is off.
func TestLogging(t *testing.T) {
	rec, logger := newRecorder(slog.LevelDebug)
	o, fc, st := fakeSetup(memdx.OpSet, nil, time.Second)
	o.Logger = logger
	o.decide(st, ReasonKVTemporaryFailure, nil) // retry 1, 1 ms
	o.decide(st, ReasonKVNotMyVbucket, nil)     // retry 2, 10 ms
	fc.Advance(999 * ms)
	o.decide(st, ReasonKVLocked, nil)                  // 4 ms asked, 1 ms left: timeout
	o.decide(st, ReasonSocketClosedWhileInFlight, nil) // refused: SET in flight

	got := rec.entries()
	require.Len(t, got, 4)
	for _, e := range got {
		assert.Equal(t, slog.LevelDebug, e.Level)
		assert.Equal(t, "SET", e.Attrs["op"])
	}
	assert.Equal(t, "retrying operation", got[0].Msg)
	assert.Equal(t, "KV_TEMPORARY_FAILURE", got[0].Attrs["reason"])
	assert.Equal(t, int64(1), got[0].Attrs["attempt"])
	assert.Equal(t, 1*ms, got[0].Attrs["delay"])
	assert.Equal(t, "retrying operation", got[1].Msg)
	assert.Equal(t, "KV_NOT_MY_VBUCKET", got[1].Attrs["reason"])
	assert.Equal(t, int64(2), got[1].Attrs["attempt"])
	assert.Equal(t, 10*ms, got[1].Attrs["delay"])
	assert.Contains(t, got[2].Msg, "deadline")
	assert.Equal(t, "KV_LOCKED", got[2].Attrs["reason"])
	assert.Equal(t, 4*ms, got[2].Attrs["delay"])
	assert.Equal(t, 1*ms, got[2].Attrs["until_deadline"])
	assert.Equal(t, "not retrying operation", got[3].Msg)
	assert.Equal(t, "SOCKET_CLOSED_WHILE_IN_FLIGHT", got[3].Attrs["reason"])
	assert.Equal(t, int64(2), got[3].Attrs["attempt"])
	assert.Equal(t, true, got[3].Attrs["ambiguous"])

	// FailWith errors are logged.
	st.Init(context.Background(), memdx.OpSet, nil, fc.Now().Add(time.Second))
	o.decide(st, ReasonAuthenticationError, nil)
	got = rec.entries()
	assert.Equal(t, kverr.ErrAuthenticationFailure.Error(), got[len(got)-1].Attrs["error"])

	// Debug off: nothing.
	rec2, logger2 := newRecorder(slog.LevelInfo)
	o.Logger = logger2
	o.decide(st, ReasonKVNotMyVbucket, nil)
	o.decide(st, ReasonSocketClosedWhileInFlight, nil)
	assert.Empty(t, rec2.entries())
}

// TestWaitRealClock: Wait on the real clock with short delays.
func TestWaitRealClock(t *testing.T) {
	o := &Orchestrator{Logger: quiet}
	st := new(State)
	st.Init(context.Background(), memdx.OpGet, fixed(ms), time.Now().Add(time.Minute))
	start := time.Now()
	for range 3 {
		require.NoError(t, o.Wait(st, ReasonKVLocked, nil))
	}
	assert.GreaterOrEqual(t, time.Since(start), 3*ms, "each wait lasts at least its delay")
	assert.Equal(t, 3, st.Attempts())

	// A context deadline bounds the waits: a 1 h wait ends at it, as a
	// timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 20*ms)
	defer cancel()
	st.Init(ctx, memdx.OpGet, fixed(time.Hour), time.Time{})
	dl, _ := ctx.Deadline()
	assert.Equal(t, dl, st.Deadline(), "Init takes the context's deadline")
	err := o.Wait(st, ReasonKVLocked, nil)
	assert.ErrorIs(t, err, kverr.ErrTimeout)
	assert.False(t, time.Now().Before(dl), "the timeout comes at the deadline, not before")
}

// TestWaitCanceled: a cancellation during a wait ends it with a
// *CanceledError; so does a retry without wait on a canceled context.
func TestWaitCanceled(t *testing.T) {
	fc := NewFakeClock(t0)
	o := &Orchestrator{Clock: fc, Logger: quiet}
	ctx, cancel := context.WithCancelCause(context.Background())
	why := errors.New("user gave up")
	st := new(State)
	st.Init(ctx, memdx.OpSet, fixed(time.Second), t0.Add(time.Hour))
	done := make(chan error, 1)
	go func() { done <- o.Wait(st, ReasonKVTemporaryFailure, errTmpFail) }()
	require.NoError(t, fc.BlockUntilTimers(waitCtx(t), 1))
	cancel(why)
	var err error
	select {
	case err = <-done:
	case <-waitCtx(t).Done():
		t.Fatal("Wait did not return on cancellation")
	}
	var ce *CanceledError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, kverr.ErrRequestCanceled)
	assert.ErrorIs(t, err, why)
	assert.ErrorIs(t, err, context.Canceled)
	// (A SET in doubt never waits: it is refused at once, TestInDoubtNeverResent.)
	assert.NotErrorIs(t, err, kverr.ErrAmbiguous, "the SET was answered: not ambiguous")
	assert.False(t, ce.Ambiguous)
	assert.Equal(t, errTmpFail, ce.LastErr)
	assert.Equal(t, 0, ce.Attempts, "the retry cut short was not sent")
	assert.Equal(t, 0, st.Attempts())
	assert.Equal(t, ReasonSet(0), ce.Reasons, "nor is its reason a retry's")
	assert.Empty(t, fc.Timers(), "the timer is stopped")

	// No wait needed, but the context is done: not sent again.
	st.Init(ctx, memdx.OpGet, nil, t0.Add(time.Hour))
	st.MarkRouteChanged()
	err = o.Wait(st, ReasonKVNotMyVbucket, nil)
	assert.ErrorIs(t, err, kverr.ErrRequestCanceled)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 0, st.Attempts())
	// A refusal is returned as is, context or not.
	err = o.Wait(st, ReasonScopeNotFound, nil)
	assert.ErrorIs(t, err, kverr.ErrScopeNotFound)
}

// TestAwaitWake: an NMV whose newer config is still on its way waits for
// the wake, up to MaxAwaitWake, rather than the backoff's first 1 ms:
// woken, it retries at once; not woken, after MaxAwaitWake; the mark is
// used once, MarkRouteChanged wins over it, and the deadline bounds it.
func TestAwaitWake(t *testing.T) {
	for _, interval := range []time.Duration{0, 100 * ms} {
		o, fc, st := fakeSetup(memdx.OpGet, nil, 10*time.Second)
		o.NMVInterval = interval
		st.MarkAwaitWake()
		d := o.decide(st, ReasonKVNotMyVbucket, nil)
		assert.True(t, d.Retry)
		assert.Equal(t, MaxAwaitWake, d.Delay)
		d = o.decide(st, ReasonKVNotMyVbucket, nil)
		assert.Less(t, d.Delay, MaxAwaitWake, "used once")

		st.MarkAwaitWake()
		st.MarkRouteChanged()
		assert.Equal(t, time.Duration(0), o.decide(st, ReasonKVNotMyVbucket, nil).Delay, "a route that changed goes at once")

		// Woken before MaxAwaitWake: retried at once, counted.
		wake := make(chan struct{})
		done := make(chan error, 1)
		st.MarkAwaitWake()
		before := st.Attempts()
		go func() { done <- o.WaitOrWake(st, ReasonKVNotMyVbucket, nil, wake) }()
		require.NoError(t, fc.BlockUntilTimers(context.Background(), 1))
		assert.Equal(t, []time.Time{fc.Now().Add(MaxAwaitWake)}, fc.Timers())
		close(wake)
		require.NoError(t, <-done)
		assert.Equal(t, before+1, st.Attempts())

		// Bounded by the deadline.
		fc.Set(st.Deadline().Add(-MaxAwaitWake / 2))
		st.MarkAwaitWake()
		d = o.decide(st, ReasonKVNotMyVbucket, nil)
		assert.False(t, d.Retry)
		assert.Equal(t, MaxAwaitWake/2, d.Delay)
		assert.ErrorIs(t, d.Err, kverr.ErrTimeout)
	}
}

// TestWaitZeroDelay: a retry at once returns nil without a timer.
func TestWaitZeroDelay(t *testing.T) {
	o, fc, st := fakeSetup(memdx.OpGet, nil, time.Second)
	st.MarkRouteChanged()
	require.NoError(t, o.Wait(st, ReasonKVNotMyVbucket, nil))
	assert.Equal(t, 1, st.Attempts())
	assert.Empty(t, fc.Timers())
	// A timeout with no time left returns at once too.
	fc.Advance(time.Second)
	assert.ErrorIs(t, o.Wait(st, ReasonKVNotMyVbucket, nil), kverr.ErrTimeout)
}

// TestZeroOrchestrator: the zero Orchestrator works (real clock,
// slog.Default()).
func TestZeroOrchestrator(t *testing.T) {
	var o Orchestrator
	st := new(State)
	st.Init(context.Background(), memdx.OpGet, nil, time.Now().Add(time.Minute))
	require.NoError(t, o.Wait(st, ReasonKVNotMyVbucket, nil))
	assert.Equal(t, 1, st.Attempts())
}

// TestAmbiguityMatrix: idempotent x written x answered, for every way this
// package ends an operation. Ambiguous exactly when the operation is not
// idempotent and an attempt was written without a definite answer.
func TestAmbiguityMatrix(t *testing.T) {
	type outcome struct{ written, answered bool }
	for _, op := range []memdx.OpCode{memdx.OpGet, memdx.OpSet} {
		for _, oc := range []outcome{{false, false}, {true, true}, {true, false}} {
			want := !IsIdempotent(op) && oc.written && !oc.answered
			name := op.String()
			switch {
			case !oc.written:
				name += "/not-written"
			case oc.answered:
				name += "/written-answered"
			default:
				name += "/written-no-answer"
			}
			// The first attempt's outcome as the client reports it: not
			// written (SOCKET_NOT_AVAILABLE), answered (TMPFAIL), or
			// written without answer (MarkInDoubt; the reason the client
			// then has is UNKNOWN, which BestEffort retries only for
			// idempotent operations, so TMPFAIL stands for a retry).
			first := func(o *Orchestrator, st *State) {
				switch {
				case !oc.written:
					o.decide(st, ReasonSocketNotAvailable, nil)
				case oc.answered:
					o.decide(st, ReasonKVTemporaryFailure, nil)
				default:
					st.MarkInDoubt()
					o.decide(st, ReasonKVTemporaryFailure, nil)
				}
			}
			t.Run(name+"/capped-wait", func(t *testing.T) {
				o, fc, st := fakeSetup(op, nil, time.Second)
				first(o, st)
				fc.Advance(time.Second - ms)
				d := o.decide(st, ReasonKVTemporaryFailure, nil) // answered, then the deadline
				if want {
					checkRefusedInDoubt(t, d.Err)
					return
				}
				checkAmbiguity(t, d.Err, want, true)
			})
			t.Run(name+"/deadline-in-flight", func(t *testing.T) {
				o, _, st := fakeSetup(op, nil, time.Second)
				first(o, st)
				// The deadline passes before the next attempt is
				// written: the client builds the timeout itself.
				checkAmbiguity(t, st.TimeoutError(nil), want, true)
			})
			t.Run(name+"/canceled", func(t *testing.T) {
				fc := NewFakeClock(t0)
				o := &Orchestrator{Clock: fc, Logger: quiet}
				ctx, cancel := context.WithCancel(context.Background())
				st := new(State)
				st.Init(ctx, op, nil, t0.Add(time.Second))
				first(o, st)
				cancel()
				err := o.Wait(st, ReasonKVTemporaryFailure, nil)
				if want {
					checkRefusedInDoubt(t, err)
					return
				}
				checkAmbiguity(t, err, want, false)
			})
		}
	}
}

// checkRefusedInDoubt: a non-idempotent request in doubt is refused at
// once, ambiguously, whatever the reason.
func checkRefusedInDoubt(t *testing.T, err error) {
	t.Helper()
	var nr *NotRetriedError
	require.ErrorAs(t, err, &nr)
	assert.True(t, nr.Ambiguous)
	assert.ErrorIs(t, err, kverr.ErrAmbiguous)
}

func checkAmbiguity(t *testing.T, err error, want, timeout bool) {
	t.Helper()
	require.Error(t, err)
	assert.Equal(t, want, errors.Is(err, kverr.ErrAmbiguous), "kverr.ErrAmbiguous: %v", err)
	if timeout {
		var te *TimeoutError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, want, te.Ambiguous)
		assert.Equal(t, want, errors.Is(err, kverr.ErrAmbiguousTimeout))
		assert.Equal(t, !want, errors.Is(err, kverr.ErrUnambiguousTimeout))
	} else {
		var ce *CanceledError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, want, ce.Ambiguous)
	}
}

// TestSocketClosedInFlight: the SET whose connection dies after the write
// fails at once, ambiguously, and not with a timeout; a GET is retried and
// stays unambiguous.
func TestSocketClosedInFlight(t *testing.T) {
	connErr := errors.New("connection reset")
	o, _, st := fakeSetup(memdx.OpSet, nil, time.Second)
	err := o.Wait(st, ReasonSocketClosedWhileInFlight, connErr)
	var nr *NotRetriedError
	require.ErrorAs(t, err, &nr)
	assert.True(t, nr.Ambiguous)
	assert.True(t, st.InDoubt())
	assert.Equal(t, ReasonSocketClosedWhileInFlight, nr.Reason)
	assert.ErrorIs(t, err, kverr.ErrAmbiguous)
	assert.ErrorIs(t, err, connErr)
	assert.NotErrorIs(t, err, kverr.ErrTimeout)
	assert.Contains(t, err.Error(), "may have been applied")

	o, fc, st := fakeSetup(memdx.OpGet, nil, time.Second)
	d := o.decide(st, ReasonSocketClosedWhileInFlight, connErr)
	assert.True(t, d.Retry)
	assert.True(t, st.InDoubt())
	fc.Advance(time.Second)
	d = o.decide(st, ReasonKVTemporaryFailure, nil)
	assert.ErrorIs(t, d.Err, kverr.ErrUnambiguousTimeout, "an idempotent GET is never ambiguous")
}

// TestInDoubtNeverResent: once a non-idempotent request may have been
// applied, no strategy can send it again, not even one that retries
// everything; an idempotent one in doubt is still retried. UNKNOWN is never
// retried, even for a GET.
func TestInDoubtNeverResent(t *testing.T) {
	asked := 0
	retryAll := StrategyFunc(func(Request, Reason) Action { asked++; return RetryAfter(ms) })
	for _, reason := range []Reason{ReasonSocketClosedWhileInFlight, ReasonKVTemporaryFailure, ReasonKVLocked, ReasonNodeNotAvailable} {
		o, _, st := fakeSetup(memdx.OpIncrement, retryAll, time.Second)
		st.MarkInDoubt()
		d := o.decide(st, reason, nil)
		assert.False(t, d.Retry, "%s", reason)
		checkRefusedInDoubt(t, d.Err)
		assert.Equal(t, 0, st.Attempts())
	}
	// A retry the client would otherwise send: the strategy is asked only
	// for reasons that are not always-retried, and here never.
	o, _, st := fakeSetup(memdx.OpSet, retryAll, time.Second)
	d := o.decide(st, ReasonSocketClosedWhileInFlight, nil)
	checkRefusedInDoubt(t, d.Err)
	assert.Equal(t, 0, asked, "the strategy was asked about a request in doubt")

	o, _, st = fakeSetup(memdx.OpGet, retryAll, time.Second)
	st.MarkInDoubt()
	assert.True(t, o.decide(st, ReasonKVTemporaryFailure, nil).Retry, "an idempotent GET in doubt is retried")
	d = o.decide(st, ReasonUnknown, nil)
	var nr *NotRetriedError
	require.ErrorAs(t, d.Err, &nr)
	assert.Equal(t, ReasonUnknown, nr.Reason)
	assert.False(t, nr.Ambiguous)
}

// TestStateInit: Init clears a previous operation; the context's earlier
// deadline wins; Reset drops references.
func TestStateInit(t *testing.T) {
	o, _, st := fakeSetup(memdx.OpSet, nil, time.Hour)
	st.MarkInDoubt()
	st.MarkRouteChanged()
	o.decide(st, ReasonKVTemporaryFailure, nil)
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	st.Init(ctx, memdx.OpGetReplica, neverRetry{}, t0.Add(time.Minute))
	assert.Equal(t, 0, st.Attempts())
	assert.Equal(t, ReasonSet(0), st.Reasons())
	assert.False(t, st.InDoubt())
	assert.False(t, st.routeChanged)
	assert.True(t, st.Idempotent())
	assert.Equal(t, memdx.OpGetReplica, st.OpCode())
	assert.Equal(t, neverRetry{}, st.Strategy())
	assert.Equal(t, t0.Add(time.Minute), st.Deadline())
	assert.Equal(t, "v", st.Context().Value(key{}))
	_, ok := st.ErrorMap()
	assert.False(t, ok)

	// A later context deadline does not extend the given one; an earlier
	// one wins; with no given deadline the context's is used.
	early, cancel := context.WithDeadline(context.Background(), t0.Add(time.Second))
	defer cancel()
	late, cancel2 := context.WithDeadline(context.Background(), t0.Add(time.Hour))
	defer cancel2()
	st.Init(late, memdx.OpGet, nil, t0.Add(time.Minute))
	assert.Equal(t, t0.Add(time.Minute), st.Deadline())
	st.Init(early, memdx.OpGet, nil, t0.Add(time.Minute))
	assert.Equal(t, t0.Add(time.Second), st.Deadline())
	st.Init(early, memdx.OpGet, nil, time.Time{})
	assert.Equal(t, t0.Add(time.Second), st.Deadline())
	//lint:ignore SA1012 a nil context is documented to mean Background
	st.Init(nil, memdx.OpGet, nil, time.Time{})
	assert.Equal(t, context.Background(), st.Context())
	assert.True(t, st.Deadline().IsZero())

	st.Reset()
	assert.Nil(t, st.ctx)
	assert.Nil(t, st.strategy)
	assert.Equal(t, context.Background(), st.Context())
}

// TestStateInitClearsEveryField: Init, which sets a State's fields one by
// one, leaves a State that ran an operation (every field set) as it
// leaves a new one. A field added to State must be added here, and to
// Init: the count below fails until it is.
func TestStateInitClearsEveryField(t *testing.T) {
	require.Equal(t, 16, reflect.TypeFor[State]().NumField(), "a new State field: set it below and clear it in Init")
	type key struct{}
	dirty := State{ctx: context.WithValue(context.Background(), key{}, "v"), strategy: neverRetry{}, deadline: t0,
		op: memdx.OpSet, name: "Upsert", idempotent: true, attempts: 3, reasons: ReasonSet(0).With(ReasonKVLocked), reasonsBefore: ReasonSet(0).With(ReasonKVTemporaryFailure),
		inDoubt: true, routeChanged: true, awaitWake: true,
		em:    ErrorMapRetry{Entry: errmap.Entry{Status: 0x7ff0, Name: "X"}, Retry: 2, Since: t0, Elapsed: time.Second},
		emSet: true, emOther: true, timer: time.NewTimer(time.Hour)}
	defer dirty.timer.Stop()
	timer := dirty.timer
	var fresh State
	ctx := context.Background()
	dirty.Init(ctx, memdx.OpGet, nil, t0.Add(time.Minute))
	fresh.Init(ctx, memdx.OpGet, nil, t0.Add(time.Minute))
	assert.Same(t, timer, dirty.timer, "Init keeps the timer")
	dirty.timer = nil
	assert.Equal(t, fresh, dirty)
}

func TestErrorStrings(t *testing.T) {
	te := &TimeoutError{OpCode: memdx.OpGet, Attempts: 1, Reasons: ReasonSet(0).With(ReasonKVLocked),
		LastErr: errors.New("last")}
	assert.Equal(t, "retry: unambiguous timeout (the request changed no data) [GET, 1 retry, reasons [KV_LOCKED]]; last error: last", te.Error())
	nr := &NotRetriedError{Reason: ReasonScopeNotFound, OpCode: memdx.OpSet, Err: kverr.ErrScopeNotFound}
	assert.Equal(t, "retry: not retried after SCOPE_NOT_FOUND [SET, 0 retries]: scope not found", nr.Error())
	assert.Nil(t, (&NotRetriedError{}).Unwrap())
	ce := &CanceledError{OpCode: memdx.OpSet, Ambiguous: true, Err: context.Canceled}
	assert.Equal(t, "retry: canceled while waiting to retry (the request may have been applied) [SET, 0 retries]: context canceled", ce.Error())
}

// RetryNotSent takes the retry decided last off Attempts and its reason
// off Reasons, but keeps a reason an earlier retry had: the reasons are
// those of the retries counted.
func TestRetryNotSentTakesItsReasonOff(t *testing.T) {
	o, _, st := fakeSetup(memdx.OpGet, fixed(ms), time.Minute)
	require.True(t, o.decide(st, ReasonKVLocked, nil).Retry)
	require.True(t, o.decide(st, ReasonKVTemporaryFailure, errTmpFail).Retry)
	st.RetryNotSent()
	assert.Equal(t, 1, st.Attempts())
	assert.Equal(t, ReasonSet(0).With(ReasonKVLocked), st.Reasons())

	st.Init(context.Background(), memdx.OpGet, fixed(ms), time.Time{})
	require.True(t, o.decide(st, ReasonKVLocked, nil).Retry)
	require.True(t, o.decide(st, ReasonKVLocked, nil).Retry)
	st.RetryNotSent()
	assert.Equal(t, 1, st.Attempts())
	assert.Equal(t, ReasonSet(0).With(ReasonKVLocked), st.Reasons(), "the first LOCKED retry was made")
}
