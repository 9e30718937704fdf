package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// Tests of a memcached:// GetMany's binary group path (batchget.go): each
// server's keys go as one group of quiet gets and a NOOP, and every key
// that is not a hit is judged as a Get's attempt would be. The text path
// has its own tests (batchtext_test.go).

// memcachedClient connects to memcached:// addrs (comma-separated) with
// testOptions(o) and MemcachedOptions.BinaryMultiGet set; the test closes
// it.
func memcachedClient(t *testing.T, addrs string, o *Options) *Client {
	t.Helper()
	o = testOptions(o)
	o.Memcached.BinaryMultiGet = true
	c, err := Connect(context.Background(), "memcached://"+addrs, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// proxied starts a memcached behind a fault proxy and returns the proxy.
func proxied(t *testing.T) *faultnode.Proxy {
	t.Helper()
	p, err := faultnode.NewProxy(memcachedtest.Start(t))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// getManySentinels are the sentinels whose match a batched key's error
// must share with a single Get's.
var getManySentinels = []error{ErrDocumentNotFound, ErrTimeout, ErrUnambiguousTimeout, ErrAmbiguousTimeout,
	ErrAmbiguous, ErrTemporaryFailure, ErrServerFailure, ErrRequestCanceled, ErrNotRetried, ErrNoNodeAvailable,
	ErrInvalidArgument, context.DeadlineExceeded, context.Canceled}

// assertSameGetError checks that got, a GetMany key's error for key, is
// the error single (a Get's, of a key that failed the same way) is: the
// same *KeyValueError but for the key and the opaque (see opaqueOf), and
// the same sentinels.
func assertSameGetError(t *testing.T, single, got error, key string) {
	t.Helper()
	var s, g *KeyValueError
	require.ErrorAs(t, single, &s, "single Get")
	require.ErrorAs(t, got, &g, "GetMany %s", key)
	assert.Equal(t, key, g.Key)
	assert.Equal(t, s.Op, g.Op, key)
	assert.Equal(t, s.OpCode, g.OpCode, key)
	assert.Equal(t, s.Status, g.Status, key)
	assert.Equal(t, s.ErrorName, g.ErrorName, key)
	assert.Equal(t, s.ErrorDescription, g.ErrorDescription, key)
	assert.Equal(t, s.ServerContext, g.ServerContext, key)
	assert.Equal(t, s.ServerErrorRef, g.ServerErrorRef, key)
	assert.Equal(t, s.Err, g.Err, "%s: sentinel", key)
	assert.Equal(t, s.Node, g.Node, key)
	assert.Equal(t, s.Bucket, g.Bucket, key)
	assert.Equal(t, s.Scope, g.Scope, key)
	assert.Equal(t, s.Collection, g.Collection, key)
	assert.Equal(t, s.Vbucket, g.Vbucket, key)
	assert.Equal(t, s.RetryAttempts, g.RetryAttempts, "%s: retries", key)
	assert.Equal(t, s.RetryReasons, g.RetryReasons, "%s: retry reasons", key)
	assert.Equal(t, s.Ambiguous, g.Ambiguous, "%s: ambiguous", key)
	for _, sentinel := range getManySentinels {
		assert.Equal(t, errors.Is(single, sentinel), errors.Is(got, sentinel), "%s: errors.Is %v\nsingle:  %v\nbatched: %v",
			key, sentinel, single, got)
	}
}

// opaqueOf returns the opaque err names: that of the request sent, 0 for
// a request never sent.
func opaqueOf(t *testing.T, err error) uint32 {
	t.Helper()
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	return kv.Opaque
}

// untilWritten calls get until its error is a timeout of a request that
// was written (timedOutWritten), at most 100 times, and returns that error.
func untilWritten(t *testing.T, get func() error) error {
	t.Helper()
	for i := 0; ; i++ {
		err := get()
		if timedOutWritten(err) {
			return err
		}
		require.Less(t, i, 100, "no request was written before its deadline in 100 tries: %v", err)
	}
}

// manyUntilWritten is untilWritten for a batch: every key's error must be
// a timeout of a written request.
func manyUntilWritten(t *testing.T, getMany func() []GetManyResult) []GetManyResult {
	t.Helper()
	for i := 0; ; i++ {
		res := getMany()
		written := len(res) > 0
		for _, r := range res {
			written = written && timedOutWritten(r.Err)
		}
		if written {
			return res
		}
		require.Less(t, i, 100, "no batch was written before its deadline in 100 tries: %v", res)
	}
}

// adjacent reports whether b starts where a ends in memory: two values
// copied one after the other into one block.
func adjacent(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(a)))+uintptr(len(a)) == uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}

// keyHook is an OnRequest hook that counts the gets of each key and, while
// armed, answers the gets of chosen keys with a status and body (each as
// many times as fail says) instead of forwarding them.
type keyHook struct {
	mu     sync.Mutex
	armed  bool
	status memdx.Status
	body   []byte // sent as JSON when it is one
	fail   map[string]int
	gets   map[string]int
}

func newKeyHook(status memdx.Status) *keyHook {
	return &keyHook{status: status, fail: map[string]int{}, gets: map[string]int{}}
}

func (h *keyHook) onRequest(req *memdx.Packet) faultnode.Action {
	if req.OpCode != memdx.OpGet && req.OpCode != memdx.OpGetKQ {
		return faultnode.Action{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	k := string(req.Key)
	h.gets[k]++
	if h.armed && h.fail[k] > 0 {
		h.fail[k]--
		pkt := faultnode.Reply(req, h.status, h.body)
		if len(h.body) > 0 && h.body[0] == '{' {
			pkt.Datatype = memdx.DatatypeJSON
		}
		return faultnode.Action{Send: []memdx.Packet{pkt}}
	}
	return faultnode.Action{}
}

func (h *keyHook) arm(status memdx.Status, keys []string, times int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.status = true, status
	clear(h.fail)
	clear(h.gets)
	for _, k := range keys {
		h.fail[k] = times
	}
}

func (h *keyHook) count(k string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gets[k]
}

// A miss read in a group is the error a single Get of the missing key
// gets: the same *KeyValueError (Op, OpCode GET, status, sentinel, node,
// no retries, not ambiguous), only the opaque differs.
func TestGetManyMemcachedGroupMissIsAGetsError(t *testing.T) {
	addr := memcachedtest.Start(t)
	c := memcachedClient(t, addr, nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	keys := batchKeys(t, col, "gpmiss", 6, 3) // 3 hits, 3 misses
	keys = append(keys, keys[4])              // a miss given twice
	_, single := col.Get(ctx, keys[5], nil)
	require.ErrorIs(t, single, ErrDocumentNotFound)
	res := col.GetMany(ctx, keys, nil)
	for i, r := range res {
		if i < 3 {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
		assertSameGetError(t, single, r.Err, r.Key)
		assert.NotZero(t, opaqueOf(t, r.Err), "%s: the opaque it was sent with", r.Key)
	}
}

// A group's get answered with a failure status is judged as a Get's
// attempt with that answer: TMPFAIL (once) is retried and read with the
// retry a single Get reports; with a strategy that retries nothing it ends
// with a single Get's ErrTemporaryFailure; EINTERNAL, which is not
// retried, ends that key alone (sent once), with the server's error
// context from the body, as a Get's. The other keys are hits.
func TestGetManyMemcachedGroupFailureStatusIsJudgedAsAGets(t *testing.T) {
	p := proxied(t)
	h := newKeyHook(memdx.StatusTmpFail)
	p.OnRequest(h.onRequest)
	c := memcachedClient(t, p.Addr(), nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	keys := batchKeys(t, col, "gpstatus", 12, 12)
	failing := map[string]bool{keys[2]: true, keys[7]: true, keys[8]: true}
	failKeys := []string{keys[2], keys[7], keys[8]}
	probe := keys[11] // read alone with the same fault, for the single Get's outcome
	noRetry := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })

	check := func(name string, status memdx.Status, strategy RetryStrategy, retried bool) {
		h.body = nil
		if status == memdx.StatusInternalError {
			h.body = []byte(`{"error":{"context":"group path test","ref":"5f1b-ref"}}`)
		}
		h.arm(status, []string{probe}, 1)
		sres, serr := col.Get(ctx, probe, &GetOptions{RetryStrategy: strategy, Timeout: 10 * time.Second})
		h.arm(status, failKeys, 1)
		res := col.GetMany(ctx, keys[:11], &GetManyOptions{RetryStrategy: strategy, Timeout: 10 * time.Second})
		for _, r := range res {
			if !failing[r.Key] {
				require.NoError(t, r.Err, "%s: %s", name, r.Key)
				assert.Equal(t, "v-"+r.Key, string(r.Value), name)
				assert.Zero(t, r.RetryAttempts, "%s: %s", name, r.Key)
				assert.Equal(t, 1, h.count(r.Key), "%s: %s read once", name, r.Key)
				continue
			}
			if retried {
				require.NoError(t, serr, "%s: single Get", name)
				require.NoError(t, r.Err, "%s: %s", name, r.Key)
				assert.Equal(t, "v-"+r.Key, string(r.Value), name)
				assert.GreaterOrEqual(t, r.RetryAttempts, 1, "%s: %s", name, r.Key)
				assert.Equal(t, sres.RetryAttempts, r.RetryAttempts, "%s: %s", name, r.Key)
				assert.Equal(t, sres.RetryReasons, r.RetryReasons, "%s: %s", name, r.Key)
				assert.Equal(t, 2, h.count(r.Key), "%s: %s read again once", name, r.Key)
				continue
			}
			require.Error(t, serr, "%s: single Get", name)
			require.Error(t, r.Err, "%s: %s", name, r.Key)
			assertSameGetError(t, serr, r.Err, r.Key)
			assert.NotZero(t, opaqueOf(t, r.Err), "%s: %s: the opaque it was sent with", name, r.Key)
			assert.Equal(t, 1, h.count(r.Key), "%s: %s not retried", name, r.Key)
		}
	}
	check("TMPFAIL, default strategy", memdx.StatusTmpFail, nil, true)
	check("TMPFAIL, no retries", memdx.StatusTmpFail, noRetry, false)
	check("EINTERNAL", memdx.StatusInternalError, nil, false)

	// The sentinels those errors stand for, as the status table says.
	h.arm(memdx.StatusTmpFail, failKeys, 1)
	for _, r := range col.GetMany(ctx, failKeys, &GetManyOptions{RetryStrategy: noRetry, Timeout: 10 * time.Second}) {
		require.ErrorIs(t, r.Err, ErrTemporaryFailure, r.Key)
	}
	h.arm(memdx.StatusInternalError, failKeys, 1)
	for _, r := range col.GetMany(ctx, failKeys, &GetManyOptions{Timeout: 10 * time.Second}) {
		require.ErrorIs(t, r.Err, ErrServerFailure, r.Key)
		var kv *KeyValueError
		require.ErrorAs(t, r.Err, &kv)
		assert.Equal(t, StatusInternalError, kv.Status, r.Key)
		assert.Equal(t, "group path test", kv.ServerContext, r.Key)
		assert.Equal(t, "5f1b-ref", kv.ServerErrorRef, r.Key)
	}
}

// A group's hit that does not decode (a success without the flags' extras)
// is that key's error alone, the error a single Get gets for the same
// answer (ErrServerFailure, not retried); the other keys are hits.
func TestGetManyMemcachedGroupUndecodableHitIsAGetsError(t *testing.T) {
	p := proxied(t)
	h := newKeyHook(memdx.StatusSuccess)
	p.OnRequest(h.onRequest)
	c := memcachedClient(t, p.Addr(), nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	keys := batchKeys(t, col, "gpbadhit", 10, 10)
	h.body = []byte("no flags")
	h.arm(memdx.StatusSuccess, keys[9:], 1)
	_, single := col.Get(ctx, keys[9], nil)
	require.ErrorIs(t, single, ErrServerFailure)
	h.arm(memdx.StatusSuccess, keys[3:5], 1)
	for i, r := range col.GetMany(ctx, keys[:9], &GetManyOptions{Timeout: 10 * time.Second}) {
		if i == 3 || i == 4 {
			require.ErrorIs(t, r.Err, ErrServerFailure, r.Key)
			assertSameGetError(t, single, r.Err, r.Key)
			assert.NotZero(t, opaqueOf(t, r.Err), "%s: the opaque it was sent with", r.Key)
			assert.Equal(t, 1, h.count(r.Key), "%s: not retried", r.Key)
			continue
		}
		require.NoError(t, r.Err, r.Key)
		assert.Equal(t, "v-"+r.Key, string(r.Value))
	}
}

// The connection ends (a FIN) right after the hits of a group were
// answered, before its NOOP's answer: those hits keep their values and are
// not read again; the keys with no answer yet (hits whose answers were
// lost, misses) are sent again on the new connection, once, and end right:
// values and ErrDocumentNotFound, retried for the closed socket.
func TestGetManyMemcachedGroupConnectionLostRetriesOnlyTheUnansweredKeys(t *testing.T) {
	p := proxied(t)
	h := newKeyHook(0)
	p.OnRequest(h.onRequest)
	c := memcachedClient(t, p.Addr(), nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "gplost", 30, 20) // 0..19 stored
	lost := map[string]bool{}
	for _, k := range keys[15:20] {
		lost[k] = true
	}
	var armed atomic.Bool
	armed.Store(true)
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if !armed.Load() || req == nil {
			return faultnode.Action{}
		}
		switch {
		case req.OpCode == memdx.OpGetKQ && lost[string(req.Key)]:
			return faultnode.Action{Drop: true}
		case req.OpCode == memdx.OpNoop:
			// Upstream answers in order: every answer to the group's
			// gets has been written to the client before this one.
			armed.Store(false)
			for _, cn := range p.Conns() {
				cn.Close()
			}
			return faultnode.Action{Drop: true}
		}
		return faultnode.Action{}
	})
	h.arm(0, nil, 0) // count from here
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: 10 * time.Second})
	require.False(t, armed.Load(), "the group's NOOP was answered")
	for i, r := range res {
		require.Equal(t, keys[i], r.Key)
		answered := i < 15
		if answered {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			assert.Zero(t, r.RetryAttempts, r.Key)
			assert.Equal(t, 1, h.count(r.Key), "%s: answered before the loss, not read again", r.Key)
			continue
		}
		assert.Equal(t, 2, h.count(r.Key), "%s: read again once", r.Key)
		if i < 20 {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			// A retry before the new connection is up waits for it
			// and counts too.
			assert.GreaterOrEqual(t, r.RetryAttempts, 1, r.Key)
			assert.True(t, r.RetryReasons.Has(RetryReasonSocketClosedWhileInFlight), "%s: %v", r.Key, r.RetryReasons)
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
		var kv *KeyValueError
		require.ErrorAs(t, r.Err, &kv)
		assert.GreaterOrEqual(t, kv.RetryAttempts, 1, r.Key)
		assert.True(t, kv.RetryReasons.Has(RetryReasonSocketClosedWhileInFlight), "%s: %v", r.Key, kv.RetryReasons)
		assert.False(t, kv.Ambiguous, r.Key)
	}
	assert.Equal(t, 2, p.Accepted(), "one new connection")
}

// A server that answers nothing: every key of the group ends by the
// batch's deadline (its Timeout, or its context's deadline when that is
// sooner) with the timeout a single Get gets (not a miss, not ambiguous),
// and the same connection reads every key once the server answers again.
func TestGetManyMemcachedGroupSilentServerTimesOutAsAGet(t *testing.T) {
	t.Parallel()
	p := proxied(t)
	c := memcachedClient(t, p.Addr(), nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	keys := batchKeys(t, col, "gpsilent", 12, 6)
	cn := c.cl.Topology().Nodes()[0].Conns()[0]
	p.Blackhole(true)
	// Each call is tried again until its requests were written before
	// the 200 ms deadline (untilWritten): one a stalled machine refused
	// at its deadline was never given an opaque.
	single := untilWritten(t, func() error {
		_, err := col.Get(ctx, keys[0], &GetOptions{Timeout: 200 * time.Millisecond})
		return err
	})
	require.ErrorIs(t, single, ErrUnambiguousTimeout)
	res := manyUntilWritten(t, func() []GetManyResult {
		return col.GetMany(ctx, keys, &GetManyOptions{Timeout: 200 * time.Millisecond})
	})
	for _, r := range res {
		require.ErrorIs(t, r.Err, ErrTimeout, r.Key)
		assertSameGetError(t, single, r.Err, r.Key)
		assert.NotZero(t, opaqueOf(t, r.Err), "%s: the opaque it was sent with", r.Key)
	}
	single = untilWritten(t, func() error {
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err := col.Get(dctx, keys[0], &GetOptions{Timeout: time.Minute})
		return err
	})
	require.ErrorIs(t, single, ErrTimeout)
	res = manyUntilWritten(t, func() []GetManyResult {
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		return col.GetMany(dctx, keys, &GetManyOptions{Timeout: time.Minute})
	})
	for _, r := range res {
		require.ErrorIs(t, r.Err, ErrTimeout, r.Key)
		assertSameGetError(t, single, r.Err, r.Key)
		assert.NotZero(t, opaqueOf(t, r.Err), "%s: the opaque it was sent with", r.Key)
	}
	p.Blackhole(false)
	for i, r := range col.GetMany(ctx, keys, &GetManyOptions{Timeout: 10 * time.Second}) {
		if i < 6 {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
	}
	require.Same(t, cn, c.cl.Topology().Nodes()[0].Conns()[0], "the same connection")
}

// The batch's context is cancelled while its group waits for the NOOP's
// answer: the keys answered before (the hits, read by the connection
// before a later Get's answer) keep their values; every other key (a get
// the server never saw, a miss not settled) ends ErrRequestCanceled, at
// once. The connection then reads every key.
func TestGetManyMemcachedGroupCancelKeepsTheAnsweredKeys(t *testing.T) {
	p := proxied(t)
	c := memcachedClient(t, p.Addr(), nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "gpcancel", 20, 15) // 0..14 stored
	unsent := map[string]bool{}
	for _, k := range keys[10:15] {
		unsent[k] = true
	}
	var armed atomic.Bool
	armed.Store(true)
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		drop := armed.Load() && (req.OpCode == memdx.OpNoop || req.OpCode == memdx.OpGetKQ && unsent[string(req.Key)])
		return faultnode.Action{Drop: drop}
	})
	noop := p.NextRequest(memdx.OpNoop)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	getErr := make(chan error, 1)
	go func() {
		<-noop
		// The server answers in order: once this Get's answer is read,
		// so are the group's hits.
		_, err := col.Get(context.Background(), keys[0], &GetOptions{Timeout: 10 * time.Second})
		getErr <- err
		cancel()
	}()
	res := col.GetMany(ctx, keys, &GetManyOptions{Timeout: time.Minute})
	require.NoError(t, <-getErr)
	for i, r := range res {
		require.Equal(t, keys[i], r.Key)
		if i < 10 {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			continue
		}
		require.ErrorIs(t, r.Err, ErrRequestCanceled, r.Key)
		require.NotErrorIs(t, r.Err, ErrTimeout, r.Key)
		require.NotErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
	}
	armed.Store(false)
	for i, r := range col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: 10 * time.Second}) {
		if i < 15 {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
	}
}

// More keys than the batch may have in flight (MaxPendingPerConnection 8:
// 4): they go as groups of at most 4 gets, a window after the other (two
// in flight), and every key has its own result in input order, a key given
// twice included.
func TestGetManyMemcachedGroupWindowsKeepOrderAndDuplicates(t *testing.T) {
	p := proxied(t)
	var mu sync.Mutex
	gets, largest, groups := 0, 0, 0
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		mu.Lock()
		defer mu.Unlock()
		switch req.OpCode {
		case memdx.OpGetKQ:
			gets++
		case memdx.OpNoop:
			largest = max(largest, gets)
			groups++
			gets = 0
		}
		return faultnode.Action{}
	})
	c := memcachedClient(t, p.Addr(), &Options{MaxPendingPerConnection: 8})
	col := c.DefaultCollection()
	stored := batchKeys(t, col, "gpwin", 24, 16) // 16..23 missing
	keys := append([]string(nil), stored...)
	// Duplicates: in the same window as their first, and windows later.
	keys = append(keys[:3], append([]string{keys[2]}, keys[3:]...)...)
	keys = append(keys, stored[0], stored[20], stored[5], stored[5], stored[23])
	require.Len(t, keys, 30)
	mu.Lock()
	groups, largest, gets = 0, 0, 0
	mu.Unlock()
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: 10 * time.Second})
	require.Len(t, res, len(keys))
	for i, r := range res {
		require.Equal(t, keys[i], r.Key, "result %d", i)
		var n int
		_, err := fmt.Sscanf(r.Key[len("gpwin-"):], "%d", &n)
		require.NoError(t, err)
		if n < 16 {
			require.NoError(t, r.Err, "%d: %s", i, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value), "result %d", i)
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, "%d: %s", i, r.Key)
		var kv *KeyValueError
		require.ErrorAs(t, r.Err, &kv)
		assert.Equal(t, r.Key, kv.Key, "result %d", i)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 4, largest, "the largest group")
	assert.Equal(t, 8, groups, "30 keys in windows of 4")
}

