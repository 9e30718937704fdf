package conn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// Tests against real memcached (Debian's package), started by
// scripts/memcached.sh: `make test` does it, or
//
//	eval "$(scripts/memcached.sh up)"; go test -race ./conn
//
// They skip when the variables are missing, except under
// KVWIRE_REQUIRE_MEMCACHED=1 (CI), where they fail.

const memcachedHowTo = `run them with: eval "$(scripts/memcached.sh up)" && go test ./conn (or make test)`

func requireMemcached() bool { return os.Getenv("KVWIRE_REQUIRE_MEMCACHED") == "1" }

// memcachedEnv returns the named variables or skips (fails in CI).
func memcachedEnv(t testing.TB, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		v := os.Getenv(n)
		if v == "" {
			if requireMemcached() {
				t.Fatalf("%s is not set and KVWIRE_REQUIRE_MEMCACHED=1: memcached tests must run; %s", n, memcachedHowTo)
			}
			t.Skipf("%s is not set: memcached tests skipped; %s", n, memcachedHowTo)
		}
		out = append(out, v)
	}
	return out
}

func plainAddr(t testing.TB) string { return memcachedEnv(t, "KV_MEMCACHED_ADDR")[0] }

// uniqueKey keeps tests (and parallel runs of other packages on the same
// memcached) apart.
func uniqueKey(t testing.TB, name string) []byte {
	return fmt.Appendf(nil, "conn-%s-%s-%d", t.Name(), name, time.Now().UnixNano())
}

