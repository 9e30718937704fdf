package conn

import "time"

// clock is where a connection reads the time and gets its timers:
// deadlines, the health monitor and the stray log's rate limit. Tests whose
// subject is timing give Options a fake one; everything else uses the
// system clock. (The writer's 50 µs batching hold is not a lifecycle rule
// and uses the system clock directly.)
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
