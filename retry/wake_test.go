package retry

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// TestWaitOrWakeEndsBackoffWhenWoken: an NMV back-off (RFC 0049's controlled
// backoff, 1 s after five retries) ends the moment wake is closed, on a
// fake clock that never moves: the retry is sent at once and counted.
func TestWaitOrWakeEndsBackoffWhenWoken(t *testing.T) {
	o, fc, st := fakeSetup(memdx.OpGet, nil, 10*time.Second)
	for range 5 {
		d := o.decide(st, ReasonKVNotMyVbucket, nil)
		require.True(t, d.Retry)
	}
	wake := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- o.WaitOrWake(st, ReasonKVNotMyVbucket, nil, wake) }()
	require.NoError(t, fc.BlockUntilTimers(waitCtx(t), 1), "the back-off must arm a timer")
	assert.Equal(t, []time.Time{t0.Add(time.Second)}, fc.Timers())
	close(wake)
	select {
	case err := <-done:
		require.NoError(t, err, "woken: retry now")
	case <-waitCtx(t).Done():
		t.Fatal("WaitOrWake did not return when woken")
	}
	assert.Equal(t, 6, st.Attempts())
	assert.Empty(t, fc.Timers(), "the woken wait's timer is stopped")
}

// TestWaitOrWakeAlreadyWoken: a wake closed before the call (the config
// changed between the attempt and its failure) retries without waiting.
func TestWaitOrWakeAlreadyWoken(t *testing.T) {
	o, fc, st := fakeSetup(memdx.OpGet, nil, 10*time.Second)
	wake := make(chan struct{})
	close(wake)
	require.NoError(t, o.WaitOrWake(st, ReasonNodeNotAvailable, nil, wake))
	assert.Equal(t, 1, st.Attempts())
	assert.Empty(t, fc.Timers())
}

// TestWaitOrWakeTurnsTimeoutIntoRetry: a wait that would have run into the
// deadline and failed (the capping rule) becomes a retry when woken before
// the deadline: the new config arrived in time to be used.
func TestWaitOrWakeTurnsTimeoutIntoRetry(t *testing.T) {
	o, fc, st := fakeSetup(memdx.OpGet, fixed(time.Second), 2500*ms)
	fc.Advance(2 * time.Second)
	wake := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- o.WaitOrWake(st, ReasonNodeNotAvailable, errTmpFail, wake) }()
	require.NoError(t, fc.BlockUntilTimers(waitCtx(t), 1))
	assert.Equal(t, []time.Time{t0.Add(2500 * ms)}, fc.Timers(), "waits until the deadline")
	close(wake)
	select {
	case err := <-done:
		require.NoError(t, err, "woken before the deadline: retry")
	case <-waitCtx(t).Done():
		t.Fatal("WaitOrWake did not return when woken")
	}
	assert.Equal(t, 1, st.Attempts())
}

// TestWaitOrWakeUnwokenTimesOut: without a wake the capped wait ends at the
// deadline with the timeout, as Wait's does.
func TestWaitOrWakeUnwokenTimesOut(t *testing.T) {
	o, fc, st := fakeSetup(memdx.OpGet, fixed(time.Second), 2500*ms)
	fc.Advance(2 * time.Second)
	done := make(chan error, 1)
	go func() { done <- o.WaitOrWake(st, ReasonNodeNotAvailable, errTmpFail, make(chan struct{})) }()
	require.NoError(t, fc.BlockUntilTimers(waitCtx(t), 1))
	fc.Advance(500 * ms)
	select {
	case err := <-done:
		assert.ErrorIs(t, err, kverr.ErrTimeout)
	case <-waitCtx(t).Done():
		t.Fatal("WaitOrWake did not return at the deadline")
	}
	assert.Equal(t, 0, st.Attempts())
}

// TestWaitOrWakeRefusalIgnoresWake: a refusal is returned at once.
func TestWaitOrWakeRefusalIgnoresWake(t *testing.T) {
	o, _, st := fakeSetup(memdx.OpGet, nil, time.Second)
	wake := make(chan struct{})
	close(wake)
	err := o.WaitOrWake(st, ReasonUnknown, nil, wake)
	assert.ErrorIs(t, err, kverr.ErrNotRetried)
}

// TestWaitOrWakeRealClockAllocatesNothing: waiting with a wake channel on
// the real clock allocates nothing once the State has its timer.
func TestWaitOrWakeRealClockAllocatesNothing(t *testing.T) {
	o := &Orchestrator{Logger: quiet}
	st := new(State)
	wake := make(chan struct{})
	st.Init(context.Background(), memdx.OpGet, nil, time.Time{})
	require.NoError(t, o.WaitOrWake(st, ReasonKVNotMyVbucket, nil, wake)) // arms st's timer
	allocs := testing.AllocsPerRun(20, func() {
		st.Init(context.Background(), memdx.OpGet, nil, time.Time{})
		if err := o.WaitOrWake(st, ReasonKVNotMyVbucket, nil, wake); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

// TestWaitOrWakeRealClockWoken: on the real clock, a 1 s NMV back-off ends
// when wake is closed while it runs; the retry follows at once, long
// before the timer would have fired.
func TestWaitOrWakeRealClockWoken(t *testing.T) {
	o := &Orchestrator{Logger: quiet}
	st := new(State)
	st.Init(context.Background(), memdx.OpGet, nil, time.Now().Add(time.Hour))
	for range 5 {
		require.True(t, o.decide(st, ReasonKVNotMyVbucket, nil).Retry)
	}
	wake := make(chan struct{})
	start := time.Now()
	go close(wake)
	require.NoError(t, o.WaitOrWake(st, ReasonKVNotMyVbucket, nil, wake))
	assert.Less(t, time.Since(start), time.Second, "the 1 s back-off ran out instead of ending on the wake")
	assert.Equal(t, 6, st.Attempts())
}
