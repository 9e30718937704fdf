package retry

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Clock is where the orchestrator reads the time and gets its timers. The
// zero Orchestrator uses the real clock; tests use a *FakeClock.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock, with the semantics of *time.Timer
// since Go 1.23: after Stop or Reset returns, no stale time is received from
// C.
type Timer interface {
	C() <-chan time.Time
	// Reset makes the timer fire d from now, whether or not it fired.
	Reset(d time.Duration)
	// Stop prevents the timer from firing; false if it already fired or
	// was stopped.
	Stop() bool
}

// RealClock returns the system clock.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return &realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t *realTimer) C() <-chan time.Time   { return t.t.C }
func (t *realTimer) Reset(d time.Duration) { t.t.Reset(d) }
func (t *realTimer) Stop() bool            { return t.t.Stop() }

// FakeClock is a Clock whose time moves only when the test moves it: Advance
// and Set fire the timers that fall due, synchronously, in order of their
// due times. It lets a test wait for a goroutine to arm a timer
// (BlockUntilTimers) and see when armed timers are due (Timers), so that
// retry waits are checked without sleeping. It is safe for concurrent use.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer // armed, in arming order
	changed chan struct{}
}

// NewFakeClock returns a fake clock reading start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, changed: make(chan struct{})}
}

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer arms a timer due d after the fake now. A timer with d <= 0 fires
// at once.
func (c *FakeClock) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{clock: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// Advance moves the fake time forward by d (a negative d is ignored) and
// fires every timer due at or before the new time.
func (c *FakeClock) Advance(d time.Duration) {
	if d < 0 {
		d = 0
	}
	c.mu.Lock()
	c.setLocked(c.now.Add(d))
	c.mu.Unlock()
}

// Set moves the fake time to t, if t is later, and fires the timers due.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.setLocked(t)
	}
	c.mu.Unlock()
}

func (c *FakeClock) setLocked(t time.Time) {
	c.now = t
	due := c.timers[:0:0]
	for _, ft := range c.timers {
		if !ft.when.After(t) {
			due = append(due, ft)
		}
	}
	slices.SortStableFunc(due, func(a, b *fakeTimer) int { return a.when.Compare(b.when) })
	for _, ft := range due {
		c.fireLocked(ft)
	}
}

// fireLocked disarms ft and delivers its due time.
func (c *FakeClock) fireLocked(ft *fakeTimer) {
	c.removeLocked(ft)
	select {
	case ft.ch <- ft.when:
	default:
	}
}

func (c *FakeClock) removeLocked(ft *fakeTimer) bool {
	i := slices.Index(c.timers, ft)
	if i < 0 {
		return false
	}
	c.timers = slices.Delete(c.timers, i, i+1)
	c.notifyLocked()
	return true
}

func (c *FakeClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Timers returns the due times of the armed timers, in arming order. The
// caller owns the slice.
func (c *FakeClock) Timers() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Time, len(c.timers))
	for i, ft := range c.timers {
		out[i] = ft.when
	}
	return out
}

// BlockUntilTimers waits until at least n timers are armed, or ctx is done
// (then it returns ctx's error).
func (c *FakeClock) BlockUntilTimers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		armed, ch := len(c.timers), c.changed
		c.mu.Unlock()
		if armed >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type fakeTimer struct {
	clock *FakeClock
	ch    chan time.Time
	when  time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Reset(d time.Duration) {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(t)
	select { // drop a time delivered before the Reset, as time.Timer does
	case <-t.ch:
	default:
	}
	t.when = c.now.Add(d)
	if d <= 0 {
		t.ch <- t.when
		return
	}
	c.timers = append(c.timers, t)
	c.notifyLocked()
}

func (t *fakeTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-t.ch:
	default:
	}
	return c.removeLocked(t)
}
