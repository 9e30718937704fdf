package client

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sched "github.com/kvwire/kvwire/internal/batch"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// batchKeys returns n keys with prefix, and writes the first stored of
// them with the value "v-<key>".
func batchKeys(t *testing.T, col *Collection, prefix string, n, stored int) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%03d", prefix, i)
		if i < stored {
			_, err := col.Upsert(context.Background(), keys[i], []byte("v-"+keys[i]), nil)
			require.NoError(t, err)
		}
	}
	return keys
}

func TestGetManyReturnsEveryKeyInOrderWithHitsAndMisses(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "gm", 60, 40)
	keys = append(keys, keys[3]) // a key given twice is read twice
	res := col.GetMany(context.Background(), keys, nil)
	require.Len(t, res, len(keys))
	for i, r := range res {
		require.Equal(t, keys[i], r.Key)
		if i < 40 || i == 60 {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			assert.NotZero(t, r.Cas)
			assert.Equal(t, CommonFlagsBinary, r.Flags)
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
		var kv *KeyValueError
		require.ErrorAs(t, r.Err, &kv)
		assert.Equal(t, r.Key, kv.Key)
		assert.Equal(t, "Get", kv.Op)
	}
	assert.Empty(t, col.GetMany(context.Background(), nil, nil))
}

// On memcached:// the gets of a batch are quiet (GETQ) and a NOOP after
// them settles the misses: hits, misses and a key given twice each get
// their own outcome, and the connection serves single operations after.
func TestGetManyMemcachedQuietGetsSettleMissesByNoop(t *testing.T) {
	addr := memcachedtest.Start(t)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, testOptions(&Options{Memcached: MemcachedOptions{BinaryMultiGet: true}}))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	prefix := fmt.Sprintf("kvwire-gm-%d", time.Now().UnixNano())
	keys := batchKeys(t, col, prefix, 100, 50)
	for i := range keys {
		if i%2 == 1 { // interleave hits and misses
			keys[i], keys[len(keys)-1-i] = keys[len(keys)-1-i], keys[i]
		}
	}
	keys = append(keys, keys[0], keys[1])
	cn := c.cl.Topology().Nodes()[0].Conns()[0]
	before := cn.Stats()
	res := col.GetMany(ctx, keys, nil)
	after := cn.Stats()
	// The whole batch (102 GETQ and a NOOP) goes out in one write.
	assert.Equal(t, before.Writes+1, after.Writes)
	require.Len(t, res, len(keys))
	stored := func(k string) bool { var n int; fmt.Sscanf(k[len(prefix)+1:], "%d", &n); return n < 50 }
	hits := 0
	for i, r := range res {
		require.Equal(t, keys[i], r.Key)
		if stored(r.Key) {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			hits++
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
	}
	assert.Greater(t, hits, 40)
	_, err = col.Get(ctx, keys[0], nil)
	require.Equal(t, stored(keys[0]), err == nil, "%v", err)
	for _, k := range keys[:100] {
		_, _ = col.Remove(ctx, k, nil)
	}
}

