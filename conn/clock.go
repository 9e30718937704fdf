package conn

import (
	"time"

	"github.com/kvwire/kvwire/retry"
)

// clock is where a connection reads the time and gets its timers. Conn
// has two: clock, for the deadlines of requests, the dial's timers, the
// bootstrap's silence watch, the read role's lending and the stray log's
// rate limit; and health (Options.Clock), for the health check, the times
// of tombstones and late answers, BarrierWait and LastActivity. Tests whose
// subject is timing give Options a fake clock (the unexported field, which
// sets both unless Clock is set); everything else uses the system clock.
// (The writer's 50 µs batching hold is not a lifecycle rule and uses the
// system clock directly.)
type clock interface {
	Now() time.Time
	// NewTimer returns a stopped timer.
	NewTimer() timer
}

// timer is the part of *time.Timer a connection uses.
type timer interface {
	C() <-chan time.Time
	// Reset makes the timer fire d from now (at once when d <= 0). It
	// must be called only on a stopped or fired and drained timer, or on
	// one whose stale value the receiver tolerates.
	Reset(d time.Duration)
	Stop()
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer() timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return sysTimer{t}
}

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time   { return t.t.C }
func (t sysTimer) Reset(d time.Duration) { t.t.Reset(d) }
func (t sysTimer) Stop()                 { t.t.Stop() }

// callerClock is a caller's Clock as a connection's clock.
type callerClock struct{ c retry.Clock }

func (k callerClock) Now() time.Time { return k.c.Now() }

// NewTimer makes a timer and stops it, which a caller's fake clock may
// show as a timer armed for a moment: the connection makes its timers on
// a caller's clock with newTimerIn, armed.
func (k callerClock) NewTimer() timer {
	t := k.c.NewTimer(time.Hour)
	t.Stop()
	return callerTimer{t}
}

type callerTimer struct{ t retry.Timer }

func (t callerTimer) C() <-chan time.Time   { return t.t.C() }
func (t callerTimer) Reset(d time.Duration) { t.t.Reset(d) }
func (t callerTimer) Stop()                 { t.t.Stop() }

// newTimerIn returns a timer of k that fires d from now: on a caller's
// Clock, made armed (one made and stopped at once would show on a test's
// fake clock as a timer armed for nothing).
func newTimerIn(k clock, d time.Duration) timer {
	if cc, ok := k.(callerClock); ok {
		return callerTimer{cc.c.NewTimer(d)}
	}
	t := k.NewTimer()
	t.Reset(d)
	return t
}
