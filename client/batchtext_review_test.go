package client

import (
	"context"
	"testing"

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
	for i, r := range col.GetMany(context.Background(), keys, nil) {
		if i < 6 {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
	}
}
