//go:build unix

package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// These tests run StartGets over real TCP, where a caller writes its group
// itself (writeInline: one non-blocking attempt per chunk) and leaves what
// the socket does not take to the writer goroutine.

// smallBuf is the socket buffer size the tests ask for on both ends, so
// that a group of a few hundred KiB fills the path between them.
const smallBuf = 4 << 10

func setBuf(opt int) func(network, address string, rc syscall.RawConn) error {
	return func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, smallBuf)
		}); err != nil {
			return err
		}
		return serr
	}
}

// listenSmall listens on loopback with a small receive buffer (inherited by
// the accepted connections).
func listenSmall(t *testing.T) net.Listener {
	t.Helper()
	lc := net.ListenConfig{Control: setBuf(syscall.SO_RCVBUF)}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// dialSmall dials addr in memcached mode with a small send buffer; serve
// runs the server's side of the one connection (after its bootstrap) and
// the test waits for it to return.
func dialSmall(t *testing.T, ln net.Listener, serve func(p *peer)) *Conn {
	t.Helper()
	d := net.Dialer{Control: setBuf(syscall.SO_SNDBUF)}
	c := dialServed(t, ln, Options{DialContext: d.DialContext}, serve)
	if c.writer.raw == nil {
		t.Fatal("no non-blocking writer on a TCP connection")
	}
	return c
}

// dialServed dials ln in memcached mode with opts; the one connection it
// accepts is served its bootstrap, then serve. Cleanup closes the Conn and
// waits for serve to return.
func dialServed(t *testing.T, ln net.Listener, opts Options, serve func(p *peer)) *Conn {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := ln.Accept()
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		defer nc.Close()
		p := newPeer(t, nc)
		serveMemcachedBoot(p)
		serve(p)
	}()
	opts.Memcached = true
	c, err := Dial(testCtx(t), ln.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		wg.Wait()
	})
	return c
}

// waitWriterIdle waits until no Write is in progress (the bootstrap's may
// still be, after Dial has its answers), so that the next StartGets on an
// empty buffer writes inline.
func waitWriterIdle(t *testing.T, c *Conn) {
	t.Helper()
	waitFor(t, "the writer idle", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.writer.inWrite && c.writer.out == nil
	})
}

// bigKeys returns n keys of 200 bytes, "miss" ones every third.
func bigKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		k := fmt.Sprintf("%s-%d-", prefix, i)
		if i%3 == 1 {
			k = "miss-" + k
		}
		keys[i] = k + strings.Repeat("k", 200-len(k))
	}
	return keys
}

// A group far larger than the socket buffers, to a server that does not
// read yet: StartGets returns having written what the socket took at once,
// the writer goroutine writes the rest once the server reads, and the
// server receives every get whole and in order (consecutive opaques, the
// keys in order), then the NOOP.
func TestStartGetsInlineLeavesTheRestToTheWriter(t *testing.T) {
	ln := listenSmall(t)
	keys := bigKeys("big", 5000)
	release := make(chan struct{})
	got := make(chan []memdx.Packet, 1)
	c := dialSmall(t, ln, func(p *peer) {
		<-release
		reqs := make([]memdx.Packet, 0, len(keys)+1)
		for range len(keys) + 1 {
			r, err := p.tryRead()
			if err != nil {
				t.Errorf("server read after %d requests: %v", len(reqs), err)
				break
			}
			reqs = append(reqs, r)
		}
		got <- reqs
		if len(reqs) == len(keys)+1 {
			p.write(ok(reqs[0], "V0"), ok(reqs[len(keys)-1], "VL"), ok(reqs[len(keys)], ""))
		}
		p.tryRead() // until the client closes
	})
	waitWriterIdle(t, c)
	n := make(tagNotifier, 1)
	s := newTestSink()
	started := make(chan Pending, 1)
	go func() {
		tmpl := memdx.NewGet(nil)
		tmpl.OpCode = memdx.OpGetQ
		pg, err := c.StartGets(time.Time{}, &tmpl, byteKeys(keys...), s, n, 7, nil)
		if err != nil {
			t.Errorf("StartGets: %v", err)
		}
		started <- pg
	}()
	var pg Pending
	select {
	case pg = <-started:
	case <-time.After(testTimeout):
		close(release)
		t.Fatal("StartGets waited for a server that does not read")
	}
	c.mu.Lock()
	cl := callOf(c, pg.Opaque)
	state, written, start, end := cl.state, c.writer.written, cl.start, cl.end
	c.mu.Unlock()
	if written <= start || written >= end || state != reqSending {
		close(release)
		t.Fatalf("after StartGets: %d of the group's %d bytes written, state %s; the test needs a part written and the rest left",
			written, end, state)
	}
	close(release)
	reqs := recv(t, (<-chan []memdx.Packet)(got))
	if len(reqs) != len(keys)+1 {
		t.Fatalf("server read %d requests, want %d", len(reqs), len(keys)+1)
	}
	for i, r := range reqs[:len(keys)] {
		want := pg.Opaque - uint32(len(keys)-i)
		if r.Magic != memdx.MagicReq || r.OpCode != memdx.OpGetQ || string(r.Key) != keys[i] || r.Opaque != want {
			t.Fatalf("request %d: %s %s %.20q opaque %d; want GETQ %.20q opaque %d", i, r.Magic, r.OpCode, r.Key, r.Opaque, keys[i], want)
		}
	}
	if last := reqs[len(keys)]; last.OpCode != memdx.OpNoop || last.Opaque != pg.Opaque {
		t.Fatalf("last request %s opaque %d, want NOOP %d", last.OpCode, last.Opaque, pg.Opaque)
	}
	if tag := recv(t, (<-chan uint64)(n)); tag != 7 {
		t.Fatalf("tag %d", tag)
	}
	if answered, err := pg.Result(); !answered || err != nil {
		t.Fatalf("group: %v, %v", answered, err)
	}
	s.wantAnswers(t, 7, map[int]string{0: "V0", len(keys) - 1: "VL"})
}