// Values read in one GetMany are the caller's own: small ones are copied
// into a shared block, but appending to one never changes another, nor
// does a later batch; empty, large (past a block's share, past a block)
// and 1 MiB-sized values read as stored, with a single Get's flags and CAS,
// and typed documents decode (ContentAs) as a Get's.
func TestGetManyMemcachedGroupValuesAreIsolated(t *testing.T) {
	addr := memcachedtest.Start(t)
	c := memcachedClient(t, addr, nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	sizes := []int{0, 1, 7, 37, 37, 100, 511, 512, 513, 600, 0, 4000, 4096, 5000, 1<<20 - 256} // 1 MiB less room for the item header and key (memcached -I 1m)
	for range 200 {                                                                            // past one block of small values
		sizes = append(sizes, 37)
	}
	keys := make([]string, len(sizes))
	want := make([][]byte, len(sizes))
	for i, n := range sizes {
		keys[i] = fmt.Sprintf("gpval-%03d", i)
		want[i] = make([]byte, n)
		for j := range want[i] {
			want[i][j] = byte(i*7 + j)
		}
		_, err := col.Upsert(ctx, keys[i], want[i], nil)
		require.NoError(t, err, "%s: %d bytes", keys[i], n)
	}
	res := col.GetMany(ctx, keys, &GetManyOptions{Timeout: 10 * time.Second})
	shared := 0
	for i, r := range res {
		require.NoError(t, r.Err, r.Key)
		require.True(t, bytes.Equal(want[i], r.Value), "%s: %d bytes, read %d", r.Key, len(want[i]), len(r.Value))
		if i > 0 && adjacent(res[i-1].Value, r.Value) {
			shared++
		}
	}
	require.Greater(t, shared, 100, "small values share blocks (the group path read them)")
	for _, i := range []int{0, 3, 8, 10, 14} {
		g, err := col.Get(ctx, keys[i], nil)
		require.NoError(t, err)
		assert.Equal(t, g.Cas, res[i].Cas, keys[i])
		assert.Equal(t, g.Flags, res[i].Flags, keys[i])
		assert.Equal(t, g.Datatype, res[i].Datatype, keys[i])
	}
	// Typed documents decode from a group's result as from a Get's.
	type doc struct {
		Name string `json:"name"`
		N    int    `json:"n"`
	}
	_, err := UpsertJSON(ctx, col, "gpval-json", doc{Name: "grouped", N: 7}, nil)
	require.NoError(t, err)
	_, err = UpsertString(ctx, col, "gpval-string", "a string", nil)
	require.NoError(t, err)
	typed := col.GetMany(ctx, []string{"gpval-json", "gpval-string"}, nil)
	require.NoError(t, typed[0].Err)
	require.NoError(t, typed[1].Err)
	single, err := col.Get(ctx, "gpval-json", nil)
	require.NoError(t, err)
	assert.Equal(t, single.Flags, typed[0].Flags)
	var d doc
	require.NoError(t, typed[0].ContentAs(&d))
	assert.Equal(t, doc{Name: "grouped", N: 7}, d)
	var str string
	require.NoError(t, typed[1].ContentAs(&str))
	assert.Equal(t, "a string", str)

	for i := range res {
		res[i].Value = append(res[i].Value, bytes.Repeat([]byte{0xee}, 1+i%40)...)
	}
	// A later batch reads other values (a pooled batch, new blocks).
	for range 2 {
		other := batchKeys(t, col, "gpval-other", 50, 50)
		for _, r := range col.GetMany(ctx, other, nil) {
			require.NoError(t, r.Err)
		}
	}
	for i, r := range res {
		require.True(t, bytes.Equal(want[i], r.Value[:len(want[i])]), "%s changed by an append to another value or a later batch", r.Key)
	}
}

// memcached:// over two servers, one of which dies (its connections
// reset, new ones refused), between batches and while a batch's group is
// in flight there: only that server's keys fail; the live server's keys
// are read as hits and misses in the same batch.
func TestGetManyMemcachedGroupDeadServersKeysFailAlone(t *testing.T) {
	live := memcachedtest.Start(t)
	p := proxied(t)
	dead := p.Addr()
	c := memcachedClient(t, live+","+dead, nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	keys := make([]string, 100)
	onLive := map[string]bool{}
	for i := range keys {
		keys[i] = fmt.Sprintf("gpdead-%03d", i)
		onLive[keys[i]] = c.Route(keys[i]).Active == live
		if i%2 == 0 {
			_, err := col.Upsert(ctx, keys[i], []byte("v-"+keys[i]), nil)
			require.NoError(t, err)
		}
	}
	nLive := 0
	for _, l := range onLive {
		if l {
			nLive++
		}
	}
	require.True(t, nLive > 10 && nLive < 90, "%d of 100 keys on the live server", nLive)
	check := func(name string, deadFails bool) {
		t.Helper()
		res := col.GetMany(ctx, keys, &GetManyOptions{Timeout: 3 * time.Second})
		for i, r := range res {
			switch {
			case !onLive[r.Key] && deadFails:
				require.Error(t, r.Err, "%s: %s", name, r.Key)
				require.NotErrorIs(t, r.Err, ErrDocumentNotFound, "%s: %s", name, r.Key)
				var kv *KeyValueError
				require.ErrorAs(t, r.Err, &kv)
				assert.Equal(t, dead, kv.Node, "%s: %s", name, r.Key)
			case i%2 == 0:
				require.NoError(t, r.Err, "%s: %s", name, r.Key)
				assert.Equal(t, "v-"+r.Key, string(r.Value), name)
			default:
				require.ErrorIs(t, r.Err, ErrDocumentNotFound, "%s: %s", name, r.Key)
			}
		}
	}
	check("both up", false)

	// Dies while the group is in flight: its gets are never answered.
	var dying atomic.Bool
	dying.Store(true)
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		if !dying.Load() {
			return faultnode.Action{}
		}
		if req.OpCode == memdx.OpNoop {
			dying.Store(false)
			p.RefuseNew(true)
			p.Reset()
		}
		return faultnode.Action{Drop: true}
	})
	check("dies in flight", true)
	require.False(t, dying.Load(), "the dead server's group was sent")
	check("dead", true)
}

