package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/memcachedtest"
)

// Concurrent memcached GetManys over two servers, in several windows each
// (a small MaxPendingPerConnection), some cancelled part-way: every key
// gets one result, a hit its own value, a miss ErrDocumentNotFound, a
// cancelled batch's unread keys ErrRequestCanceled; and the values a
// batch returned (which share blocks) are unchanged after later batches
// reused the pooled batch.
func TestGetManyMemcachedGroupsConcurrentWithCancelsKeepEveryValue(t *testing.T) {
	t.Parallel()
	a, b := memcachedtest.Start(t), memcachedtest.Start(t)
	c, err := Connect(context.Background(), "memcached://"+a+","+b, testOptions(&Options{MaxPendingPerConnection: 64}))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	prefix := fmt.Sprintf("kvwire-gmstress-%d", time.Now().UnixNano())
	keys := make([]string, 300)
	want := map[string]string{}
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%03d", prefix, i)
		if i%4 != 1 {
			v := fmt.Sprintf("v-%d-%s", i, strings.Repeat("x", i%90))
			_, err := col.Upsert(context.Background(), keys[i], []byte(v), nil)
			require.NoError(t, err)
			want[keys[i]] = v
		}
	}
	type kept struct {
		key, value string
		got        []byte
	}
	var mu sync.Mutex
	var all []kept
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 15 {
				ctx, cancel := context.WithCancel(context.Background())
				if (round+g)%3 == 0 {
					go cancel()
				}
				res := col.GetMany(ctx, keys, &GetManyOptions{Timeout: 10 * time.Second})
				cancel()
				if len(res) != len(keys) {
					t.Errorf("%d results", len(res))
					return
				}
				for i, r := range res {
					v, hit := want[keys[i]]
					switch {
					case r.Key != keys[i]:
						t.Errorf("result %d for %q", i, r.Key)
					case r.Err == nil && hit && string(r.Value) == v:
						mu.Lock()
						all = append(all, kept{keys[i], v, r.Value})
						mu.Unlock()
					case r.Err != nil && !hit && errors.Is(r.Err, ErrDocumentNotFound):
					case r.Err != nil && errors.Is(r.Err, ErrRequestCanceled):
					default:
						t.Errorf("round %d key %s: %q, %v (hit %v)", round, keys[i], r.Value, r.Err, hit)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, k := range all {
		if string(k.got) != k.value {
			t.Fatalf("%s: value now %q, was %q", k.key, k.got, k.value)
		}
	}
}
