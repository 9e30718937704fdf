package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// Delta 0 adds nothing: Increment and Decrement with it read the counter,
// or create it with Initial.
func TestCounterDeltaZeroReadsCounter(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	seven := uint64(7)
	r, err := col.Increment(ctx, "n", &IncrementOptions{Initial: &seven})
	require.NoError(t, err)
	assert.Equal(t, uint64(7), r.Value, "created with Initial")
	r, err = col.Increment(ctx, "n", nil)
	require.NoError(t, err)
	assert.Equal(t, uint64(7), r.Value, "nil options: Delta 0, the counter read")
	r, err = col.Decrement(ctx, "n", &DecrementOptions{})
	require.NoError(t, err)
	assert.Equal(t, uint64(7), r.Value)
	r, err = col.Increment(ctx, "n", &IncrementOptions{Delta: 1})
	require.NoError(t, err)
	assert.Equal(t, uint64(8), r.Value)
	d, _ := mc.Bucket(mockcluster.DefaultBucket).Get("_default", "_default", "n")
	assert.Equal(t, "8", string(d.Value))
}

// A counter's Expiry is the expiry of the document Initial creates.
func TestCounterExpiryAppliesToCreatedCounter(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	mc := newMock(t, mockcluster.Options{Clock: func() time.Time { return start }})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	one := uint64(1)
	_, err := col.Decrement(ctx, "n", &DecrementOptions{Initial: &one, Expiry: time.Minute})
	require.NoError(t, err)
	d, _ := mc.Bucket(mockcluster.DefaultBucket).Get("_default", "_default", "n")
	assert.Equal(t, start.Add(time.Minute).Unix(), d.Expiry.Unix())
	_, err = col.Decrement(ctx, "n", &DecrementOptions{Delta: 1, Expiry: time.Minute})
	assert.ErrorIs(t, err, ErrInvalidArgument, "an expiry the server would ignore")
}
