package rangescan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

func TestIncompleteNamesTheLastRequestAndTheCause(t *testing.T) {
	var r Run
	// No request sent yet: the scan's first would have been a create.
	op, sentinel, err := r.Incomplete(context.DeadlineExceeded)
	assert.Equal(t, memdx.OpRangeScanCreate, op)
	assert.Nil(t, sentinel)
	var te *retry.TimeoutError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, memdx.OpRangeScanCreate, te.OpCode)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	r.lastOp.Store(uint32(memdx.OpRangeScanContinue))
	op, sentinel, err = r.Incomplete(fmt.Errorf("wrapped: %w", context.Canceled))
	assert.Equal(t, memdx.OpRangeScanContinue, op)
	assert.Equal(t, kverr.ErrRequestCanceled, sentinel)
	assert.ErrorIs(t, err, context.Canceled)

	cause := errors.New("something else")
	op, sentinel, err = r.Incomplete(cause)
	assert.Equal(t, memdx.OpRangeScanContinue, op)
	assert.Equal(t, kverr.ErrServerFailure, sentinel)
	assert.Equal(t, cause, err)
}

func TestPrefixRange(t *testing.T) {
	r, err := PrefixRange("user:", 10)
	require.NoError(t, err)
	assert.Equal(t, "user:", string(r.Start))
	assert.Equal(t, "user:"+strings.Repeat("\xff", 5), string(r.End))
	assert.False(t, r.ExclusiveStart || r.ExclusiveEnd)

	r, err = PrefixRange("", 3)
	require.NoError(t, err)
	assert.Equal(t, "\x00", string(r.Start))
	assert.Equal(t, "\xff\xff\xff", string(r.End))

	r, err = PrefixRange("0123456789", 10)
	require.NoError(t, err)
	assert.Equal(t, "0123456789", string(r.End))

	_, err = PrefixRange("0123456789a", 10)
	assert.EqualError(t, err, "prefix of 11 bytes, at most 10")
}

func TestRestart(t *testing.T) {
	for _, tc := range []struct {
		st                   memdx.Status
		unreachable          bool
		wantRestart, wantCnl bool
	}{
		{memdx.StatusNotMyVbucket, false, true, false},
		{memdx.StatusKeyNotFound, false, true, false},
		{memdx.StatusRangeScanCancelled, false, true, false}, // the server dropped the scan
		{0, true, true, true},                                // no status: the node may still hold the scan
		{memdx.StatusNotMyVbucket, true, true, false},        // a status came: the node answered
		{0, false, false, false},                             // a KV error without status, node reached
		{memdx.StatusTmpFail, false, false, false},           // retried by ContinueStrategy, not restarted
		{memdx.StatusNoAccess, false, false, false},
	} {
		restart, cancel := Restart(tc.st, tc.unreachable)
		assert.Equal(t, tc.wantRestart, restart, "%v unreachable=%v", tc.st, tc.unreachable)
		assert.Equal(t, tc.wantCnl, cancel, "%v unreachable=%v", tc.st, tc.unreachable)
	}
}

// SnapshotWait is 90% of the time left, capped; a timeout so long that
// left*9/10 overflows (a century) asks for the cap, not 1 ms.
func TestSnapshotWaitOfAVeryLongTimeout(t *testing.T) {
	assert.Equal(t, uint32(900), SnapshotWait(time.Second))
	assert.Equal(t, uint32(1), SnapshotWait(0))
	assert.Equal(t, uint32(1<<31), SnapshotWait(100*365*24*time.Hour), "a century left")
	assert.Equal(t, uint32(1<<31), SnapshotWait(math.MaxInt64))
}

// A continue's time limit is half of the time its attempt has left, never
// 0 (kv_engine's "no limit") nor more than MaxContinueTimeLimit, a
// caller's "no timeout" included; SetContinueTimeLimit writes it into a
// continue's extras only.
func TestContinueTimeLimit(t *testing.T) {
	for _, tc := range []struct {
		left time.Duration
		want uint32
	}{
		{1500 * time.Millisecond, 750},
		{2 * time.Second, 1000},
		{2500 * time.Millisecond, 1000},
		{75 * time.Second, 1000},
		{time.Second, 500},
		{time.Millisecond, 1},
		{0, 1},
		{-time.Second, 1},
		{math.MaxInt64, 1000},
	} {
		assert.Equal(t, tc.want, ContinueTimeLimit(tc.left), "left %v", tc.left)
	}
	req := memdx.NewRangeScanContinue(memdx.RangeScanContinue{ID: memdx.RangeScanID{1}, ItemLimit: 7, ByteLimit: 9})
	SetContinueTimeLimit(&req, 4*time.Second)
	got, err := memdx.DecodeRangeScanContinueRequest(&memdx.Packet{Extras: req.ExtrasBytes()})
	require.NoError(t, err)
	assert.Equal(t, memdx.RangeScanContinue{ID: memdx.RangeScanID{1}, ItemLimit: 7, TimeLimitMs: 1000, ByteLimit: 9}, got)
	cancel := memdx.NewRangeScanCancel(memdx.RangeScanID{1})
	before := string(cancel.ExtrasBytes())
	SetContinueTimeLimit(&cancel, 4*time.Second)
	assert.Equal(t, before, string(cancel.ExtrasBytes()), "a cancel's extras")
}
