package client

import (
	"time"

	"github.com/kvwire/kvwire/retry"
)

// Clock is where a client reads the time and gets its timers: operation
// deadlines, retry waits, a node's waits between redials, config polls,
// config fetch spacing, recovery rounds, how long a node that left the
// cluster waits for its requests in flight before closing its
// connections, the absolute expiry sent for a time to live over 30
// days, and its connections' health check (HealthCheckOptions: when a
// request given up calls for a probe, how long the probe may go
// unanswered, the bounds of durable writes and range-scan continues the
// probe waits for) and the times of late answers (the orphan report).
// Options.Clock sets it; the default is the real clock. A fake Clock lets a
// test move time itself and check timing without sleeping. Sockets keep
// real time: a dial's timeout (the bootstrap's watch for silence,
// HealthCheck.ProbeTimeout while a connection bootstraps, included), and
// the wait for a response, which ends at the operation's deadline read as
// a real time. A context's deadline is a
// real time too: an operation ends at the earlier of it and its timeout
// counted on the Clock, so a fake Clock is used with contexts that have
// none.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock, with the semantics of *time.Timer
// since Go 1.23: after Stop or Reset returns, no stale time is received
// from C.
type Timer interface {
	C() <-chan time.Time
	// Reset makes the timer fire d from now, whether or not it fired.
	Reset(d time.Duration)
	// Stop prevents the timer from firing; false if it already fired or
	// was stopped.
	Stop() bool
}

// retryClock gives a Clock to the retry orchestrator.
type retryClock struct{ Clock }

func (c retryClock) NewTimer(d time.Duration) retry.Timer { return c.Clock.NewTimer(d) }

// clockFor returns the clock a client uses for c (nil: the real one).
func clockFor(c Clock) retry.Clock {
	if c == nil {
		return retry.RealClock()
	}
	return retryClock{c}
}

// after is the time now, read after start, a reading of c's clock made
// moments ago (an attempt's send), for the operation's observers. On the
// real clock it is start plus the monotonic time elapsed since: one
// monotonic reading, where time.Now reads the wall clock too, which costs
// as much again on this kind of machine (57 ns a time.Now). Its wall
// reading is start's moved by the elapsed time, which differs from the
// wall clock only if that was stepped meanwhile; durations and deadline
// checks use the monotonic reading. On a caller's Clock it is its Now.
func (c *Client) after(start time.Time) time.Time {
	if c.realClock {
		return start.Add(time.Since(start))
	}
	return c.clock.Now()
}