// memcachedLike serves GET, GETQ and NOOP in order until the connection
// ends: a key starting with "miss" is not found (GET: KEY_ENOENT; GETQ:
// no answer), any other is found with the key as its value. It fails the
// test on anything else, which a request cut or interleaved with another
// would be. It reports the number of requests read.
func memcachedLike(t *testing.T, p *peer) int {
	count := 0
	var out []byte
	for {
		r, err := p.tryRead()
		if err != nil {
			var de *memdx.DecodeError
			if errors.As(err, &de) || errors.Is(err, memdx.ErrMalformed) {
				t.Errorf("server: request %d: %v", count, err)
			}
			return count
		}
		count++
		if r.Magic != memdx.MagicReq {
			t.Errorf("server: request %d: magic %s", count, r.Magic)
			return count
		}
		a := memdx.Packet{Magic: memdx.MagicRes, OpCode: r.OpCode, Opaque: r.Opaque}
		switch r.OpCode {
		case memdx.OpGet, memdx.OpGetQ:
			if strings.HasPrefix(string(r.Key), "miss") {
				if r.OpCode == memdx.OpGetQ {
					continue
				}
				a.Status = memdx.StatusKeyNotFound
			} else {
				a.Extras = []byte{0, 0, 0, 0}
				a.Value = r.Key
			}
		case memdx.OpNoop:
		default:
			t.Errorf("server: request %d: opcode %s", count, r.OpCode)
			return count
		}
		out = append(out[:0], encode(t, a)...)
		if _, err := p.nc.Write(out); err != nil {
			return count
		}
	}
}

// groupNotifier records the groups' ends by tag and signals each.
type groupNotifier struct {
	mu    sync.Mutex
	ends  map[uint64]int
	errs  map[uint64]error
	ended chan uint64
}

func newGroupNotifier(n int) *groupNotifier {
	return &groupNotifier{ends: map[uint64]int{}, errs: map[uint64]error{}, ended: make(chan uint64, n)}
}

func (g *groupNotifier) RequestEnded(tag uint64, _ bool, err error) bool {
	g.mu.Lock()
	g.ends[tag]++
	g.errs[tag] = err
	g.mu.Unlock()
	select {
	case g.ended <- tag:
	default:
	}
	return true
}

func (g *groupNotifier) Wake() {}