// Keys GetMany refuses (empty, too long) fail alone with
// ErrInvalidArgument; the others are still read in a group.
func TestGetManyMemcachedGroupRefusedKeysFailAlone(t *testing.T) {
	addr := memcachedtest.Start(t)
	c := memcachedClient(t, addr, nil)
	col := c.DefaultCollection()
	stored := batchKeys(t, col, "gprefused-key-of-some-length", 10, 8)
	long := strings.Repeat("k", MaxKeyLength+1)
	keys := append([]string{"", stored[0], long}, stored[1:]...)
	keys = append(keys, "")
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: 10 * time.Second})
	var hits [][]byte
	for i, r := range res {
		require.Equal(t, keys[i], r.Key)
		switch {
		case r.Key == "" || r.Key == long:
			require.ErrorIs(t, r.Err, ErrInvalidArgument, "result %d", i)
		case strings.HasSuffix(r.Key, "-008") || strings.HasSuffix(r.Key, "-009"):
			require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
		default:
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			assert.Zero(t, r.RetryAttempts, r.Key)
			hits = append(hits, r.Value)
		}
	}
	require.Len(t, hits, 8)
	shared := 0
	for i := 1; i < len(hits); i++ {
		if adjacent(hits[i-1], hits[i]) {
			shared++
		}
	}
	assert.Equal(t, len(hits)-1, shared, "the hits were read in one group (their values in one block)")
}

