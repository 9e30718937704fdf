package client

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A newer config with no vbucket map (a bucket with no partitions yet, as
// Couchbase Server sends it right after bucket creation) arrives in a
// NOT_MY_VBUCKET body: the client keeps routing by the map it holds and
// keeps its nodes, so it still follows the cluster afterwards.
func TestConfigWithoutMapIsNotInstalled(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, &Options{ConfigPollInterval: 50 * time.Millisecond})
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)

	b := mc.Bucket(mockcluster.DefaultBucket)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b.ConfigJSON(0), &m))
	m["rev"] = float64(b.Rev() + 1)
	vsm := m["vBucketServerMap"].(map[string]any)
	vsm["serverList"] = []string{}
	vsm["vBucketMap"] = [][]int{}
	delete(vsm, "vBucketMapForward")
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"},
		Action: mockcluster.Action{Status: memdx.StatusNotMyVbucket, Value: raw}, Times: 1})
	nodes := c.Nodes()
	_, err = col.Get(ctx, "k", nil)
	require.NoError(t, err)
	h.Remove()
	assert.ElementsMatch(t, nodes, c.Nodes(), "the map-less config retired nodes")

	r, err := mc.StartRebalance(mockcluster.RebalanceOptions{})
	require.NoError(t, err)
	require.NoError(t, r.Finish())
	require.Eventually(t, func() bool { return c.ConfigVersion().Rev == uint64(b.Rev()) },
		10*time.Second, 10*time.Millisecond, "the client stopped following the cluster")
	_, err = col.Get(ctx, "k", nil)
	require.NoError(t, err)
}

// A node rebalanced out while a request with a long per-operation timeout is
// in flight on it: its connection drains until the answer comes, instead of
// closing after the client's default timeout and making the write
// ambiguous. The node holds the answer until the client has dropped it, so
// the drain is always what is exercised. The client's clock (on which the
// timeouts and the drain's bound are counted) moves only by the config
// fetches' spacing, far from either timeout, so the test checks the bound
// the drain arms (the operation's timeout and a second, not the default
// timeout's) rather than waiting for it. The operation's timeout is an
// hour: its socket reads the deadline as a real time, which a loaded
// machine could reach within a few seconds.
func TestLeavingNodeDrainsLongOperation(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, KVTimeout: 300 * time.Millisecond})
	col := c.DefaultCollection()
	const key = "slow-counter"
	active := c.Route(key).Active
	var others []int
	for _, n := range mc.Nodes() {
		if n.Addr() != active {
			others = append(others, n.ID())
		}
	}
	release := make(chan struct{})
	h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: key, OpCodes: []memdx.OpCode{memdx.OpIncrement}},
		Action: mockcluster.Action{Hold: release}, Times: 1})
	defer h.Remove()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	done := make(chan error, 1)
	var res CounterResult
	go func() {
		one := uint64(1)
		var err error
		res, err = col.Increment(context.Background(), key, &IncrementOptions{Initial: &one, Timeout: time.Hour})
		done <- err
	}()
	limit := time.NewTimer(time.Minute) // a bound only a broken run reaches
	defer limit.Stop()
	for h.Hits() == 0 {
		select {
		case <-limit.C:
			t.Fatal("the Increment never reached the node")
		case <-time.After(time.Millisecond):
		}
	}
	r, err := mc.StartRebalance(mockcluster.RebalanceOptions{Nodes: others})
	require.NoError(t, err)
	require.NoError(t, r.Finish())
	// The rebalance publishes its configs one after another; fetches of
	// them are spaced by ConfigFetchInterval on the clock, moved on by
	// that step whenever a timer is due within it.
	for steps := 0; contains(c.Nodes(), active); {
		select {
		case err := <-done:
			t.Fatalf("the Increment ended before the node left: %v", err)
		case <-limit.C:
			t.Fatal("the client never dropped the node rebalanced out")
		case <-time.After(time.Millisecond):
			now := fc.Now()
			if slices.ContainsFunc(fc.Timers(), func(due time.Time) bool { return !due.After(now.Add(cluster.ConfigFetchInterval)) }) {
				require.Less(t, steps, 10, "fetches keep waiting for their spacing")
				steps++
				fc.Advance(cluster.ConfigFetchInterval)
			}
		}
	}
	// The drain's bound, from the operation's hour, is the only timer due
	// an hour or more ahead.
	for {
		now := fc.Now()
		if slices.ContainsFunc(fc.Timers(), func(due time.Time) bool { return !due.Before(now.Add(time.Hour)) }) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the Increment ended before the drain armed its bound: %v", err)
		case <-limit.C:
			t.Fatalf("the drain armed no bound from the operation's timeout (timers due %v from %v)", fc.Timers(), fc.Now())
		case <-time.After(time.Millisecond):
		}
	}
	close(release)
	released = true
	require.NoError(t, <-done)
	assert.Equal(t, uint64(1), res.Value)
	assert.Equal(t, uint64(1), mc.Bucket(mockcluster.DefaultBucket).MutationCount("_default", "_default", key))
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// A request that cannot be encoded fails at once with ErrInvalidArgument:
// no retry can make it encodable.
func TestUnencodableRequestFailsAtOnce(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, &Options{KVTimeout: 5 * time.Second})
	_, err := c.DefaultCollection().Upsert(context.Background(), "k", []byte("v"),
		&UpsertOptions{Durability: DurabilityLevel(9)})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.NotErrorIs(t, err, ErrTimeout)
	assert.NotErrorIs(t, err, ErrAmbiguous)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, 0, kv.RetryAttempts)
}

