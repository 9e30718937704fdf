package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/memcachedtest"
)

// A memcached:// GetMany with as many keys as a connection may have in
// flight (MaxPendingPerConnection) reads every key: the NOOP that settles
// the quiet gets must find room on the connection, or the batch must send
// them in parts. FAILS on w-batch: the NOOP's Start is refused
// (ErrOverloaded), fence takes back every quiet get, and the next round
// does the same, until the deadline: every key times out.
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

// A memcached:// GetMany miss is "a *KeyValueError as Get's": same Op and
// OpCode (GET) as a single Get's miss, not the quiet opcode the batch sent.
// FAILS on w-batch: judge builds the error while o.req.OpCode is still
// GETQ and restores GET only afterwards (batch.go:501-502).
func TestGetManyMemcachedMissIsTheErrorOfAGet(t *testing.T) {
	addr := memcachedtest.Start(t)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, nil)
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
	c, err := Connect(ctx, "memcached://"+p.Addr(), nil)
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
	assert.GreaterOrEqual(t, p.Requests(memdx.OpGetQ), 60, "every miss sent again (hits answered before the drop need not be)")
}