// countingObserver counts each key's AttemptStart and AttemptEnd calls.
type countingObserver struct {
	mu           sync.Mutex
	starts, ends map[string]int
}

func (o *countingObserver) AttemptStart(i AttemptInfo) {
	o.mu.Lock()
	o.starts[i.Key]++
	o.mu.Unlock()
}

func (o *countingObserver) AttemptEnd(i AttemptInfo, _ error) {
	o.mu.Lock()
	o.ends[i.Key]++
	o.mu.Unlock()
}

// With an Observer, a memcached:// GetMany reports every key's attempt
// (AttemptStart and AttemptEnd, a key given twice twice), and its results
// are those of a client without one.
func TestGetManyMemcachedWithAnObserverReportsEveryKeysAttempt(t *testing.T) {
	addr := memcachedtest.Start(t)
	obs := &countingObserver{starts: map[string]int{}, ends: map[string]int{}}
	plain := memcachedClient(t, addr, nil)
	observed := memcachedClient(t, addr, &Options{Observer: obs})
	keys := batchKeys(t, plain.DefaultCollection(), "gpobs", 20, 12)
	keys = append(keys, keys[3], keys[15])
	obs.mu.Lock()
	clear(obs.starts)
	clear(obs.ends)
	obs.mu.Unlock()
	ctx := context.Background()
	want := plain.DefaultCollection().GetMany(ctx, keys, &GetManyOptions{Timeout: 10 * time.Second})
	got := observed.DefaultCollection().GetMany(ctx, keys, &GetManyOptions{Timeout: 10 * time.Second})
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		require.Equal(t, w.Key, g.Key)
		if w.Err != nil {
			require.ErrorIs(t, w.Err, ErrDocumentNotFound, w.Key)
			assertSameGetError(t, w.Err, g.Err, g.Key)
			continue
		}
		require.NoError(t, g.Err, g.Key)
		assert.Equal(t, w.Value, g.Value, g.Key)
		assert.Equal(t, w.Cas, g.Cas, g.Key)
		assert.Equal(t, w.Flags, g.Flags, g.Key)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	times := map[string]int{}
	for _, k := range keys {
		times[k]++
	}
	for k, n := range times {
		assert.Equal(t, n, obs.starts[k], "%s: AttemptStart", k)
		assert.Equal(t, n, obs.ends[k], "%s: AttemptEnd", k)
	}
}

