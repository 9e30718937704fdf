package httpconfig

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/kvwire/kvwire/internal/conformance"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/leakcheck"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// guard bounds every wait for an event in these tests: it is how long a
// broken implementation takes to fail, not a margin anything is timed by.
const guard = 20 * time.Second

func readAll(t *testing.T, cr *configReader) (cfgs []string, skipped []int) {
	t.Helper()
	for {
		c, s, err := cr.next()
		if s > 0 {
			skipped = append(skipped, s)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("next: %v", err)
			}
			return cfgs, skipped
		}
		if c != nil {
			cfgs = append(cfgs, string(c))
		}
	}
}

// A real streamed body (couchbase-jvm-clients' test data: two configs of
// /pools/default/bucketsStreaming) splits into its two configs, whatever
// the reads' sizes.
func TestConfigReaderSplitsARealStream(t *testing.T) {
	body := conformance.Read(t, "configs/http_terse_streaming_two_configs.txt")
	for _, r := range []struct {
		name string
		r    io.Reader
	}{
		{"whole", bytes.NewReader(body)},
		{"one byte at a time", iotest.OneByteReader(bytes.NewReader(body))},
		{"half", iotest.HalfReader(bytes.NewReader(body))},
	} {
		t.Run(r.name, func(t *testing.T) {
			cfgs, skipped := readAll(t, newConfigReader(r.r, vbmap.MaxConfigSize))
			if len(cfgs) != 2 || len(skipped) != 0 {
				t.Fatalf("%d configs, %d skipped; want 2, 0", len(cfgs), len(skipped))
			}
			for i, want := range []vbmap.Version{{Rev: 18815}, {Rev: 18820}} {
				c, err := vbmap.Parse([]byte(cfgs[i]), "localhost")
				if err != nil {
					t.Fatalf("config %d: %v", i, err)
				}
				if c.Version() != want {
					t.Errorf("config %d: version %v, want %v", i, c.Version(), want)
				}
			}
		})
	}
}

func TestConfigReaderSkipsWhatIsOverTheLimit(t *testing.T) {
	big := strings.Repeat("x", 100)
	in := "{\"rev\":1}\n\n\n\n" + // a config
		"\n\n\n\n" + // an empty one (a separator alone)
		big + "\n\n\n\n" + // over the limit of 50: skipped whole
		"  {\"rev\":2}  \n\n\n\n" + // whitespace around it
		"{\"rev\":3}" // cut short by the end: dropped
	for _, r := range []io.Reader{strings.NewReader(in), iotest.OneByteReader(strings.NewReader(in))} {
		cr := newConfigReader(r, 50)
		cfgs, skipped := readAll(t, cr)
		if strings.Join(cfgs, "|") != `{"rev":1}|{"rev":2}` {
			t.Errorf("configs %q", cfgs)
		}
		if len(skipped) != 1 || skipped[0] != len(big) {
			t.Errorf("skipped %v, want [%d]", skipped, len(big))
		}
		if cap(cr.buf) > 50+len(separator)+8192 {
			t.Errorf("buffer grew to %d bytes for a limit of 50", cap(cr.buf))
		}
	}
}

// newMock starts a mock cluster with a couchbase bucket, a memcached
// bucket and a user who may use only the couchbase one.
func newMock(t *testing.T, o mockcluster.Options) *mockcluster.Cluster {
	t.Helper()
	o.Buckets = []mockcluster.BucketOptions{{Name: "default", NumVbuckets: 64}, {Name: "mc", Type: mockcluster.MemcachedBucket}}
	o.Users = []mockcluster.User{
		{Name: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Buckets: []string{"*"}},
		{Name: "app", Password: "secret", Buckets: []string{"default"}},
	}
	mc, err := mockcluster.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	return mc
}