// Callers of Do and of StartGets, some groups larger than the socket
// buffers, and corked batches of Start, on one TCP connection at once: the
// server reads every request whole (it fails on a cut or interleaved one),
// each Do gets its own key's answer, each group exactly its hits.
func TestStartGetsInlineWithConcurrentCallersOnTCP(t *testing.T) {
	ln := listenSmall(t)
	served := make(chan int, 1)
	c := dialSmall(t, ln, func(p *peer) { served <- memcachedLike(t, p) })
	const (
		doers    = 4
		groupers = 3
		rounds   = 40
	)
	var sent sync.WaitGroup
	var mu sync.Mutex
	requests := 0
	count := func(n int) { mu.Lock(); requests += n; mu.Unlock() }
	ctx := testCtx(t)
	for g := range doers {
		sent.Add(1)
		go func() {
			defer sent.Done()
			for i := range rounds * 5 {
				key := fmt.Sprintf("do-%d-%d", g, i)
				if i%4 == 3 {
					key = "miss-" + key
				}
				r := doGet(ctx, c, key)
				count(1)
				switch {
				case strings.HasPrefix(key, "miss"):
					if r.err != nil || r.status != memdx.StatusKeyNotFound {
						t.Errorf("Do %s: %+v", key, r)
						return
					}
				case r.err != nil || r.value != key:
					t.Errorf("Do %s: %+v", key, r)
					return
				}
			}
		}()
	}
	for g := range groupers {
		sent.Add(1)
		go func() {
			defer sent.Done()
			n := newGroupNotifier(1)
			for i := range rounds {
				size := 1 + (i*37+g*11)%300
				if i%10 == 9 {
					size = 2500 // larger than the path's buffers
				}
				keys := bigKeys(fmt.Sprintf("g%d-%d", g, i), size)
				s := newTestSink()
				tag := uint64(g)<<32 | uint64(i)
				tmpl := memdx.NewGet(nil)
				tmpl.OpCode = memdx.OpGetQ
				pg, err := c.StartGets(time.Now().Add(testTimeout), &tmpl, byteKeys(keys...), s, n, tag, nil)
				if err != nil {
					t.Errorf("StartGets: %v", err)
					return
				}
				count(size + 1)
				if got := recv(t, (<-chan uint64)(n.ended)); got != tag {
					t.Errorf("ended tag %x, want %x", got, tag)
					return
				}
				if answered, err := pg.Result(); !answered || err != nil {
					t.Errorf("group %x: %v, %v", tag, answered, err)
					return
				}
				want := map[int]string{}
				for j, k := range keys {
					if !strings.HasPrefix(k, "miss") {
						want[j] = k
					}
				}
				s.wantAnswers(t, tag, want)
			}
		}()
	}
	sent.Add(1)
	go func() { // corked batches of quiet gets and their NOOP
		defer sent.Done()
		n := make(tagNotifier, 64)
		for i := range rounds {
			vals := make([]string, 8)
			var ps []Pending
			c.Cork()
			for j := range vals {
				key := fmt.Sprintf("cork-%d-%d", i, j)
				if j%2 == 1 {
					key = "miss-" + key
				}
				ps = append(ps, startGet(t, c, memdx.OpGetQ, key, n, uint64(j), &vals[j]))
			}
			noop := memdx.Request{OpCode: memdx.OpNoop}
			pn, err := c.Start(time.Time{}, &noop, nil, n, 100, nil)
			c.Uncork()
			if err != nil {
				t.Errorf("NOOP: %v", err)
				return
			}
			count(len(vals) + 1)
			for range len(vals) + 1 {
				recv(t, (<-chan uint64)(n))
			}
			for j, p := range ps {
				answered, err := p.Result()
				hit := j%2 == 0
				if err != nil || answered != hit || (hit && vals[j] != fmt.Sprintf("cork-%d-%d", i, j)) {
					t.Errorf("cork %d/%d: %v %v %q", i, j, answered, err, vals[j])
				}
			}
			pn.Result()
		}
	}()
	sent.Wait()
	if st := c.Stats(); st.StrayResponses != 0 {
		t.Errorf("%d strays", st.StrayResponses)
	}
	c.Close()
	if got := recv(t, (<-chan int)(served)); got != requests {
		t.Errorf("server read %d requests, the callers sent %d", got, requests)
	}
}

