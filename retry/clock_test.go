package retry

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeClock(t *testing.T) {
	fc := NewFakeClock(t0)
	assert.Equal(t, t0, fc.Now())
	a := fc.NewTimer(10 * ms)
	b := fc.NewTimer(5 * ms)
	assert.Equal(t, []time.Time{t0.Add(10 * ms), t0.Add(5 * ms)}, fc.Timers())

	fc.Advance(4 * ms)
	_, ok := received(b.C())
	assert.False(t, ok)
	fc.Advance(1 * ms)
	v, ok := received(b.C())
	assert.True(t, ok)
	assert.Equal(t, t0.Add(5*ms), v)
	assert.False(t, b.Stop(), "already fired")

	assert.True(t, a.Stop())
	assert.False(t, a.Stop())
	fc.Advance(time.Hour)
	_, ok = received(a.C())
	assert.False(t, ok, "a stopped timer does not fire")

	// Reset re-arms and drops an undelivered time.
	now := fc.Now()
	b.Reset(time.Second)
	fc.Advance(time.Second)
	b.Reset(2 * time.Second) // fired but not received: dropped
	_, ok = received(b.C())
	assert.False(t, ok)
	fc.Set(now.Add(3 * time.Second))
	v, ok = received(b.C())
	assert.True(t, ok)
	assert.Equal(t, now.Add(3*time.Second), v)

	// Non-positive durations fire at once; Set and Advance never go back.
	c := fc.NewTimer(0)
	_, ok = received(c.C())
	assert.True(t, ok)
	before := fc.Now()
	fc.Set(t0)
	fc.Advance(-time.Hour)
	assert.Equal(t, before, fc.Now())
	assert.Empty(t, fc.Timers())
}

func TestFakeClockBlockUntilTimers(t *testing.T) {
	fc := NewFakeClock(t0)
	armed := make(chan struct{})
	go func() {
		defer close(armed)
		fc.NewTimer(time.Second)
		fc.NewTimer(time.Second)
	}()
	require.NoError(t, fc.BlockUntilTimers(waitCtx(t), 2))
	<-armed
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, fc.BlockUntilTimers(ctx, 3), context.Canceled)
}

func TestRealClock(t *testing.T) {
	c := RealClock()
	before := time.Now()
	assert.False(t, c.Now().Before(before))
	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	tm.Reset(time.Hour)
	assert.True(t, tm.Stop())
}