func TestFetchReadsTheBucketConfig(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	for _, bucket := range []string{"default", "mc"} {
		c := New(Config{Bucket: bucket, Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword})
		raw, host, err := c.Fetch(context.Background(), mc.MgmtAddrs()[1])
		if err != nil {
			t.Fatalf("%s: %v", bucket, err)
		}
		if host != "127.0.0.1" {
			t.Errorf("%s: host %q", bucket, host)
		}
		cfg, err := vbmap.Parse(raw, host)
		if err != nil {
			t.Fatalf("%s: %v", bucket, err)
		}
		if cfg.BucketName() != bucket || cfg.NumServers() != 2 {
			t.Errorf("%s: config of %q with %d servers", bucket, cfg.BucketName(), cfg.NumServers())
		}
		if addr, _ := cfg.Nodes()[0].MgmtAddr("", false); addr != mc.MgmtAddrs()[0] {
			t.Errorf("%s: node 0's REST address %q, want %q", bucket, addr, mc.MgmtAddrs()[0])
		}
	}
}

func TestFetchRefusalsMatchTheKVSentinels(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	addr := mc.MgmtAddrs()[0]
	for _, tc := range []struct {
		name, bucket, user, pass string
		want                     error
		status                   int
		says                     string
	}{
		{"wrong password", "default", "app", "nope", kverr.ErrAuthenticationFailure, 401, "credentials were refused"},
		{"no such bucket", "nosuch", "app", "secret", kverr.ErrBucketNotFound, 403, "may not read"},
		{"no such bucket, admin", "nosuch", mockcluster.DefaultUser, mockcluster.DefaultPassword, kverr.ErrBucketNotFound, 404, "no such bucket"},
		{"bucket of another user", "mc", "app", "secret", kverr.ErrBucketNotFound, 403, "may not read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{Bucket: tc.bucket, Username: tc.user, Password: tc.pass})
			_, _, err := c.Fetch(context.Background(), addr)
			var he *Error
			if !errors.As(err, &he) || he.Status != tc.status || !errors.Is(err, tc.want) {
				t.Fatalf("err %v; want HTTP %d matching %v", err, tc.status, tc.want)
			}
			if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "/pools/default/b/"+tc.bucket) ||
				!strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not name the node, the path and %q", err, tc.says)
			}
		})
	}
}

func TestFetchOverHTTPS(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1, TLS: true})
	addr := mc.MgmtTLSAddrs()[0]
	c := New(Config{Bucket: "default", Username: "app", Password: "secret", TLS: &tls.Config{RootCAs: mc.RootCAs()}})
	raw, _, err := c.Fetch(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vbmap.Parse(raw, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	// A CA the client does not trust: the KV dial's TLS error.
	c = New(Config{Bucket: "default", Username: "app", Password: "secret", TLS: &tls.Config{RootCAs: x509.NewCertPool()}})
	_, _, err = c.Fetch(context.Background(), addr)
	if !errors.Is(err, kverr.ErrTLS) {
		t.Fatalf("err %v, want ErrTLS", err)
	}
	// HTTPS to the plain HTTP port.
	c = New(Config{Bucket: "default", Username: "app", Password: "secret", TLS: &tls.Config{RootCAs: mc.RootCAs()}})
	_, _, err = c.Fetch(context.Background(), mc.MgmtAddrs()[0])
	if !errors.Is(err, kverr.ErrTLS) {
		t.Fatalf("err %v, want ErrTLS", err)
	}
}

func TestFetchRefusesAConfigOverTheLimit(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := New(Config{Bucket: "default", Username: "app", Password: "secret", MaxConfigSize: 100})
	_, _, err := c.Fetch(context.Background(), mc.MgmtAddrs()[0])
	if err == nil || !strings.Contains(err.Error(), "over the size limit (100 bytes)") {
		t.Fatalf("err %v", err)
	}
}

// A node that accepts the connection and never answers fails the fetch
// after ConnectTimeout, saying so.
func TestFetchGivesUpOnASilentNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, nc)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, nc := range held {
			nc.Close()
		}
		mu.Unlock()
	}()
	c := New(Config{Bucket: "default", ConnectTimeout: 50 * time.Millisecond})
	_, _, err = c.Fetch(context.Background(), ln.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "no answer within the connect timeout (50ms)") {
		t.Fatalf("err %v", err)
	}
}

