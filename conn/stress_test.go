package conn

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// chaosServer reads requests and answers some at once, holds some back to
// answer later (out of order), never answers others, and drops the
// connection after a given number of requests (or when none came for a
// while and some were never answered). It records every request it read in
// full.
type chaosServer struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (s *chaosServer) serve(t *testing.T, nc net.Conn, seed uint64, closeAfter int) {
	defer nc.Close()
	rng := rand.New(rand.NewPCG(seed, 1))
	p := newPeer(t, nc)
	var held []memdx.Packet
	never := 0 // requests read and never to be answered
	answer := func(req memdx.Packet) bool {
		_, err := nc.Write(encode(t, ok(req, string(req.Key))))
		return err == nil
	}
	for n := 0; n < closeAfter; {
		// When every client waits for an answer, nothing more arrives:
		// send the held answers, or, with none held, drop the connection
		// if some request will never be answered (its caller may wait for
		// nothing else). With every request answered, a quiet moment only
		// means the clients are slow (Dial finishing its bootstrap on a busy
		// machine, say): keep reading.
		nc.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		req, err := p.tryRead()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			switch {
			case len(held) > 0:
				for _, h := range held {
					if !answer(h) {
						return
					}
				}
				held = held[:0]
				continue
			case never == 0:
				continue
			}
		}
		if err != nil {
			return
		}
		n++
		s.mu.Lock()
		s.seen[string(req.Key)] = true
		s.mu.Unlock()
		switch x := rng.IntN(10); {
		case x < 5:
			if !answer(req) {
				return
			}
		case x < 9:
			held = append(held, req)
		default: // never answered
			never++
		}
		if len(held) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(held))
			if !answer(held[i]) {
				return
			}
			held = append(held[:i], held[i+1:]...)
		}
		if rng.IntN(8) == 0 {
			runtime.Gosched() // let the client queue up and cancel
		}
	}
}

// Every request ends exactly once, a request the server read in full is
// never reported as not written, and a response always reaches the request
// it answers — under concurrency, cancellation and deadlines (and both at
// once), out-of-order and missing answers, and connections dropped at
// arbitrary points. The stack variant makes the connection crowded with a
// request in flight, so that callers submit (submit.go).
func TestExactlyOnceUnderChaos(t *testing.T) {
	t.Run("lock", func(t *testing.T) { exactlyOnceUnderChaos(t, 0) })
	t.Run("stack", func(t *testing.T) { exactlyOnceUnderChaos(t, 1) })
}

func exactlyOnceUnderChaos(t *testing.T, submitAt int) {
	rounds := 12
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		s := &chaosServer{seen: map[string]bool{}}
		dial, servers := pipeDialer(nil)
		var srv sync.WaitGroup
		srv.Add(1)
		go func() {
			defer srv.Done()
			nc := <-servers
			p := newPeer(t, nc)
			serveMemcachedBoot(p)
			s.serve(t, nc, uint64(round), 100+round*30)
		}()
		c, err := Dial(testCtx(t), "chaos:1", Options{Memcached: true, DialContext: dial, MaxPending: 64, submitAt: submitAt})
		if err != nil {
			t.Fatal(err)
		}

		const workers, each = 8, 60
		type outcome struct {
			key     string
			calls   int32
			value   string
			err     error
			written bool
		}
		outcomes := make(chan outcome, workers*each)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for i := range each {
					key := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					// A third of the requests are cancelled very early, a
					// third a little later, a third wait until the server
					// drops the connection (the bound is only a safety net).
					d := 10 * time.Second
					switch rng.IntN(3) {
					case 0:
						d = time.Duration(rng.IntN(300)) * time.Microsecond
					case 1:
						d = 20 * time.Millisecond
					}
					// The bound comes from a context, from DoDeadline's
					// deadline (expired by the connection's sweeper), or from
					// both, racing each other.
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					var deadline time.Time
					switch rng.IntN(3) {
					case 0:
						ctx, cancel = context.WithTimeout(context.Background(), d)
					case 1:
						deadline = time.Now().Add(d)
					default:
						ctx, cancel = context.WithTimeout(context.Background(), d)
						deadline = time.Now().Add(d + time.Duration(rng.IntN(200)-100)*time.Microsecond)
					}
					var o outcome
					o.key = key
					var calls atomic.Int32
					req := memdx.NewGet([]byte(key))
					_, o.err = c.DoDeadline(ctx, deadline, &req, func(p *memdx.Packet) error {
						calls.Add(1)
						o.value = string(p.Value)
						return nil
					}, nil)
					cancel()
					o.calls = calls.Load()
					var re *RequestError
					if errors.As(o.err, &re) {
						o.written = re.Written
					}
					outcomes <- o
				}
			}()
		}
		wg.Wait()
		close(outcomes)
		submitted := c.Stats().Submitted
		c.Close()
		srv.Wait()
		if submitAt > 0 && submitted == 0 {
			t.Fatal("no request went through the submission stack")
		}

		var answered, failed, unwritten int
		for o := range outcomes {
			switch {
			case o.err == nil:
				answered++
				if o.calls != 1 || o.value != o.key {
					t.Fatalf("%s: answered with %d handle calls, value %q", o.key, o.calls, o.value)
				}
			default:
				failed++
				if o.calls != 0 {
					t.Fatalf("%s: error %v after %d handle calls", o.key, o.err, o.calls)
				}
				var re *RequestError
				if !errors.As(o.err, &re) {
					t.Fatalf("%s: %v is not a *RequestError", o.key, o.err)
				}
				if !o.written {
					unwritten++
					s.mu.Lock()
					seen := s.seen[o.key]
					s.mu.Unlock()
					if seen {
						t.Fatalf("%s: reported not written (%v), but the server read it", o.key, o.err)
					}
				}
			}
		}
		if answered+failed != workers*each {
			t.Fatalf("%d outcomes for %d requests", answered+failed, workers*each)
		}
		t.Logf("round %d: %d answered, %d failed (%d not written), %d submitted", round, answered, failed, unwritten, submitted)
	}
}