// 100 keys in one GetMany, where some miss, some are refused (EACCESS),
// some are answered TMPFAIL twice, a node drops its connection with
// requests in flight, and a third of the vbuckets moved to other nodes
// before the call without the client knowing (no notifications, no polls:
// it learns from the NOT_MY_VBUCKET answers): every key ends with its own
// outcome.
func TestGetManyEveryKeyGetsItsOwnOutcomeUnderFaultsAndMoves(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{NoClusterMapNotifications: true})
	c := connect(t, mc, &Options{ConfigPollInterval: time.Hour})
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "mix", 100, 80)

	moved := 0
	r, err := mc.StartRebalance(mockcluster.RebalanceOptions{Nodes: []int{0, 1}})
	require.NoError(t, err)
	require.NoError(t, r.Finish())
	for _, k := range keys[:80] {
		if c.Route(k).Active == mc.Node(2).Addr() {
			moved++
		}
	}
	require.Greater(t, moved, 5, "keys on the node the rebalance emptied")

	get := []memdx.OpCode{memdx.OpGet}
	for _, k := range keys[10:15] {
		h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: get, Key: k},
			Action: mockcluster.Action{Status: memdx.StatusNoAccess}})
		t.Cleanup(h.Remove)
	}
	for _, k := range keys[30:35] {
		h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: get, Key: k},
			Action: mockcluster.Action{Status: memdx.StatusTmpFail}, Times: 2})
		t.Cleanup(h.Remove)
	}
	drop := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: get, Nodes: []int{0}},
		Action: mockcluster.Action{Close: mockcluster.CloseBeforeApply}, Times: 1})
	t.Cleanup(drop.Remove)

	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: 20 * time.Second})
	require.Len(t, res, 100)
	nmv, dropped := 0, 0
	for i, r := range res {
		require.Equal(t, keys[i], r.Key)
		var kv *KeyValueError
		switch {
		case i >= 10 && i < 15:
			require.ErrorIs(t, r.Err, ErrNoAccess, r.Key)
			require.ErrorAs(t, r.Err, &kv)
			assert.Equal(t, StatusNoAccess, kv.Status)
			continue
		case i >= 80:
			require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
			continue
		}
		require.NoError(t, r.Err, r.Key)
		assert.Equal(t, "v-"+r.Key, string(r.Value))
		if i >= 30 && i < 35 {
			assert.True(t, r.RetryReasons.Has(RetryReasonKVTemporaryFailure), "%s: %v", r.Key, r.RetryReasons)
			assert.GreaterOrEqual(t, r.RetryAttempts, 2)
		}
		if r.RetryReasons.Has(RetryReasonKVNotMyVbucket) {
			nmv++
		}
		if r.RetryReasons.Has(RetryReasonSocketClosedWhileInFlight) || r.RetryReasons.Has(RetryReasonSocketNotAvailable) {
			dropped++
		}
	}
	assert.Equal(t, 1, drop.Hits())
	assert.Positive(t, nmv, "keys retried after NOT_MY_VBUCKET")
	assert.Positive(t, dropped, "keys retried after the dropped connection")
}

// endSignal is an Observer that sends every finished attempt on a channel.
type endSignal struct{ ends chan AttemptInfo }

func (endSignal) AttemptStart(AttemptInfo)            {}
func (e endSignal) AttemptEnd(i AttemptInfo, _ error) { e.ends <- i }

// A key waiting for its retry (TMPFAIL, on a fake clock) holds back no
// other key: every other key's attempt has ended with its answer while the
// clock has not moved, and the waiting key is sent again only when the
// clock passes its wait.
func TestGetManyPerKeyRetryWaitsDoNotHoldBackOtherKeys(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	fc := retry.NewFakeClock(time.Now())
	obs := endSignal{ends: make(chan AttemptInfo, 100)}
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour, Observer: obs})
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "indep", 20, 20)
	for len(obs.ends) > 0 {
		<-obs.ends
	}
	slow := keys[7]
	tmp := faultGets(t, mc, slow, mockcluster.Action{Status: memdx.StatusTmpFail}, 0)
	passed := fc.Now().Add(time.Second) // by the Advance below

	done := make(chan []GetManyResult)
	go func() { done <- col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: time.Minute}) }()
	for range keys {
		a := within(t, obs.ends, "each key's first AttemptEnd")
		if a.Key == slow {
			assert.Equal(t, StatusTmpFail, a.Status)
		} else {
			assert.Equal(t, StatusSuccess, a.Status, a.Key)
		}
	}
	// The slow key's retry wait (due well within the second the clock
	// moves below), not any timer: the clock moves only once it is armed.
	awaitTimerBy(t, fc, passed, "the slow key's retry wait")
	select {
	case <-done:
		t.Fatal("GetMany returned while a key waited for its retry")
	default:
	}
	tmp.Remove()
	fc.Advance(time.Second)
	res := within(t, done, "GetMany's end, the slow key's wait over")
	for i, r := range res {
		require.NoError(t, r.Err, r.Key)
		if keys[i] == slow {
			assert.Equal(t, 1, r.RetryAttempts)
			assert.True(t, r.RetryReasons.Has(RetryReasonKVTemporaryFailure))
		} else {
			assert.Zero(t, r.RetryAttempts, r.Key)
		}
	}
	a := within(t, obs.ends, "the slow key's retry's AttemptEnd")
	assert.Equal(t, slow, a.Key)
	assert.Equal(t, 1, a.Attempt)
}

