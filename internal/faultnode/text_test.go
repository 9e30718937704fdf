package faultnode_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
)

// textProxied starts a proxy in front of a bare TCP listener standing for a
// text-protocol node, and returns the proxy and a channel of the node-side
// ends of the connections the proxy opens: the test plays the node.
func textProxied(t *testing.T) (*faultnode.Proxy, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ups := make(chan net.Conn, 16)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			nc.SetDeadline(time.Now().Add(testTimeout))
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			ups <- nc
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, nc := range conns {
			nc.Close()
		}
		mu.Unlock()
	})
	p, err := faultnode.NewProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, ups
}

// textRelayed starts a proxy with textProxied, dials it and sends first
// from the client; it returns the proxy, its node's connections, the
// client's connection and the node's end of it, which first reached.
func textRelayed(t *testing.T, first string) (*faultnode.Proxy, <-chan net.Conn, net.Conn, net.Conn) {
	t.Helper()
	p, ups := textProxied(t)
	c := textDial(t, p.Addr())
	send(t, c, first)
	up := recv(t, ups)
	expect(t, up, first)
	return p, ups, c, up
}

// textDial connects a plain TCP client to the proxy.
func textDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(testTimeout))
	return nc
}

func send(t *testing.T, nc net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(nc, s); err != nil {
		t.Fatal(err)
	}
}

// expect reads len(want) bytes from nc and fails unless they are want.
func expect(t *testing.T, nc net.Conn, want string) {
	t.Helper()
	b := make([]byte, len(want))
	if _, err := io.ReadFull(nc, b); err != nil {
		t.Fatalf("reading %q: got %q, %v", want, b, err)
	}
	if string(b) != want {
		t.Fatalf("got %q; want %q", b, want)
	}
}

// waitFor polls cond until it holds, for a counter that has no event.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestProxyRelaysTextConnectionBothWays(t *testing.T) {
	p, _, c, up := textRelayed(t, "gets a b\r\n")
	send(t, up, "VALUE a 0 1 7\r\nx\r\nEND\r\n")
	expect(t, c, "VALUE a 0 1 7\r\nx\r\nEND\r\n")
	// Multi-gets are counted by line, however the reads cut them.
	send(t, c, "ge")
	send(t, c, "ts b\r\nversion\r\nget c d\r\ngetx\r\n")
	expect(t, up, "gets b\r\nversion\r\nget c d\r\ngetx\r\n")
	if n := p.TextGets(); n != 3 {
		t.Fatalf("TextGets %d, want 3", n)
	}

	// Large bytes both ways at once, cut however the reads fall.
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(rand.Uint32())
	}
	errs := make(chan error, 2)
	go func() { _, err := c.Write(big); errs <- err }()
	go func() { _, err := up.Write(big); errs <- err }()
	for _, nc := range []net.Conn{up, c} {
		got := make([]byte, len(big))
		if _, err := io.ReadFull(nc, got); err != nil || !bytes.Equal(got, big) {
			t.Fatalf("1 MiB through the proxy: equal %v, %v", bytes.Equal(got, big), err)
		}
	}
	for range 2 {
		if err := recv(t, errs); err != nil {
			t.Fatal(err)
		}
	}
	if p.Accepted() != 1 || len(p.Conns()) != 1 || p.Forwarded() != 0 || p.Requests(memdx.OpCode('g')) != 0 {
		t.Fatalf("accepted %d, open %d, forwarded %d, requests %d; want 1, 1, 0, 0",
			p.Accepted(), len(p.Conns()), p.Forwarded(), p.Requests(memdx.OpCode('g')))
	}
}

// The node closing its end closes the client's, before and after the
// client's first byte.
func TestProxyClosesTextClientWhenNodeCloses(t *testing.T) {
	p, ups := textProxied(t)
	for _, first := range []string{"", "version\r\n"} {
		c := textDial(t, p.Addr())
		if first != "" {
			send(t, c, first)
		}
		up := recv(t, ups)
		expect(t, up, first)
		up.Close()
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("first bytes %q: read %d bytes, %v after the node closed; want an end", first, n, err)
		}
	}
}

