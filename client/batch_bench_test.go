package client

import (
	"context"
	"strconv"
	"testing"

	"github.com/kvwire/kvwire/mockcluster"
)

// benchMock starts a one-node mock with n documents of 100 bytes (keys
// "bench-0" ...) and returns a collection on it and the keys.
func benchMock(b *testing.B, n int) (*Collection, []string) {
	b.Helper()
	mc, err := mockcluster.New(mockcluster.Options{Nodes: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(mc.Close)
	ctx := context.Background()
	c, err := Connect(ctx, mc.ConnString(), &Options{Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword, Bucket: mockcluster.DefaultBucket})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	col := c.DefaultCollection()
	keys := make([]string, n)
	val := make([]byte, 100)
	for i := range keys {
		keys[i] = "bench-" + strconv.Itoa(i)
		if _, err := col.Upsert(ctx, keys[i], val, nil); err != nil {
			b.Fatal(err)
		}
	}
	return col, keys
}

// BenchmarkGet is one blocking Get of a 100-byte document on the mock.
func BenchmarkGet(b *testing.B) {
	col, keys := benchMock(b, 1)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := col.Get(ctx, keys[0], nil); err != nil {
			b.Fatal(err)
		}
	}
}
