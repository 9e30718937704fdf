package client

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A batch over a named collection needs the collection's id before it
// sends any key: the first key's lookup gives it to every key of the
// batch (one COLLECTIONS_GET_ID per batch), and a lookup that fails gives
// its outcome to every key of the round routed to the same connection
// instead of each key sending a lookup of its own, one after the other.
// Over a collection the server does not know, every key fails with
// ErrCollectionNotFound after one lookup per node, and no mutation is
// written.
func TestBatchLooksUpItsCollectionOncePerRound(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	addCollections(t, mc, "app", "users")
	c := connect(t, mc, nil)
	users := c.Scope("app").Collection("users")
	keys := batchKeys(t, users, "u", 200, 100)
	c.cl.Collections().Invalidate(users.path)

	lookups := countOp(mc, memdx.OpCollectionsGetID)
	for i, r := range users.GetMany(context.Background(), keys, nil) {
		if i < 100 {
			require.NoError(t, r.Err, r.Key)
		}
	}
	assert.Equal(t, lookups+1, countOp(mc, memdx.OpCollectionsGetID), "one lookup for the batch")

	missing := c.Scope("app").Collection("missing")
	lookups = countOp(mc, memdx.OpCollectionsGetID)
	for _, r := range missing.GetMany(context.Background(), keys, nil) {
		require.ErrorIs(t, r.Err, ErrCollectionNotFound, r.Key)
	}
	nodes := uint64(len(mc.Nodes()))
	assert.LessOrEqual(t, countOp(mc, memdx.OpCollectionsGetID), lookups+nodes, "one lookup per node for the batch's keys, not one each")

	items := make([]UpsertManyItem, len(keys))
	for i, k := range keys {
		items[i] = UpsertManyItem{Key: k, Value: []byte("x")}
	}
	lookups, sets := countOp(mc, memdx.OpCollectionsGetID), countOp(mc, memdx.OpSet)
	for _, r := range missing.UpsertMany(context.Background(), items, nil) {
		require.ErrorIs(t, r.Err, ErrCollectionNotFound, r.Key)
		assert.NotErrorIs(t, r.Err, ErrAmbiguous, "never written")
	}
	assert.LessOrEqual(t, countOp(mc, memdx.OpCollectionsGetID), lookups+nodes)
	assert.Equal(t, sets, countOp(mc, memdx.OpSet), "nothing written")
}

// heldLookups makes p hold the answers to COLLECTIONS_GET_ID until the
// returned release is called, which sends them (each to the connection
// whose request it answers; the others drop it as a stray). held receives
// once per answer held.
func heldLookups(t *testing.T, p *faultnode.Proxy) (held <-chan struct{}, release func()) {
	ch := make(chan struct{}, 16)
	var mu sync.Mutex
	var answers []memdx.Packet
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if req == nil || req.OpCode != memdx.OpCollectionsGetID {
			return faultnode.Action{}
		}
		a := *resp
		a.Key, a.Extras, a.Value = bytes.Clone(resp.Key), bytes.Clone(resp.Extras), bytes.Clone(resp.Value)
		mu.Lock()
		answers = append(answers, a)
		mu.Unlock()
		ch <- struct{}{}
		return faultnode.Action{Drop: true}
	})
	var once sync.Once
	release = func() {
		once.Do(func() {
			p.OnResponse(nil)
			mu.Lock()
			defer mu.Unlock()
			for _, a := range answers {
				_, err := p.InjectResponse(a)
				assert.NoError(t, err)
			}
		})
	}
	t.Cleanup(release)
	return ch, release
}

