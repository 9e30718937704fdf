package retry

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/errmap"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// mockSpecs returns CouchbaseMock's entries 0x7ff0 (constant), 0x7ff1
// (linear) and 0x7ff2 (exponential), each with after 50 ms and max-duration
// 500 ms.
func mockSpecs(t *testing.T) (constant, linear, exponential errmap.Entry) {
	t.Helper()
	m, err := errmap.Parse(conformance(t, "errmap/couchbasemock_errmap_v1_with_retry_specs.json"))
	require.NoError(t, err)
	var es [3]errmap.Entry
	for i := range es {
		e, ok := m.Lookup(memdx.Status(0x7ff0 + i))
		require.True(t, ok)
		require.NotNil(t, e.Retry, "0x%04x has a retry spec", 0x7ff0+i)
		require.True(t, e.RetryIndicated(), "auto-retry indicates a retry")
		es[i] = e
	}
	return es[0], es[1], es[2]
}

// runErrorMap hands the same error-map status to the orchestrator until it
// stops retrying, advancing the fake clock by every delay, and returns the
// delays and the final decision.
func runErrorMap(o *Orchestrator, fc *FakeClock, st *State, e errmap.Entry) ([]time.Duration, decision) {
	var delays []time.Duration
	for range 1000 {
		st.SetErrorMapEntry(e)
		d := o.decide(st, ReasonKVErrorMapRetryIndicated, e.Status)
		if !d.Retry {
			return delays, d
		}
		delays = append(delays, d.Delay)
		fc.Advance(d.Delay)
	}
	panic("no end")
}

// TestFollowErrorMapSpecs follows the three CouchbaseMock specs to their
// max-duration: a retry is made only if it goes before 500 ms after the
// first response with the status.
func TestFollowErrorMapSpecs(t *testing.T) {
	constant, linear, exponential := mockSpecs(t)
	rep := func(d time.Duration, n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = d
		}
		return out
	}
	cases := []struct {
		name  string
		entry errmap.Entry
		want  []time.Duration
	}{
		// 50, then 10s: 50+10*44 = 490; the 46th would go at 500.
		{"constant", constant, append([]time.Duration{50 * ms}, rep(10*ms, 44)...)},
		// 50, then 2, 4, ..., 40: sum 470; the next (42) would go at 512.
		{"linear", linear, []time.Duration{50 * ms, 2 * ms, 4 * ms, 6 * ms, 8 * ms, 10 * ms, 12 * ms, 14 * ms,
			16 * ms, 18 * ms, 20 * ms, 22 * ms, 24 * ms, 26 * ms, 28 * ms, 30 * ms, 32 * ms, 34 * ms, 36 * ms,
			38 * ms, 40 * ms}},
		// 50, then 2^n ms: sum 304; the next (200, the ceil) would go at 504.
		{"exponential", exponential, []time.Duration{50 * ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms, 32 * ms, 64 * ms, 128 * ms}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, fc, st := fakeSetup(memdx.OpSet, FollowErrorMap(nil), time.Hour)
			delays, last := runErrorMap(o, fc, st, c.entry)
			assert.Equal(t, c.want, delays)
			assert.ErrorIs(t, last.Err, kverr.ErrErrorMapMaxDuration)
			assert.ErrorIs(t, last.Err, c.entry.Status, "the status is the cause")
			assert.ErrorIs(t, last.Err, kverr.ErrNotRetried)
			assert.Equal(t, len(c.want), st.Attempts())
			em, ok := st.ErrorMap()
			require.True(t, ok)
			assert.Equal(t, len(c.want)+1, em.Retry)
			assert.Equal(t, t0, em.Since)
			assert.Less(t, em.Elapsed, 500*ms)
		})
	}
}

// TestFollowErrorMapDeadline: the operation's deadline bounds the spec (the
// shorter limit wins): a timeout, not the max-duration error.
func TestFollowErrorMapDeadline(t *testing.T) {
	constant, _, _ := mockSpecs(t)
	o, fc, st := fakeSetup(memdx.OpSet, FollowErrorMap(nil), 100*ms)
	delays, last := runErrorMap(o, fc, st, constant)
	assert.Equal(t, []time.Duration{50 * ms, 10 * ms, 10 * ms, 10 * ms, 10 * ms}, delays)
	assert.ErrorIs(t, last.Err, kverr.ErrTimeout)
	assert.Equal(t, 10*ms, last.Delay, "waits until the deadline")
}