// Do allocates nothing on its hot path: the pending record and its channel
// are pooled, the request is encoded into the connection's buffer, the
// response is decoded in place. A lone caller whose context can be
// cancelled reads for itself with its context watched (readFor), which
// costs context.AfterFunc's two allocations (its context and its stop
// function). The count is exact (testing.AllocsPerRun rounds down). Under
// -race, sync.Pool drops a quarter of what is put back, so a pooled record
// is sometimes made anew: the bound is looser there.
func TestDoAllocs(t *testing.T) {
	c := dialEchoGets(t)
	req := memdx.NewGet([]byte("some-key"))
	var n int
	handle := func(p *memdx.Packet) error { n += len(p.Value); return nil }
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		limit float64
	}{
		{"context.Background", context.Background(), 0.01},
		{"a context that can be cancelled", cctx, 2.01},
	} {
		do := func() {
			if err := c.Do(tc.ctx, &req, handle); err != nil {
				t.Fatal(err)
			}
		}
		for range 100 { // warm the pool, the map and the buffers
			do()
		}
		const runs = 5000
		perOp := mallocsPer(runs, do)
		t.Logf("%s: %.4f allocations per Do (%d calls)", tc.name, perOp, runs)
		limit := tc.limit
		if raceEnabled {
			limit += 1.5
		}
		if perOp > limit {
			t.Fatalf("%s: %.4f allocations per Do, want at most %g", tc.name, perOp, limit)
		}
	}
}

// dialEchoGets dials, in memcached mode, a local echoGets server that
// closes with the test.
func dialEchoGets(t *testing.T) *Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go echoGets(t, ln, true)
	c, err := Dial(testCtx(t), ln.Addr().String(), Options{Memcached: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echoGets serves one connection: the memcached bootstrap (when boot is
// set), then a GET answer (flags 0, value "value") for every request, all
// answers to one read in one write. It allocates nothing per request, so
// that allocation counts taken while it runs are the client's.
func echoGets(t testing.TB, ln net.Listener, boot bool) {
	nc, err := ln.Accept()
	if err != nil {
		return
	}
	defer nc.Close()
	p := newPeer(t, nc)
	if boot {
		serveMemcachedBoot(p)
	}
	tmpl := encode(t, memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpGet, Extras: []byte{0, 0, 0, 0}, Value: []byte("value")})
	buf := make([]byte, 256<<10)
	out := make([]byte, 0, 256<<10)
	r, w := 0, copy(buf, p.buf) // what the bootstrap read ahead
	for {
		out = out[:0]
		for w-r >= memdx.HeaderSize {
			size, err := memdx.PacketSize(buf[r:w], 0)
			if err != nil || w-r < size {
				break
			}
			out = append(out, tmpl...)
			copy(out[len(out)-len(tmpl)+12:], buf[r+12:r+16]) // the opaque
			r += size
		}
		if len(out) > 0 {
			if _, err := nc.Write(out); err != nil {
				return
			}
		}
		w = copy(buf, buf[r:w])
		r = 0
		n, err := nc.Read(buf[w:])
		if err != nil {
			return
		}
		w += n
	}
}

// mallocsPer is the process's allocations per call of do, over runs calls
// after a GC: exact, where testing.AllocsPerRun rounds down.
func mallocsPer(runs int, do func()) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		do()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs)
}
