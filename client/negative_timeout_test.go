package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// requireNegativeRefused requires err to be the refusal of a negative
// option named option (ErrInvalidArgument, a *KeyValueError of operation
// op that sent nothing, its message naming the option).
func requireNegativeRefused(t *testing.T, err error, op, option string) {
	t.Helper()
	require.ErrorIs(t, err, ErrInvalidArgument, op)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv, op)
	assert.Equal(t, op, kv.Op)
	assert.Empty(t, kv.Node, "%s: nothing was sent", op)
	assert.Zero(t, kv.RetryAttempts, op)
	assert.Contains(t, err.Error(), "negative "+option, op)
}

// One rule for a negative duration in the options of an operation: it is
// refused before anything is sent, with ErrInvalidArgument naming the
// option, as Connect refuses a negative KVTimeout and Scan and
// WaitUntilReady a negative Timeout; 0 means the default. A single
// operation, a batch (every key), a replica read, a node's request and a
// scan alike.
func TestNegativeTimeoutIsRefused(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	sent := func() uint64 { return mc.RequestCount(memdx.OpGet) + mc.RequestCount(memdx.OpSet) }
	before := sent()

	_, err = col.Get(ctx, "k", &GetOptions{Timeout: -time.Second})
	requireNegativeRefused(t, err, "Get", "Timeout -1s")
	_, err = col.Upsert(ctx, "k", []byte("v"), &UpsertOptions{Timeout: -1})
	requireNegativeRefused(t, err, "Upsert", "Timeout -1ns")
	_, err = col.Upsert(ctx, "k", []byte("v"), &UpsertOptions{Durability: DurabilityMajority, DurabilityTimeout: -time.Second})
	requireNegativeRefused(t, err, "Upsert", "DurabilityTimeout -1s")
	for _, r := range col.GetMany(ctx, []string{"k", "other"}, &GetManyOptions{Timeout: -time.Second}) {
		requireNegativeRefused(t, r.Err, "Get", "Timeout -1s")
	}
	for _, r := range col.UpsertMany(ctx, []UpsertManyItem{{Key: "k", Value: []byte("v")}}, &UpsertManyOptions{Timeout: -time.Second}) {
		requireNegativeRefused(t, r.Err, "Upsert", "Timeout -1s")
	}
	_, err = col.LookupIn(ctx, "k", []LookupInSpec{ExistsSpec("a", nil)}, &LookupInOptions{Timeout: -time.Second})
	requireNegativeRefused(t, err, "LookupIn", "Timeout -1s")
	_, err = col.GetAnyReplica(ctx, "k", &GetReplicaOptions{Timeout: -time.Second})
	require.ErrorIs(t, err, ErrInvalidArgument, "GetAnyReplica")
	assert.Contains(t, err.Error(), "negative Timeout -1s")
	assert.Equal(t, before, sent(), "nothing was sent")

	res, err := c.Stats(ctx, "", &StatsOptions{Timeout: -time.Second})
	assert.Nil(t, res)
	requireNegativeRefused(t, err, "Stats", "Timeout -1s")
	_, err = c.Version(ctx, &VersionOptions{Timeout: -time.Second})
	requireNegativeRefused(t, err, "Version", "Timeout -1s")

	_, err = col.Scan(ctx, RangeScan{}, &ScanOptions{Timeout: -time.Second})
	requireNegativeRefused(t, err, "Scan", "Timeout -1s")
	_, err = col.Scan(ctx, RangeScan{}, &ScanOptions{Concurrency: -1})
	requireNegativeRefused(t, err, "Scan", "Concurrency -1")

	// 0 is the default.
	_, err = col.Get(ctx, "k", &GetOptions{Timeout: 0})
	require.NoError(t, err)
}

// On memcached:// a GetMany reads its keys by groups before any key is an
// operation: a negative Timeout is refused there too, for every key,
// without a read (a hit would otherwise be returned under it).
func TestNegativeTimeoutIsRefusedByAMemcachedGetMany(t *testing.T) {
	addr := memcachedtest.Start(t)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	keys := make([]string, 4)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
		_, err := col.Upsert(ctx, keys[i], []byte("v"), nil)
		require.NoError(t, err)
	}
	for _, r := range col.GetMany(ctx, keys, &GetManyOptions{Timeout: -time.Second}) {
		requireNegativeRefused(t, r.Err, "Get", "Timeout -1s")
	}
	res, err := c.Flush(ctx, &FlushOptions{Timeout: -time.Second})
	assert.Nil(t, res)
	requireNegativeRefused(t, err, "Flush", "Timeout -1s")
}

// A negative Expiry is refused before anything is sent, as a negative
// Timeout is: sent as 0 it would mean "never expires", keeping for ever a
// document whose time to live had run out before it was written. Every
// operation that takes an expiry, alike.
func TestNegativeExpiryIsRefused(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	ops := []memdx.OpCode{memdx.OpSet, memdx.OpAdd, memdx.OpReplace, memdx.OpTouch, memdx.OpGAT,
		memdx.OpIncrement, memdx.OpSubdocMultiMutation}
	sent := func() (n uint64) {
		for _, op := range ops {
			n += mc.RequestCount(op)
		}
		return n
	}
	before := sent()

	_, err = col.Upsert(ctx, "k", []byte("v"), &UpsertOptions{Expiry: -time.Second})
	requireNegativeRefused(t, err, "Upsert", "expiry -1s")
	_, err = col.Insert(ctx, "new", []byte("v"), &InsertOptions{Expiry: -1})
	requireNegativeRefused(t, err, "Insert", "expiry -1ns")
	_, err = col.Replace(ctx, "k", []byte("v"), &ReplaceOptions{Expiry: -time.Second})
	requireNegativeRefused(t, err, "Replace", "expiry -1s")
	_, err = col.Touch(ctx, "k", -time.Second, nil)
	requireNegativeRefused(t, err, "Touch", "expiry -1s")
	_, err = col.GetAndTouch(ctx, "k", -time.Second, nil)
	requireNegativeRefused(t, err, "GetAndTouch", "expiry -1s")
	initial := uint64(1)
	_, err = col.Increment(ctx, "n", &IncrementOptions{Initial: &initial, Expiry: -time.Second})
	requireNegativeRefused(t, err, "Increment", "expiry -1s")
	_, err = col.MutateIn(ctx, "k", []MutateInSpec{UpsertSpec("a", []byte("1"), nil)}, &MutateInOptions{Expiry: -time.Second})
	requireNegativeRefused(t, err, "MutateIn", "expiry -1s")
	for _, r := range col.UpsertMany(ctx, []UpsertManyItem{{Key: "k", Value: []byte("v"), Expiry: -time.Second}}, nil) {
		requireNegativeRefused(t, r.Err, "Upsert", "expiry -1s")
	}
	assert.Equal(t, before, sent(), "a refused operation sent nothing")

	exists, err := col.Exists(ctx, "new", nil)
	require.NoError(t, err)
	assert.False(t, exists.Exists, "the refused Insert wrote nothing")
}
