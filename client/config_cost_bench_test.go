package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// paddedConfig returns the bucket's config with rev and at least size
// bytes: the bucket's own nodes and map, then cluster members that serve no
// vbucket (each with services, an alternate address, a server group and a
// UUID, as a real node entry has) until the size is reached. Every client
// can install it: its serverList and map are the mock's.
func paddedConfig(tb testing.TB, mc *mockcluster.Cluster, rev int64, size int) []byte {
	tb.Helper()
	b := mc.Bucket(mockcluster.DefaultBucket)
	var m map[string]any
	require.NoError(tb, json.Unmarshal(b.ConfigJSON(0), &m))
	m["rev"] = rev
	base, err := json.Marshal(m)
	require.NoError(tb, err)
	entry := func(i int) map[string]any {
		return map[string]any{
			"hostname":    fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255),
			"services":    map[string]int{"kv": 11210, "kvSSL": 11207, "mgmt": 8091, "mgmtSSL": 18091, "n1ql": 8093, "capi": 8092},
			"serverGroup": "Group 1",
			"nodeUUID":    fmt.Sprintf("%032x", i),
			"alternateAddresses": map[string]any{"external": map[string]any{
				"hostname": fmt.Sprintf("node-%d.external.example.com", i), "ports": map[string]int{"kv": 31210, "mgmt": 30091}}},
		}
	}
	one, err := json.Marshal(entry(0))
	require.NoError(tb, err)
	nodes := m["nodesExt"].([]any)
	for i := 0; len(base)+(len(one)+1)*(len(nodes)-3) < size; i++ {
		nodes = append(nodes, entry(i))
	}
	m["nodesExt"] = nodes
	raw, err := json.Marshal(m)
	require.NoError(tb, err)
	return raw
}

// BenchmarkNMVLargeConfig measures what a large config in NOT_MY_VBUCKET
// bodies costs the operations that meet it: eight Gets with a 500 ms
// timeout each meet one answer carrying a newer config of the given size,
// then answers without a body until they time out. Per iteration (all eight
// Gets): time, allocation (B/op: the whole process, parses included) and
// max-overshoot-ms, how long past its 500 ms the latest Get returned.
//
//	go test -run '^$' -bench NMVLargeConfig -benchtime 3x ./client
func BenchmarkNMVLargeConfig(b *testing.B) {
	for _, size := range []int{3_900_000, 15_600_000} {
		b.Run(fmt.Sprintf("%.1fMB", float64(size)/1e6), func(b *testing.B) {
			mc, err := mockcluster.New(mockcluster.Options{})
			require.NoError(b, err)
			defer mc.Close()
			ctx := context.Background()
			c, err := Connect(ctx, mc.ConnString(), testOptions(&Options{Username: mockcluster.DefaultUser,
				Password: mockcluster.DefaultPassword, Bucket: mockcluster.DefaultBucket}))
			require.NoError(b, err)
			defer c.Close()
			col := c.DefaultCollection()
			_, err = col.Upsert(ctx, "k", []byte("v"), nil)
			require.NoError(b, err)
			rev := mc.Bucket(mockcluster.DefaultBucket).Rev()
			const timeout = 500 * time.Millisecond
			var over time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				cfg := paddedConfig(b, mc, rev+1+int64(i), size)
				body := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"},
					Action: mockcluster.Action{Status: memdx.StatusNotMyVbucket, Value: cfg}, Times: 8})
				empty := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"},
					Action: mockcluster.Action{Status: memdx.StatusNotMyVbucket, Value: []byte{}}})
				b.StartTimer()
				var wg sync.WaitGroup
				var mu sync.Mutex
				for range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						start := time.Now()
						octx, cancel := context.WithTimeout(ctx, timeout)
						_, _ = col.Get(octx, "k", nil)
						cancel()
						d := time.Since(start) - timeout
						mu.Lock()
						over = max(over, d)
						mu.Unlock()
					}()
				}
				wg.Wait()
				b.StopTimer()
				body.Remove()
				empty.Remove()
				b.StartTimer()
			}
			b.ReportMetric(float64(over)/float64(time.Millisecond), "max-overshoot-ms")
		})
	}
}
