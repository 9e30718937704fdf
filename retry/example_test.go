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

// A client loop driven by Decide on a fake clock: a SET is answered TMPFAIL
// until its 100 ms timeout. The waits grow (1, 2, 4, ... ms) until one would
// reach the deadline; the operation then waits only the time left and fails
// with an unambiguous timeout, without being sent again.
func Example() {
	clock := retry.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	orch := &retry.Orchestrator{Clock: clock, Logger: slog.New(slog.DiscardHandler)}
	var st retry.State
	st.Init(context.Background(), memdx.OpSet, nil, clock.Now().Add(100*time.Millisecond))

	sends := 0
	for {
		sends++
		clock.Advance(5 * time.Millisecond) // the attempt's round trip
		cause := &memdx.StatusError{Status: memdx.StatusTmpFail, OpCode: memdx.OpSet}
		d := orch.Decide(&st, retry.ReasonKVTemporaryFailure, cause)
		clock.Advance(d.Delay) // Wait would sleep here
		if !d.Retry {
			fmt.Printf("sends=%d, last wait %v, ambiguous=%v: %v\n",
				sends, d.Delay, errors.Is(d.Err, retry.ErrAmbiguous), errors.Is(d.Err, retry.ErrUnambiguousTimeout))
			break
		}
		fmt.Printf("retry %d after %v\n", st.Attempts(), d.Delay)
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