// A batch whose collection's id is being looked up by another operation
// (a Get with an hour's timeout, whose lookup the server holds) waits for
// that lookup within its own deadline, not the Get's: on the client's
// clock it ends at its timeout, every key a timeout and nothing written,
// while the Get still waits; once the server answers, the Get reads its
// document.
func TestBatchWaitingForAnotherCallersLookupEndsAtItsOwnDeadline(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	addCollections(t, mc, "app", "users")
	ps, _ := proxyEach(t, mc)
	fc := retry.NewFakeClock(time.Now())
	c := connectVia(t, ps[0].Addr(), &Options{Clock: fakeClock{fc}})
	users := c.Scope("app").Collection("users")
	_, err := users.Upsert(context.Background(), "u1", []byte("v1"), nil)
	require.NoError(t, err)
	c.cl.Collections().Invalidate(users.path)
	held, release := heldLookups(t, ps[0])

	got := make(chan error, 1)
	go func() {
		g, err := users.Get(context.Background(), "u1", &GetOptions{Timeout: time.Hour})
		if err == nil && string(g.Value) != "v1" {
			err = assert.AnError
		}
		got <- err
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the Get's lookup never reached the node")
	}

	start := fc.Now()
	sets := countOp(mc, memdx.OpSet)
	upserted := make(chan []MutateManyResult, 1)
	go func() {
		upserted <- users.UpsertMany(context.Background(), []UpsertManyItem{{Key: "u2", Value: []byte("x")}, {Key: "u3", Value: []byte("y")}},
			&UpsertManyOptions{Timeout: time.Second})
	}()
	var res []MutateManyResult
	require.Eventually(t, func() bool {
		select {
		case res = <-upserted:
			return true
		default:
			fc.Advance(100 * time.Millisecond)
			return false
		}
	}, 10*time.Second, time.Millisecond, "the batch ended at its own deadline")
	// The clock moves on from before the batch begins, by 100 ms a poll
	// (at most 1000 s in the 10 s allowed, whatever the load): short of
	// the Get's hour, however late the batch set its own second.
	assert.Less(t, fc.Now().Sub(start), time.Hour, "before the Get's deadline")
	for _, r := range res {
		require.ErrorIs(t, r.Err, ErrTimeout, r.Key)
		assert.NotErrorIs(t, r.Err, ErrAmbiguous, "never written")
	}
	assert.Equal(t, sets, countOp(mc, memdx.OpSet), "nothing written")
	select {
	case err := <-got:
		t.Fatalf("the Get ended (%v) before its lookup was answered", err)
	default:
	}

	release()
	select {
	case err := <-got:
		require.NoError(t, err, "the Get reads its document once the lookup is answered")
	case <-time.After(10 * time.Second):
		t.Fatal("the Get did not end once its lookup was answered")
	}
}

// A lookup that fails on one node's connection is that node's: the keys of
// the round routed to another node look their collection up there, and do
// not take the failure (here node 0 answers every COLLECTIONS_GET_ID with a
// temporary failure, and the round's first key is node 0's: every key
// succeeds, node 0's once the id is cached from node 1's lookup). Once
// another node's lookup cached the id, node 0's later keys of the round use
// it: only the round's first key waits for a retry.
func TestBatchLookupFailureOnOneNodeDoesNotHoldAnothers(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	addCollections(t, mc, "app", "users")
	b := mc.Bucket(mockcluster.DefaultBucket)
	vbmap := b.VbucketMap()
	node := func(k string) int { return vbmap[b.VbucketForKey([]byte(k))][0] }
	var on0, others []string
	for i := 0; len(on0) < 20 || len(others) < 20; i++ {
		if k := "k" + strconv.Itoa(i); node(k) == 0 {
			on0 = append(on0, k)
		} else {
			others = append(others, k)
		}
	}
	var keys []string
	for i := range 20 {
		keys = append(keys, on0[i], others[i])
	}
	require.Equal(t, 0, node(keys[0]), "the round's first key is node 0's")
	c := connect(t, mc, &Options{KVTimeout: 2 * time.Second})
	users := c.Scope("app").Collection("users")
	for _, k := range keys {
		_, err := b.Set("app", "users", k, []byte("v"), 0, 0)
		require.NoError(t, err)
	}
	c.cl.Collections().Invalidate(users.path)
	h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Nodes: []int{0}, OpCodes: []memdx.OpCode{memdx.OpCollectionsGetID}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail}})
	defer h.Remove()
	for i, r := range users.GetMany(context.Background(), keys, nil) {
		require.NoError(t, r.Err, r.Key)
		if i > 0 {
			assert.Zero(t, r.RetryAttempts, "%s: placed once the id was cached", r.Key)
		}
	}
	assert.Positive(t, h.Hits(), "node 0's lookup failed")
}
