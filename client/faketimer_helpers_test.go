package client

import (
	"testing"
	"time"

	"github.com/kvwire/kvwire/retry"
)

// failAfter bounds a test's wait for something that fails to happen: it is
// never a wait the test relies on, only how long a test that is failing
// takes to say so rather than hang.
const failAfter = time.Minute

// awaitTimerBy waits until fc has a timer armed that is due at or before
// by (an operation's retry wait, say, due before its deadline), and fails
// the test, saying what it waited for, when none is armed within
// failAfter. A count of armed timers (BlockUntilTimers) does not tell which
// timer was armed: the client's own goroutines (its config poll, a node's
// redial wait, a connection's health check) arm and re-arm timers of the
// same clock at any time, and an Advance made before the awaited timer is
// armed leaves it armed from the new time on, for good.
func awaitTimerBy(t *testing.T, fc *retry.FakeClock, by time.Time, what string) {
	t.Helper()
	bound := time.After(failAfter)
	for {
		for _, due := range fc.Timers() {
			if !due.After(by) {
				return
			}
		}
		select {
		case <-bound:
			t.Fatalf("no timer due by %v (now %v) was armed in %v: %s; armed: %v", by, fc.Now(), failAfter, what, fc.Timers())
		case <-time.After(time.Millisecond): // look again
		}
	}
}

// within returns what ch gives, and fails the test, saying what it waited
// for, when ch gives nothing within failAfter.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(failAfter):
		t.Fatalf("%s: nothing in %v", what, failAfter)
		panic("unreachable")
	}
}