// The batch's context is cancelled while the first two of several windows
// are in flight: every key ends ErrRequestCanceled, and the later windows
// are never sent.
func TestGetManyMemcachedGroupCancelInTheFirstWindowsSendsNoOther(t *testing.T) {
	p := proxied(t)
	c := memcachedClient(t, p.Addr(), &Options{MaxPendingPerConnection: 8}) // windows of 4
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "gpcancelwin", 12, 6)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var armed atomic.Bool
	var noops atomic.Int32
	armed.Store(true)
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		if !armed.Load() || req.OpCode != memdx.OpNoop && req.OpCode != memdx.OpGetKQ {
			return faultnode.Action{}
		}
		if req.OpCode == memdx.OpNoop && noops.Add(1) == 2 {
			cancel() // window 2's NOOP: both windows in flight came
		}
		return faultnode.Action{Drop: true}
	})
	getqs := p.Requests(memdx.OpGetKQ)
	for _, r := range col.GetMany(ctx, keys, &GetManyOptions{Timeout: time.Minute}) {
		require.ErrorIs(t, r.Err, ErrRequestCanceled, r.Key)
	}
	armed.Store(false)
	// The proxy has read everything sent before this Get's request.
	_, err := col.Get(context.Background(), keys[0], &GetOptions{Timeout: 10 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, 8, p.Requests(memdx.OpGetKQ)-getqs, "gets sent: the first two windows' only")
}

