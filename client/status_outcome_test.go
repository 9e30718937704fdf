package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// collectionsMock starts a mock whose default bucket has the collection
// app.users with the document "u", and a client on it.
func collectionsMock(t *testing.T, o *Options) (*mockcluster.Cluster, *Client, *Collection) {
	t.Helper()
	mc := newMock(t, mockcluster.Options{})
	addCollections(t, mc, "app", "users")
	c := connect(t, mc, o)
	col := c.Scope("app").Collection("users")
	_, err := col.Upsert(context.Background(), "u", []byte("v"), nil)
	require.NoError(t, err)
	return mc, c, col
}

// TestTempErrorMapStatusIsTemporaryFailure: a status the client has no
// outcome of its own for, whose error-map entry says "temp", ends as
// ErrTemporaryFailure, not ErrServerFailure: here with FollowErrorMap, when
// the entry's max-duration (500 ms for the mock's 0x7ff0) ends its retries,
// on an operation and on the collection-id lookup.
func TestTempErrorMapStatusIsTemporaryFailure(t *testing.T) {
	t.Parallel()
	mc, c, col := collectionsMock(t, &Options{RetryStrategy: FollowErrorMap(nil)})
	ctx := context.Background()
	opts := &GetOptions{Timeout: 20 * time.Second}

	ctl := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "u", OpCodes: []memdx.OpCode{memdx.OpGet}},
		Action: mockcluster.Action{Status: mockcluster.StatusTestRetry}})
	_, err := col.Get(ctx, "u", opts)
	ctl.Remove()
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrTemporaryFailure)
	assert.NotErrorIs(t, err, ErrServerFailure)
	assert.ErrorIs(t, err, ErrErrorMapMaxDuration, "ended by the entry's max-duration")
	assert.NotErrorIs(t, err, ErrTimeout)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, ErrTemporaryFailure, kv.Err)
	assert.Equal(t, "MOCK_TEST_RETRY", kv.ErrorName)
	assert.Greater(t, ctl.Hits(), 1, "retried first")

	c.cl.Collections().Invalidate(col.path)
	ctl = mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpCollectionsGetID}},
		Action: mockcluster.Action{Status: mockcluster.StatusTestRetry}})
	_, err = col.Get(ctx, "u", opts)
	ctl.Remove()
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrTemporaryFailure)
	assert.NotErrorIs(t, err, ErrServerFailure)
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, ErrTemporaryFailure, kv.Err)
}

// TestCollectionLookupFollowsErrorMapSpec: with FollowErrorMap, an
// error-map retry of the collection-id lookup is timed by the entry's retry
// spec, as an operation's is: the mock's 0x7ff0 (max-duration 500 ms) ends
// the lookup's retries long before the operation's 20 s timeout, where the
// fallback strategy would retry until it.
func TestCollectionLookupFollowsErrorMapSpec(t *testing.T) {
	t.Parallel()
	mc, c, col := collectionsMock(t, &Options{RetryStrategy: FollowErrorMap(nil)})
	c.cl.Collections().Invalidate(col.path)
	ctl := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpCollectionsGetID}},
		Action: mockcluster.Action{Status: mockcluster.StatusTestRetry}})
	defer ctl.Remove()
	_, err := col.Get(context.Background(), "u", &GetOptions{Timeout: 20 * time.Second})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrErrorMapMaxDuration)
	assert.NotErrorIs(t, err, ErrTimeout)
	// after 10 ms, then every 10 ms, while less than 500 ms have passed.
	assert.Greater(t, ctl.Hits(), 2)
}

// TestLookupRefusalAfterStatusHasLookupsError: an operation whose attempt
// got a status, and whose next attempt failed in the collection-id lookup,
// ends with the lookup's error, not the earlier status's: a scope dropped
// under a cached collection id gives UNKNOWN_COLLECTION on the operation,
// then UNKNOWN_SCOPE on the lookup, and the caller sees ErrScopeNotFound.
func TestLookupRefusalAfterStatusHasLookupsError(t *testing.T) {
	mc, _, col := collectionsMock(t, nil)
	ctx := context.Background()
	_, err := col.Get(ctx, "u", nil) // the id is cached
	require.NoError(t, err)
	require.NoError(t, mc.Bucket(mockcluster.DefaultBucket).DropScope("app"))

	_, err = col.Get(ctx, "u", &GetOptions{Timeout: 20 * time.Second})
	require.Error(t, err)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, StatusUnknownCollection, kv.Status, "the operation's own attempt got UNKNOWN_COLLECTION")
	assert.Equal(t, ErrScopeNotFound, kv.Err, "the lookup found the scope gone")
	assert.ErrorIs(t, err, ErrScopeNotFound)
	assert.NotErrorIs(t, err, ErrCollectionNotFound)
	assert.NotErrorIs(t, err, ErrTimeout)

}

// TestLookupRetryRefusedHasStatusSentinel: a lookup status that is retried
// (TMPFAIL) but whose retry the strategy refuses ends the operation with the
// status's sentinel as the error's Err, as an operation's own status does.
func TestLookupRetryRefusedHasStatusSentinel(t *testing.T) {
	mc, c, col := collectionsMock(t, nil)
	c.cl.Collections().Invalidate(col.path)
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpCollectionsGetID}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail}, Times: 1})
	never := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })
	_, err := col.Get(context.Background(), "u", &GetOptions{RetryStrategy: never})
	require.Error(t, err)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, ErrTemporaryFailure, kv.Err)
	assert.ErrorIs(t, err, memdx.StatusTmpFail)
}
