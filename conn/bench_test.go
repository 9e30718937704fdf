package conn

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// BenchmarkMemcachedGet compares, in one run against the same memcached
// (KV_MEMCACHED_ADDR):
//
//   - conn-64: 64 goroutines doing GETs through one Conn;
//   - conn-1: one goroutine doing GETs through one Conn (latency-bound);
//   - raw-window-64: the floor, a loop that writes 64 GETs in one Write and
//     reads the 64 answers, with no multiplexing at all.
//
// It reports ops/s, and for Conn the socket writes and reads per operation
// and allocations per operation. Run it with
//
//	eval "$(scripts/memcached.sh up)"; go test -run '^$' -bench MemcachedGet -benchtime 3s ./conn
func BenchmarkMemcachedGet(b *testing.B) {
	addr := memcachedEnv(b, "KV_MEMCACHED_ADDR")[0]
	key := []byte("conn-bench-get")
	value := make([]byte, 100)

	setup, err := Dial(context.Background(), addr, Options{Memcached: true})
	if err != nil {
		b.Fatal(err)
	}
	set := memdx.NewStore(memdx.OpSet, key, value, 0, 0)
	if err := setup.Do(context.Background(), &set, nil); err != nil {
		b.Fatal(err)
	}
	setup.Close()

	for _, g := range []int{64, 1} {
		b.Run(fmt.Sprintf("conn-%d", g), func(b *testing.B) { benchConn(b, addr, key, g) })
	}
	b.Run("raw-window-64", func(b *testing.B) { benchRaw(b, addr, key, 64) })
}

func benchConn(b *testing.B, addr string, key []byte, goroutines int) {
	c, err := Dial(context.Background(), addr, Options{Memcached: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	before := c.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		n := b.N / goroutines
		if g < b.N%goroutines {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := memdx.NewGet(key)
			var got int
			handle := func(p *memdx.Packet) error {
				got = len(p.Value)
				return memdx.NewStatusError(p)
			}
			for range n {
				if err := c.Do(ctx, &req, handle); err != nil {
					errs <- err
					return
				}
			}
			if n > 0 && got != 100 {
				errs <- io.ErrUnexpectedEOF
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	st := c.Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(st.Writes-before.Writes)/float64(b.N), "writes/op")
	b.ReportMetric(float64(st.Reads-before.Reads)/float64(b.N), "reads/op")
}

// benchRaw is the floor: GETs pipelined in windows of `window` on one
// socket, one Write per window, answers read until the window is complete.
func benchRaw(b *testing.B, addr string, key []byte, window int) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	var out []byte
	req := memdx.NewGet(key)
	for i := range window {
		out, _ = req.AppendTo(out, uint32(i+1))
	}
	in := make([]byte, 256<<10)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; {
		n := min(window, b.N-done)
		one := len(out) / window
		if _, err := nc.Write(out[:n*one]); err != nil {
			b.Fatal(err)
		}
		r, w := 0, 0
		for got := 0; got < n; {
			if w-r >= memdx.HeaderSize {
				size, err := memdx.PacketSize(in[r:w], 0)
				if err != nil {
					b.Fatal(err)
				}
				if w-r >= size {
					if in[r+6] != 0 || in[r+7] != 0 { // status
						b.Fatalf("status %x%x", in[r+6], in[r+7])
					}
					r += size
					got++
					continue
				}
			}
			w = copy(in, in[r:w])
			r = 0
			m, err := nc.Read(in[w:])
			if err != nil {
				b.Fatal(err)
			}
			w += m
		}
		done += n
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
}

// BenchmarkDoLoopback measures Do against the in-process echo server of
// the allocation tests (no memcached needed): 64 goroutines and 1, and 1
// whose context can be cancelled (a lone caller's path depends on it:
// readrole.go).
func BenchmarkDoLoopback(b *testing.B) {
	for _, bc := range []struct {
		g           int
		cancellable bool
	}{{64, false}, {1, false}, {1, true}} {
		g := bc.g
		name := fmt.Sprintf("goroutines-%d", g)
		if bc.cancellable {
			name += "-cancellable"
		}
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if bc.cancellable {
				ctx, cancel = context.WithCancel(ctx)
			}
			defer cancel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go echoGets(b, ln, true)
			c, err := Dial(context.Background(), ln.Addr().String(), Options{Memcached: true})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ReportAllocs()
			b.SetParallelism(g)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				req := memdx.NewGet([]byte("some-key"))
				handle := func(p *memdx.Packet) error { return nil }
				for pb.Next() {
					if err := c.Do(ctx, &req, handle); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkRequestBookkeeping is the connection's own work for one
// request, with no I/O and no other goroutine involved: queue (opaque,
// encode, the in-flight table, the wire list), hand-off and accept as a
// Write of it would, the answer's lookup by opaque and end, the outcome on
// done and the call back to the pool. It isolates the in-flight table and
// the transitions from the socket and the scheduler, whose costs swamp
// them in the other benchmarks.
func BenchmarkRequestBookkeeping(b *testing.B) {
	for _, withDeadline := range []bool{false, true} {
		name := "no-deadline"
		if withDeadline {
			name = "deadline"
		}
		b.Run(name, func(b *testing.B) {
			nc, peer := net.Pipe()
			defer peer.Close()
			c := newConn(nc, "pipe", ptr(Options{ProbeAfter: -1}.resolved()), "bench")
			defer c.Close()
			req := memdx.NewGet([]byte("some-key"))
			var deadline time.Time
			if withDeadline {
				deadline = time.Now().Add(time.Hour)
			}
			w := &c.writer
			b.ReportAllocs()
			for b.Loop() {
				cl := getCall()
				cl.op, cl.deadline = req.OpCode, deadline
				c.mu.Lock()
				if _, err := c.queue(cl, &req, true); err != nil {
					b.Fatal(err)
				}
				w.takeBatch() // the writer's part of a Write that takes it all
				w.writing = w.queued
				c.handOff()
				w.written = w.writing
				c.accept()
				w.spare, w.out = w.out[:0], nil
				got, ok := c.inflight.get(cl.opaque) // the reader's part
				if !ok || got.state != reqWritten {
					b.Fatalf("the request is not written in the table: %v", ok)
				}
				c.end(got)
				got.answered = true
				c.mu.Unlock()
				got.finish(nil, &c.reader.wake)
				if err := <-got.done; err != nil {
					b.Fatal(err)
				}
				c.leave(got)
			}
		})
	}
}
