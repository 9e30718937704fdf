package dnssrv

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/connstr"
)

// fakeResolver answers LookupSRV from a table keyed by the record's name.
type fakeResolver struct {
	records map[string][]*net.SRV
	err     error // returned for every lookup when set
	// partial is returned with the records, as *net.Resolver does when
	// it dropped some whose target is not a valid name.
	partial error
	asked   []string
	// deadline is the lookup context's deadline, as seen.
	deadline time.Time
}

func (f *fakeResolver) LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error) {
	f.deadline, _ = ctx.Deadline()
	f.asked = append(f.asked, service+"|"+proto+"|"+name)
	if f.err != nil {
		return "", nil, f.err
	}
	recs, ok := f.records[name]
	if !ok {
		return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	return name, recs, f.partial
}

func TestLookupGivesTargetsInOrder(t *testing.T) {
	r := &fakeResolver{records: map[string][]*net.SRV{
		"_couchbases._tcp.cb.example.cloud": {
			{Target: "node2.cb.example.cloud.", Port: 11207, Priority: 0},
			{Target: "node1.cb.example.cloud.", Port: 11207, Priority: 5},
			{Target: "node2.cb.example.cloud.", Port: 11207}, // a duplicate
			{Target: "node3.cb.example.cloud", Port: 0},      // the default port
			{Target: "::1", Port: 11300},                     // an IPv6 literal
			nil,
			{Target: ".", Port: 11207}, // "not available here": skipped
		},
	}}
	got, err := Lookup(context.Background(), r, "couchbases", "cb.example.cloud", 11207)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"node2.cb.example.cloud:11207", "node1.cb.example.cloud:11207", "node3.cb.example.cloud:11207", "[::1]:11300"}
	if !slices.Equal(got, want) {
		t.Errorf("targets %q, want %q", got, want)
	}
	// The record's whole name, service and proto empty: *net.Resolver
	// then looks it up as given.
	if !slices.Equal(r.asked, []string{"||_couchbases._tcp.cb.example.cloud"}) {
		t.Errorf("asked %q", r.asked)
	}
}

