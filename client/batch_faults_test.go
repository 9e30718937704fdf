package client

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A memcached:// GetMany with as many keys as a connection may have in
// flight (MaxPendingPerConnection) reads every key: the NOOP that settles
// the quiet gets must find room on the connection, or the batch must send
// them in parts: were the NOOP's Start refused (ErrOverloaded), fence
// would take back every quiet get, and every round would do the same
// until the deadline.
func TestGetManyMemcachedAsManyKeysAsMaxPendingReadsEveryKey(t *testing.T) {
	addr := memcachedtest.Start(t)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, &Options{MaxPendingPerConnection: 8})
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	prefix := fmt.Sprintf("kvwire-gmmax-%d", time.Now().UnixNano())
	for _, n := range []int{8, 20} { // as many keys as fit, and more (sent in several rounds)
		keys := batchKeys(t, col, fmt.Sprintf("%s-%d", prefix, n), n, n)
		res := col.GetMany(ctx, keys, &GetManyOptions{Timeout: 2 * time.Second})
		for i, r := range res {
			require.NoError(t, r.Err, keys[i])
			require.Equal(t, "v-"+keys[i], string(r.Value))
		}
	}
}

// A batch whose context has already ended sends nothing, as a single
// Upsert under that context sends nothing (conn.DoDeadline checks ctx
// first): every item ends canceled, not written, so not ambiguous, and the
// node sees no SET: a batch that started its keys before looking at the
// context would have the writer send them, and cancelling them then would
// abandon written ones (ambiguous, and applied).
func TestUpsertManyUnderAnEndedContextSendsNothing(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := col.Upsert(ctx, "single", []byte("x"), nil)
	require.ErrorIs(t, err, ErrRequestCanceled)
	require.NotErrorIs(t, err, ErrAmbiguous)
	items := make([]UpsertManyItem, 64)
	for i := range items {
		items[i] = UpsertManyItem{Key: fmt.Sprintf("ended-%02d", i), Value: []byte("x")}
	}
	for round := 0; round < 20; round++ {
		for _, r := range col.UpsertMany(ctx, items, nil) {
			require.ErrorIs(t, r.Err, ErrRequestCanceled, r.Key)
			require.NotErrorIs(t, r.Err, ErrAmbiguous, "round %d: %s was sent under an ended context", round, r.Key)
		}
	}
	_, err = col.Get(context.Background(), "ended-00", nil) // the connection's answers so far are in
	require.ErrorIs(t, err, ErrDocumentNotFound)
	require.Zero(t, mc.RequestCount(memdx.OpSet), "SETs sent under an ended context")
}

// pairObserver counts AttemptStart and AttemptEnd per key and sends every
// AttemptEnd on ends.
type pairObserver struct {
	mu           sync.Mutex
	starts, endN map[string]int
	ends         chan AttemptInfo
}

func (p *pairObserver) AttemptStart(i AttemptInfo) {
	p.mu.Lock()
	p.starts[i.Key]++
	p.mu.Unlock()
}

func (p *pairObserver) AttemptEnd(i AttemptInfo, _ error) {
	p.mu.Lock()
	p.endN[i.Key]++
	p.mu.Unlock()
	p.ends <- i
}

