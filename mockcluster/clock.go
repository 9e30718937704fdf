package mockcluster

import (
	"sync/atomic"
	"time"
)

// Clock is the cluster's notion of the current time. Document expiry and
// GET_LOCKED lock timeouts are measured against it, so a test can expire a
// document or a lock without waiting:
//
//	c.Clock().Advance(time.Hour)
//
// It reads Options.Clock (time.Now by default) and adds the offset that
// Advance accumulated. A Clock is safe for concurrent use. Timers the mock
// starts (delayed answers, background rebalance pacing, synchronous-write
// commits) use real time, not this clock.
type Clock struct {
	base   func() time.Time
	offset atomic.Int64
}

func newClock(base func() time.Time) *Clock {
	if base == nil {
		base = time.Now
	}
	return &Clock{base: base}
}

// Now returns the cluster's current time.
func (c *Clock) Now() time.Time {
	return c.base().Add(time.Duration(c.offset.Load()))
}

// Advance moves the cluster's time forward by d (backward when d is
// negative). Documents whose expiry falls in the skipped interval are gone on
// their next access; locks whose timeout passed are released.
func (c *Clock) Advance(d time.Duration) {
	c.offset.Add(int64(d))
}
