package errmap

import (
	"math"
	"testing"
	"time"
)

const ms = time.Millisecond

// The retry specs of CouchbaseMock's map (codes 0x7ff0..0x7ff2);
// TestConformanceMockRetrySpecs checks that Parse reads exactly these.
var (
	mockConstant    = RetrySpec{Strategy: Constant, Interval: 10 * ms, After: 50 * ms, MaxDuration: 500 * ms}
	mockLinear      = RetrySpec{Strategy: Linear, Interval: 2 * ms, After: 50 * ms, MaxDuration: 500 * ms, Ceil: 50 * ms}
	mockExponential = RetrySpec{Strategy: Exponential, Interval: 2 * ms, After: 50 * ms, MaxDuration: 500 * ms, Ceil: 200 * ms}
)

func TestDelayMockSpecs(t *testing.T) {
	tests := []struct {
		name string
		spec RetrySpec
		// want[i] is the delay before attempt i+1, in milliseconds.
		want []int64
	}{
		{"constant", mockConstant, []int64{50, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}},
		{"linear", mockLinear, []int64{50, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22}},
		{"exponential", mockExponential, []int64{50, 2, 4, 8, 16, 32, 64, 128, 200, 200, 200, 200}},
	}
	for _, tc := range tests {
		for i, w := range tc.want {
			attempt := i + 1
			if got := tc.spec.Delay(attempt); got != time.Duration(w)*ms {
				t.Errorf("%s: Delay(%d) = %v, want %dms", tc.name, attempt, got, w)
			}
		}
	}
}

func TestDelayCeilAndLargeAttempts(t *testing.T) {
	tests := []struct {
		name    string
		spec    RetrySpec
		attempt int
		want    time.Duration
	}{
		// Linear reaches its ceil at r = 25 (attempt 26) and stays there.
		{"linear below ceil", mockLinear, 25, 48 * ms},
		{"linear at ceil", mockLinear, 26, 50 * ms},
		{"linear past ceil", mockLinear, 27, 50 * ms},
		{"linear huge attempt", mockLinear, math.MaxInt, 50 * ms},
		{"exponential last below ceil", mockExponential, 8, 128 * ms},
		{"exponential huge attempt", mockExponential, math.MaxInt, 200 * ms},
		{"constant huge attempt", mockConstant, math.MaxInt, 10 * ms},

		// Without a ceil the delay grows until time.Duration saturates; it
		// never wraps.
		{"exp 2^43 ms fits", RetrySpec{Strategy: Exponential, Interval: 2 * ms}, 44, (1 << 43) * ms},
		{"exp 2^44 ms saturates", RetrySpec{Strategy: Exponential, Interval: 2 * ms}, 45, maxDuration},
		{"exp 2^63 would wrap", RetrySpec{Strategy: Exponential, Interval: 2 * ms}, 64, maxDuration},
		{"exp huge attempt", RetrySpec{Strategy: Exponential, Interval: 2 * ms}, math.MaxInt, maxDuration},
		{"exp 1000^4 ms fits", RetrySpec{Strategy: Exponential, Interval: time.Second}, 5, 1e12 * ms},
		{"exp 1000^5 ms saturates", RetrySpec{Strategy: Exponential, Interval: time.Second}, 6, maxDuration},
		{"exp max interval", RetrySpec{Strategy: Exponential, Interval: maxDuration}, 3, maxDuration},
		{"linear saturates", RetrySpec{Strategy: Linear, Interval: maxDuration / 2}, 4, maxDuration},
		{"linear exact max", RetrySpec{Strategy: Linear, Interval: maxDuration}, 2, maxDuration},
		{"linear huge attempt", RetrySpec{Strategy: Linear, Interval: ms}, math.MaxInt, maxDuration},

		// Degenerate intervals.
		{"exp interval 1ms", RetrySpec{Strategy: Exponential, Interval: ms}, math.MaxInt, ms},
		{"exp interval 1ms, ceil below", RetrySpec{Strategy: Exponential, Interval: ms, Ceil: 500 * time.Microsecond}, 5, 500 * time.Microsecond},
		{"exp interval 0", RetrySpec{Strategy: Exponential}, 7, 0},
		{"exp sub-ms interval truncates to 0", RetrySpec{Strategy: Exponential, Interval: 999 * time.Microsecond}, 3, 0},
		{"exp 1.5ms truncates to 1ms", RetrySpec{Strategy: Exponential, Interval: 1500 * time.Microsecond}, 9, ms},
		{"exp sub-ms ceil", RetrySpec{Strategy: Exponential, Interval: 3 * ms, Ceil: 100 * time.Microsecond}, 2, 100 * time.Microsecond},
		{"linear interval 0", RetrySpec{Strategy: Linear, Ceil: 5 * ms}, 9, 0},
		{"linear ceil below interval", RetrySpec{Strategy: Linear, Interval: 10 * ms, Ceil: 3 * ms}, 2, 3 * ms},
		{"constant ignores ceil", RetrySpec{Strategy: Constant, Interval: 10 * ms, Ceil: 3 * ms}, 2, 10 * ms},

		// Attempt numbering and bad fields.
		{"attempt 0 is the first", mockExponential, 0, 50 * ms},
		{"negative attempt is the first", mockLinear, math.MinInt, 50 * ms},
		{"negative after", RetrySpec{Strategy: Constant, After: -time.Second, Interval: ms}, 1, 0},
		{"negative interval", RetrySpec{Strategy: Linear, Interval: -ms}, 5, 0},
		{"negative interval exp", RetrySpec{Strategy: Exponential, Interval: -2 * ms}, 5, 0},
		{"negative ceil is no ceil", RetrySpec{Strategy: Linear, Interval: ms, Ceil: -ms}, 101, 100 * ms},
		{"unknown strategy acts as constant", RetrySpec{Strategy: 9, After: ms, Interval: 7 * ms}, 4, 7 * ms},
		{"zero spec", RetrySpec{}, 3, 0},
	}
	for _, tc := range tests {
		if got := tc.spec.Delay(tc.attempt); got != tc.want {
			t.Errorf("%s: Delay(%d) = %v, want %v", tc.name, tc.attempt, got, tc.want)
		}
	}
}

