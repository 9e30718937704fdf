package client

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
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

// Without XERROR kv_engine closes the connection where SELECT_BUCKET
// would answer EACCESS (select_bucket: the user may not use the bucket,
// which it says also of a bucket that does not exist to a user without
// access to every bucket; Connection::remapErrorCode). Connect used to
// report that as ErrNoNodeAvailable, and, with a cluster manager address
// to fall back on, waited for it all of ConnectTimeout when that one did
// not answer, failing with the fallback's timeout. One hang-up could be
// the network's; the same hang-up at the same step on the next connection
// is the node's answer: Connect now fails at once with ErrBucketNotFound,
// naming the bucket, the user and why, and asks no other address.
func TestSelectBucketHangupWithoutXerrorIsTheBucketRefused(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1,
		Users: []mockcluster.User{{Name: "app", Password: "secret", Buckets: []string{"other"}}}})
	p := noXerrorProxy(t, mc)
	// A cluster manager address that accepts connections and answers
	// nothing: the fallback Connect must not wait for.
	rest, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer rest.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Connect(ctx, "couchbase://"+p.Addr()+","+rest.Addr().String()+"=http/"+mockcluster.DefaultBucket,
		testOptions(&Options{Username: "app", Password: "secret", ConnectTimeout: 10 * time.Second}))
	if c != nil {
		c.Close()
	}
	require.Error(t, err)
	t.Logf("%v", err)
	assert.ErrorIs(t, err, ErrBucketNotFound)
	for _, want := range []string{`bucket "default"`, `user "app"`, "EACCESS", "XERROR", "two connections"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Equal(t, 2, p.Requests(memdx.OpSelectBucket), "SELECT_BUCKET on the connections without XERROR")
	// Nothing dialed the cluster manager: its connection would wait in
	// the listener's queue.
	require.NoError(t, rest.(*net.TCPListener).SetDeadline(time.Now()))
	if nc, err := rest.Accept(); err == nil {
		nc.Close()
		t.Error("Connect asked the cluster manager after the bucket was refused")
	}
}