func TestLookupErrorsNameHostAndRecord(t *testing.T) {
	for _, tc := range []struct {
		name         string
		r            *fakeResolver
		notFound     bool
		wantInString []string
	}{
		{"no record", &fakeResolver{}, true,
			[]string{"no DNS SRV record _couchbase._tcp.cluster.test", "no such host"}},
		{"lookup failed", &fakeResolver{err: &net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}}, false,
			[]string{"DNS SRV lookup of _couchbase._tcp.cluster.test failed", "server misbehaving"}},
		{"no target", &fakeResolver{records: map[string][]*net.SRV{"_couchbase._tcp.cluster.test": {nil}}}, false,
			[]string{"DNS SRV record _couchbase._tcp.cluster.test lists no target"}},
		// RFC 2782: a target of "." says the service is decidedly not
		// available at this domain; the record does not "list no target".
		{"target .", &fakeResolver{records: map[string][]*net.SRV{"_couchbase._tcp.cluster.test": {{Target: ".", Port: 11210}}}}, false,
			[]string{`DNS SRV record _couchbase._tcp.cluster.test says the service is not available at this domain (its target is ".", RFC 2782)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Lookup(context.Background(), tc.r, "couchbase", "cluster.test", 11210)
			var le *LookupError
			if !errors.As(err, &le) {
				t.Fatalf("err %v (%T), want a *LookupError", err, err)
			}
			if le.Host != "cluster.test" || le.Record != "_couchbase._tcp.cluster.test" || le.NotFound != tc.notFound {
				t.Errorf("LookupError %+v", le)
			}
			for _, w := range tc.wantInString {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestSeedsResolveFallsBackToTheHost(t *testing.T) {
	given := []string{"cluster.test:11210"}
	s := &Seeds{Resolver: &fakeResolver{}, Service: "couchbase", Host: "cluster.test", DefaultPort: 11210}
	got, err := s.Resolve(context.Background(), given)
	if err != nil || !slices.Equal(got, given) {
		t.Fatalf("Resolve = %q, %v; want the seeds as given", got, err)
	}
	var le *LookupError
	if !errors.As(s.Err, &le) || !le.NotFound || s.Targets != nil {
		t.Errorf("Err %v, Targets %q: want the record's absence kept", s.Err, s.Targets)
	}

	s.Resolver = &fakeResolver{records: map[string][]*net.SRV{"_couchbase._tcp.cluster.test": {{Target: "n1.cluster.test.", Port: 12000}}}}
	got, err = s.Resolve(context.Background(), given)
	if err != nil || !slices.Equal(got, []string{"n1.cluster.test:12000"}) || s.Err != nil {
		t.Fatalf("Resolve = %q, %v (Err %v); want the record's target", got, err, s.Err)
	}
}

// The lookup may take half of what is left of the bootstrap's time, so
// that a resolver that never answers leaves the dials of the host itself
// the other half.
func TestSeedsResolveTakesHalfTheTimeLeft(t *testing.T) {
	r := &fakeResolver{}
	s := &Seeds{Resolver: r, Service: "couchbase", Host: "cluster.test", DefaultPort: 11210}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	outer, _ := ctx.Deadline()
	if _, err := s.Resolve(ctx, []string{"cluster.test:11210"}); err != nil {
		t.Fatal(err)
	}
	if r.deadline.IsZero() || r.deadline.After(outer.Add(-4*time.Second)) {
		t.Errorf("lookup deadline %v, want about 5 s before the bootstrap's %v", r.deadline, outer)
	}
}

// ForConnStr looks up a connection string's SRV host with its scheme's KV
// port, and nothing for a string that names none.
func TestForConnStr(t *testing.T) {
	for in, port := range map[string]int{"couchbase://cb.example.com": 11210, "couchbases://cb.example.cloud/b": 11207} {
		cs, err := connstr.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		r := &fakeResolver{}
		s := ForConnStr(cs, r, nil)
		if s == nil || s.Host != cs.SRVHost || s.Service != string(cs.Scheme) || s.DefaultPort != port || s.Resolver != r {
			t.Errorf("%s: %+v", in, s)
		}
	}
	cs, err := connstr.Parse("couchbase://h1,h2")
	if err != nil {
		t.Fatal(err)
	}
	if s := ForConnStr(cs, nil, nil); s != nil {
		t.Errorf("two hosts: %+v", s)
	}
}

// *net.Resolver drops the records whose target is not a valid name and
// returns the others with an error: the others are still the seeds (and
// the error says what was dropped); with none left, it is a lookup that
// gave no seeds.
func TestLookupKeepsTheTargetsTheResolverDidNotDrop(t *testing.T) {
	dropped := &net.DNSError{Err: "DNS response contained records which contain invalid names", Name: "_couchbase._tcp.cb.example.com"}
	r := &fakeResolver{partial: dropped, records: map[string][]*net.SRV{
		"_couchbase._tcp.cb.example.com": {{Target: "node1.cb.example.com.", Port: 11210}},
	}}
	got, err := Lookup(context.Background(), r, "couchbase", "cb.example.com", 11210)
	if want := []string{"node1.cb.example.com:11210"}; !slices.Equal(got, want) {
		t.Errorf("targets %q, want %q", got, want)
	}
	var le *LookupError
	if !errors.As(err, &le) || !errors.Is(err, dropped) {
		t.Errorf("error %v: want a *LookupError saying what was dropped", err)
	}
	s := &Seeds{Resolver: r, Service: "couchbase", Host: "cb.example.com", DefaultPort: 11210}
	seeds, err := s.Resolve(context.Background(), []string{"cb.example.com:11210"})
	if err != nil || !slices.Equal(seeds, []string{"node1.cb.example.com:11210"}) || s.Err != nil {
		t.Errorf("Resolve gave %q, %v (Err %v): want the record's target", seeds, err, s.Err)
	}

	r.records["_couchbase._tcp.cb.example.com"] = nil // every record dropped
	got, err = Lookup(context.Background(), r, "couchbase", "cb.example.com", 11210)
	if got != nil || !errors.As(err, &le) || !errors.Is(err, dropped) {
		t.Errorf("every record dropped: %q, %v: want no targets and the resolver's error", got, err)
	}
}

// RefreshName names the record only when Resolve took the seeds from it;
// Refresh looks the record up again and gives its current targets (the
// host's own fallback is not looked up again).
func TestSeedsRefresh(t *testing.T) {
	rec := "_couchbase._tcp.cluster.test"
	r := &fakeResolver{records: map[string][]*net.SRV{rec: {{Target: "a.test.", Port: 11210}}}}
	s := &Seeds{Resolver: r, Service: "couchbase", Host: "cluster.test", DefaultPort: 11210}
	if _, err := s.Resolve(context.Background(), []string{"cluster.test:11210"}); err != nil {
		t.Fatal(err)
	}
	if got := s.RefreshName(); got != rec {
		t.Fatalf("RefreshName %q, want %q", got, rec)
	}
	r.records[rec] = []*net.SRV{{Target: "b.test.", Port: 11210}, {Target: "c.test.", Port: 0}}
	got, err := s.Refresh(context.Background())
	if err != nil || !slices.Equal(got, []string{"b.test:11210", "c.test:11210"}) {
		t.Fatalf("Refresh: %q, %v", got, err)
	}
	delete(r.records, rec)
	if got, err := s.Refresh(context.Background()); len(got) != 0 || err == nil {
		t.Fatalf("Refresh of a record gone: %q, %v", got, err)
	}

	none := &Seeds{Resolver: &fakeResolver{}, Service: "couchbase", Host: "h.test", DefaultPort: 11210}
	if _, err := none.Resolve(context.Background(), []string{"h.test:11210"}); err != nil {
		t.Fatal(err)
	}
	if got := none.RefreshName(); got != "" {
		t.Fatalf("RefreshName %q of seeds the record did not give", got)
	}
}
