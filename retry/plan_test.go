package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// Plan decides without waiting and Resume ends the wait as WaitOrWake
// would: a wait that lasted its delay retries, a timeout decision woken
// before the deadline retries (counted), and one that ran out fails with
// the timeout; no timer is armed by either.
func TestPlanAndResumeCarryOutWaitOrWakesDecision(t *testing.T) {
	o, fc, st := fakeSetup(memdx.OpGet, fixed(time.Second), 2500*ms)
	p := o.Plan(st, ReasonKVTemporaryFailure, errTmpFail)
	require.True(t, p.Retry())
	assert.Equal(t, time.Second, p.Delay())
	assert.Empty(t, fc.Timers(), "Plan waits for nothing")
	require.NoError(t, o.Resume(st, p, false, nil))
	assert.Equal(t, 1, st.Attempts())

	fc.Advance(2 * time.Second)
	p = o.Plan(st, ReasonKVTemporaryFailure, errTmpFail)
	require.False(t, p.Retry(), "the wait reaches the deadline")
	assert.Equal(t, 500*ms, p.Delay())
	require.NoError(t, o.Resume(st, p, true, nil), "woken before the deadline: retry")
	assert.Equal(t, 2, st.Attempts())

	p = o.Plan(st, ReasonKVTemporaryFailure, errTmpFail)
	err := o.Resume(st, p, false, nil)
	require.ErrorIs(t, err, kverr.ErrTimeout)
	assert.Equal(t, 2, st.Attempts())
}

// A wait ended by the context takes the planned retry off the count and
// fails with the context's error; a refusal is returned whatever ended the
// wait.
func TestResumeEndedByTheContext(t *testing.T) {
	o, _, st := fakeSetup(memdx.OpGet, fixed(time.Second), 10*time.Second)
	p := o.Plan(st, ReasonKVTemporaryFailure, errTmpFail)
	require.Equal(t, 1, st.Attempts())
	err := o.Resume(st, p, false, context.Canceled)
	require.ErrorIs(t, err, kverr.ErrRequestCanceled)
	assert.Equal(t, 0, st.Attempts(), "the retry was not sent")

	_, _, set := fakeSetup(memdx.OpSet, fixed(time.Second), 10*time.Second)
	set.MarkInDoubt()
	p = o.Plan(set, ReasonKVTemporaryFailure, errTmpFail)
	require.False(t, p.Retry())
	var nr *NotRetriedError
	require.True(t, errors.As(o.Resume(set, p, true, nil), &nr), "an ambiguous write is refused")
}