// The Observer sees one AttemptStart and one AttemptEnd per attempt, in a
// batch as in a single Get. Here a key's retry wait (TMPFAIL) ends when the
// clock has jumped past the batch's deadline: the retry is refused unsent,
// and no AttemptEnd is reported for the attempt that never started (in
// round or in endReady).
func TestGetManyObserverSeesAnAttemptEndOnlyAfterItsStart(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	fc := retry.NewFakeClock(time.Now())
	obs := &pairObserver{starts: map[string]int{}, endN: map[string]int{}, ends: make(chan AttemptInfo, 100)}
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour, Observer: obs})
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "pairs", 3, 3)
	for len(obs.ends) > 0 {
		<-obs.ends
	}
	slow := keys[1]
	faultGets(t, mc, slow, mockcluster.Action{Status: memdx.StatusTmpFail}, 0)
	obs.mu.Lock()
	clear(obs.starts)
	clear(obs.endN)
	obs.mu.Unlock()

	deadline := fc.Now().Add(time.Minute)
	done := make(chan []GetManyResult)
	go func() { done <- col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: time.Minute}) }()
	for range keys {
		within(t, obs.ends, "each key's first AttemptEnd")
	}
	// The slow key's retry wait, due before the deadline, not any timer.
	awaitTimerBy(t, fc, deadline, "the slow key's retry wait")
	fc.Advance(2 * time.Minute) // past the deadline at once
	res := within(t, done, "GetMany's end, its deadline passed")
	require.ErrorIs(t, res[1].Err, ErrTimeout)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for _, k := range keys {
		assert.Equal(t, obs.starts[k], obs.endN[k], "%s: AttemptStart %d, AttemptEnd %d", k, obs.starts[k], obs.endN[k])
	}
}

// memcached:// drops the connection after the batch's quiet gets reached
// it and before their NOOP did: no key may be left waiting for a NOOP that
// never comes, nor be reported a miss it was not; each key is read again
// on the new connection (gets are idempotent) and ends with its value or
// ErrDocumentNotFound.
func TestGetManyMemcachedConnectionLostBeforeTheNoopRetriesEveryKey(t *testing.T) {
	addr := memcachedtest.Start(t)
	p, err := faultnode.NewProxy(addr)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+p.Addr(), testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	prefix := fmt.Sprintf("kvwire-gmdrop-%d", time.Now().UnixNano())
	keys := batchKeys(t, col, prefix, 40, 20)
	var once sync.Once
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		if req.OpCode == memdx.OpNoop {
			dropped := false
			once.Do(func() {
				for _, cn := range p.Conns() {
					cn.Reset()
				}
				dropped = true
			})
			if dropped {
				return faultnode.Action{Drop: true}
			}
		}
		return faultnode.Action{}
	})
	res := col.GetMany(ctx, keys, &GetManyOptions{Timeout: 10 * time.Second})
	for i, r := range res {
		if i < 20 {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
	}
	assert.GreaterOrEqual(t, p.Requests(memdx.OpGetKQ), 60, "every miss sent again (hits answered before the drop need not be)")
}

// Closing the client while a batch waits for answers the node holds ends
// every key: gets with ErrClosed or a connection error, upserts ambiguous
// (written, then the connection closed); the batch returns.
func TestManyClientCloseDuringABatchEndsEveryKey(t *testing.T) {
	for _, upsert := range []bool{false, true} {
		mc := newMock(t, mockcluster.Options{Nodes: 1})
		c := connect(t, mc, nil)
		col := c.DefaultCollection()
		keys := batchKeys(t, col, "closing", 30, 20)
		held := make(chan struct{})
		var seen int
		hold := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet, memdx.OpSet},
			Func: func(r *mockcluster.Request) bool { return strings.HasPrefix(string(r.Key), "closing-") }}, 0,
			func(*mockcluster.Request) (mockcluster.Action, bool) {
				seen++
				if seen == len(keys) {
					close(held)
				}
				return mockcluster.Action{Delay: time.Hour}, true
			})
		t.Cleanup(hold.Remove)
		go func() { <-held; _ = c.Close() }()
		var errs []error
		if upsert {
			items := make([]UpsertManyItem, len(keys))
			for i, k := range keys {
				items[i] = UpsertManyItem{Key: k, Value: []byte("new")}
			}
			for _, r := range col.UpsertMany(context.Background(), items, &UpsertManyOptions{Timeout: time.Minute}) {
				require.ErrorIs(t, r.Err, ErrAmbiguous, r.Key)
				errs = append(errs, r.Err)
			}
		} else {
			for _, r := range col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: time.Minute}) {
				require.Error(t, r.Err, r.Key)
				require.NotErrorIs(t, r.Err, ErrTimeout, r.Key)
				errs = append(errs, r.Err)
			}
		}
		require.Len(t, errs, len(keys))
		hold.Remove()
	}
}