func dialMemcached(t *testing.T, addr string, opts Options) *Conn {
	t.Helper()
	c, err := Dial(testCtx(t), addr, opts)
	if err != nil {
		t.Fatalf("Dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// op runs one request and returns a copy of its response.
func op(t *testing.T, c *Conn, req memdx.Request) memdx.Packet {
	t.Helper()
	var out memdx.Packet
	err := c.Do(testCtx(t), &req, func(p *memdx.Packet) error {
		out = clonePacket(*p)
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", req.OpCode, err)
	}
	return out
}

func wantStatus(t *testing.T, p memdx.Packet, want memdx.Status) {
	t.Helper()
	if p.Status != want {
		t.Fatalf("%s: status %s (%q), want %s", p.OpCode, p.Status, p.Value, want)
	}
}

func TestMemcachedPlainOps(t *testing.T) {
	c := dialMemcached(t, plainAddr(t), Options{Memcached: true})
	if !c.Memcached() || c.ServerVersion() == "" || c.Features().Len() != 0 || c.ErrorMap() != nil {
		t.Fatalf("memcached=%v version=%q features=%v errmap=%v", c.Memcached(), c.ServerVersion(), c.Features(), c.ErrorMap())
	}
	k := uniqueKey(t, "k")
	get := func() memdx.Packet { return op(t, c, memdx.NewGet(k)) }

	wantStatus(t, get(), memdx.StatusKeyNotFound)
	set := op(t, c, memdx.NewStore(memdx.OpSet, k, []byte("v1"), 0xcafe, 0))
	wantStatus(t, set, memdx.StatusSuccess)
	g := get()
	wantStatus(t, g, memdx.StatusSuccess)
	if flags, err := memdx.DecodeGetFlags(&g); string(g.Value) != "v1" || err != nil || flags != 0xcafe || g.Cas != set.Cas {
		t.Fatalf("GET: value %q flags %x (%v) cas %d, want v1 cafe cas %d", g.Value, flags, err, g.Cas, set.Cas)
	}
	wantStatus(t, op(t, c, memdx.NewStore(memdx.OpAdd, k, []byte("x"), 0, 0)), memdx.StatusKeyExists)
	wantStatus(t, op(t, c, memdx.NewStore(memdx.OpReplace, k, []byte("v2"), 0, 0)), memdx.StatusSuccess)
	stale := memdx.NewStore(memdx.OpReplace, k, []byte("v3"), 0, 0)
	stale.Cas = set.Cas // replaced since: the CAS is stale
	wantStatus(t, op(t, c, stale), memdx.StatusKeyExists)
	wantStatus(t, op(t, c, memdx.NewConcat(memdx.OpAppend, k, []byte(">"))), memdx.StatusSuccess)
	wantStatus(t, op(t, c, memdx.NewConcat(memdx.OpPrepend, k, []byte("<"))), memdx.StatusSuccess)
	if g := get(); string(g.Value) != "<v2>" {
		t.Fatalf("after append/prepend: %q", g.Value)
	}
	wantStatus(t, op(t, c, memdx.NewTouch(k, 3600)), memdx.StatusSuccess)
	gat := op(t, c, memdx.NewGAT(k, 3600))
	wantStatus(t, gat, memdx.StatusSuccess)
	if string(gat.Value) != "<v2>" {
		t.Fatalf("GAT value %q", gat.Value)
	}
	wantStatus(t, op(t, c, memdx.NewDelete(k)), memdx.StatusSuccess)
	wantStatus(t, get(), memdx.StatusKeyNotFound)
	wantStatus(t, op(t, c, memdx.NewDelete(k)), memdx.StatusKeyNotFound)
	wantStatus(t, op(t, c, memdx.NewStore(memdx.OpReplace, k, []byte("v"), 0, 0)), memdx.StatusKeyNotFound)
	wantStatus(t, op(t, c, memdx.NewStore(memdx.OpAdd, k, []byte("v"), 0, 0)), memdx.StatusSuccess)

	ck := uniqueKey(t, "counter")
	counter := func(o memdx.OpCode, delta uint64) uint64 {
		p := op(t, c, memdx.NewCounter(o, ck, delta, 100, 0))
		wantStatus(t, p, memdx.StatusSuccess)
		v, err := memdx.DecodeCounterValue(&p)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := counter(memdx.OpIncrement, 5); v != 100 { // created with the initial value
		t.Fatalf("first INCREMENT = %d, want 100", v)
	}
	if v := counter(memdx.OpIncrement, 5); v != 105 {
		t.Fatalf("INCREMENT = %d, want 105", v)
	}
	if v := counter(memdx.OpDecrement, 7); v != 98 {
		t.Fatalf("DECREMENT = %d, want 98", v)
	}
	wantStatus(t, op(t, c, memdx.NewCounter(memdx.OpIncrement, uniqueKey(t, "nocreate"), 1, 0, memdx.NoCreate)), memdx.StatusKeyNotFound)

	wantStatus(t, op(t, c, memdx.NewNoop()), memdx.StatusSuccess)
	v := op(t, c, memdx.NewVersion())
	if v.Status != memdx.StatusSuccess || string(v.Value) != c.ServerVersion() {
		t.Fatalf("VERSION %s %q, bootstrap said %q", v.Status, v.Value, c.ServerVersion())
	}

	stats := map[string]string{}
	req := memdx.NewStat(nil)
	err := c.Do(testCtx(t), &req, func(p *memdx.Packet) error {
		if p.Status != memdx.StatusSuccess {
			return memdx.NewStatusError(p)
		}
		if k, v, done := memdx.DecodeStat(p); !done {
			stats[string(k)] = string(v)
		}
		return nil
	})
	if err != nil || stats["version"] != c.ServerVersion() || stats["pid"] == "" {
		t.Fatalf("STAT: %v; %d stats, version %q pid %q", err, len(stats), stats["version"], stats["pid"])
	}
	if c.Pending() != 0 || c.Err() != nil {
		t.Fatalf("pending %d, err %v", c.Pending(), c.Err())
	}
}

// Many requests from many goroutines through one connection: each gets its
// own answer.
func TestMemcachedConcurrent(t *testing.T) {
	c := dialMemcached(t, plainAddr(t), Options{Memcached: true})
	const workers, each = 16, 50
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range each {
				k := uniqueKey(t, fmt.Sprintf("w%d-%d", w, i))
				val := fmt.Sprintf("value-%d-%d", w, i)
				req := memdx.NewStore(memdx.OpSet, k, []byte(val), 0, 60)
				if err := c.Do(context.Background(), &req, nil); err != nil {
					errs <- err
					return
				}
				var got string
				g := memdx.NewGet(k)
				if err := c.Do(context.Background(), &g, func(p *memdx.Packet) error {
					got = string(p.Value)
					return memdx.NewStatusError(p)
				}); err != nil || got != val {
					errs <- fmt.Errorf("GET %s = %q, %v; want %q", k, got, err, val)
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := recv(t, errs); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Stats()
	t.Logf("%d requests in %d writes", 2*workers*each, st.Writes)
}

// FLUSH empties the whole server, so it runs against a memcached of its own
// rather than the shared one.
func TestMemcachedFlush(t *testing.T) {
	plainAddr(t) // skip (or fail in CI) like the other memcached tests
	addr := privateMemcached(t)
	c := dialMemcached(t, addr, Options{Memcached: true})
	k := uniqueKey(t, "k")
	wantStatus(t, op(t, c, memdx.NewStore(memdx.OpSet, k, []byte("v"), 0, 0)), memdx.StatusSuccess)
	wantStatus(t, op(t, c, memdx.NewFlush()), memdx.StatusSuccess)
	wantStatus(t, op(t, c, memdx.NewGet(k)), memdx.StatusKeyNotFound)
}

// privateMemcached starts a memcached for this test alone and returns its
// address; it is killed at the end of the test.
func privateMemcached(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		if requireMemcached() {
			t.Fatalf("memcached binary not found: %v", err)
		}
		t.Skipf("memcached binary not found (%v); %s", err, memcachedHowTo)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	args := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-m", "8", "-t", "1"}
	if os.Getuid() == 0 {
		args = append(args, "-u", "nobody")
	}
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitFor(t, "the private memcached to listen", func() bool {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
	return addr
}

func saslEnv(t *testing.T) (addr, user, pass string) {
	v := memcachedEnv(t, "KV_MEMCACHED_SASL_ADDR", "KV_MEMCACHED_USER", "KV_MEMCACHED_PASS")
	return v[0], v[1], v[2]
}

func TestMemcachedSASLPlain(t *testing.T) {
	addr, user, pass := saslEnv(t)
	c := dialMemcached(t, addr, Options{Memcached: true, Username: user, Password: pass, AllowPlainAuthWithoutTLS: true})
	if c.Mechanism() != memdx.MechPlain {
		t.Fatalf("mechanism %q", c.Mechanism())
	}
	k := uniqueKey(t, "k")
	wantStatus(t, op(t, c, memdx.NewStore(memdx.OpSet, k, []byte("secret"), 0, 60)), memdx.StatusSuccess)
	if g := op(t, c, memdx.NewGet(k)); string(g.Value) != "secret" {
		t.Fatalf("GET %q", g.Value)
	}
}

func TestMemcachedSASLWrongPassword(t *testing.T) {
	addr, user, _ := saslEnv(t)
	_, err := Dial(testCtx(t), addr, Options{Memcached: true, Username: user, Password: "wrong", AllowPlainAuthWithoutTLS: true})
	var ae *AuthError
	if !errors.As(err, &ae) || ae.Status != memdx.StatusAuthError || ae.Mechanism != memdx.MechPlain ||
		!errors.Is(err, kverr.ErrAuthenticationFailure) || !errors.Is(err, memdx.StatusAuthError) {
		t.Fatalf("Dial with a wrong password: %v; want an *AuthError with AUTH_ERROR and PLAIN", err)
	}
}

// PLAIN sends the password in clear: without TLS it needs the opt-in.
// Without it Dial asks the server for its mechanisms (no secret), finds
// SASL, and refuses: the password never reaches the socket.
func TestMemcachedSASLPlainNeedsOptIn(t *testing.T) {
	addr, user, pass := saslEnv(t)
	var sent recordedWrites
	_, err := Dial(testCtx(t), addr, Options{Memcached: true, Username: user, Password: pass, DialContext: sent.dial})
	var ae *AuthError
	if !errors.As(err, &ae) || ae.Mechanism != memdx.MechPlain || !errors.Is(err, kverr.ErrPlainAuthRefused) {
		t.Fatalf("Dial: %v; want an *AuthError matching kverr.ErrPlainAuthRefused", err)
	}
	if b := sent.bytes(); len(b) == 0 || strings.Contains(string(b), pass) {
		t.Fatalf("sent %q: want SASL_LIST_MECHS and no password", b)
	}
}

// A user given for a memcached without SASL is not sent: the connection
// works unauthenticated (the user may come from an environment meant for
// another server), as libmemcached's does.
func TestMemcachedUserWithoutSASLNotSent(t *testing.T) {
	const user, pass = "someone", "unused-secret-41c2"
	var sent recordedWrites
	c := dialMemcached(t, plainAddr(t), Options{Memcached: true, Username: user, Password: pass, DialContext: sent.dial})
	if c.Mechanism() != "" {
		t.Fatalf("mechanism %q on a server without SASL", c.Mechanism())
	}
	k := uniqueKey(t, "k")
	wantStatus(t, op(t, c, memdx.NewStore(memdx.OpSet, k, []byte("v"), 0, 60)), memdx.StatusSuccess)
	if strings.Contains(string(sent.bytes()), pass) {
		t.Fatal("the password was sent to a server without SASL")
	}
}

// recordedWrites records what connections dialed through dial write.
type recordedWrites struct {
	mu sync.Mutex
	b  []byte
}

func (r *recordedWrites) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: nc, r: r}, nil
}

func (r *recordedWrites) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.b)
}

type recordingConn struct {
	net.Conn
	r *recordedWrites
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.r.mu.Lock()
	c.r.b = append(c.r.b, p...)
	c.r.mu.Unlock()
	return c.Conn.Write(p)
}

// Over TLS (the -Z instance of scripts/memcached.sh) PLAIN needs no opt-in,
// and the certificate is verified against the CA given.
func TestMemcachedSASLPlainOverTLS(t *testing.T) {
	addr, user, pass, pool := tlsEnv(t)
	c := dialMemcached(t, addr, Options{Memcached: true, Username: user, Password: pass,
		TLSConfig: &tls.Config{RootCAs: pool}})
	if c.Mechanism() != memdx.MechPlain {
		t.Fatalf("mechanism %q, want PLAIN", c.Mechanism())
	}
	p := op(t, c, memdx.NewVersion())
	wantStatus(t, p, memdx.StatusSuccess)

	_, err := Dial(testCtx(t), addr, Options{Memcached: true, Username: user, Password: pass, TLSConfig: &tls.Config{}})
	if !errors.Is(err, kverr.ErrTLS) {
		t.Fatalf("Dial without the test CA: %v, want kverr.ErrTLS", err)
	}
}

// tlsEnv returns the TLS memcached's address, its user and password, and
// a pool holding its CA (or skips: memcachedEnv).
func tlsEnv(t *testing.T) (addr, user, pass string, pool *x509.CertPool) {
	t.Helper()
	v := memcachedEnv(t, "KV_MEMCACHED_TLS_ADDR", "KV_MEMCACHED_TLS_CA", "KV_MEMCACHED_USER", "KV_MEMCACHED_PASS")
	pem, err := os.ReadFile(v[1])
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", v[1])
	}
	return v[0], v[2], v[3], pool
}

// Unauthenticated access to a SASL memcached: it refuses the first
// command that needs a login with AUTH_ERROR and closes the connection.
func TestMemcachedUnauthenticatedRefused(t *testing.T) {
	addr, _, _ := saslEnv(t)
	_, err := Dial(testCtx(t), addr, Options{Memcached: true})
	var ae *AuthError
	if !errors.As(err, &ae) || ae.Status != memdx.StatusAuthError {
		t.Fatalf("Dial without credentials: %v; want an *AuthError with AUTH_ERROR", err)
	}

	// And through Do, on a connection made by hand: the status reaches
	// handle, then the connection ends because memcached closed it.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := newConn(nc, addr, ptr(Options{}.resolved()), "raw")
	defer c.Close()
	req := memdx.NewGet([]byte("k"))
	err = c.Do(testCtx(t), &req, nil)
	if !errors.Is(err, memdx.StatusAuthError) {
		t.Fatalf("GET without login: %v, want AUTH_ERROR", err)
	}
	<-c.Done()
	req = memdx.NewNoop()
	if err := c.Do(testCtx(t), &req, nil); !errors.Is(err, kverr.ErrConnectionClosed) {
		t.Fatalf("after memcached closed: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// A Couchbase-mode Dial to plain memcached: HELLO is refused, Dial switches
// to memcached mode, and the stream is in step (a GET returns the value
// SET stored).
func TestMemcachedHelloRefusedPlainMode(t *testing.T) {
	addr := plainAddr(t)
	for _, name := range []string{"", "a-much-longer-client-name/1.2.3 (with details that make the HELLO key span several NOOPs)"} {
		c := dialMemcached(t, addr, Options{ClientName: name, Features: []memdx.HelloFeature{memdx.FeatureUnorderedExecution}})
		if !c.Memcached() || c.Features().Len() != 0 || c.ErrorMap() != nil || c.ServerVersion() == "" {
			t.Fatalf("memcached=%v features=%v", c.Memcached(), c.Features())
		}
		k := uniqueKey(t, "k")
		wantStatus(t, op(t, c, memdx.NewStore(memdx.OpSet, k, []byte("in step"), 0, 60)), memdx.StatusSuccess)
		if g := op(t, c, memdx.NewGet(k)); g.Status != memdx.StatusSuccess || string(g.Value) != "in step" {
			t.Fatalf("GET %s %q", g.Status, g.Value)
		}
	}
}

// The padding rule, at the level of one socket: memcached answers the
// padded HELLO with UNKNOWN_COMMAND (rather than closing silently or never
// answering), and the requests after it are answered in step.
func TestMemcachedHelloPaddingKeepsStep(t *testing.T) {
	addr := plainAddr(t)
	for _, agent := range []string{"kvwire", "x", "an agent name of some length to need more padding"} {
		key, pads := helloKey(agent, "0123456789abcdef")
		if len(key)%24 != 0 || pads != len(key)/24 {
			t.Fatalf("key of %d bytes, %d pads", len(key), pads)
		}
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c := newConn(nc, addr, ptr(Options{}.resolved()), "raw")
		c.cork()
		hello := c.send(memdx.NewHello(key, []memdx.HelloFeature{memdx.FeatureXerror}))
		for range pads {
			c.send(padRequest())
		}
		emap := c.send(memdx.NewGetErrorMap(2))
		version := c.send(memdx.NewVersion())
		c.uncork()
		for _, s := range []*step{hello, emap, version} {
			if err := c.await(testCtx(t), s); err != nil {
				t.Fatalf("agent %q: %s: %v", agent, s.op, err)
			}
		}
		if hello.status != memdx.StatusUnknownCommand || emap.status != memdx.StatusUnknownCommand ||
			version.status != memdx.StatusSuccess || len(version.value) == 0 {
			t.Fatalf("agent %q: HELLO %s, GET_ERROR_MAP %s, VERSION %s %q", agent, hello.status, emap.status, version.status, version.value)
		}
		c.Close()
	}
}

// A Couchbase-mode Dial to SASL memcached: HELLO gets AUTH_ERROR (and the
// connection is closed); with credentials and PLAIN allowed, Dial goes on
// in memcached mode with SASL PLAIN.
func TestMemcachedSASLCouchbaseMode(t *testing.T) {
	addr, user, pass := saslEnv(t)
	c := dialMemcached(t, addr, Options{Username: user, Password: pass, AllowPlainAuthWithoutTLS: true})
	if !c.Memcached() || c.Mechanism() != memdx.MechPlain {
		t.Fatalf("memcached=%v mechanism=%q", c.Memcached(), c.Mechanism())
	}
	wantStatus(t, op(t, c, memdx.NewNoop()), memdx.StatusSuccess)

	_, err := Dial(testCtx(t), addr, Options{Username: user, Password: pass})
	var ae *AuthError
	if !errors.As(err, &ae) || ae.Mechanism != memdx.MechPlain {
		t.Fatalf("without the PLAIN opt-in: %v", err)
	}
	_, err = Dial(testCtx(t), addr, Options{Username: user, Password: pass, AllowPlainAuthWithoutTLS: true,
		SASLMechanisms: []string{memdx.MechScramSHA512}})
	if !errors.As(err, &ae) || ae.Mechanism != memdx.MechPlain || !strings.Contains(err.Error(), "SASLMechanisms") {
		t.Fatalf("PLAIN not in SASLMechanisms: %v", err)
	}
	_, err = Dial(testCtx(t), addr, Options{})
	if !errors.As(err, &ae) || ae.Status != memdx.StatusAuthError {
		t.Fatalf("without credentials: %v", err)
	}
	_, err = Dial(testCtx(t), plainAddr(t), Options{Bucket: "default"})
	var be *BootstrapError
	if !errors.As(err, &be) || be.Step != memdx.OpHello || be.Status != memdx.StatusUnknownCommand {
		t.Fatalf("a bucket on plain memcached: %v", err)
	}
}

// MaxPending 1 does not stop Dial (its requests do not count against it)
// against real memcached, plain or SASL, in either mode: memcached answers
// HELLO only after reading all its padding.
func TestMemcachedMaxPendingOne(t *testing.T) {
	plain := plainAddr(t)
	addr, user, pass := saslEnv(t)
	sasl := Options{Username: user, Password: pass, AllowPlainAuthWithoutTLS: true, MaxPending: 1}
	for name, d := range map[string]struct {
		addr string
		o    Options
	}{
		"plain, Couchbase mode": {plain, Options{MaxPending: 1, ClientName: strings.Repeat("a", maxClientName)}},
		"plain, memcached mode": {plain, Options{MaxPending: 1, Memcached: true}},
		"SASL, Couchbase mode":  {addr, sasl},
		"SASL, memcached mode":  {addr, func() Options { o := sasl; o.Memcached = true; return o }()},
	} {
		t.Run(name, func(t *testing.T) {
			c := dialMemcached(t, d.addr, d.o)
			if !c.Memcached() || (d.o.Username != "") != (c.Mechanism() == memdx.MechPlain) {
				t.Fatalf("memcached %v mechanism %q", c.Memcached(), c.Mechanism())
			}
			k := uniqueKey(t, "k")
			wantStatus(t, op(t, c, memdx.NewStore(memdx.OpSet, k, []byte("in step"), 0, 60)), memdx.StatusSuccess)
			if g := op(t, c, memdx.NewGet(k)); string(g.Value) != "in step" {
				t.Fatalf("GET %s %q", g.Status, g.Value)
			}
		})
	}
}
