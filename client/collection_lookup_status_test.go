package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// TestCollectionLookupFinalStatuses: a COLLECTIONS_GET_ID answered with a
// status waiting cannot fix ends the operation at once with that status's
// sentinel, instead of being retried as SOCKET_NOT_AVAILABLE until the
// timeout; TMPFAIL is still retried; UNKNOWN_COLLECTION keeps its RFC 0049
// handling (TestCollections).
func TestCollectionLookupFinalStatuses(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	addCollections(t, mc, "app", "users", "orders")
	c := connect(t, mc, nil)
	ctx := context.Background()
	opts := &GetOptions{Timeout: 20 * time.Second}

	// EINVAL from the server itself: "x.y" is not a valid collection name.
	lookups := countOp(mc, memdx.OpCollectionsGetID)
	_, err := c.Scope(DefaultScope).Collection("x.y").Get(ctx, "k", opts)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	var se *memdx.StatusError
	require.True(t, errors.As(err, &se), "the lookup's status is inspectable")
	assert.Equal(t, memdx.StatusInvalidArgs, se.Status)
	assert.Equal(t, memdx.OpCollectionsGetID, se.OpCode)
	assert.Equal(t, lookups+1, countOp(mc, memdx.OpCollectionsGetID), "EINVAL ends the operation: the lookup is not sent again")

	// EACCESS: the user may not see the collection.
	deny := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpCollectionsGetID}},
		Action: mockcluster.Action{Status: memdx.StatusNoAccess}})
	_, err = c.Scope("app").Collection("users").Get(ctx, "k", opts)
	deny.Remove()
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNoAccess)
	assert.NotErrorIs(t, err, ErrTimeout)
	assert.Equal(t, 1, deny.Hits(), "EACCESS ends the operation: the lookup is not sent again")
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, ErrNoAccess, kv.Err, "the error's sentinel is the lookup status's")

	// An unknown status the error map does not mark for retry: final too.
	odd := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpCollectionsGetID}},
		Action: mockcluster.Action{Status: mockcluster.StatusTestNoRetry}})
	_, err = c.Scope("app").Collection("users").Get(ctx, "k", opts)
	odd.Remove()
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrServerFailure)
	assert.NotErrorIs(t, err, ErrTimeout)
	assert.Equal(t, 1, odd.Hits(), "an unknown status ends the operation: the lookup is not sent again")

	// TMPFAIL, and statuses the error map marks for retry (EBUSY, an
	// unknown code), are retryable: the lookup is tried again and the Get
	// succeeds.
	_, err = c.Scope("app").Collection("orders").Upsert(ctx, "o1", []byte("v"), nil)
	require.NoError(t, err)
	for _, st := range []memdx.Status{memdx.StatusTmpFail, memdx.StatusBusy, mockcluster.StatusTestRetry} {
		c.cl.Collections().Invalidate(c.Scope("app").Collection("orders").path)
		mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpCollectionsGetID}},
			Action: mockcluster.Action{Status: st}, Times: 2})
		g, err := c.Scope("app").Collection("orders").Get(ctx, "o1", opts)
		require.NoError(t, err, "status %v", st)
		assert.Equal(t, "v", string(g.Value))
	}
}