// TestFollowErrorMapStatusChange: a different status restarts the count
// (the first wait is After again) and the max-duration window.
func TestFollowErrorMapStatusChange(t *testing.T) {
	constant, linear, exponential := mockSpecs(t)
	o, fc, st := fakeSetup(memdx.OpSet, FollowErrorMap(nil), time.Hour)
	step := func(e errmap.Entry) time.Duration {
		t.Helper()
		st.SetErrorMapEntry(e)
		d := o.decide(st, ReasonKVErrorMapRetryIndicated, e.Status)
		require.True(t, d.Retry, "%v", d.Err)
		fc.Advance(d.Delay)
		return d.Delay
	}
	assert.Equal(t, 50*ms, step(constant))
	assert.Equal(t, 10*ms, step(constant))
	assert.Equal(t, 10*ms, step(constant))
	assert.Equal(t, 50*ms, step(linear), "new status: After again")
	assert.Equal(t, 2*ms, step(linear))
	assert.Equal(t, 4*ms, step(linear))
	// An always-retry reason in between does not break the run.
	st.MarkRouteChanged()
	d := o.decide(st, ReasonKVNotMyVbucket, nil)
	require.True(t, d.Retry)
	require.Zero(t, d.Delay)
	assert.Equal(t, 6*ms, step(linear))
	assert.Equal(t, 50*ms, step(constant), "back to the first status: a new run")
	em, _ := st.ErrorMap()
	assert.Equal(t, 1, em.Retry)
	assert.Equal(t, fc.Now().Add(-50*ms), em.Since)
	assert.Equal(t, 9, st.Attempts(), "the operation's own count does not restart")

	// The window restarts too: 450 ms into a constant run, switching to
	// exponential allows its whole sequence again.
	o, fc, st = fakeSetup(memdx.OpSet, FollowErrorMap(nil), time.Hour)
	for range 41 {
		step(constant) // 50 + 40*10 = 450 ms
	}
	delays, last := runErrorMap(o, fc, st, exponential)
	assert.Len(t, delays, 8)
	assert.ErrorIs(t, last.Err, kverr.ErrErrorMapMaxDuration)
}

// TestErrorMapSpecNotUsedByDefault: RFC 0049 says the spec's values must not
// be used by the shipped strategies; the default times an error-map retry
// with its own backoff.
func TestErrorMapSpecNotUsedByDefault(t *testing.T) {
	constant, _, _ := mockSpecs(t)
	for _, s := range []Strategy{nil, BestEffort(nil), FailFastOnTerminalErrors(nil)} {
		o, _, st := fakeSetup(memdx.OpSet, s, time.Hour)
		st.SetErrorMapEntry(constant)
		d := o.decide(st, ReasonKVErrorMapRetryIndicated, nil)
		assert.True(t, d.Retry)
		assert.Equal(t, 1*ms, d.Delay, "BestEffort's first delay, not the spec's after (50 ms)")
	}
}

// TestFollowErrorMapFallback: other reasons, and error-map reasons without
// an entry or a spec, go to the fallback.
func TestFollowErrorMapFallback(t *testing.T) {
	s := FollowErrorMap(fixed(42 * ms))
	o, _, st := fakeSetup(memdx.OpSet, s, time.Hour)
	assert.Equal(t, 42*ms, o.decide(st, ReasonKVLocked, nil).Delay)
	assert.Equal(t, 42*ms, o.decide(st, ReasonKVErrorMapRetryIndicated, nil).Delay, "no entry")
	st.SetErrorMapEntry(errmap.Entry{Status: memdx.StatusBusy, Attrs: errmap.NewAttrs(errmap.AttrRetryNow)})
	assert.Equal(t, 42*ms, o.decide(st, ReasonKVErrorMapRetryIndicated, nil).Delay, "no spec")

	// The nil fallback is the default strategy; so is the zero value's.
	for _, s := range []Strategy{FollowErrorMap(nil), &FollowErrorMapStrategy{}} {
		o, _, st = fakeSetup(memdx.OpSet, s, time.Hour)
		assert.ErrorIs(t, o.decide(st, ReasonBucketAccessError, nil).Err, kverr.ErrBucketNotFound)
		assert.Equal(t, 1*ms, o.decide(st, ReasonKVLocked, nil).Delay)
	}
}

