package httpconfig

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/leakcheck"
)

// dialer is the DialContext of a test's Client: it counts the dials in
// flight and the connections it opened that are not closed yet. slow
// makes a dial connect nowhere: it waits for its context to end, then
// takes a moment more to return, as a dial does whose end waits on
// something else (a DNS lookup, a socket's close).
type dialer struct {
	slow    bool
	dialing chan struct{} // one per dial begun
	inDial  atomic.Int64
	open    atomic.Int64
}

func newDialer(slow bool) *dialer { return &dialer{slow: slow, dialing: make(chan struct{}, 64)} }

func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.inDial.Add(1)
	defer d.inDial.Add(-1)
	d.dialing <- struct{}{}
	if d.slow {
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // not a margin: the time it takes
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	}
	nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.open.Add(1)
	return &countedConn{Conn: nc, open: &d.open}, nil
}

// countedConn counts its first Close.
type countedConn struct {
	net.Conn
	open   *atomic.Int64
	closed atomic.Bool
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.open.Add(-1)
	}
	return c.Conn.Close()
}

// requireNothingLeft fails t when, the moment the call that made the
// requests (after) has returned, a dial of d is still running or a
// connection it opened is still open: the client's Close returns then,
// and promises that nothing of the client is left. The goroutines of the
// requests, which may still be unwinding their last frames, must then
// end.
func requireNothingLeft(t *testing.T, d *dialer, after string) {
	t.Helper()
	if n := d.inDial.Load(); n != 0 {
		t.Errorf("%d dials still running when %s returned", n, after)
	}
	if n := d.open.Load(); n != 0 {
		t.Errorf("%d connections still open when %s returned", n, after)
	}
	for deadline := time.Now().Add(guard); ; time.Sleep(10 * time.Millisecond) {
		var left []string
		for _, g := range leakcheck.Foreign() {
			if strings.Contains(g, "net/http.(*Transport)") || strings.Contains(g, "net/http.(*persistConn)") ||
				strings.Contains(g, "httpconfig.(*Client)") || strings.Contains(g, "httpconfig.watch") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines of the requests left after %s returned:\n%s", after, strings.Join(left, "\n\n"))
		}
	}
}

// silentNode accepts connections and never answers; accepted receives each
// one. Its connections close when the test ends.
func silentNode(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 64)
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, nc)
			mu.Unlock()
			ch <- struct{}{}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, nc := range held {
			nc.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String(), ch
}

// Close promises that nothing of the client is left when it returns, and
// Close ends the config stream by ending Stream's context. Stream used to
// return with a dial of its request still running: net/http dials on a
// goroutine of its own, detached from the request's context, and cancels
// the dial only when asked to close idle connections, without waiting
// for it to end.
func TestStreamLeavesNothingRunningWhenItReturns(t *testing.T) {
	run := func(t *testing.T, d *dialer, addr string) {
		c := New(Config{Bucket: "default", DialContext: d.DialContext})
		started := d.dialing
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Stream(ctx, func() []string { return []string{addr} }, nil, nil, func([]byte, string, string) error { return nil })
		}()
		select {
		case <-started:
		case <-time.After(guard):
			cancel()
			<-done
			t.Fatal("the stream was not requested")
		}
		cancel()
		select {
		case <-done:
		case <-time.After(guard):
			t.Fatal("Stream did not return after its context ended")
		}
		requireNothingLeft(t, d, "Stream")
	}
	t.Run("silent node", func(t *testing.T) {
		addr, _ := silentNode(t)
		run(t, newDialer(false), addr)
	})
	t.Run("dial", func(t *testing.T) {
		run(t, newDialer(true), "127.0.0.1:1")
	})
}

// A Fetch that gives up (ConnectTimeout, or its context) returns only once
// its dial has: the bootstrap's Connect fails with nothing of it left
// running, where net/http's dial went on on its own after Fetch returned.
func TestFetchLeavesNothingRunningWhenItReturns(t *testing.T) {
	t.Run("connect timeout", func(t *testing.T) {
		d := newDialer(true)
		c := New(Config{Bucket: "default", ConnectTimeout: 10 * time.Millisecond, DialContext: d.DialContext})
		_, _, err := c.Fetch(context.Background(), "127.0.0.1:1")
		if err == nil || !strings.Contains(err.Error(), "no answer within the connect timeout (10ms)") {
			t.Fatalf("err %v", err)
		}
		requireNothingLeft(t, d, "Fetch")
	})
	t.Run("context", func(t *testing.T) {
		d := newDialer(true)
		c := New(Config{Bucket: "default", DialContext: d.DialContext})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-d.dialing; cancel() }()
		_, _, err := c.Fetch(ctx, "127.0.0.1:1")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		requireNothingLeft(t, d, "Fetch")
	})
}