// A memcached:// GetMany miss is "a *KeyValueError as Get's": same Op and
// OpCode (GET) as a single Get's miss, not the quiet opcode the batch sent:
// the batch's judge restores GET before the error is built.
func TestGetManyMemcachedMissIsTheErrorOfAGet(t *testing.T) {
	addr := memcachedtest.Start(t)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	key := fmt.Sprintf("kvwire-gmmiss-%d", time.Now().UnixNano())
	_, gerr := col.Get(ctx, key, nil)
	var single, batched *KeyValueError
	require.ErrorAs(t, gerr, &single)
	res := col.GetMany(ctx, []string{key}, nil)
	require.ErrorIs(t, res[0].Err, ErrDocumentNotFound)
	require.ErrorAs(t, res[0].Err, &batched)
	assert.Equal(t, single.Op, batched.Op)
	assert.Equal(t, single.OpCode, batched.OpCode, "single %s, batch %s", single.OpCode, batched.OpCode)
}

// Keys answered NOT_MY_VBUCKET with no config in the body (twice each),
// the client's config being current: each is retried on its own (the node
// is asked for its config) and read; the other keys are not held back.
func TestGetManyNotMyVbucketWithoutAConfigRetriesThoseKeys(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, &Options{ConfigPollInterval: time.Hour})
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "nmvbare", 30, 30)
	for _, k := range keys[5:10] {
		faultGets(t, mc, k, mockcluster.Action{Status: memdx.StatusNotMyVbucket}, 2)
	}
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: 10 * time.Second})
	for i, r := range res {
		require.NoError(t, r.Err, r.Key)
		assert.Equal(t, "v-"+r.Key, string(r.Value))
		if i >= 5 && i < 10 {
			assert.True(t, r.RetryReasons.Has(RetryReasonKVNotMyVbucket), r.Key)
			assert.Equal(t, 2, r.RetryAttempts, r.Key)
		} else {
			assert.Zero(t, r.RetryAttempts, r.Key)
		}
	}
}

// A memcached:// server that stops answering (its requests swallowed)
// during a GetMany: every key ends by the batch's deadline with a
// timeout, none hangs waiting for a NOOP that never comes. Once it
// answers again, the next batch on the same connection reads every key
// (its NOOP's answer also drops the earlier batch's quiet tombstones).
func TestGetManyMemcachedSilentServerTimesOutEveryKeyThenRecovers(t *testing.T) {
	t.Parallel()
	addr := memcachedtest.Start(t)
	p, err := faultnode.NewProxy(addr)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+p.Addr(), testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	prefix := fmt.Sprintf("kvwire-gmsilent-%d", time.Now().UnixNano())
	keys := batchKeys(t, col, prefix, 20, 10)
	cn := c.cl.Topology().Nodes()[0].Conns()[0]
	p.Blackhole(true)
	for _, r := range col.GetMany(ctx, keys, &GetManyOptions{Timeout: 300 * time.Millisecond}) {
		require.ErrorIs(t, r.Err, ErrTimeout, r.Key)
	}
	p.Blackhole(false)
	for i, r := range col.GetMany(ctx, keys, &GetManyOptions{Timeout: 10 * time.Second}) {
		if i < 10 {
			require.NoError(t, r.Err, r.Key)
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
	}
	require.Same(t, cn, c.cl.Topology().Nodes()[0].Conns()[0], "the same connection")
	// The swallowed GETQs are dropped by the later NOOP's answer; the
	// swallowed NOOP itself is not quiet and stays a tombstone (bounded by
	// MaxAbandoned, vouched for by the answered NOOP).
	assert.LessOrEqual(t, cn.Pending(), 1, "quiet tombstones left")
}

// A key of a batch that times out waiting for its answer names the
// request's opaque in its error, as a single Get's timeout does (to find
// it in the server's logs): a batch has no response to take it from, so
// it takes the one its Start returned.
func TestGetManyTimeoutErrorNamesTheOpaque(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "opq", 2, 2)
	faultGets(t, mc, keys[1], mockcluster.Action{Delay: time.Hour}, 0)
	// Only a request written before its deadline has an opaque to name
	// (one refused at its deadline was never given one): on a machine
	// that stalls for the 100 ms, the test tries again until it was.
	var single, batched *KeyValueError
	for i := 0; ; i++ {
		_, err := col.Get(context.Background(), keys[1], &GetOptions{Timeout: 100 * time.Millisecond})
		require.ErrorAs(t, err, &single)
		if timedOutWritten(err) {
			break
		}
		require.Less(t, i, 100, "no Get was written within its 100 ms in 100 tries: %v", err)
	}
	require.NotZero(t, single.Opaque, "single Get")
	for i := 0; ; i++ {
		res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: 100 * time.Millisecond})
		require.ErrorIs(t, res[1].Err, ErrTimeout)
		require.ErrorAs(t, res[1].Err, &batched)
		if timedOutWritten(res[1].Err) {
			require.NoError(t, res[0].Err)
			break
		}
		require.Less(t, i, 100, "no GetMany was written within its 100 ms in 100 tries: %v", res[1].Err)
	}
	assert.NotZero(t, batched.Opaque, "GetMany: %v", batched)
}