// TestFollowErrorMapNoMaxDuration: max-duration 0 means "follow the client":
// only the deadline ends the run.
func TestFollowErrorMapNoMaxDuration(t *testing.T) {
	spec := &errmap.RetrySpec{Strategy: errmap.Constant, After: 5 * ms, Interval: 100 * ms}
	e := errmap.Entry{Status: 0x7fa0, Attrs: errmap.NewAttrs(errmap.AttrAutoRetry), Retry: spec}
	o, fc, st := fakeSetup(memdx.OpGet, FollowErrorMap(nil), time.Second)
	delays, last := runErrorMap(o, fc, st, e)
	assert.Equal(t, []time.Duration{5 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms,
		100 * ms, 100 * ms}, delays) // 905 ms; the next would go at 1005
	assert.ErrorIs(t, last.Err, kverr.ErrTimeout)
}

// TestFollowErrorMapAfterNotBeforeMaxDuration: a spec whose first wait
// (after) already reaches its max-duration allows no retry: the operation
// fails at once, and the error says why (the first retry would come too
// late) instead of claiming that a max-duration has passed when no time has.
// Later in a run, the error gives the time elapsed and the wait refused.
func TestFollowErrorMapAfterNotBeforeMaxDuration(t *testing.T) {
	for _, after := range []time.Duration{500 * ms, 600 * ms} {
		spec := &errmap.RetrySpec{Strategy: errmap.Constant, After: after, Interval: 10 * ms, MaxDuration: 500 * ms}
		e := errmap.Entry{Status: 0x7fa1, Name: "SLOW_RETRY", Attrs: errmap.NewAttrs(errmap.AttrAutoRetry), Retry: spec}
		o, fc, st := fakeSetup(memdx.OpGet, FollowErrorMap(nil), time.Hour)
		delays, last := runErrorMap(o, fc, st, e)
		assert.Empty(t, delays, "after %v", after)
		assert.Equal(t, t0, fc.Now(), "no wait")
		require.ErrorIs(t, last.Err, kverr.ErrErrorMapMaxDuration)
		msg := last.Err.Error()
		assert.NotContains(t, msg, "has passed", "no time has passed")
		assert.Contains(t, msg, "first retry")
		assert.Contains(t, msg, after.String())
		assert.Contains(t, msg, "500ms")
		var me *ErrorMapMaxDurationError
		require.ErrorAs(t, last.Err, &me)
		assert.Equal(t, ErrorMapMaxDurationError{Status: 0x7fa1, Retry: 1, Elapsed: 0, Wait: after, MaxDuration: 500 * ms}, *me)
	}

	// Later in a run: 50 ms, then 10 ms waits up to 490 ms; the next would
	// end at 500.
	constant, _, _ := mockSpecs(t)
	o, fc, st := fakeSetup(memdx.OpSet, FollowErrorMap(nil), time.Hour)
	_, last := runErrorMap(o, fc, st, constant)
	var me *ErrorMapMaxDurationError
	require.ErrorAs(t, last.Err, &me)
	assert.Equal(t, ErrorMapMaxDurationError{Status: 0x7ff0, Retry: 46, Elapsed: 490 * ms, Wait: 10 * ms, MaxDuration: 500 * ms}, *me)
	assert.Contains(t, last.Err.Error(), "490ms")
	assert.NotContains(t, last.Err.Error(), "first retry")
}

