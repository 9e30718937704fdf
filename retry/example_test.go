package retry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// A client loop waiting with Wait on a fake clock: a SET is answered TMPFAIL
// until its 100 ms timeout. The waits grow (1, 2, 4, ... ms) until one would
// reach the deadline; the operation then waits only the time left and fails
// with an unambiguous timeout, without being sent again.
func Example() {
	clock := retry.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	orch := &retry.Orchestrator{Clock: clock, Logger: slog.New(slog.DiscardHandler)}
	var st retry.State
	st.Init(context.Background(), memdx.OpSet, nil, clock.Now().Add(100*time.Millisecond))

	// Time moves only when the operation waits: each wait's timer fires as
	// soon as it is armed.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for clock.BlockUntilTimers(ctx, 1) == nil {
			clock.Set(clock.Timers()[0])
		}
	}()
	defer func() { stop(); <-done }()

	sends := 0
	for {
		sends++
		clock.Advance(5 * time.Millisecond) // the attempt's round trip
		cause := &memdx.StatusError{Status: memdx.StatusTmpFail, OpCode: memdx.OpSet}
		before := clock.Now()
		err := orch.Wait(&st, retry.ReasonKVTemporaryFailure, cause)
		waited := clock.Now().Sub(before)
		if err != nil {
			var te *retry.TimeoutError
			timedOut := errors.As(err, &te)
			fmt.Printf("sends=%d, last wait %v, ambiguous=%v: %v\n",
				sends, waited, timedOut && te.Ambiguous, timedOut && !te.Ambiguous)
			break
		}
		fmt.Printf("retry %d after %v\n", st.Attempts(), waited)
	}
	// Output:
	// retry 1 after 1ms
	// retry 2 after 2ms
	// retry 3 after 4ms
	// retry 4 after 8ms
	// retry 5 after 16ms
	// retry 6 after 32ms
	// sends=7, last wait 2ms, ambiguous=false: true
}
