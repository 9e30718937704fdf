package client

import (
	"context"
	"testing"
	"time"

	"github.com/kvwire/kvwire/mockcluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Couchbase Server counts expiry and lock time in whole seconds and keeps a
// document through the last second of its TTL, and a lock through the last
// second of its lock time: a test that waits exactly the TTL may still
// find the document, and one that waits exactly the lock time may still
// find it locked.
func TestExpiryAndLockEndAfterTheirLastSecond(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	mc := newMock(t, mockcluster.Options{Clock: func() time.Time { return start }})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "e", []byte("v"), &UpsertOptions{Expiry: 10 * time.Second})
	require.NoError(t, err)
	_, err = col.Upsert(ctx, "l", []byte("v"), nil)
	require.NoError(t, err)
	_, err = col.GetAndLock(ctx, "l", 10*time.Second, nil)
	require.NoError(t, err)

	mc.Clock().Advance(10 * time.Second)
	_, err = col.Get(ctx, "e", nil)
	assert.NoError(t, err, "alive through the TTL's last second")
	noRetry := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })
	_, err = col.Upsert(ctx, "l", []byte("w"), &UpsertOptions{RetryStrategy: noRetry})
	assert.ErrorIs(t, err, ErrDocumentLocked, "locked through the lock's last second")

	mc.Clock().Advance(time.Second)
	_, err = col.Get(ctx, "e", nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound)
	_, err = col.Upsert(ctx, "l", []byte("w"), nil)
	assert.NoError(t, err)
}