// The black hole drops text bytes both ways; after it, the relay resumes
// with the next bytes and what was dropped never arrives.
func TestProxyBlackholeDropsTextBytes(t *testing.T) {
	p, _, c, up := textRelayed(t, "version\r\n")

	p.Blackhole(true)
	send(t, c, "get lost\r\n")
	send(t, up, "VERSION 1\r\n")
	waitFor(t, "21 bytes in the black hole", func() bool { return p.TextDropped() == 21 })
	p.Blackhole(false)

	send(t, c, "get after\r\n")
	expect(t, up, "get after\r\n")
	send(t, up, "END\r\n")
	expect(t, c, "END\r\n")
	if p.Dropped() != 0 {
		t.Fatalf("Dropped %d; want 0 (it counts packets)", p.Dropped())
	}
}

func TestProxyResetAndRefuseNewApplyToTextConnections(t *testing.T) {
	p, ups, c, up := textRelayed(t, "version\r\n")
	p.Reset()
	if _, err := c.Read(make([]byte, 1)); !isReset(err) {
		t.Fatalf("client read after Reset: %v; want a connection reset", err)
	}
	if n, err := up.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("node read after Reset: %d bytes, %v; want the proxy's end closed", n, err)
	}

	p.RefuseNew(true)
	// The reset may come before the dial returns, or after.
	if refused, err := net.Dial("tcp", p.Addr()); err == nil {
		refused.SetDeadline(time.Now().Add(testTimeout))
		n, err := refused.Read(make([]byte, 1))
		refused.Close()
		if n != 0 || err == nil || os.IsTimeout(err) {
			t.Fatalf("read on a refused connection: %d bytes, %v; want it reset", n, err)
		}
	}
	p.RefuseNew(false)
	c = textDial(t, p.Addr())
	send(t, c, "version\r\n")
	up = recv(t, ups)
	expect(t, up, "version\r\n")
	send(t, up, "VERSION 1\r\n")
	expect(t, c, "VERSION 1\r\n")
	if p.Accepted() != 3 {
		t.Fatalf("accepted %d connections; want 3", p.Accepted())
	}
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

func TestProxyStallHoldsTextBytesUntilRelease(t *testing.T) {
	p, _, c, up := textRelayed(t, "gets a\r\n")
	st := p.StallNextResponse(3)
	send(t, up, "VALUE a 0 1 7\r\nx\r\nEND\r\n")
	recv(t, st.Reached())
	expect(t, c, "VAL")
	// Nothing more comes while stalled. A short read deadline can only
	// miss a defect under load, never fail a correct proxy.
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read during the stall: %d bytes, %v", n, err)
	}
	c.SetReadDeadline(time.Now().Add(testTimeout))
	st.Release()
	expect(t, c, "UE a 0 1 7\r\nx\r\nEND\r\n")
}

// Close returns with text connections open (one relaying with a stall
// held, one that has sent nothing yet); leakcheck (TestMain) proves their
// goroutines ended.
func TestProxyCloseEndsTextConnections(t *testing.T) {
	p, ups, c, up := textRelayed(t, "gets a\r\n")
	st := p.StallNextResponse(3)
	send(t, up, "VALUE a 0 1 7\r\nx\r\nEND\r\n")
	recv(t, st.Reached())
	idle := textDial(t, p.Addr())
	recv(t, ups)
	p.Close()
	for _, nc := range []net.Conn{c, idle} {
		if _, err := io.ReadAll(nc); err != nil && !isReset(err) {
			t.Fatalf("client after Close: %v; want the connection closed", err)
		}
	}
	if len(p.Conns()) != 0 {
		t.Fatalf("%d connections open after Close", len(p.Conns()))
	}
}
