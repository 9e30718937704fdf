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

// A retry whose wait the client's Close ended is not sent, and counts in
// neither RetryAttempts nor the span's couchbase.retries: the span has no
// "retry" event for it either, so that its retry events and its
// couchbase.retries agree (one LOCKED retry made, the TMPFAIL one not).
func TestRetryEventsOnlyOfRetriesMade(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	tr := &treeTracer{}
	c := connect(t, mc, &Options{Tracer: tr})
	col := c.DefaultCollection()
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"}, Action: mockcluster.Action{Status: memdx.StatusLocked, Value: []byte{}}, Times: 1})
	h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"}, Action: mockcluster.Action{Status: memdx.StatusTmpFail, Value: []byte{}}})
	defer h.Remove()

	strategy := RetryStrategyFunc(func(_ RetryRequest, r RetryReason) RetryAction {
		if r == RetryReasonKVLocked {
			return RetryAfter(0)
		}
		// The TMPFAIL retry is decided, and its wait ended by Close
		// before it goes out.
		go c.Close()
		return RetryAfter(time.Hour)
	})
	_, err := col.Get(context.Background(), "k", &GetOptions{RetryStrategy: strategy, Timeout: 2 * time.Hour})
	require.ErrorIs(t, err, ErrClosed)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	require.Equal(t, 1, kv.RetryAttempts, "the LOCKED retry was sent, the TMPFAIL one was not: %v", err)

	var op *treeSpan
	for _, s := range tr.take() {
		if s.name == "get" {
			op = s
		}
	}
	require.NotNil(t, op, "the get's span")
	retries := 0
	for _, e := range op.events {
		if e.name == "retry" {
			retries++
		}
	}
	assert.Equal(t, int64(1), op.attrs["couchbase.retries"].Int64())
	assert.Equal(t, 1, retries, "retry events %v, couchbase.retries %v", op.events, op.attrs["couchbase.retries"])
}