// TestFollowErrorMapRunEndsOnOtherStatus: RFC 0013 resets the retry count
// "when a new, different error code is received". A status the client
// retries by its own reason (LOCKED, TMPFAIL, SYNC_WRITE_IN_PROGRESS, ...)
// between two answers with an error-map status is such a code: the status
// that comes back after it starts a new run (After again, a new
// max-duration window). A run of 450 ms, then LOCKED for 100 ms, then the
// status again is not refused as past its 500 ms max-duration.
func TestFollowErrorMapRunEndsOnOtherStatus(t *testing.T) {
	constant, _, _ := mockSpecs(t)
	for _, other := range []Reason{ReasonKVLocked, ReasonKVTemporaryFailure,
		ReasonKVSyncWriteInProgress, ReasonKVSyncWriteReCommitInProgress} {
		t.Run(other.String(), func(t *testing.T) {
			o, fc, st := fakeSetup(memdx.OpSet, FollowErrorMap(nil), time.Hour)
			step := func() decision {
				t.Helper()
				st.SetErrorMapEntry(constant)
				d := o.decide(st, ReasonKVErrorMapRetryIndicated, constant.Status)
				fc.Advance(d.Delay)
				return d
			}
			for range 41 {
				require.True(t, step().Retry) // 50 + 40*10 = 450 ms
			}
			d := o.decide(st, other, nil)
			require.True(t, d.Retry, "%v", d.Err)
			fc.Advance(100 * ms) // the other status's retries
			d = step()
			require.True(t, d.Retry, "a new run: %v", d.Err)
			assert.Equal(t, 50*ms, d.Delay, "the first wait of a run is After")
			em, ok := st.ErrorMap()
			require.True(t, ok)
			assert.Equal(t, 1, em.Retry)
			assert.Equal(t, fc.Now().Add(-50*ms), em.Since)
		})
	}
}

// TestFollowErrorMapMaxDurationHugeWait: a wait so long that adding the
// time elapsed overflows a time.Duration (an interval at the map's largest
// millisecond count, or an exponential delay saturated without a ceil) is
// still past the max-duration: the retry is refused at once with the
// max-duration error, not waited for until the operation times out.
func TestFollowErrorMapMaxDurationHugeWait(t *testing.T) {
	huge := time.Duration(math.MaxInt64/int64(ms)) * ms
	spec := &errmap.RetrySpec{Strategy: errmap.Constant, After: 10 * ms, Interval: huge, MaxDuration: 500 * ms}
	e := errmap.Entry{Status: 0x7fa2, Attrs: errmap.NewAttrs(errmap.AttrAutoRetry), Retry: spec}
	o, fc, st := fakeSetup(memdx.OpSet, FollowErrorMap(nil), time.Hour)
	delays, last := runErrorMap(o, fc, st, e)
	assert.Equal(t, []time.Duration{10 * ms}, delays)
	require.ErrorIs(t, last.Err, kverr.ErrErrorMapMaxDuration)
	assert.Zero(t, last.Delay, "refused at once")
}

// TestErrorMapOnlyForErrorMapReason: Request.ErrorMap (client's
// RetryRequest.ErrorMapRetry: "false otherwise") describes the run only
// when the reason being decided is KV_ERROR_MAP_RETRY_INDICATED. A
// strategy asked about another reason after an error-map status (a node
// gone, NOT_MY_VBUCKET in between) does not see the earlier status's spec
// as if it applied; the run itself goes on when the status comes back.
func TestErrorMapOnlyForErrorMapReason(t *testing.T) {
	constant, _, _ := mockSpecs(t)
	type seen struct {
		reason Reason
		ok     bool
		retry  int
	}
	var got []seen
	s := StrategyFunc(func(req Request, reason Reason) Action {
		em, ok := req.ErrorMap()
		got = append(got, seen{reason, ok, em.Retry})
		return RetryAfter(ms)
	})
	o, _, st := fakeSetup(memdx.OpGet, s, time.Hour)
	st.SetErrorMapEntry(constant)
	o.decide(st, ReasonKVErrorMapRetryIndicated, nil)
	o.decide(st, ReasonNodeNotAvailable, nil)
	o.decide(st, ReasonKVNotMyVbucket, nil)
	o.decide(st, ReasonSocketClosedWhileInFlight, nil)
	st.SetErrorMapEntry(constant)
	o.decide(st, ReasonKVErrorMapRetryIndicated, nil)
	assert.Equal(t, []seen{
		{ReasonKVErrorMapRetryIndicated, true, 1},
		{ReasonNodeNotAvailable, false, 0},
		{ReasonSocketClosedWhileInFlight, false, 0},
		{ReasonKVErrorMapRetryIndicated, true, 2},
	}, got)
}
