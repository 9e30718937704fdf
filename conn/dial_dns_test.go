package conn

import (
	"context"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/dnsctx/dnsctxtest"
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

// So does the lookup of each connection attempt (ConnectAttempt, on the
// fake clock here): a later attempt looks the name up on its own rather
// than joining the lookup in flight, which the Go resolver then goes on
// with until it ends (whoever's context ended) since more than one dial
// waits for it.
func TestDialByNameEndsEveryAttemptsLookupWithTheContext(t *testing.T) {
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
	waitFor(t, "the attempt's timer", func() bool { return fc.armedWithin(DefaultConnectAttempt) })
	fc.Advance(DefaultConnectAttempt)
	dns.AwaitReading(t, 3) // the second attempt's own
	ended := time.Now()
	cancel()
	if err := recv(t, dialed); err == nil {
		t.Fatal("Dial to a name the DNS does not answer for succeeded")
	}
	dns.EndedWith(t, ended)
}
