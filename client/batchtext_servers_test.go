package client

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/memcachedtest"
)

// A text connection the server closed while it sat idle (memcached's
// idle_timeout, a restart, a NAT dropping it) is found dead only when a
// batch writes its multi-get on it: nothing of the answer was read, and
// the server's binary connection is fine. Its keys read as Gets read them
// then, with no retry: a strategy that never retries still gets every
// key, as it does with Get.
func TestGetManyMemcachedTextConnectionClosedWhileIdleReadsWithoutRetry(t *testing.T) {
	f := newTextFront(t, memcachedtest.Start(t))
	noRetry := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })
	c := textClient(t, f.addr(), &Options{RetryStrategy: noRetry})
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "txidle", 10, 6)
	warmText(t, c, keys[0])
	f.closeTexts()
	for i, k := range keys {
		_, err := col.Get(context.Background(), k, nil)
		if i < 6 {
			require.NoError(t, err, "Get %s", k)
		} else {
			require.ErrorIs(t, err, ErrDocumentNotFound, k)
		}
	}
	requireStored(t, col.GetMany(context.Background(), keys, nil), 6)
}

// Keys of two servers in windows of the batch's in-flight bound (10 keys
// here), with keys given twice (also across windows), keys text cannot
// carry and misses: each key reads what a Get reads, by text multi-gets.
func TestGetManyMemcachedTextTwoServersInWindowsReadAsGets(t *testing.T) {
	f1 := newTextFront(t, memcachedtest.Start(t))
	f2 := newTextFront(t, memcachedtest.Start(t))
	c, err := Connect(context.Background(), "memcached://"+f1.addr()+","+f2.addr(),
		testOptions(&Options{MaxPendingPerConnection: 20}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	col := c.DefaultCollection()
	require.Equal(t, 10, c.batchInFlight())
	keys := batchKeys(t, col, "tx2", 60, 40)
	for _, k := range []string{"tx2 sp1", "tx2 sp2"} {
		_, err := col.Upsert(context.Background(), k, []byte("v-"+k), nil)
		require.NoError(t, err)
		keys = append(keys, k)
	}
	keys = append(keys, keys[1], keys[1], keys[50], keys[0], "tx2 sp1", keys[5])
	check := func() {
		t.Helper()
		res := col.GetMany(context.Background(), keys, nil)
		require.Len(t, res, len(keys))
		for i, r := range res {
			require.Equal(t, keys[i], r.Key)
			single, serr := col.Get(context.Background(), r.Key, nil)
			if serr != nil {
				require.ErrorIs(t, serr, ErrDocumentNotFound)
				require.ErrorIs(t, r.Err, ErrDocumentNotFound, "%d %s", i, r.Key)
				continue
			}
			require.NoError(t, r.Err, "%d %s", i, r.Key)
			require.Equal(t, string(single.Value), string(r.Value), "%d %s", i, r.Key)
			require.Equal(t, single.Cas, r.Cas, "%d %s", i, r.Key)
		}
	}
	check()
	// Two windows are in flight at once, each taking a text connection
	// per server: with two idle on each server, every window's groups are
	// read by text whatever the timing. The first check dialed at least
	// one; taking it makes TakeText dial a second, and putting it back
	// after leaves two idle.
	for _, nd := range c.cl.Topology().Nodes() {
		waitFor(t, "a text connection to "+nd.Addr(), func() bool { k, _, _ := nd.TextState(); return k >= 1 })
		if k, _, _ := nd.TextState(); k >= 2 {
			continue
		}
		held := nd.TakeText()
		require.NotNil(t, held)
		require.Nil(t, nd.TakeText(), "the node's one idle text connection is held: this take starts a dial")
		waitFor(t, "a second text connection to "+nd.Addr(), func() bool { k, _, _ := nd.TextState(); return k >= 1 })
		nd.PutText(held, true)
	}
	// Every window's group of a server is one text multi-get: as many as
	// the windows' servers (keys with a space go by binary gets).
	want := 0
	for from := 0; from < len(keys); from += 10 {
		servers := map[string]bool{}
		for _, k := range keys[from:min(from+10, len(keys))] {
			if !strings.Contains(k, " ") {
				servers[c.Route(k).Active] = true
			}
		}
		want += len(servers)
	}
	before := f1.multigets.Load() + f2.multigets.Load()
	check()
	assert.Equal(t, int32(want), f1.multigets.Load()+f2.multigets.Load()-before, "multi-gets per window and server")
	assert.NotZero(t, f1.multigets.Load())
	assert.NotZero(t, f2.multigets.Load())
}

// One of two servers stops answering (paused, overloaded): its keys time
// out, but the other server's keys, answered in time, read as Gets of
// them do: a silent server does not fail the keys of the others.
func TestGetManyMemcachedTextSilentServerDoesNotFailTheOthers(t *testing.T) {
	t.Parallel()
	f1 := newTextFront(t, memcachedtest.Start(t))
	f2 := newTextFront(t, memcachedtest.Start(t))
	c, err := Connect(context.Background(), "memcached://"+f1.addr()+","+f2.addr(), testOptions(nil))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "txsil2", 40, 40)
	top := c.cl.Topology()
	serverOf := func(k string) string { _, n := top.KetamaServer([]byte(k)); return n.Addr() }
	// The silent server is the one of the first key, whose group is sent
	// and read first.
	silent, other := f1, f2
	if serverOf(keys[0]) != f1.addr() {
		silent, other = f2, f1
	}
	col.GetMany(context.Background(), keys, nil)
	waitFor(t, "text connections to both servers", func() bool {
		for _, nd := range top.Nodes() {
			if k, _, _ := nd.TextState(); k == 0 {
				return false
			}
		}
		return true
	})
	hold := make(chan struct{})
	defer close(hold)
	silent.setOnGets(func([]string) textAction { return textAction{hold: hold} })
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: 300 * time.Millisecond})
	require.NotZero(t, other.multigets.Load())
	for _, r := range res {
		if serverOf(r.Key) == silent.addr() {
			require.ErrorIs(t, r.Err, ErrTimeout, r.Key)
			continue
		}
		require.NoError(t, r.Err, r.Key)
		assert.Equal(t, "v-"+r.Key, string(r.Value))
	}
}