// Closing the connection while callers write groups inline, to a server
// that stops reading (so that inline writes stop part-way and the writer
// is blocked in its Write) or one that answers: Close returns, every group
// started ends exactly once, with its answer or the connection's end, and
// StartGets after the end is refused.
func TestStartGetsInlineTeardownDoesNotHang(t *testing.T) {
	for _, reading := range []bool{false, true} {
		t.Run(fmt.Sprintf("server reading %v", reading), func(t *testing.T) {
			ln := listenSmall(t)
			stop := make(chan struct{})
			var stopOnce sync.Once
			c := dialSmall(t, ln, func(p *peer) {
				if reading {
					memcachedLike(t, p)
					return
				}
				<-stop // reads nothing until the client has closed
			})
			t.Cleanup(func() { stopOnce.Do(func() { close(stop) }) })
			const callers = 4
			n := newGroupNotifier(1 << 12)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var started []Pending
			var tags []uint64
			firstDone := make(chan struct{})
			var once sync.Once
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 40 {
						keys := bigKeys(fmt.Sprintf("t%d-%d", g, i), 50+i%200)
						tag := uint64(g)<<32 | uint64(i)
						tmpl := memdx.NewGet(nil)
						tmpl.OpCode = memdx.OpGetQ
						pg, err := c.StartGets(time.Time{}, &tmpl, byteKeys(keys...), newTestSink(), n, tag, nil)
						if i == 3 {
							once.Do(func() { close(firstDone) })
						}
						if err != nil {
							if !errors.Is(err, kverr.ErrConnectionClosed) {
								t.Errorf("StartGets after the end: %v", err)
							}
							return
						}
						mu.Lock()
						started = append(started, pg)
						tags = append(tags, tag)
						mu.Unlock()
					}
				}()
			}
			<-firstDone
			closed := make(chan struct{})
			go func() { c.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(testTimeout):
				t.Fatal("Close did not return")
			}
			stopOnce.Do(func() { close(stop) })
			wg.Wait()
			n.mu.Lock()
			defer n.mu.Unlock()
			for i, tag := range tags {
				if n.ends[tag] != 1 {
					t.Fatalf("group %x ended %d times", tag, n.ends[tag])
				}
				answered, err := started[i].Result()
				if !answered && !errors.Is(err, kverr.ErrConnectionClosed) {
					t.Fatalf("group %x: %v, %v", tag, answered, err)
				}
			}
			if len(n.ends) != len(tags) {
				t.Fatalf("%d groups told of, %d started", len(n.ends), len(tags))
			}
		})
	}
}

// writerParked reports whether c's writer goroutine is parked: waiting
// for a kick (a channel receive), or holding a batch (a select).
func writerParked(c *Conn) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	frame := fmt.Sprintf("(*Conn).writeLoop(%p", c)
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, frame) {
			state := g[strings.Index(g, "["):]
			return strings.HasPrefix(state, "[select") || strings.HasPrefix(state, "[chan receive")
		}
	}
	return false
}

// Requests queued under a Cork wait for Uncork even when the writer
// goroutine, finishing a group a caller left to it, could take them in
// the same turn: they go out together with what follows them before the
// Uncork (here, a batch's quiet gets are not written without their NOOP).
func TestStartGetsInlineRestDoesNotWriteACorkedBatch(t *testing.T) {
	ln := listenSmall(t)
	keys := bigKeys("cork", 5000)
	release := make(chan struct{})
	c := dialSmall(t, ln, func(p *peer) {
		<-release
		for {
			if _, err := p.tryRead(); err != nil {
				return
			}
		}
	})
	defer close(release)
	n := make(tagNotifier, 4)
	waitWriterIdle(t, c)
	pg := startGets(t, c, memdx.OpGetQ, keys, newTestSink(), n, 1)
	c.mu.Lock()
	start := callOf(c, pg.Opaque).start
	inline := c.writer.written > start
	c.mu.Unlock()
	if !inline {
		t.Fatal("StartGets wrote nothing of the group itself")
	}
	waitFor(t, "the writer writing the group's rest", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.writer.inWrite
	})
	c.Cork()
	var v string
	pq := startGet(t, c, memdx.OpGetQ, "corked", n, 2, &v)
	release <- struct{}{}
	waitWritten(t, c, pg.Opaque)
	waitFor(t, "the writer parked", func() bool { return writerParked(c) })
	c.mu.Lock()
	state := callOf(c, pq.Opaque).state
	c.mu.Unlock()
	c.Uncork()
	if state != reqQueued {
		t.Fatalf("a quiet get queued under Cork is %s before Uncork", state)
	}
	waitWritten(t, c, pq.Opaque)
}
