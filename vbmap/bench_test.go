package vbmap

import (
	"strconv"
	"sync/atomic"
	"testing"
)

func BenchmarkVbucketForKey(b *testing.B) {
	key := []byte("airline_10-some-typical-document-key")
	b.ReportAllocs()
	b.SetBytes(int64(len(key)))
	var sink uint16
	for b.Loop() {
		sink += VbucketForKey(key, 1024)
	}
	_ = sink
}

func benchKeys() [][]byte {
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = []byte("user::" + strconv.Itoa(i*7919))
	}
	return keys
}

// BenchmarkRoute: the per-operation hot path, current map.
func BenchmarkRoute(b *testing.B) {
	c := mustParseFile(b, "configs/cb_terse_rebalance_vbmapforward_rev28957.json", "10.143.200.104")
	keys := benchKeys()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		var rs RouteState
		if _, _, err := rs.Route(c, keys[i&1023], 0); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkRouteForward: an attempt after NMV, through the forward map.
func BenchmarkRouteForward(b *testing.B) {
	c := mustParseFile(b, "configs/cb_terse_rebalance_vbmapforward_rev28957.json", "10.143.200.104")
	keys := benchKeys()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		var rs RouteState
		rs.OnNotMyVbucket(c)
		if _, _, err := rs.Route(c, keys[i&1023], 0); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkRouteKetama: a memcached bucket (MD5 plus a binary search).
func BenchmarkRouteKetama(b *testing.B) {
	c := mustParseFile(b, "configs/memcached_terse_4node_host_placeholder.json", "localhost")
	keys := benchKeys()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		var rs RouteState
		if _, _, err := rs.Route(c, keys[i&1023], 0); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkLoadRouteParallel: what the client does per operation, with
// concurrent goroutines loading one config from an atomic.Pointer.
func BenchmarkLoadRouteParallel(b *testing.B) {
	var h atomic.Pointer[Config]
	h.Store(mustParseFile(b, "configs/cb_terse_7.6.4_3node_server_groups.json", "192.168.106.128"))
	keys := benchKeys()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			var rs RouteState
			if _, _, err := rs.Route(h.Load(), keys[i&1023], 0); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkParse(b *testing.B) {
	data := readConformance(b, "configs/cb_terse_rebalance_vbmapforward_rev28957.json")
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data, "10.143.200.104"); err != nil {
			b.Fatal(err)
		}
	}
}