// Cancelling the context ends every key of a batch whose answers are held
// by the server: gets with ErrRequestCanceled, written upserts ambiguous
// as well; the connections carry on.
func TestManyCancelEndsEveryKeyAndKeepsTheConnection(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "cancel", 30, 20)
	held := make(chan struct{})
	var seen int
	hold := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet, memdx.OpSet},
		Func: func(r *mockcluster.Request) bool { return strings.HasPrefix(string(r.Key), "cancel-") }}, 0,
		func(*mockcluster.Request) (mockcluster.Action, bool) {
			seen++ // the node's one connection: one goroutine
			if seen == len(keys) {
				close(held)
			}
			return mockcluster.Action{Delay: time.Hour}, true
		})
	t.Cleanup(hold.Remove)

	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-held; cancel() }()
	res := col.GetMany(ctx, keys, &GetManyOptions{Timeout: time.Minute})
	for _, r := range res {
		require.ErrorIs(t, r.Err, ErrRequestCanceled, r.Key)
		assert.NotErrorIs(t, r.Err, ErrAmbiguous, r.Key)
	}

	held = make(chan struct{})
	seen = 0
	items := make([]UpsertManyItem, len(keys))
	for i, k := range keys {
		items[i] = UpsertManyItem{Key: k, Value: []byte("new")}
	}
	ctx, cancel = context.WithCancel(context.Background())
	go func() { <-held; cancel() }()
	mres := col.UpsertMany(ctx, items, &UpsertManyOptions{Timeout: time.Minute})
	for _, r := range mres {
		require.ErrorIs(t, r.Err, ErrRequestCanceled, r.Key)
		require.ErrorIs(t, r.Err, ErrAmbiguous, r.Key)
	}
	hold.Remove()
	// The held upserts were applied (the mock holds their answers): the
	// ambiguity was real. The connection serves a new request.
	g, err := col.Get(context.Background(), keys[0], nil)
	require.NoError(t, err)
	assert.Equal(t, "new", string(g.Value))
}

// UpsertMany writes every item with its own flags, expiry and JSON bit;
// RemoveMany removes them, a missing key failing alone. A write whose
// connection dropped after the node applied it is ambiguous, as is any
// other write in flight on that connection then; none is sent again, and
// the writes on the other nodes succeed.
func TestUpsertManyAndRemoveManyOnTheMock(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	items := make([]UpsertManyItem, 40)
	for i := range items {
		items[i] = UpsertManyItem{Key: fmt.Sprintf("um-%02d", i), Value: []byte(fmt.Sprintf(`{"n":%d}`, i)),
			Flags: uint32(100 + i), JSON: i%2 == 0}
	}
	items[3].Flags, items[3].Expiry = 0, time.Hour
	lost := items[5].Key
	drop := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSet}, Key: lost},
		Action: mockcluster.Action{Close: mockcluster.CloseAfterApply}, Times: 1})
	t.Cleanup(drop.Remove)
	res := col.UpsertMany(context.Background(), items, nil)
	require.Len(t, res, len(items))
	ok := 0
	for i, r := range res {
		require.Equal(t, items[i].Key, r.Key)
		if r.Key == lost || r.Err != nil {
			require.ErrorIs(t, r.Err, ErrAmbiguous, r.Key)
			var kv *KeyValueError
			require.ErrorAs(t, r.Err, &kv)
			assert.Zero(t, kv.RetryAttempts, "an ambiguous write is not sent again")
			if g, err := col.Get(context.Background(), r.Key, nil); err == nil {
				assert.Equal(t, items[i].Value, g.Value)
			} else {
				require.ErrorIs(t, err, ErrDocumentNotFound)
			}
			continue
		}
		ok++
		require.NoError(t, r.Err, r.Key)
		assert.NotZero(t, r.Cas)
		g, err := col.Get(context.Background(), r.Key, nil)
		require.NoError(t, err)
		assert.Equal(t, r.Cas, g.Cas)
		assert.Equal(t, items[i].Value, g.Value)
		switch {
		case i == 3:
			assert.Equal(t, CommonFlagsBinary, g.Flags)
		default:
			assert.Equal(t, items[i].Flags, g.Flags)
		}
		if items[i].JSON {
			assert.Equal(t, DatatypeJSON, g.Datatype)
		}
	}
	assert.Equal(t, 1, drop.Hits())
	assert.Greater(t, ok, len(items)/2, "the writes to the other nodes")
	assert.LessOrEqual(t, mc.RequestCount(memdx.OpSet), uint64(len(items)), "no write sent twice")
	g, err := col.Get(context.Background(), lost, nil)
	require.NoError(t, err, "applied once, before the connection dropped")
	assert.Equal(t, items[5].Value, g.Value)

	keys := []string{items[0].Key, "um-missing", items[1].Key}
	for _, k := range []string{items[0].Key, items[1].Key} {
		_, err := col.Upsert(context.Background(), k, nil, nil)
		require.NoError(t, err)
	}
	rm := col.RemoveMany(context.Background(), keys, nil)
	require.NoError(t, rm[0].Err)
	require.ErrorIs(t, rm[1].Err, ErrDocumentNotFound)
	require.NoError(t, rm[2].Err)
	assert.NotZero(t, rm[2].Cas)
	for _, k := range []string{items[0].Key, items[1].Key} {
		_, err := col.Get(context.Background(), k, nil)
		require.ErrorIs(t, err, ErrDocumentNotFound)
	}
}