// For every strategy and a range of parameters, delays after the first
// never decrease, never exceed the ceil and never go negative.
func TestDelayMonotonic(t *testing.T) {
	for _, st := range []Strategy{Constant, Linear, Exponential} {
		for _, interval := range []time.Duration{0, ms, 2 * ms, 3 * ms, 7 * ms, time.Second, maxDuration / 3} {
			for _, ceil := range []time.Duration{0, ms, 100 * ms, time.Hour} {
				s := RetrySpec{Strategy: st, After: 5 * ms, Interval: interval, Ceil: ceil}
				prev := time.Duration(0)
				for attempt := 2; attempt < 200; attempt++ {
					d := s.Delay(attempt)
					if d < prev || d < 0 {
						t.Fatalf("%v: Delay(%d) = %v after %v", s, attempt, d, prev)
					}
					if st != Constant && ceil > 0 && d > ceil {
						t.Fatalf("%v: Delay(%d) = %v exceeds ceil", s, attempt, d)
					}
					prev = d
				}
			}
		}
	}
}

func TestDelayAllocatesNothing(t *testing.T) {
	var sink time.Duration
	allocs := testing.AllocsPerRun(100, func() {
		sink += mockExponential.Delay(9) + mockLinear.Delay(30) + mockConstant.Delay(1)
	})
	if allocs != 0 {
		t.Errorf("Delay allocates %v times per run", allocs)
	}
	_ = sink
}

func TestDeadline(t *testing.T) {
	start := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	got, ok := mockLinear.Deadline(start)
	if !ok || !got.Equal(start.Add(500*ms)) {
		t.Errorf("Deadline = %v, %v; want %v, true", got, ok, start.Add(500*ms))
	}
	for _, d := range []time.Duration{0, -ms} {
		s := mockLinear
		s.MaxDuration = d
		if got, ok := s.Deadline(start); ok || !got.IsZero() {
			t.Errorf("MaxDuration %v: Deadline = %v, %v; want zero, false", d, got, ok)
		}
	}
}

func TestStrategyString(t *testing.T) {
	for s, want := range map[Strategy]string{Constant: "constant", Linear: "linear", Exponential: "exponential", 0: "Strategy(0)", 7: "Strategy(7)"} {
		if got := s.String(); got != want {
			t.Errorf("Strategy(%d).String() = %q, want %q", s, got, want)
		}
		if st, ok := ParseStrategy(want); ok != (s != 0 && s < 4) || (ok && st != s) {
			t.Errorf("ParseStrategy(%q) = %v, %v", want, st, ok)
		}
	}
}

func TestRetrySpecString(t *testing.T) {
	if got, want := mockLinear.String(), "linear after=50ms interval=2ms ceil=50ms max-duration=500ms"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got, want := (RetrySpec{Strategy: Constant, Interval: 10 * ms}).String(), "constant after=0s interval=10ms"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}
