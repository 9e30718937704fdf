package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// Without XERROR (a reconnect after an unusable error map) kv_engine
// closes the connection where it would answer DURABILITY_IMPOSSIBLE,
// SYNC_WRITE_AMBIGUOUS, EACCESS or NO_BUCKET (Connection::remapErrorCode).
// A durable write on a one-node cluster whose bucket wants a replica is
// such a write: the user saw only "the request may have been applied" and
// an EOF. The error still says the write may have been applied (the
// client cannot know), and now also that the node hung up where Couchbase
// Server refuses so, and why the connection had no XERROR.
func TestHangupWithoutXerrorNamesTheRefusalsItMayBe(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connectWithoutXerror(t, mc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.DefaultCollection().Upsert(ctx, "k", []byte("v"),
		&UpsertOptions{Durability: DurabilityMajority, RetryStrategy: RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })})
	require.Error(t, err)
	t.Logf("%v", err)
	assert.ErrorIs(t, err, ErrAmbiguous, "the client cannot know the write was refused")
	for _, want := range []string{"closed the connection", "XERROR", "DURABILITY_IMPOSSIBLE", "EACCESS", "error map"} {
		assert.Contains(t, err.Error(), want)
	}
}
