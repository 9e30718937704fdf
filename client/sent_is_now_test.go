package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// An operation that waited on another operation's collection-id lookup
// (shared: one lookup per collection and node at a time; one node here)
// until after its own
// deadline is refused unsent, as its connection's deadline check would
// refuse it: the time its request is sent is read after the lookup, not
// taken from the operation's begin (conn.Origin.SentIsNow). A request
// queued past its deadline races its expiry against its write: a mutation
// written would be an ambiguous timeout the server may still apply.
func TestDeadlinePassedDuringSharedLookupIsNotSent(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	addCollections(t, mc, "app", "users")
	c := connect(t, mc, nil) // the real clock: SentIsNow applies
	require.Nil(t, c.opts.Clock)
	col := c.Scope("app").Collection("users")

	// The lookup is answered once the test has the remove's outcome
	// (held, not delayed by a time the test goroutine could outlast on
	// a loaded machine); the test learns when it reached the node.
	hold := make(chan struct{})
	hit := make(chan struct{})
	mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpCollectionsGetID}}, 1,
		func(*mockcluster.Request) (mockcluster.Action, bool) {
			close(hit)
			return mockcluster.Action{Hold: hold}, true
		})
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		_, err := col.Get(ctx, "a", &GetOptions{Timeout: 20 * time.Second})
		first <- err
	}()
	<-hit
	deletes := countOp(mc, memdx.OpDelete)
	start := time.Now()
	_, err := col.Remove(ctx, "b", &RemoveOptions{Timeout: 50 * time.Millisecond})
	close(hold)
	require.Greater(t, time.Since(start), 50*time.Millisecond, "the remove waited on the shared lookup")
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrUnambiguousTimeout, "its deadline passed before it was sent: %v", err)
	assert.NotErrorIs(t, err, ErrAmbiguousTimeout)
	// Refused by the deadline check before it was queued, rather than
	// queued past its deadline to race its expiry against its write.
	var te *retry.TimeoutError
	require.ErrorAs(t, err, &te)
	var re *conn.RequestError
	require.ErrorAs(t, te.LastErr, &re)
	assert.False(t, re.Written)
	assert.Zero(t, re.Opaque, "the remove was queued past its deadline: %v", err)
	assert.ErrorIs(t, <-first, ErrDocumentNotFound, "the Get that led the lookup goes on")
	assert.Equal(t, deletes, countOp(mc, memdx.OpDelete), "nothing was written past its deadline")
	assert.Equal(t, uint64(1), countOp(mc, memdx.OpCollectionsGetID), "one lookup, shared")
}
