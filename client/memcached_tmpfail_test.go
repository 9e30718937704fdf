package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
)

// A plain memcached connection negotiates no XERROR (memcached refuses
// HELLO), yet no kv_engine remaps its statuses: memcached has no locks, so
// a TMPFAIL it answers to DELETE given a CAS is a temporary failure, not
// the lock kv_engine's locked_tmpfail is on a Couchbase connection without
// XERROR.
func TestMemcachedTmpFailOnDeleteIsATemporaryFailure(t *testing.T) {
	addr := memcachedtest.Start(t)
	p, err := faultnode.NewProxy(addr)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if resp.OpCode != memdx.OpDelete {
			return faultnode.Action{}
		}
		tmp := *resp
		tmp.Status, tmp.Value, tmp.Extras, tmp.Cas = memdx.StatusTmpFail, nil, nil, 0
		return faultnode.Action{Send: []memdx.Packet{tmp}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Connect(ctx, "memcached://"+p.Addr(), testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	up, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	var reasons []RetryReason
	noRetry := RetryStrategyFunc(func(_ RetryRequest, r RetryReason) RetryAction {
		reasons = append(reasons, r)
		return NoRetry()
	})
	_, err = col.Remove(ctx, "k", &RemoveOptions{Cas: up.Cas, RetryStrategy: noRetry})
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, Status(memdx.StatusTmpFail), kv.Status)
	assert.ErrorIs(t, err, ErrTemporaryFailure)
	assert.NotErrorIs(t, err, ErrDocumentLocked)
	assert.Equal(t, []RetryReason{RetryReasonKVTemporaryFailure}, reasons)
	assert.NotContains(t, err.Error(), "XERROR", "%v", err)
}