// Canceling the context while an operation waits to be retried after a
// status gives ErrRequestCanceled, not the status's error: NOT_MY_VBUCKET
// must never reach the caller (RFC 0005), nor LOCKED as if the strategy had
// given up, nor UNKNOWN_COLLECTION for a collection that exists.
func TestCancelDuringRetryWait(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	for _, st := range []memdx.Status{memdx.StatusLocked, memdx.StatusNotMyVbucket, memdx.StatusUnknownCollection, memdx.StatusTmpFail} {
		t.Run(st.String(), func(t *testing.T) {
			h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"}, Action: mockcluster.Action{Status: st, Value: []byte{}}})
			defer h.Remove()
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			_, err := col.Get(ctx, "k", nil)
			require.ErrorIs(t, err, ErrRequestCanceled)
			require.ErrorIs(t, err, context.Canceled)
			for _, wrong := range []error{ErrDocumentLocked, ErrServerFailure, ErrCollectionNotFound, ErrTemporaryFailure, ErrTimeout} {
				assert.NotErrorIs(t, err, wrong)
			}
		})
	}
}

// A strategy that retries everything still cannot send an Increment again
// once its connection closed after the server applied it: it fails as
// ambiguous and was applied exactly once.
func TestNoStrategyResendsMutationInDoubt(t *testing.T) {
	var asked atomic.Int32
	all := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction {
		asked.Add(1)
		return RetryAfter(10 * time.Millisecond)
	})
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, &Options{RetryStrategy: all})
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "ctr", []byte("10"), nil)
	require.NoError(t, err)
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "ctr", OpCodes: []memdx.OpCode{memdx.OpIncrement}},
		Action: mockcluster.Action{Close: mockcluster.CloseAfterApply}, Times: 1})
	_, err = col.Increment(ctx, "ctr", &IncrementOptions{Delta: 5})
	require.ErrorIs(t, err, ErrAmbiguous)
	assert.Equal(t, int32(0), asked.Load(), "the strategy was asked about a request in doubt")
	got, err := col.Get(ctx, "ctr", nil)
	require.NoError(t, err)
	assert.Equal(t, "15", string(got.Value), "applied once")
}

// A server that applies a mutation and answers SUCCESS with a body that does
// not decode: the error must say the request may have been applied.
func TestAppliedButUndecodableIsAmbiguous(t *testing.T) {
	var applied atomic.Int64
	addr := malformedSuccessServer(t, &applied)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, testOptions(&Options{KVTimeout: 2 * time.Second}))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	_, err = col.Upsert(ctx, "k", []byte("v"), nil)
	require.ErrorIs(t, err, ErrServerFailure)
	require.ErrorIs(t, err, ErrAmbiguous)
	one := uint64(1)
	_, err = col.Increment(ctx, "n", &IncrementOptions{Initial: &one})
	require.ErrorIs(t, err, ErrAmbiguous)
	assert.Equal(t, int64(2), applied.Load(), "each mutation sent once")
}

// malformedSuccessServer answers every request with SUCCESS; SET gets 4
// bytes of extras (0 or 16 are valid) and INCREMENT a 4-byte value (8 is).
func malformedSuccessServer(t *testing.T, applied *atomic.Int64) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				serveMalformed(nc, applied)
			}()
		}
	}()
	return ln.Addr().String()
}

func serveMalformed(nc net.Conn, applied *atomic.Int64) {
	hdr := make([]byte, memdx.HeaderSize)
	for {
		if _, err := io.ReadFull(nc, hdr); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, nc, int64(binary.BigEndian.Uint32(hdr[8:12]))); err != nil {
			return
		}
		op := memdx.OpCode(hdr[1])
		var extras, value []byte
		switch op {
		case memdx.OpSet:
			applied.Add(1)
			extras = []byte{0, 0, 0, 0}
		case memdx.OpIncrement:
			applied.Add(1)
			value = []byte{0, 0, 0, 1}
		case memdx.OpVersion:
			value = []byte("1.6.18")
		}
		resp := make([]byte, memdx.HeaderSize+len(extras)+len(value))
		resp[0] = byte(memdx.MagicRes)
		resp[1] = byte(op)
		resp[4] = byte(len(extras))
		binary.BigEndian.PutUint32(resp[8:12], uint32(len(extras)+len(value)))
		copy(resp[12:16], hdr[12:16])
		binary.BigEndian.PutUint64(resp[16:24], 42)
		copy(resp[24:], extras)
		copy(resp[24+len(extras):], value)
		if _, err := nc.Write(resp); err != nil {
			return
		}
	}
}
