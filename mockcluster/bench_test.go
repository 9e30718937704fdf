package mockcluster

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Pipelined GETs on one connection, the same harness against the mock and
// against memcached from Debian's packages:
//
//	eval "$(scripts/memcached.sh up)"
//	go test -run '^$' -bench PipelinedGet -benchtime 3s ./mockcluster
//
// Each iteration is one GET; requests go out in windows of benchWindow in
// one write, and the window's responses are read before the next goes out.
// gets/s is the figure to compare; the memcached case skips when
// KV_MEMCACHED_ADDR is unset.
const (
	benchWindow = 64
	benchKeys   = 1024
	benchValue  = 128
)

func BenchmarkPipelinedGet(b *testing.B) {
	keys := make([][]byte, benchKeys)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("bench-key-%06d", i))
	}
	value := make([]byte, benchValue)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}

	b.Run("mock", func(b *testing.B) {
		c, err := New(Options{Nodes: 1, Buckets: []BucketOptions{{Name: DefaultBucket, NumReplicas: NoReplicas}}})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		bk := c.Bucket(DefaultBucket)
		cl := bootstrap(b, c.Node(0).Addr(), DefaultBucket, []memdx.HelloFeature{memdx.FeatureXerror})
		vbs := make([]uint16, len(keys))
		for i, k := range keys {
			vbs[i] = bk.VbucketForKey(k)
		}
		benchGets(b, cl, keys, vbs, value)
	})

	b.Run("memcached", func(b *testing.B) {
		addr := os.Getenv("KV_MEMCACHED_ADDR")
		if addr == "" {
			b.Skip(`KV_MEMCACHED_ADDR is unset: run eval "$(scripts/memcached.sh up)" first`)
		}
		cl := dialRaw(b, addr)
		benchGets(b, cl, keys, make([]uint16, len(keys)), value)
	})
}

// benchGets stores every key, then runs b.N pipelined GETs over cl.
func benchGets(b *testing.B, cl *rawClient, keys [][]byte, vbs []uint16, value []byte) {
	for i, k := range keys {
		r := memdx.NewStore(memdx.OpSet, k, value, 0, 0)
		r.Vbucket = vbs[i]
		if p := cl.do(r); p.Status != memdx.StatusSuccess {
			b.Fatalf("SET %s: %s", k, p.Status)
		}
	}
	// Pre-encode windows so that the loop measures the server only.
	var windows [][]byte
	for w := 0; w < len(keys)/benchWindow; w++ {
		var buf []byte
		for j := 0; j < benchWindow; j++ {
			i := w*benchWindow + j
			r := memdx.NewGet(keys[i])
			r.Vbucket = vbs[i]
			var err error
			if buf, err = r.AppendTo(buf, uint32(i)); err != nil {
				b.Fatal(err)
			}
		}
		windows = append(windows, buf)
	}
	rbuf := make([]byte, 256<<10)
	_ = cl.nc.SetDeadline(time.Time{})
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	done := 0
	for w := 0; done < b.N; w++ {
		if _, err := cl.nc.Write(windows[w%len(windows)]); err != nil {
			b.Fatal(err)
		}
		got, have := 0, 0
		for got < benchWindow {
			n, err := cl.nc.Read(rbuf[have:])
			if err != nil {
				b.Fatal(err)
			}
			have += n
			off := 0
			for {
				h, err := memdx.DecodeHeader(rbuf[off:have], 0)
				if err != nil || have-off < h.PacketLen() {
					break
				}
				if h.VbucketOrStatus != 0 {
					b.Fatalf("GET answered status %#x", h.VbucketOrStatus)
				}
				off += h.PacketLen()
				got++
			}
			have = copy(rbuf, rbuf[off:have])
		}
		done += benchWindow
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(done)/elapsed.Seconds(), "gets/s")
}
