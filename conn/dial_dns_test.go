package conn

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/dnsctx/dnsctxtest"
	"github.com/kvwire/kvwire/memdx"
)

// A dial to a host name whose DNS server does not answer ends its lookup
// when its context ends: the lookup's queries do not go on (a goroutine of
// the net package, a socket) until the resolver's timeout past the dial,
// and so past the Close of the client that ended it.
func TestDialByNameEndsItsLookupWithTheContext(t *testing.T) {
	dns := dnsctxtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		c, err := Dial(ctx, "silent.kvwire.test:11210", Options{Resolver: dns.Resolver, Memcached: true, clock: newFakeClock()})
		if err == nil {
			c.Close()
		}
		dialed <- err
	}()
	dns.AwaitReading(t, 1)
	ended := time.Now()
	cancel()
	if err := recv(t, dialed); err == nil {
		t.Fatal("Dial to a name the DNS does not answer for succeeded")
	}
	dns.EndedWith(t, ended)
}

// So does the lookup the dial's connection attempts share (ConnectAttempt,
// on the fake clock here): a later attempt waits for the lookup in flight
// rather than start its own, and the Go resolver goes on with a lookup
// that more than one waited for until it ends, whoever's context ended:
// the dial's end ends it. (It made a query again, and another dial, once
// the first queries reached their 5 s deadline.)
func TestDialByNameEndsTheAttemptsSharedLookupWithTheContext(t *testing.T) {
	dns := dnsctxtest.New(t)
	fc := newFakeClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		c, err := Dial(ctx, "silent.kvwire.test:11210", Options{Resolver: dns.Resolver, Memcached: true, clock: fc})
		if err == nil {
			c.Close()
		}
		dialed <- err
	}()
	// The Go resolver asks for the name's A and AAAA records at once.
	dns.AwaitReading(t, 2)
	for range maxConnectAttempts {
		waitFor(t, "the attempt's timer", func() bool { return fc.armedWithin(DefaultConnectAttempt) })
		fc.Advance(DefaultConnectAttempt)
	}
	// The first attempt was given up for a fifth; the others wait for
	// the lookup it began.
	waitFor(t, "the attempt's timer", func() bool { return fc.armedWithin(DefaultConnectAttempt) })
	ended := time.Now()
	cancel()
	if err := recv(t, dialed); err == nil {
		t.Fatal("Dial to a name the DNS does not answer for succeeded")
	}
	dns.EndedWith(t, ended)
	if n := dns.Reading(); n != 2 {
		t.Errorf("%d DNS queries; want the 2 of the lookup the attempts share", n)
	}
}

// A lookup slower than the connection attempts' rotation (here, answered
// only once the first attempt was given up for a fifth: a DNS server
// that answers after 2 s, as one behind a dead first nameserver of
// resolv.conf does after that one's timeout) still ends the dial: the
// later attempts wait for the lookup in flight rather than start their
// own, each given up in its turn before its own answer came, so that the
// dial never connected.
func TestDialByNameOutlastsTheAttemptsOfASlowLookup(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			// The attempts that lose are closed before they send.
			p := newPeer(t, nc)
			if v, err := p.tryRead(); err == nil {
				g, n := p.read(), p.read()
				p.write(ok(v, "1.6.18"), res(g, memdx.StatusKeyNotFound, "Not found"), ok(n, ""))
				drain(nc)
			}
			nc.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	dns := dnsctxtest.New(t)
	fc := newFakeClock()
	dialed := make(chan error, 1)
	go func() {
		c, err := Dial(testCtx(t), net.JoinHostPort("slow.kvwire.test", port), Options{Resolver: dns.Resolver, Memcached: true, clock: fc})
		if err == nil {
			c.Close()
		}
		dialed <- err
	}()
	dns.AwaitReading(t, 2) // the first attempt's lookup: A and AAAA
	for range maxConnectAttempts {
		waitFor(t, "the attempt's timer", func() bool { return fc.armedWithin(DefaultConnectAttempt) })
		fc.Advance(DefaultConnectAttempt)
	}
	// The fifth attempt began, the first was given up.
	waitFor(t, "the attempt's timer", func() bool { return fc.armedWithin(DefaultConnectAttempt) })
	dns.Answer(t, 0, net.IPv4(127, 0, 0, 1))
	dns.Answer(t, 1, net.IPv4(127, 0, 0, 1))
	if err := recv(t, dialed); err != nil {
		t.Fatalf("Dial once the slow lookup answered: %v", err)
	}
	ln.Close()
	<-served
}