// Keys the client refuses (empty, too long) fail alone with
// ErrInvalidArgument, and the keys around them are read.
func TestGetManyBadKeysFailAlone(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "bad", 3, 3)
	keys = []string{keys[0], "", keys[1], strings.Repeat("k", MaxKeyLength+1), keys[2]}
	res := col.GetMany(context.Background(), keys, nil)
	for i, r := range res {
		if i == 1 || i == 3 {
			var kv *KeyValueError
			require.ErrorAs(t, r.Err, &kv)
			require.ErrorIs(t, r.Err, ErrInvalidArgument)
			assert.Equal(t, keys[i], kv.Key)
			continue
		}
		require.NoError(t, r.Err)
		assert.Equal(t, "v-"+keys[i], string(r.Value))
	}
	mres := col.RemoveMany(context.Background(), []string{"", keys[0]}, nil)
	require.ErrorIs(t, mres[0].Err, ErrInvalidArgument)
	require.NoError(t, mres[1].Err)
	ures := col.UpsertMany(context.Background(), []UpsertManyItem{{Key: keys[0], Expiry: -time.Second}, {Key: strings.Repeat("k", 300)}, {Key: keys[0]}}, nil)
	require.ErrorIs(t, ures[0].Err, ErrInvalidArgument) // a negative expiry
	require.ErrorIs(t, ures[1].Err, ErrInvalidArgument)
	require.NoError(t, ures[2].Err)
}

// memcached:// with two servers, one refusing connections: the keys of
// the dead server fail at once with ErrNoNodeAvailable (not retried,
// nothing sent), while the live server's keys are read as hits and misses
// in the same batch.
func TestGetManyMemcachedKeysOfADeadServerFailAlone(t *testing.T) {
	live := memcachedtest.Start(t)
	c, dead := connectWithDeadServer(t, live)
	ctx := context.Background()
	col := c.DefaultCollection()
	keys := make([]string, 100)
	onLive := map[string]bool{}
	for i := range keys {
		keys[i] = fmt.Sprintf("dead-%d-%03d", time.Now().UnixNano(), i)
		if c.Route(keys[i]).Active == live {
			onLive[keys[i]] = true
			if i%2 == 0 {
				_, err := col.Upsert(ctx, keys[i], []byte("v-"+keys[i]), nil)
				require.NoError(t, err)
			}
		}
	}
	require.True(t, len(onLive) > 10 && len(onLive) < 90, "%d of 100 keys on the live server", len(onLive))
	res := col.GetMany(ctx, keys, nil)
	for i, r := range res {
		switch {
		case !onLive[r.Key]:
			require.ErrorIs(t, r.Err, ErrNoNodeAvailable, r.Key)
			var kv *KeyValueError
			require.ErrorAs(t, r.Err, &kv)
			assert.Equal(t, dead, kv.Node)
			assert.Zero(t, kv.RetryAttempts)
		case i%2 == 0:
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
		default:
			require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
		}
	}
}

