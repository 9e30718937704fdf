package dnssrv

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// guard bounds the waits for an event in these tests: only a broken
// implementation reaches it.
const guard = 20 * time.Second

// Through the Go resolver (a DNS server on the loopback): a record set
// mixing ports and priorities gives every target, trailing dot removed,
// each at its own port, in the resolver's order, which sorts by priority
// (RFC 0011 has clients ignore priority and weight for which targets are
// seeds: all of them are); couchbases:// looks up _couchbases._tcp only.
func TestLookupThroughGoResolver(t *testing.T) {
	dns := newLoopbackDNS(t, map[string][]*net.SRV{
		"_couchbases._tcp.cb.test": {
			{Target: "n3.cb.test.", Port: 11207, Priority: 20},
			{Target: "n1.cb.test.", Port: 11207, Priority: 0},
			{Target: "n2.cb.test.", Port: 12207, Priority: 10, Weight: 5},
		},
		"_couchbase._tcp.cb.test": {{Target: "plain.cb.test.", Port: 11210}},
	})
	got, err := Lookup(context.Background(), dns.resolver(), "couchbases", "cb.test", 11207)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"n1.cb.test:11207", "n2.cb.test:12207", "n3.cb.test:11207"}; !slices.Equal(got, want) {
		t.Errorf("targets %q, want %q", got, want)
	}
	if asked := dns.names(); !slices.Equal(asked, []string{"_couchbases._tcp.cb.test"}) {
		t.Errorf("asked %q", asked)
	}
}

// A name without the record is NotFound (NXDOMAIN), so the host is dialed
// as written; a record whose only target is "." (RFC 2782: the service is
// decidedly not available at this domain) gives no seeds and says so.
func TestLookupThroughGoResolverNoSeeds(t *testing.T) {
	dns := newLoopbackDNS(t, map[string][]*net.SRV{
		"_couchbase._tcp.down.test": {{Target: ".", Port: 0}},
	})
	_, err := Lookup(context.Background(), dns.resolver(), "couchbase", "nosuch.test", 11210)
	var le *LookupError
	if !errors.As(err, &le) || !le.NotFound {
		t.Errorf("no record: %v, want a NotFound *LookupError", err)
	}
	got, err := Lookup(context.Background(), dns.resolver(), "couchbase", "down.test", 11210)
	if got != nil || !errors.As(err, &le) || le.NotFound {
		t.Fatalf("target .: %q, %v, want no targets and a *LookupError", got, err)
	}
	if want := `says the service is not available at this domain (its target is ".", RFC 2782)`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	s := &Seeds{Resolver: dns.resolver(), Service: "couchbase", Host: "down.test", DefaultPort: 11210}
	seeds, err := s.Resolve(context.Background(), []string{"down.test:11210"})
	if err != nil || !slices.Equal(seeds, []string{"down.test:11210"}) || s.Err == nil {
		t.Errorf("Resolve = %q, %v (Err %v): want the host as written and the reason kept", seeds, err, s.Err)
	}
}

// A DNS server that never answers: the lookup ends with the half of the
// bootstrap's time it is given, however long the resolver configuration
// would wait, and the seeds given are returned.
func TestSeedsResolveBoundedWhenTheServerIsSilent(t *testing.T) {
	dns := newLoopbackDNS(t, nil, "_couchbase._tcp.silent.test")
	s := &Seeds{Resolver: dns.resolver(), Service: "couchbase", Host: "silent.test", DefaultPort: 11210}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	seeds, err := s.Resolve(ctx, []string{"silent.test:11210"})
	if err != nil || !slices.Equal(seeds, []string{"silent.test:11210"}) {
		t.Fatalf("Resolve = %q, %v", seeds, err)
	}
	var le *LookupError
	if !errors.As(s.Err, &le) || le.NotFound || !slices.Contains(dns.names(), "_couchbase._tcp.silent.test") {
		t.Errorf("Err %v, asked %q: want the failed lookup of the record kept", s.Err, dns.names())
	}
	if !errors.Is(s.Err, context.DeadlineExceeded) {
		t.Errorf("Err %v: want the lookup ended by its deadline", s.Err)
	}
}

// The client's Close ends a lookup of the seeds again by ending its
// context, and so does that lookup's own bound (on the client's clock).
// The Go resolver does not end a query in flight when its context ends:
// it waits for the answer until the query's deadline (the resolver
// configuration's timeout, 5 s by default), and only then sees the
// context's end; Close waited as long for a DNS server that does not
// answer, as when the network that cut the cluster off cut the DNS server
// off too. A lookup through a *net.Resolver now ends when its context
// does: well before the query's deadline, which the resolver's Dial is
// told.
func TestLookupEndsWithItsContextThroughGoResolver(t *testing.T) {
	dns := newLoopbackDNS(t, nil, "_couchbase._tcp.silent.test")
	var mu sync.Mutex
	var deadline time.Time // the first query's
	r := dns.resolver()
	dial := r.Dial
	r.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		if dl, ok := ctx.Deadline(); ok && deadline.IsZero() {
			deadline = dl
		}
		mu.Unlock()
		return dial(ctx, network, addr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Lookup(ctx, r, "couchbase", "silent.test", 11210)
		done <- err
	}()
	for wait := time.After(guard); len(dns.names()) == 0; {
		select {
		case <-wait:
			t.Fatal("the query never reached the server")
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(guard):
		t.Fatal("the lookup did not end")
	}
	ended := time.Now()
	mu.Lock()
	dl := deadline
	mu.Unlock()
	if dl.IsZero() || !ended.Before(dl) {
		t.Fatalf("the lookup ended at %v, not before its query's deadline %v: it waited for the silent server after its context ended",
			ended.Format(time.StampMilli), dl.Format(time.StampMilli))
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
}
