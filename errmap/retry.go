package errmap

import (
	"math"
	"strconv"
	"time"
)

// Strategy is the backoff algorithm of a retry spec.
//
// The zero Strategy is not a strategy; Parse never produces it.
type Strategy uint8

// The strategies of RFC 0013. The comment after each is its name in the map.
const (
	Constant    Strategy = iota + 1 // constant
	Linear                          // linear
	Exponential                     // exponential
)

// String returns the strategy's name in the map, or "Strategy(n)".
func (s Strategy) String() string {
	switch s {
	case Constant:
		return "constant"
	case Linear:
		return "linear"
	case Exponential:
		return "exponential"
	}
	return "Strategy(" + strconv.Itoa(int(s)) + ")"
}

// ParseStrategy returns the strategy named name in the map (String's
// inverse), or false when name is none of them.
func ParseStrategy(name string) (Strategy, bool) {
	switch name {
	case "constant":
		return Constant, true
	case "linear":
		return Linear, true
	case "exponential":
		return Exponential, true
	}
	return 0, false
}

// maxDuration is the longest time.Duration: Delay saturates here.
const maxDuration = time.Duration(math.MaxInt64)

// RetrySpec is the optional "retry" object of an error-map entry (RFC 0013).
// The map gives every field in whole milliseconds; Parse converts them.
//
// RFC 0069 (error map v2) tells SDKs to prefer their own configured retry
// strategy over these values, and RFC 0049 says they must not be used when
// the user's strategy sets its own: a retry strategy may use them, but is not
// obliged to.
type RetrySpec struct {
	// Strategy says how the delay grows from one retry to the next.
	Strategy Strategy
	// After is the wait before the first retry (required in the map).
	After time.Duration
	// Interval is the base delay (required in the map).
	Interval time.Duration
	// Ceil caps the delay of the linear and exponential strategies; 0 (or
	// absent in the map) means no cap. It does not apply to Constant.
	Ceil time.Duration
	// MaxDuration bounds the whole retry sequence, After included; 0 (or
	// absent) means "use the client's own limit". See Deadline.
	MaxDuration time.Duration
}

// Delay returns how long to wait before retry number attempt (attempt 1 is
// the first retry, made after the first failure with this status).
//
// The rule: the first retry waits After; retry n > 1 waits d(r) where
// r = n-1 is the number of retries already attempted and
//
//	Constant:    d(r) = Interval
//	Linear:      d(r) = min(Interval*r, Ceil)
//	Exponential: d(r) = min(Interval^r, Ceil), Interval^r taken in milliseconds
//
// with Ceil = 0 meaning no cap. Results saturate at the longest
// time.Duration instead of overflowing, so any attempt is safe to ask for.
//
// Why: RFC 0013's pseudo-code sleeps After, retries, then sleeps
// Interval*X with X = 1, 2, ... before each further retry (its constant
// strategy sleeps Interval); its prose defines the delay as Interval*r and
// Interval^r "where r is the number of retries already attempted" and After
// as "the initial sleep ... prior to beginning the retry sequence",
// "independent of the strategy or retry interval". Both agree on the rule
// above for constant and linear. For exponential the pseudo-code never
// sleeps and squares its running value (Interval, Interval^2, Interval^4,
// ...), which contradicts the prose; Delay follows the prose. The power is of
// the millisecond count, as the map writes it: interval 2 gives 2, 4, 8 ms.
// For Exponential, an Interval that is not a whole number of milliseconds is
// truncated to one (Parse only produces whole milliseconds).
//
// Worked example in milliseconds, with the three specs of CouchbaseMock's
// map (0x7ff0..0x7ff2; each has after 50 and max-duration 500):
//
//	attempt:                          1   2   3   4   5   6   7    8    9   10
//	constant    interval 10:          50  10  10  10  10  10  10   10   10   10
//	linear      interval 2, ceil 50:  50   2   4   6   8  10  12   14   16   18  (50 from attempt 26 on)
//	exponential interval 2, ceil 200: 50   2   4   8  16  32  64  128  200  200
//
// An attempt below 1 is treated as 1; negative fields count as 0. An
// unknown Strategy (only possible in a hand-built spec) behaves as Constant.
func (s RetrySpec) Delay(attempt int) time.Duration {
	if attempt <= 1 {
		return max(s.After, 0)
	}
	r := int64(attempt - 1)
	interval := max(s.Interval, 0)
	limit := maxDuration
	if s.Ceil > 0 {
		limit = s.Ceil
	}
	switch s.Strategy {
	case Linear:
		if interval == 0 {
			return 0
		}
		if r > int64(limit/interval) {
			return limit
		}
		return interval * time.Duration(r)
	case Exponential:
		base := int64(interval / time.Millisecond)
		limitMs := int64(limit / time.Millisecond)
		switch base {
		case 0:
			return 0
		case 1:
			return min(time.Millisecond, limit)
		}
		// base >= 2, so this loop exits within 63 rounds whatever r is.
		p := int64(1)
		for range r {
			if p > limitMs/base {
				return limit
			}
			p *= base
		}
		return time.Duration(p) * time.Millisecond // p <= limitMs: no overflow
	default:
		return interval
	}
}

// Deadline returns the time after which the retry sequence that began at
// start must stop: start + MaxDuration. It returns false when MaxDuration is
// 0, which the RFC defines as "follow the client's behaviour".
//
// start is when the first response with this status arrived (the sequence
// includes After, as RFC 0013's prose says; its pseudo-code, which starts
// the clock after sleeping After, is not followed). RFC 0013 restarts the
// count, and so the sequence, when a different status comes back. The
// caller uses the earlier of this deadline and the operation's own: the
// shorter limit always wins.
func (s RetrySpec) Deadline(start time.Time) (time.Time, bool) {
	if s.MaxDuration <= 0 {
		return time.Time{}, false
	}
	return start.Add(s.MaxDuration), true
}

// String describes the spec for logs, in the map's vocabulary:
// "linear after=50ms interval=2ms ceil=50ms max-duration=500ms".
func (s RetrySpec) String() string {
	b := make([]byte, 0, 80)
	b = append(b, s.Strategy.String()...)
	b = append(b, " after="...)
	b = append(b, s.After.String()...)
	b = append(b, " interval="...)
	b = append(b, s.Interval.String()...)
	if s.Ceil != 0 {
		b = append(b, " ceil="...)
		b = append(b, s.Ceil.String()...)
	}
	if s.MaxDuration != 0 {
		b = append(b, " max-duration="...)
		b = append(b, s.MaxDuration.String()...)
	}
	return string(b)
}