// The batch's timeout is every key's deadline: keys whose answers the
// node holds past it time out (ErrTimeout, not cancelled), the others are
// read.
func TestGetManyKeysHeldPastTheDeadlineTimeOutAlone(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "late", 20, 20)
	held := map[string]bool{keys[3]: true, keys[11]: true}
	for k := range held {
		faultGets(t, mc, k, mockcluster.Action{Delay: time.Hour}, 0)
	}
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: 2 * time.Second})
	for _, r := range res {
		if held[r.Key] {
			require.ErrorIs(t, r.Err, ErrTimeout, r.Key)
			assert.NotErrorIs(t, r.Err, ErrRequestCanceled)
			var kv *KeyValueError
			require.ErrorAs(t, r.Err, &kv)
			assert.NotZero(t, kv.Opaque, "the opaque it was sent with")
			assert.NotErrorIs(t, r.Err, ErrAmbiguous, "a read is never ambiguous")
			continue
		}
		require.NoError(t, r.Err, r.Key)
		assert.Equal(t, "v-"+r.Key, string(r.Value))
	}
}

// A batch on a named collection reads its documents (the collection's id
// is looked up once); a context cancelled before the call ends every key
// unsent.
func TestGetManyOnACollectionAndUnderACancelledContext(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	addCollections(t, mc, "app", "users")
	c := connect(t, mc, nil)
	users := c.Scope("app").Collection("users")
	keys := batchKeys(t, users, "u", 10, 7)
	res := users.GetMany(context.Background(), keys, nil)
	for i, r := range res {
		if i < 7 {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound)
		var kv *KeyValueError
		require.ErrorAs(t, r.Err, &kv)
		assert.Equal(t, "users", kv.Collection)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gets := mc.RequestCount(memdx.OpGet)
	for _, r := range users.GetMany(ctx, keys, nil) {
		require.ErrorIs(t, r.Err, ErrRequestCanceled, r.Key)
		assert.NotErrorIs(t, r.Err, ErrAmbiguous)
	}
	for _, r := range users.UpsertMany(ctx, []UpsertManyItem{{Key: keys[0]}}, nil) {
		require.ErrorIs(t, r.Err, ErrRequestCanceled)
		assert.NotErrorIs(t, r.Err, ErrAmbiguous, "never sent")
	}
	assert.Equal(t, gets, mc.RequestCount(memdx.OpGet), "nothing sent")
}

// A batch of more keys than a connection takes in flight (MaxPending,
// 4096) keeps at most sched.MaxInFlight of them in flight: the others wait
// for room instead of being refused as overloaded and retried.
func TestGetManyLargerThanAConnectionTakesIsNotRetried(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	keys := make([]string, 3*sched.MaxInFlight+7)
	for i := range keys {
		keys[i] = fmt.Sprintf("big-%d", i)
	}
	_, err := col.Upsert(context.Background(), keys[len(keys)-1], []byte("last"), nil)
	require.NoError(t, err)
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: time.Minute})
	for _, r := range res[:len(res)-1] {
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
		var kv *KeyValueError
		require.ErrorAs(t, r.Err, &kv)
		require.Zero(t, kv.RetryAttempts, "%s: %v", r.Key, kv.RetryReasons)
	}
	require.NoError(t, res[len(res)-1].Err)
	assert.Equal(t, "last", string(res[len(res)-1].Value))
}

// panicObserver panics in AttemptStart while armed.
type panicObserver struct{ armed atomic.Bool }

func (p *panicObserver) AttemptStart(AttemptInfo) {
	if p.armed.Load() {
		panic("observer")
	}
}
func (p *panicObserver) AttemptEnd(AttemptInfo, error) {}

// An Observer that panics while a batch has its connection corked does
// not leave that connection's writes held: the panic reaches the caller,
// and the next operation on the connection is written and answered.
func TestGetManyObserverPanicLeavesTheConnectionUsable(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	obs := &panicObserver{}
	c := connect(t, mc, &Options{Observer: obs})
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "after-panic", []byte("v"), nil)
	require.NoError(t, err)
	obs.armed.Store(true)
	func() {
		defer func() { assert.Equal(t, "observer", recover()) }()
		col.GetMany(ctx, []string{"p-1", "p-2", "p-3"}, nil)
	}()
	obs.armed.Store(false)
	// A failure bound only: a held connection never answers.
	r, err := col.Get(ctx, "after-panic", &GetOptions{Timeout: 5 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, "v", string(r.Value))
}
