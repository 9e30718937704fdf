package client

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A counter's expiry of 0xffffffff is not a time on the wire: it tells the
// server not to create the document (memdx.NoCreate). An Expiry (over 30
// days, so sent as an absolute time) that lands exactly on Unix time
// 0xffffffff used to be sent as is: Increment with Initial then failed with
// ErrDocumentNotFound instead of creating the counter. It is refused before
// anything is sent, as an expiry past 0xffffffff is, naming the expiry.
func TestCounterExpiryOnNoCreateRefused(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	expiry := 31 * 24 * time.Hour
	fc := retry.NewFakeClock(time.Unix(math.MaxUint32-int64(expiry/time.Second), 0))
	col := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour}).DefaultCollection()
	ctx := context.Background()
	ctl := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpIncrement, memdx.OpDecrement}}})
	defer ctl.Remove()
	one := uint64(1)
	_, err := col.Increment(ctx, "n", &IncrementOptions{Delta: 1, Initial: &one, Expiry: expiry})
	require.ErrorIs(t, err, ErrInvalidArgument, "%v", err)
	assert.NotErrorIs(t, err, ErrDocumentNotFound)
	assert.Contains(t, err.Error(), "expiry")
	_, err = col.Decrement(ctx, "n", &DecrementOptions{Delta: 1, Initial: &one, Expiry: expiry})
	require.ErrorIs(t, err, ErrInvalidArgument, "%v", err)
	assert.Zero(t, ctl.Hits(), "nothing sent")

	// A second less is a time, and creates the counter.
	ctl.Remove()
	r, err := col.Increment(ctx, "n", &IncrementOptions{Delta: 1, Initial: &one, Expiry: expiry - time.Second})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), r.Value)
}
