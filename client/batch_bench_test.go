package client

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/memcachedtest"
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

// BenchmarkGetMany reads 256 documents of 100 bytes in one GetMany on the
// mock, from one goroutine, and reports the cost per key (allocs/key:
// the value copy, and the result slice and the batch's call shared by the
// keys).
func BenchmarkGetMany(b *testing.B) {
	col, keys := benchMock(b, 256)
	benchGetMany(b, col, keys)
}

// BenchmarkGetManyMemcached is BenchmarkGetMany on a memcached of its own
// (one text multi-get per batch, after the first).
func BenchmarkGetManyMemcached(b *testing.B) {
	benchGetManyMemcached(b, "", 256)
}

// BenchmarkGetManyMemcachedBinary is BenchmarkGetManyMemcached with binary
// quiet gets (GETKQ, a NOOP after them) instead of the text multi-get.
func BenchmarkGetManyMemcachedBinary(b *testing.B) {
	benchGetManyMemcached(b, "?binary_multiget=true", 256)
}

// BenchmarkGetManyMemcachedBig is BenchmarkGetManyMemcached with 8192 keys
// per GetMany: more than the batch's in-flight bound (2048 by default),
// so that the keys are read in several windows.
func BenchmarkGetManyMemcachedBig(b *testing.B) {
	benchGetManyMemcached(b, "", 8192)
}

// BenchmarkGetManyMemcachedBigBinary is BenchmarkGetManyMemcachedBig with
// binary quiet gets.
func BenchmarkGetManyMemcachedBigBinary(b *testing.B) {
	benchGetManyMemcached(b, "?binary_multiget=true", 8192)
}

// BenchmarkGetManyMemcachedBigDelayed is BenchmarkGetManyMemcachedBig
// through a proxy that delays every byte by 1 ms each way, a round trip
// of 2 ms (loopback has almost none, and tc netem is not in this kernel):
// what windows that wait for each other cost on a network.
func BenchmarkGetManyMemcachedBigDelayed(b *testing.B) {
	benchGetManyMemcachedVia(b, delayProxy(b, memcachedtest.Start(b), time.Millisecond), "", 8192)
}

// BenchmarkGetManyMemcachedBigBinaryDelayed is
// BenchmarkGetManyMemcachedBigDelayed with binary quiet gets.
func BenchmarkGetManyMemcachedBigBinaryDelayed(b *testing.B) {
	benchGetManyMemcachedVia(b, delayProxy(b, memcachedtest.Start(b), time.Millisecond), "?binary_multiget=true", 8192)
}

// delayProxy relays TCP connections to upstream, each chunk read passed on
// after delay in both directions, in order: a link with a round trip of
// twice delay.
func delayProxy(b *testing.B, upstream string, delay time.Duration) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	b.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	type chunk struct {
		due  time.Time
		data []byte
	}
	pipe := func(dst, src net.Conn) {
		chunks := make(chan chunk, 1024)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(chunks)
			for {
				buf := make([]byte, 64<<10)
				n, err := src.Read(buf)
				if n > 0 {
					chunks <- chunk{time.Now().Add(delay), buf[:n]}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			defer dst.Close()
			for c := range chunks {
				time.Sleep(time.Until(c.due))
				if _, err := dst.Write(c.data); err != nil {
					_ = src.Close()
					for range chunks {
					}
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			pipe(up, c)
			pipe(c, up)
		}
	}()
	return ln.Addr().String()
}

// benchGetManyMemcached reads n documents of 100 bytes per GetMany from a
// memcached of its own.
func benchGetManyMemcached(b *testing.B, query string, n int) {
	benchGetManyMemcachedVia(b, memcachedtest.Start(b), query, n)
}

// benchGetManyMemcachedVia is benchGetManyMemcached on the memcached at
// addr.
func benchGetManyMemcachedVia(b *testing.B, addr, query string, n int) {
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr+query, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	col := c.DefaultCollection()
	keys := make([]string, n)
	items := make([]UpsertManyItem, n)
	val := make([]byte, 100)
	for i := range keys {
		keys[i] = "bench-" + strconv.Itoa(i)
		items[i] = UpsertManyItem{Key: keys[i], Value: val}
	}
	for _, r := range col.UpsertMany(ctx, items, nil) {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	benchGetMany(b, col, keys)
}

func benchGetMany(b *testing.B, col *Collection, keys []string) {
	ctx := context.Background()
	b.ReportAllocs()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0, cpuOK := processCPU()
	n := 0
	for b.Loop() {
		for _, r := range col.GetMany(ctx, keys, nil) {
			if r.Err != nil || len(r.Value) != 100 {
				b.Fatalf("%s: %d bytes, %v", r.Key, len(r.Value), r.Err)
			}
		}
		n++
	}
	cpu1, _ := processCPU()
	cpu := cpu1 - cpu0
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(n*len(keys)), "allocs/key")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*len(keys)), "ns/key")
	b.ReportMetric(float64(n*len(keys))/b.Elapsed().Seconds(), "keys/s")
	// CPU of this process (the client, and the mock when it is the
	// server; not a memcached, which is a process of its own) per key: on
	// a loaded machine a steadier figure than the time per key. Not where
	// the system does not tell it (processCPU).
	if cpuOK {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(n*len(keys)), "cpu-ns/key")
	}
}