// delivery is one config a stream delivered.
type delivery struct {
	ver        vbmap.Version
	host, addr string
}

// collect is a Sink that parses what it receives and sends it on.
func collect(t *testing.T) (Sink, <-chan delivery) {
	ch := make(chan delivery, 64)
	return func(raw []byte, host, addr string) error {
		c, err := vbmap.Parse(raw, host)
		if err != nil {
			t.Errorf("streamed config from %s: %v", addr, err)
			return nil
		}
		ch <- delivery{c.Version(), host, addr}
		return nil
	}, ch
}

func next(t *testing.T, ch <-chan delivery) delivery {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(guard):
		t.Fatal("no config streamed")
		return delivery{}
	}
}

// The stream delivers the current config, then every config the cluster
// publishes; when its node stops, it is reopened on the next node, which
// delivers the current config and the next ones.
func TestStreamFollowsConfigsAndMovesOnWhenItsNodeStops(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 3})
	addrs := mc.MgmtAddrs()
	// The real clock times the reopen waits here: no redial may move the
	// stream however slow the machine.
	c := New(Config{Bucket: "default", Username: "app", Password: "secret", RedialPeriod: 24 * time.Hour})
	sink, ch := collect(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Stream(ctx, func() []string { return addrs }, nil, nil, sink)
	}()
	defer func() { cancel(); <-done }()

	first := next(t, ch)
	if first.addr != addrs[0] || first.host != "127.0.0.1" {
		t.Fatalf("first config from %s (host %s), want %s", first.addr, first.host, addrs[0])
	}
	r, err := mc.StartRebalance(mockcluster.RebalanceOptions{Nodes: []int{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if d := next(t, ch); !d.ver.Newer(first.ver) || d.addr != addrs[0] {
		t.Fatalf("after the rebalance started: %+v, want a config newer than %v from %s", d, first.ver, addrs[0])
	}
	mc.Node(0).Stop()
	moved := next(t, ch)
	if moved.addr != addrs[1] {
		t.Fatalf("after node 0 stopped: config from %s, want %s", moved.addr, addrs[1])
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	if d := next(t, ch); !d.ver.Newer(moved.ver) || d.addr != addrs[1] {
		t.Fatalf("after the rebalance finished: %+v, want a config newer than %v from %s", d, moved.ver, addrs[1])
	}
}

// When no node serves a stream, the rounds of attempts wait 100 ms,
// doubling, on the Clock.
func TestStreamWaitsBetweenFailedRounds(t *testing.T) {
	// A server that refuses every request: 401.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	clock := retry.NewFakeClock(time.Unix(1e9, 0))
	var mu sync.Mutex
	asked := 0
	c := New(Config{Bucket: "default", Clock: clock})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Stream(ctx, func() []string {
			mu.Lock()
			asked++
			mu.Unlock()
			return []string{addr, addr}
		}, nil, nil, func([]byte, string, string) error { t.Error("delivered a config"); return nil })
	}()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(context.Background(), guard)
	defer wcancel()
	for _, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		if err := clock.BlockUntilTimers(wctx, 1); err != nil {
			t.Fatal(err)
		}
		if got := clock.Timers()[0].Sub(clock.Now()); got != want {
			t.Fatalf("round wait %v, want %v", got, want)
		}
		clock.Advance(want)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked < 3 {
		t.Errorf("nodes asked %d times, want one per round", asked)
	}
}

// A stream that delivers and then ends soon after it opened (a proxy that
// closes every response, a node that drops the stream) is not reopened at
// once, again and again, flooding the cluster manager: the reopens wait
// 100 ms, doubling to 10 s, on the Clock. A stream that lived 10 s or
// more is reopened at once, as a node that stops after serving for a
// while is replaced at once.
func TestStreamBacksOffFromStreamsThatEndAtOnce(t *testing.T) {
	// Each open stream also arms its redial period (streamRedial), told
	// apart from the reopen waits.
	requests := make(chan chan struct{}, 16)
	s := startStream(t, newArmClock(), requests, endOnCue(requests), streamRunConfig{})
	clock, request, wait := s.clock, s.request, s.wait
	for _, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		close(request()) // it delivers and ends at once
		if got := wait(); got != want {
			t.Fatalf("reopen after %v, want %v", got, want)
		}
		select {
		case <-requests:
			t.Fatal("reopened before its wait was over")
		default:
		}
		clock.Advance(want)
	}
	end := request()
	clock.Advance(10 * time.Second) // a stream that lived
	close(end)
	close(request()) // reopened at once: no wait on the clock
}

// armClock is a FakeClock that also reports the duration of every timer
// armed on it, in order, once it is armed.
type armClock struct {
	*retry.FakeClock
	armed chan time.Duration
}

func newArmClock() armClock {
	return armClock{retry.NewFakeClock(time.Unix(1e9, 0)), make(chan time.Duration, 1024)}
}

func (c armClock) NewTimer(d time.Duration) retry.Timer {
	t := c.FakeClock.NewTimer(d)
	c.armed <- d
	return t
}

// A node that sends the stream's headers and then nothing (a frozen
// process whose kernel still acknowledges, a half-dead proxy) cannot hold
// the stream, and so the client's view of the cluster, for longer than the
// redial period (10 s, on the Clock): the stream is then reopened on the
// next node, at once (a stream closed for its period did not "end at
// once"), whether or not the frozen node sent a config first. A healthy
// stream is as silent when no config changes (ns_server writes only when
// the config changed), so only its age can tell. A shorter period set in
// Config is no more a stream that ended at once.
func TestStreamReopensAStreamOpenForTheRedialPeriod(t *testing.T) {
	for _, tc := range []struct {
		name   string
		first  bool
		period time.Duration // 0: the default
	}{
		{"frozen before its first config", false, 0},
		{"frozen after its first config", true, 0},
		{"frozen after its first config, period of 1s", true, time.Second},
	} {
		first := tc.first
		period := cmp.Or(tc.period, 10*time.Second)
		t.Run(tc.name, func(t *testing.T) {
			frozen := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusOK)
				if first {
					w.Write([]byte(`{"rev":1}` + "\n\n\n\n"))
				}
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}))
			defer frozen.Close()
			healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte(`{"rev":2}` + "\n\n\n\n"))
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}))
			defer healthy.Close()
			addrs := []string{strings.TrimPrefix(frozen.URL, "http://"), strings.TrimPrefix(healthy.URL, "http://")}
			clock := newArmClock()
			c := New(Config{Bucket: "default", Clock: clock, RedialPeriod: tc.period})
			type got struct{ raw, addr string }
			ch := make(chan got, 16)
			sink := func(raw []byte, _, addr string) error { ch <- got{string(raw), addr}; return nil }
			next := func() got {
				t.Helper()
				select {
				case g := <-ch:
					return g
				case <-time.After(guard):
					t.Fatal("no config streamed")
					return got{}
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.Stream(ctx, func() []string { return addrs }, nil, nil, sink)
			}()
			defer func() { cancel(); <-done }()
			if first {
				if d := next(); d.addr != addrs[0] || d.raw != `{"rev":1}` {
					t.Fatalf("first config %+v, want rev 1 from %s", d, addrs[0])
				}
			}
			select {
			case d := <-clock.armed:
				if d != period {
					t.Fatalf("timer of %v armed on the open stream, want the redial period %v", d, period)
				}
			case <-time.After(guard):
				t.Fatal("no redial period armed on the open stream")
			}
			clock.Advance(period)
			// No further Advance: reopened at once, without a back-off.
			if d := next(); d.addr != addrs[1] || d.raw != `{"rev":2}` {
				t.Fatalf("after the redial period: %+v, want rev 2 from %s", d, addrs[1])
			}
		})
	}
}
