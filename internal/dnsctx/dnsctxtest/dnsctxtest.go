// Package dnsctxtest is a DNS server for tests that never answers unless
// told to (Answer), and a Go resolver that sends every query there: a test
// checks that a lookup through it ends with its context (internal/dnsctx),
// not at the resolver's timeout past it.
package dnsctxtest

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"
)

// Waits bounds every wait of Silent's: only a lookup that does not end
// reaches it.
const Waits = 10 * time.Second

// Silent is a DNS server on loopback that reads the queries and never
// answers, with Resolver sending every query there. Each query's
// connection records the deadline the resolver gave it, when its read
// ended and when it was closed.
type Silent struct {
	// Resolver is a Go resolver (PreferGo) asking the silent server.
	Resolver *net.Resolver
	pc       net.PacketConn
	mu       sync.Mutex
	queries  []*query
	received map[string][]byte // the query each query connection sent, by its address
}

type query struct {
	*net.UDPConn
	mu       sync.Mutex
	deadline time.Time // the resolver's own (the first one set)
	readEnd  time.Time
	closed   chan struct{}
	once     sync.Once
}

func (q *query) SetDeadline(t time.Time) error {
	q.mu.Lock()
	if q.deadline.IsZero() {
		q.deadline = t
	}
	q.mu.Unlock()
	return q.UDPConn.SetDeadline(t)
}

func (q *query) Read(b []byte) (int, error) {
	n, err := q.UDPConn.Read(b)
	q.mu.Lock()
	q.readEnd = time.Now()
	q.mu.Unlock()
	return n, err
}

func (q *query) Close() error {
	q.once.Do(func() { close(q.closed) })
	return q.UDPConn.Close()
}

// New starts a silent server, closed when t ends.
func New(t testing.TB) *Silent {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Silent{pc: pc, received: make(map[string][]byte)}
	read := make(chan struct{})
	go s.receive(read)
	t.Cleanup(func() {
		pc.Close()
		<-read
	})
	s.Resolver = &net.Resolver{PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, "udp", pc.LocalAddr().String())
			if err != nil {
				return nil, err
			}
			q := &query{UDPConn: nc.(*net.UDPConn), closed: make(chan struct{})}
			s.mu.Lock()
			s.queries = append(s.queries, q)
			s.mu.Unlock()
			return q, nil
		}}
	return s
}

// Reading is how many queries were given their deadline (the resolver
// sets it before it sends the query and waits for the answer).
func (s *Silent) Reading() int {
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

// AwaitReading waits until at least n queries are reading.
func (s *Silent) AwaitReading(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(Waits)
	for s.Reading() < n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d DNS queries (%d)", n, s.Reading())
		}
		time.Sleep(time.Millisecond)
	}
}

// EndedWith checks that every query sent was closed, its read ended
// before the resolver's own deadline for it: by the lookup's context,
// which ended at ended, not by the resolver's timeout (5 s by default)
// past it.
func (s *Silent) EndedWith(t testing.TB, ended time.Time) {
	t.Helper()
	s.mu.Lock()
	queries := append([]*query(nil), s.queries...)
	s.mu.Unlock()
	if len(queries) == 0 {
		t.Fatal("no DNS query was sent")
	}
	for i, q := range queries {
		select {
		case <-q.closed:
		case <-time.After(Waits):
			t.Fatalf("DNS query %d still open %v after the lookup's context ended", i, Waits)
		}
		q.mu.Lock()
		dl, end := q.deadline, q.readEnd
		q.mu.Unlock()
		if !end.IsZero() && !end.Before(dl) {
			t.Errorf("DNS query %d waited for the silent server until its own deadline, %v after the lookup's context ended", i, dl.Sub(ended))
		}
	}
}

// receive records the queries the server reads, until it is closed.
func (s *Silent) receive(done chan<- struct{}) {
	defer close(done)
	for {
		b := make([]byte, 1500)
		n, from, err := s.pc.ReadFrom(b)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.received[from.String()] = b[:n]
		s.mu.Unlock()
	}
}

// Answer answers the query sent on the ith query connection (in the order
// the resolver dialed them), late as the test chooses: an A query with ip
// (an IPv4 address), any other with no record (the name has none of that
// type). It waits until the server has read the query.
func (s *Silent) Answer(t testing.TB, i int, ip net.IP) {
	t.Helper()
	deadline := time.Now().Add(Waits)
	for {
		s.mu.Lock()
		var q []byte
		var to net.Addr
		if i < len(s.queries) {
			to = s.queries[i].LocalAddr()
			q = s.received[to.String()]
		}
		s.mu.Unlock()
		if q != nil {
			if _, err := s.pc.WriteTo(answer(t, q, ip), to); err != nil {
				t.Fatalf("answering DNS query %d: %v", i, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for DNS query %d", i)
		}
		time.Sleep(time.Millisecond)
	}
}

// answer is the response to query q: its question, and for an A query
// one record with ip.
func answer(t testing.TB, q []byte, ip net.IP) []byte {
	t.Helper()
	const header = 12
	end := header
	for end < len(q) && q[end] != 0 { // the question's name, uncompressed
		end += 1 + int(q[end])
	}
	end += 1 + 4 // the root label, type, class
	if end > len(q) {
		t.Fatalf("a DNS query too short: % x", q)
	}
	r := append([]byte(nil), q[:end]...)
	binary.BigEndian.PutUint16(r[2:], 0x8180) // a response, recursion desired and available, NOERROR
	binary.BigEndian.PutUint16(r[4:], 1)      // the question
	binary.BigEndian.PutUint16(r[6:], 0)      // answers, set below
	binary.BigEndian.PutUint32(r[8:], 0)      // no authority, no additional records
	if qtype := binary.BigEndian.Uint16(q[end-4:]); qtype == 1 {
		binary.BigEndian.PutUint16(r[6:], 1)
		r = append(r, 0xc0, header)              // the question's name
		r = binary.BigEndian.AppendUint16(r, 1)  // A
		r = binary.BigEndian.AppendUint16(r, 1)  // IN
		r = binary.BigEndian.AppendUint32(r, 60) // TTL
		r = binary.BigEndian.AppendUint16(r, 4)
		r = append(r, ip.To4()...)
	}
	return r
}