// A server that answers nothing, with several windows: the first two
// windows (in flight together) end at the batch's deadline and the later
// ones, whose deadline has passed, are not sent; every key ends with a
// single Get's timeout.
func TestGetManyMemcachedGroupWindowsPastTheDeadlineAreNotSent(t *testing.T) {
	t.Parallel()
	p := proxied(t)
	c := memcachedClient(t, p.Addr(), &Options{MaxPendingPerConnection: 8}) // windows of 4
	col := c.DefaultCollection()
	ctx := context.Background()
	keys := batchKeys(t, col, "gpdeadwin", 12, 6)
	p.Blackhole(true)
	single := untilWritten(t, func() error {
		_, err := col.Get(ctx, keys[0], &GetOptions{Timeout: 200 * time.Millisecond})
		return err
	})
	require.ErrorIs(t, single, ErrUnambiguousTimeout)
	// The batch is tried again until its first two windows were written
	// before the 200 ms deadline, which a stalled machine may miss; the
	// gets a try did write are counted by the proxy before the next try
	// takes its own count.
	var getqs int
	var res []GetManyResult
	for try := 0; ; try++ {
		getqs = p.Requests(memdx.OpGetKQ)
		res = col.GetMany(ctx, keys, &GetManyOptions{Timeout: 200 * time.Millisecond})
		written := 0
		for _, r := range res {
			if timedOutWritten(r.Err) {
				written++
			}
		}
		if written >= 8 {
			break
		}
		require.Less(t, try, 100, "no batch's first two windows were written before its deadline in 100 tries")
		require.Eventually(t, func() bool { return p.Requests(memdx.OpGetKQ) >= getqs+written }, time.Minute, time.Millisecond)
	}
	for i, r := range res {
		require.ErrorIs(t, r.Err, ErrTimeout, r.Key)
		assertSameGetError(t, single, r.Err, r.Key)
		assert.Equal(t, i < 8, opaqueOf(t, r.Err) != 0, "%s: an opaque only for a get sent", r.Key)
	}
	p.Blackhole(false)
	_, err := col.Get(ctx, keys[0], &GetOptions{Timeout: 10 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, 8, p.Requests(memdx.OpGetKQ)-getqs, "gets sent: the first two windows' only")
}

// Closing the client while a group waits for its NOOP's answer ends every
// key of the batch with ErrClosed (not a timeout, not a miss), at once.
func TestGetManyMemcachedGroupClientCloseEndsEveryKey(t *testing.T) {
	p := proxied(t)
	c := memcachedClient(t, p.Addr(), nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "gpclose", 20, 10)
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		return faultnode.Action{Drop: req.OpCode == memdx.OpNoop || req.OpCode == memdx.OpGetKQ}
	})
	noop := p.NextRequest(memdx.OpNoop)
	closed := make(chan error, 1)
	go func() { <-noop; closed <- c.Close() }()
	for _, r := range col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: time.Minute}) {
		require.ErrorIs(t, r.Err, ErrClosed, r.Key)
		require.NotErrorIs(t, r.Err, ErrTimeout, r.Key)
		require.NotErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
	}
	require.NoError(t, <-closed)
}

// A connection full with other callers' requests refuses the batch's
// group (ErrOverloaded, not sent): each key is retried as a Get refused
// by its connection is (SOCKET_NOT_AVAILABLE) and read once there is
// room; with a strategy that retries nothing, each key fails as such a
// Get does.
func TestGetManyMemcachedGroupRefusedByAFullConnectionIsRetriedAsAGet(t *testing.T) {
	p := proxied(t)
	c := memcachedClient(t, p.Addr(), &Options{MaxPendingPerConnection: 8})
	col := c.DefaultCollection()
	ctx := context.Background()
	keys := batchKeys(t, col, "gpfull", 6, 4)
	held := make(chan struct{}, 8)
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		if req.OpCode == memdx.OpGet && strings.HasPrefix(string(req.Key), "held-") {
			held <- struct{}{}
			return faultnode.Action{Drop: true}
		}
		return faultnode.Action{}
	})
	hctx, release := context.WithCancel(ctx)
	defer release()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = col.Get(hctx, fmt.Sprintf("held-%d", i), &GetOptions{Timeout: time.Minute})
		}()
	}
	for range 8 {
		<-held
	}

	noRetry := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })
	_, single := col.Get(ctx, keys[0], &GetOptions{RetryStrategy: noRetry, Timeout: 10 * time.Second})
	require.ErrorIs(t, single, ErrNotRetried)
	for _, r := range col.GetMany(ctx, keys, &GetManyOptions{RetryStrategy: noRetry, Timeout: 10 * time.Second}) {
		require.Error(t, r.Err, r.Key)
		assertSameGetError(t, single, r.Err, r.Key)
		assert.Zero(t, opaqueOf(t, r.Err), "%s: not sent", r.Key)
	}

	refused := make(chan struct{})
	var once sync.Once
	signal := RetryStrategyFunc(func(_ RetryRequest, reason RetryReason) RetryAction {
		if reason == RetryReasonSocketNotAvailable {
			once.Do(func() { close(refused) })
		}
		return RetryAfter(time.Millisecond)
	})
	go func() { <-refused; release() }()
	res := col.GetMany(ctx, keys, &GetManyOptions{RetryStrategy: signal, Timeout: 10 * time.Second})
	release() // (done already, unless the group was not refused)
	wg.Wait()
	for i, r := range res {
		if i < 4 {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			assert.GreaterOrEqual(t, r.RetryAttempts, 1, r.Key)
			assert.True(t, r.RetryReasons.Has(RetryReasonSocketNotAvailable), "%s: %v", r.Key, r.RetryReasons)
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
		var kv *KeyValueError
		require.ErrorAs(t, r.Err, &kv)
		assert.True(t, kv.RetryReasons.Has(RetryReasonSocketNotAvailable), "%s: %v", r.Key, kv.RetryReasons)
	}
}

