package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Pipelined writes to a TLS memcached are all answered, however the
// stream falls into TLS records. memcached (1.6.18, Debian's) reads TLS
// with one SSL_read into the room left in its buffer, or into the rest of
// a value; what that read leaves of a record stays decrypted inside
// OpenSSL, where epoll cannot see it, and the server waits for bytes it
// already has until more arrive. A client whose records straddle requests
// has its last requests stall until their deadline. The test sends batches
// of small values, of mixed small and large ones, and of mid-sized ones,
// and wants every answer before the deadline: a stall runs out the whole
// of it. (conn's TestTLSRecordsHoldWholeRequests checks the records.)
func TestMemcachedTLSPipelinedWritesAllAnswered(t *testing.T) {
	t.Parallel()
	addr, pool := memcachedTLS(t)
	ctx := context.Background()
	c, err := Connect(ctx, "memcacheds://"+addr, testOptions(&Options{Username: os.Getenv("KV_MEMCACHED_USER"),
		Password: os.Getenv("KV_MEMCACHED_PASS"), TLSConfig: &tls.Config{RootCAs: pool}}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	col := c.DefaultCollection()
	prefix := fmt.Sprintf("tls-stream-%d-", time.Now().UnixNano())

	// Rounds: many small values; a mix with values larger than a record
	// and than a Write (64 KiB); a mix of small and mid-sized ones. Each
	// stays well inside the server's memory (-m 64, shared with the other
	// tests: about 3 MiB here), so that nothing read back was evicted.
	rounds := []struct {
		n     int
		sizes []int
	}{
		{4000, []int{10}},
		{120, []int{10, 1000, 20 << 10, 70 << 10}},
		{2000, []int{10, 700, 3000}},
	}
	for round, rd := range rounds {
		n := rd.n
		items := make([]UpsertManyItem, n)
		keys := make([]string, n)
		for i := range items {
			size := rd.sizes[i%len(rd.sizes)]
			keys[i] = fmt.Sprintf("%s%d-%d", prefix, round, i)
			// An expiry, so that a failed run leaves nothing for long in
			// the memcached the other tests share.
			items[i] = UpsertManyItem{Key: keys[i], Value: make([]byte, size), Expiry: time.Minute}
		}
		t.Cleanup(func() { col.RemoveMany(ctx, keys, nil) }) // whatever the test left
		// The deadline is long for a loopback batch and short for a test:
		// a stalled request fails at it.
		opts := &UpsertManyOptions{Timeout: 20 * time.Second}
		for i, r := range col.UpsertMany(ctx, items, opts) {
			require.NoError(t, r.Err, "round %d: upsert %d of %d (%d bytes)", round, i, n, len(items[i].Value))
		}
		for i, r := range col.GetMany(ctx, keys, &GetManyOptions{Timeout: 20 * time.Second}) {
			require.NoError(t, r.Err, "round %d: get %d of %d", round, i, n)
			require.Len(t, r.Value, len(items[i].Value))
		}
		for i, r := range col.RemoveMany(ctx, keys, &RemoveManyOptions{Timeout: 20 * time.Second}) {
			require.NoError(t, r.Err, "round %d: remove %d of %d", round, i, n)
		}
	}
}
