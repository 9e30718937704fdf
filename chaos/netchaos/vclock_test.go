package main

import (
	"context"
	"slices"
	"sync"
	"time"
)

// vclock is a virtual time for the harness's tests: it moves only when a
// store says an operation took some (advance), so the times the harness
// measures (operations' spans, the fault's schedule, the recovery) are
// the same on any machine. A sleeper (the phase's schedule) woken by an
// advance acts before the clock moves on: the advance waits until it
// sleeps again or settles, and a hold keeps the clock still until the
// schedule first sleeps.
type vclock struct {
	mu      sync.Mutex
	cond    *sync.Cond
	now     time.Time
	waiters []*vwaiter
	busy    bool // held, or a woken sleeper has neither slept again nor settled
}

type vwaiter struct {
	at time.Time
	ch chan struct{}
}

func newVClock() *vclock {
	c := &vclock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *vclock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *vclock) hold() {
	c.mu.Lock()
	c.busy = true
	c.mu.Unlock()
}

func (c *vclock) settle() {
	c.mu.Lock()
	c.busy = false
	c.cond.Broadcast()
	c.mu.Unlock()
}

func (c *vclock) sleepUntil(ctx context.Context, at time.Time) bool {
	c.mu.Lock()
	if !c.now.Before(at) {
		c.busy = true // acting now, as if woken
		c.mu.Unlock()
		return true
	}
	w := &vwaiter{at: at, ch: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	c.busy = false
	c.cond.Broadcast()
	c.mu.Unlock()
	select {
	case <-w.ch:
		return true
	case <-ctx.Done():
		c.mu.Lock()
		c.waiters = slices.DeleteFunc(c.waiters, func(x *vwaiter) bool { return x == w })
		c.mu.Unlock()
		return false
	}
}

// advance moves the clock d on, stopping at each sleeper due meanwhile
// until it has acted.
func (c *vclock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	target := c.now.Add(d)
	for {
		for c.busy {
			c.cond.Wait()
		}
		i := -1
		for j, w := range c.waiters {
			if !w.at.After(target) && (i < 0 || w.at.Before(c.waiters[i].at)) {
				i = j
			}
		}
		if i < 0 {
			break
		}
		w := c.waiters[i]
		c.waiters = slices.Delete(c.waiters, i, i+1)
		if w.at.After(c.now) {
			c.now = w.at
		}
		c.busy = true
		close(w.ch)
	}
	if target.After(c.now) {
		c.now = target
	}
}

// opStep is how long, on a vclock, an operation the cluster answered took.
const opStep = time.Millisecond

// timed runs a store's operations on a vclock: each takes opStep.
type timed struct {
	store
	clk *vclock
}

func (s timed) Get(ctx context.Context, key string) ([]byte, error) {
	defer s.clk.advance(opStep)
	return s.store.Get(ctx, key)
}

func (s timed) Insert(ctx context.Context, key string, value []byte) error {
	defer s.clk.advance(opStep)
	return s.store.Insert(ctx, key, value)
}

func (s timed) Append(ctx context.Context, key string, value []byte) error {
	defer s.clk.advance(opStep)
	return s.store.Append(ctx, key, value)
}