// Several GetMany calls at once on a node's connections, many of them ended by
// their context or deadline while their groups are in flight (the
// batches are then pooled and reused): every key's result is its own,
// never another group's answer: a value is the key's, a miss is a key not
// stored, any other outcome is a timeout or a cancellation.
func TestGetManyMemcachedGroupsOfConcurrentBatchesKeepTheirOwnAnswers(t *testing.T) {
	t.Parallel()
	addr := memcachedtest.Start(t)
	c := memcachedClient(t, addr, &Options{MaxPendingPerConnection: 64, ConnectionsPerNode: 2}) // windows of 32
	col := c.DefaultCollection()
	all := batchKeys(t, col, "gpconc", 300, 150) // 0..149 stored
	stored := map[string]bool{}
	for _, k := range all[:150] {
		stored[k] = true
	}
	waits := []time.Duration{0, 50 * time.Microsecond, 200 * time.Microsecond, time.Millisecond}
	var wg sync.WaitGroup
	var ended, read atomic.Int64
	errs := make(chan error, 1)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range 40 {
				keys := make([]string, 70)
				for j := range keys {
					keys[j] = all[(g*97+it*31+j*j)%len(all)]
				}
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if w := waits[(g+it)%len(waits)]; w > 0 {
					if it%2 == 0 {
						ctx, cancel = context.WithTimeout(ctx, w)
					} else {
						ctx, cancel = context.WithCancel(ctx)
						time.AfterFunc(w, cancel)
					}
				}
				res := col.GetMany(ctx, keys, &GetManyOptions{Timeout: 10 * time.Second})
				cancel()
				for j, r := range res {
					switch {
					case r.Key != keys[j]:
						report(fmt.Errorf("result %d is %q's, not %q's", j, r.Key, keys[j]))
					case r.Err == nil:
						read.Add(1)
						if !stored[r.Key] || string(r.Value) != "v-"+r.Key {
							report(fmt.Errorf("%s: read %q (stored: %v)", r.Key, r.Value, stored[r.Key]))
						}
					case errors.Is(r.Err, ErrDocumentNotFound):
						read.Add(1)
						if stored[r.Key] {
							report(fmt.Errorf("%s: stored, reported missing: %v", r.Key, r.Err))
						}
					case errors.Is(r.Err, ErrTimeout) || errors.Is(r.Err, ErrRequestCanceled):
						ended.Add(1)
					default:
						report(fmt.Errorf("%s: %v", r.Key, r.Err))
					}
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("%d keys read, %d ended by their context", read.Load(), ended.Load())
	assert.Positive(t, read.Load())
}

// taggingTranscoder decodes any value into a *string, tagged.
type taggingTranscoder struct{ JSONTranscoder }

func (taggingTranscoder) Decode(value []byte, _ uint32, out any) error {
	*out.(*string) = "tagged:" + string(value)
	return nil
}

// A group's hit decodes (ContentAs) with the client's Transcoder, as a
// Get's result does.
func TestGetManyMemcachedGroupHitsDecodeWithTheClientsTranscoder(t *testing.T) {
	addr := memcachedtest.Start(t)
	c := memcachedClient(t, addr, &Options{Transcoder: taggingTranscoder{}})
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "gptc", 3, 3)
	for _, r := range col.GetMany(context.Background(), keys, nil) {
		require.NoError(t, r.Err)
		var s string
		require.NoError(t, r.ContentAs(&s))
		assert.Equal(t, "tagged:v-"+r.Key, s)
	}
}

// Large groups (windows of 2048 gets, written in many chunks, over TLS
// by the writer goroutine alone) read every key: values of many sizes,
// from empty to past a TLS record, and misses. (The values fit in the
// 16 MB of memcachedtest's server: nothing is evicted.)
func TestGetManyMemcachedLargeGroupsReadEveryKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	run := func(t *testing.T, c *Client) {
		col := c.DefaultCollection()
		prefix := fmt.Sprintf("kvwire-gplarge-%d", time.Now().UnixNano())
		keys := make([]string, 5000)
		want := map[string][]byte{}
		for i := range keys {
			keys[i] = fmt.Sprintf("%s-%04d", prefix, i)
			if i%5 == 4 {
				continue // a miss
			}
			n := (i * 37) % 700 // 0 to 700 bytes, and 20 KiB now and then
			if i%50 == 7 {
				n = 20 << 10
			}
			want[keys[i]] = bytes.Repeat([]byte{byte(i)}, n)
			_, err := col.Upsert(ctx, keys[i], want[keys[i]], nil)
			require.NoError(t, err)
		}
		t.Cleanup(func() {
			for k := range want {
				_, _ = col.Remove(ctx, k, nil)
			}
		})
		res := col.GetMany(ctx, keys, &GetManyOptions{Timeout: 10 * time.Second})
		for i, r := range res {
			require.Equal(t, keys[i], r.Key)
			v, ok := want[r.Key]
			if !ok {
				require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
				continue
			}
			require.NoError(t, r.Err, r.Key)
			require.True(t, bytes.Equal(v, r.Value), "%s: %d bytes, read %d", r.Key, len(v), len(r.Value))
			assert.Zero(t, r.RetryAttempts, r.Key)
		}
	}
	t.Run("tcp", func(t *testing.T) {
		run(t, memcachedClient(t, memcachedtest.Start(t), nil))
	})
	t.Run("tls", func(t *testing.T) {
		addr, pool := memcachedTLS(t)
		c, err := Connect(ctx, "memcacheds://"+addr, testOptions(&Options{Username: os.Getenv("KV_MEMCACHED_USER"),
			Password: os.Getenv("KV_MEMCACHED_PASS"), TLSConfig: &tls.Config{RootCAs: pool}}))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		run(t, c)
	})
}