// A batch larger than a connection's MaxPendingPerConnection is the
// batch's own doing, not an overloaded node: it paces itself (sends the
// rest as answers free room) rather than failing the overflow with
// ErrOverloaded or sending it through the retry strategy. With a strategy
// that retries nothing, every key is still read, none with a retry.
// Keys past MaxPending that got ErrOverloaded from conn.Start (not
// written, SOCKET_NOT_AVAILABLE) would fail with this strategy, and with
// the default one be retried on back-off (12000 keys on one memcached:
// 7904 keys retried, ~3x the time per key of a 4000-key batch).
func TestGetManyLargerThanMaxPendingPacesItselfWithoutRetries(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, &Options{MaxPendingPerConnection: 8})
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "pace", 30, 30)
	noRetry := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })
	res := col.GetMany(context.Background(), keys, &GetManyOptions{RetryStrategy: noRetry, Timeout: 10 * time.Second})
	for _, r := range res {
		require.NoError(t, r.Err, r.Key)
		assert.Zero(t, r.RetryAttempts, r.Key)
	}
}

// Cancelling a memcached:// GetMany whose quiet gets and NOOP reached a
// server that does not answer them ends every key at once
// (ErrRequestCanceled); the next batch's NOOP answer drops the abandoned
// group of quiet gets (whose own NOOP the server swallowed), and that
// batch reads every key on the same connection.
func TestGetManyMemcachedCancelAbandonsQuietGetsThenANoopDropsThem(t *testing.T) {
	addr := memcachedtest.Start(t)
	p, err := faultnode.NewProxy(addr)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	c, err := Connect(context.Background(), "memcached://"+p.Addr(), testOptions(&Options{Memcached: MemcachedOptions{BinaryMultiGet: true}}))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	prefix := fmt.Sprintf("kvwire-gmcancel-%d", time.Now().UnixNano())
	keys := batchKeys(t, col, prefix, 20, 10)
	cn := c.cl.Topology().Nodes()[0].Conns()[0]
	var swallow atomic.Bool
	swallow.Store(true)
	p.OnRequest(func(*memdx.Packet) faultnode.Action { return faultnode.Action{Drop: swallow.Load()} })
	noop := p.NextRequest(memdx.OpNoop)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-noop; cancel() }()
	for _, r := range col.GetMany(ctx, keys, &GetManyOptions{Timeout: time.Minute}) {
		require.ErrorIs(t, r.Err, ErrRequestCanceled, r.Key)
	}
	require.Equal(t, 1, cn.Pending(), "the group of GETQs and its NOOP is a tombstone")
	swallow.Store(false)
	for i, r := range col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: 10 * time.Second}) {
		if i < 10 {
			require.NoError(t, r.Err, r.Key)
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
	}
	assert.Zero(t, cn.Pending(), "the next group's NOOP answer settles the abandoned group, whose own NOOP was swallowed")
}
