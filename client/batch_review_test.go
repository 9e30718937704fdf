package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