// A memcached GetMany's group hits are shown to the observers one get
// each, as their own operations are: the meter records a latency per hit
// (in one step when nothing else observes them, by the caller's Meter
// once per key all the same), the tracer gets a span per key, and the
// misses are operations of their own, recorded as not found.
func TestGetManyMemcachedGroupHitsReachTheObservers(t *testing.T) {
	addr := memcachedtest.Start(t)
	plain := memcachedClient(t, addr, nil)
	keys := batchKeys(t, plain.DefaultCollection(), "gmobs", 20, 12)
	ctx := context.Background()

	m := &countingMeter{}
	metered := memcachedClient(t, addr, &Options{Meter: m})
	res := metered.DefaultCollection().GetMany(ctx, keys, &GetManyOptions{Timeout: 10 * time.Second})
	require.Len(t, res, 20)
	m.mu.Lock()
	assert.Len(t, m.values["get/"], 12, "a latency per hit")
	assert.Len(t, m.values["get/DocumentNotFound"], 8, "a latency per miss")
	m.mu.Unlock()

	tr := &treeTracer{}
	traced := memcachedClient(t, addr, &Options{Tracer: tr})
	res = traced.DefaultCollection().GetMany(ctx, keys, &GetManyOptions{Timeout: 10 * time.Second})
	require.Len(t, res, 20)
	gets := 0
	for _, s := range tr.take() {
		if s.name == "get" {
			gets++
		}
	}
	assert.Equal(t, 20, gets, "a span per key")
}

// A memcached GetMany window's group hits reach the logging meter (the
// default Meter) together (optrace's RecordN): the window's count, each at
// the window's latency, from the batch's start to the window's read: D
// here, exactly, as the client's fake clock moves by D while the group's
// NOOP answer passes the proxy. Over the slow-operation threshold (a
// latency above KVThreshold, as for an operation of its own), or with a
// tracer, each hit is an operation of its own: the threshold report holds
// each at D, the tracer has a span each of D; the meter records them
// alike.
func TestGetManyMemcachedGroupHitsReachTheLoggingMeter(t *testing.T) {
	const hits, d = 12, 3 * time.Millisecond
	p := proxied(t)
	keys := batchKeys(t, memcachedClient(t, p.Addr(), nil).DefaultCollection(), "gmmeter", hits, hits)
	for _, tc := range []struct {
		name      string
		threshold time.Duration
		traced    bool
		slow      bool // each hit in the threshold report
	}{
		{"meter only: at the threshold", d, false, false},
		{"over the threshold", d - time.Microsecond, false, true},
		{"traced", time.Second, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := retry.NewFakeClock(time.Now())
			p.OnResponse(func(_, resp *memdx.Packet) faultnode.Action {
				if resp.OpCode == memdx.OpNoop {
					fc.Advance(d) // the group's end: before the client reads it
				}
				return faultnode.Action{}
			})
			defer p.OnResponse(nil)
			logger, logs := newReportLog()
			tr := &treeTracer{}
			o := &Options{Logger: logger, Clock: fakeClock{fc},
				ThresholdLogging: ThresholdLoggingOptions{KVThreshold: tc.threshold, SampleSize: 2 * hits}}
			if tc.traced {
				o.Tracer = tr
			}
			c := memcachedClient(t, p.Addr(), o)
			noops := p.Requests(memdx.OpNoop)
			res := c.DefaultCollection().GetMany(context.Background(), keys, &GetManyOptions{Timeout: 10 * time.Second})
			for i, r := range res {
				require.NoError(t, r.Err, keys[i])
			}
			require.Equal(t, 1, p.Requests(memdx.OpNoop)-noops, "one window, one group")
			require.NoError(t, c.Close()) // logs the reports

			var latencies, slow []byte
			for len(logs.ch) > 0 {
				switch l := <-logs.ch; l.Msg {
				case LoggingMeterMessage:
					latencies = l.Report
				case ThresholdReportMessage:
					slow = l.Report
				}
			}
			var rep struct {
				Operations map[string]map[string]struct {
					TotalCount    uint64            `json:"total_count"`
					PercentilesUs map[string]uint64 `json:"percentiles_us"`
				} `json:"operations"`
			}
			require.NoError(t, json.Unmarshal(latencies, &rep), "%s", latencies)
			get := rep.Operations["kv"]["get"]
			assert.EqualValues(t, hits, get.TotalCount, "a latency per hit: %s", latencies)
			require.Len(t, get.PercentilesUs, 5, "%s", latencies)
			for pc, v := range get.PercentilesUs {
				assert.EqualValues(t, d/time.Microsecond, v, "percentile %s: the window's latency: %s", pc, latencies)
			}

			if tc.slow {
				require.NotNil(t, slow, "no threshold report")
				k := logcapture.ParseKV(t, logcapture.Logged{Msg: ThresholdReportMessage, Report: slow})
				assert.EqualValues(t, hits, k.KV.TotalCount, "each hit its own slow operation: %s", slow)
				require.Len(t, k.KV.TopRequests, hits, slow)
				for _, e := range k.KV.TopRequests {
					assert.Equal(t, "get", e["operation_name"])
					assert.Equal(t, d, us(e, "total_duration_us"))
				}
			} else {
				assert.Nil(t, slow, "a threshold report: %s", slow)
			}

			gets := 0
			for _, s := range tr.take() {
				if s.name == "get" {
					gets++
					assert.Equal(t, d, s.end.Sub(s.start), "a hit's span: the window's latency")
				}
			}
			if tc.traced {
				assert.Equal(t, hits, gets, "a span per hit")
			} else {
				assert.Zero(t, gets)
			}
		})
	}
}
