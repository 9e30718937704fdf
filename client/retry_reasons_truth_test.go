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

// RetryReasons names the reasons of the retries RetryAttempts counts: a
// retry decided and then not sent (the context ended its wait) is in
// neither, so the error never says "after 1 retry (for LOCKED, TMPFAIL)"
// of an operation retried only for LOCKED.
func TestRetryReasonsOnlyOfRetriesMade(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"}, Action: mockcluster.Action{Status: memdx.StatusLocked, Value: []byte{}}, Times: 1})
	h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"}, Action: mockcluster.Action{Status: memdx.StatusTmpFail, Value: []byte{}}})
	defer h.Remove()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	strategy := RetryStrategyFunc(func(_ RetryRequest, r RetryReason) RetryAction {
		if r == RetryReasonKVLocked {
			return RetryAfter(0)
		}
		// The TMPFAIL retry is decided, and its wait ended by the
		// context before it goes out.
		cancel()
		return RetryAfter(time.Hour)
	})
	_, err := col.Get(ctx, "k", &GetOptions{RetryStrategy: strategy, Timeout: 2 * time.Hour})
	require.ErrorIs(t, err, ErrRequestCanceled)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	t.Logf("%v", err)
	assert.Equal(t, 1, kv.RetryAttempts, "the LOCKED retry was sent, the TMPFAIL one was not")
	assert.True(t, kv.RetryReasons.Has(RetryReasonKVLocked))
	assert.False(t, kv.RetryReasons.Has(RetryReasonKVTemporaryFailure), "no retry was made for TMPFAIL: %v", kv.RetryReasons)
	assert.Equal(t, StatusTmpFail, kv.Status, "the last answer still says what came back")
}
