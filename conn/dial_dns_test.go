package conn

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// silentDNS is a DNS server on loopback that reads the queries and never
// answers, and a Go resolver that sends every query there. Each query's
// connection records the deadline the resolver gave it, when its read
// ended and when it was closed.
type silentDNS struct {
	pc       net.PacketConn
	resolver *net.Resolver
	mu       sync.Mutex
	queries  []*dnsQuery
}

type dnsQuery struct {
	*net.UDPConn
	mu       sync.Mutex
	deadline time.Time // the resolver's own (the first one set)
	readEnd  time.Time
	closed   chan struct{}
	once     sync.Once
}

func (q *dnsQuery) SetDeadline(t time.Time) error {
	q.mu.Lock()
	if q.deadline.IsZero() {
		q.deadline = t
	}
	q.mu.Unlock()
	return q.UDPConn.SetDeadline(t)
}

func (q *dnsQuery) Read(b []byte) (int, error) {
	n, err := q.UDPConn.Read(b)
	q.mu.Lock()
	q.readEnd = time.Now()
	q.mu.Unlock()
	return n, err
}

func (q *dnsQuery) Close() error {
	q.once.Do(func() { close(q.closed) })
	return q.UDPConn.Close()
}

func newSilentDNS(t *testing.T) *silentDNS {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	s := &silentDNS{pc: pc}
	s.resolver = &net.Resolver{PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, "udp", pc.LocalAddr().String())
			if err != nil {
				return nil, err
			}
			q := &dnsQuery{UDPConn: nc.(*net.UDPConn), closed: make(chan struct{})}
			s.mu.Lock()
			s.queries = append(s.queries, q)
			s.mu.Unlock()
			return q, nil
		}}
	return s
}

// reading is how many queries were given their deadline (the resolver
// sets it before it sends the query and waits for the answer).
func (s *silentDNS) reading() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.queries {
		q.mu.Lock()
		if !q.deadline.IsZero() {
			n++
		}
		q.mu.Unlock()
	}
	return n
}

// endedWithTheDial checks that every query the dial sent was closed, its
// read ended before the resolver's own deadline for it: by the dial's
// context, not by the resolver's timeout (5 s by default) past it.
func (s *silentDNS) endedWithTheDial(t *testing.T, ended time.Time) {
	t.Helper()
	s.mu.Lock()
	queries := append([]*dnsQuery(nil), s.queries...)
	s.mu.Unlock()
	if len(queries) == 0 {
		t.Fatal("the dial sent no DNS query")
	}
	for i, q := range queries {
		recv(t, q.closed)
		q.mu.Lock()
		dl, end := q.deadline, q.readEnd
		q.mu.Unlock()
		if !end.IsZero() && !end.Before(dl) {
			t.Errorf("query %d waited for the silent DNS server until its own deadline, %v after the dial's context ended", i, dl.Sub(ended))
		}
	}
}

// A dial to a host name whose DNS server does not answer ends its lookup
// when its context ends: the lookup's queries do not go on (a goroutine of
// the net package, a socket) until the resolver's timeout past the dial,
// and so past the Close of the client that ended it.
func TestDialByNameEndsItsLookupWithTheContext(t *testing.T) {
	dns := newSilentDNS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		c, err := Dial(ctx, "silent.kvwire.test:11210", Options{Resolver: dns.resolver, Memcached: true, clock: newFakeClock()})
		if err == nil {
			c.Close()
		}
		dialed <- err
	}()
	waitFor(t, "a DNS query", func() bool { return dns.reading() > 0 })
	ended := time.Now()
	cancel()
	if err := recv(t, dialed); err == nil {
		t.Fatal("Dial to a name the DNS does not answer for succeeded")
	}
	dns.endedWithTheDial(t, ended)
}

// So does the lookup of each connection attempt (ConnectAttempt, on the
// fake clock here): a later attempt looks the name up on its own rather
// than joining the lookup in flight, which the Go resolver then goes on
// with until it ends (whoever's context ended) since more than one dial
// waits for it.
func TestDialByNameEndsEveryAttemptsLookupWithTheContext(t *testing.T) {
	dns := newSilentDNS(t)
	fc := newFakeClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		c, err := Dial(ctx, "silent.kvwire.test:11210", Options{Resolver: dns.resolver, Memcached: true, clock: fc})
		if err == nil {
			c.Close()
		}
		dialed <- err
	}()
	// The Go resolver asks for the name's A and AAAA records at once.
	waitFor(t, "the first attempt's DNS queries", func() bool { return dns.reading() >= 2 })
	waitFor(t, "the attempt's timer", func() bool { return fc.armedWithin(DefaultConnectAttempt) })
	fc.Advance(DefaultConnectAttempt)
	waitFor(t, "the second attempt's own DNS query", func() bool { return dns.reading() > 2 })
	ended := time.Now()
	cancel()
	if err := recv(t, dialed); err == nil {
		t.Fatal("Dial to a name the DNS does not answer for succeeded")
	}
	dns.endedWithTheDial(t, ended)
}
