package conn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/errmap"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// fakeNode answers a Couchbase bootstrap over a scripted connection, one
// request at a time, as configured.
type fakeNode struct {
	helloStatus  memdx.Status // 0: success
	grant        []memdx.HelloFeature
	grantUnasked []memdx.HelloFeature // granted even when HELLO does not ask
	errMap       []byte               // nil: GET_ERROR_MAP answers UNKNOWN_COMMAND
	mechs        string
	user, pass   string
	badSignature bool         // tamper with SCRAM's server-final message
	serverFirst  string       // replaces SCRAM's server-first message
	serverFinal  string       // replaces SCRAM's server-final message
	bucketStatus memdx.Status // SELECT_BUCKET's answer
	config       string       // "": GET_CLUSTER_CONFIG answers NO_BUCKET
	silentKey    string       // a request with this key gets no answer
	notify       bool         // a cluster-map notification after HELLO (revision: the connection's number)
	noSASL       bool         // SASL commands answer UNKNOWN_COMMAND (memcached without -S)
	// preAuth: before a successful login only HELLO, SASL_LIST_MECHS,
	// SASL_AUTH, SASL_STEP and GET_ERROR_MAP run; everything else answers
	// EACCESS with no body and the connection stays open, as kv_engine 7.x
	// does (Cookie::validate).
	preAuth bool
	// mapWithNoops: the answers to HELLO's padding (the SASL_LIST_MECHS
	// before GET_ERROR_MAP) are held back and written in one write with
	// GET_ERROR_MAP's, so that the client reads the map's header in the
	// same read as the last padding answer (not held when HELLO asked for
	// no XERROR: no map is asked for then).
	mapWithNoops bool

	mu       sync.Mutex
	hello    [][]memdx.HelloFeature // the features each connection asked for
	helloIDs []string               // the connection id each HELLO carried
	ops      []memdx.OpCode         // every request, in order
	refused  []memdx.OpCode         // the requests refused before a login (preAuth)
}

func (f *fakeNode) serve(p *peer) {
	var scram *memdx.ScramServer
	failed := false
	// The client may close while answers to pipelined requests are still
	// due (a refused step ends the Dial): stop quietly then.
	reply := func(pkts ...memdx.Packet) {
		if _, err := p.nc.Write(encode(p.t, pkts...)); err != nil {
			failed = true
		}
	}
	var held []memdx.Packet // padding answers (mapWithNoops)
	mapAsked := false       // HELLO asked for XERROR, and the map is still to come
	authed := false         // a login succeeded (preAuth)
	for !failed {
		req, err := p.tryRead()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.ops = append(f.ops, req.OpCode)
		f.mu.Unlock()
		if f.silentKey != "" && string(req.Key) == f.silentKey {
			continue
		}
		if f.noSASL && (req.OpCode == memdx.OpSASLListMechs || req.OpCode == memdx.OpSASLAuth || req.OpCode == memdx.OpSASLStep) {
			reply(res(req, memdx.StatusUnknownCommand, ""))
			continue
		}
		if f.preAuth && !authed {
			switch req.OpCode {
			case memdx.OpHello, memdx.OpSASLListMechs, memdx.OpSASLAuth, memdx.OpSASLStep, memdx.OpGetErrorMap:
			default:
				f.mu.Lock()
				f.refused = append(f.refused, req.OpCode)
				f.mu.Unlock()
				reply(res(req, memdx.StatusNoAccess, ""))
				continue
			}
		}
		switch req.OpCode {
		case memdx.OpHello:
			asked, _ := memdx.DecodeHelloFeatures(req.Value)
			mapAsked = slices.Contains(asked, memdx.FeatureXerror)
			_, id := memdx.DecodeHelloKey(req.Key)
			f.mu.Lock()
			f.hello = append(f.hello, asked)
			f.helloIDs = append(f.helloIDs, id)
			f.mu.Unlock()
			if f.helloStatus != 0 {
				reply(res(req, f.helloStatus, ""))
				continue
			}
			var granted []byte
			for _, x := range asked {
				if (f.grant == nil || slices.Contains(f.grant, x)) && !slices.Contains(f.grantUnasked, x) {
					granted = append(granted, byte(x>>8), byte(x))
				}
			}
			for _, x := range f.grantUnasked {
				granted = append(granted, byte(x>>8), byte(x))
			}
			reply(ok(req, string(granted)))
			if f.notify {
				f.mu.Lock()
				n := len(f.hello)
				f.mu.Unlock()
				reply(notification(int64(n), "b", fmt.Sprintf(`{"rev":%d}`, n)))
			}
		case memdx.OpNoop:
			reply(ok(req, ""))
		case memdx.OpGet: // memcached mode's probe: a miss, as memcached answers
			reply(res(req, memdx.StatusKeyNotFound, ""))
		case memdx.OpGetErrorMap:
			if f.errMap == nil {
				reply(append(held, res(req, memdx.StatusUnknownCommand, ""))...)
			} else {
				reply(append(held, ok(req, string(f.errMap)))...)
			}
			held = nil
			mapAsked = false
		case memdx.OpVersion:
			reply(ok(req, "7.6.2-fake"))
		case memdx.OpSASLListMechs:
			if f.mapWithNoops && mapAsked {
				held = append(held, ok(req, f.mechs))
				continue
			}
			reply(ok(req, f.mechs))
		case memdx.OpSASLAuth:
			mech := string(req.Key)
			if mech == memdx.MechPlain {
				_, u, pw, _ := memdx.DecodePlainPayload(req.Value)
				if u == f.user && pw == f.pass {
					authed = true
					reply(ok(req, ""))
				} else {
					reply(res(req, memdx.StatusAuthError, ""))
				}
				continue
			}
			keys, err := memdx.DeriveScramKeys(mech, f.pass, []byte("salt"), 4096)
			if err != nil {
				p.t.Errorf("fake node: %v", err)
				return
			}
			scram, _ = memdx.NewScramServer(mech, func(u string) (memdx.ScramKeys, bool) { return keys, u == f.user }, nil)
			first, err := scram.ServerFirst(req.Value)
			if err != nil {
				reply(res(req, memdx.StatusAuthError, ""))
				continue
			}
			if f.serverFirst != "" {
				first = []byte(f.serverFirst)
			}
			reply(res(req, memdx.StatusAuthContinue, string(first)))
		case memdx.OpSASLStep:
			final, err := scram.ServerFinal(req.Value)
			if err != nil {
				reply(res(req, memdx.StatusAuthError, ""))
				continue
			}
			if f.badSignature {
				final = []byte("v=" + base64.StdEncoding.EncodeToString(make([]byte, 64)))
			}
			if f.serverFinal != "" {
				final = []byte(f.serverFinal)
			}
			authed = true
			reply(ok(req, string(final)))
		case memdx.OpSelectBucket:
			reply(res(req, f.bucketStatus, ""))
		case memdx.OpGetClusterConfig:
			if f.config == "" {
				reply(res(req, memdx.StatusNoBucket, ""))
			} else {
				reply(ok(req, f.config))
			}
		default:
			reply(res(req, memdx.StatusUnknownCommand, ""))
		}
	}
}

// dialFake dials a Couchbase-mode Conn whose every connection is served by
// f.
func dialFake(t *testing.T, f *fakeNode, opts Options) (*Conn, error) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var servers []net.Conn
	opts.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, s := net.Pipe()
		mu.Lock()
		servers = append(servers, s)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.serve(newPeer(t, s))
			s.Close()
		}()
		return c, nil
	}
	c, err := Dial(testCtx(t), "fake:11210", opts)
	t.Cleanup(func() {
		if c != nil {
			c.Close()
		}
		mu.Lock()
		for _, s := range servers {
			s.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return c, err
}

func (f *fakeNode) helloNoLock() [][]memdx.HelloFeature { return f.hello }

func (f *fakeNode) helloCalls() [][]memdx.HelloFeature {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.hello)
}

var validMap = mockcluster.ErrorMapJSON(2)

// Every bootstrap write carries what the package doc says, and Dial records
// what the node answered.
func TestBootstrapWrites(t *testing.T) {
	f := &fakeNode{errMap: validMap, mechs: "SCRAM-SHA1 SCRAM-SHA256 PLAIN", user: "u", pass: "p",
		config: `{"rev":1}`, grant: []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket}}
	g, wrap := newGate()
	dial, servers := pipeDialer(wrap)
	type dialed struct {
		c   *Conn
		err error
	}
	out := make(chan dialed, 1)
	go func() {
		c, err := Dial(testCtx(t), "fake:11210", Options{Username: "u", Password: "p", Bucket: "b", DialContext: dial,
			ClientName: "boot-test", Features: []memdx.HelloFeature{memdx.FeatureSelectBucket, memdx.FeatureJSON}})
		out <- dialed{c, err}
	}()
	p := newPeer(t, <-servers)
	go f.serve(p)
	var writes [][]memdx.OpCode
	for range 3 {
		var ops []memdx.OpCode
		for _, pk := range packets(t, <-g.calls) {
			ops = append(ops, pk.OpCode)
		}
		writes = append(writes, ops)
		g.acts <- gateWrite{n: -1}
	}
	d := recv(t, out)
	if d.err != nil {
		t.Fatal(d.err)
	}
	defer d.c.Close()
	_, pads := helloKey("boot-test", d.c.ID())
	want1 := []memdx.OpCode{memdx.OpHello}
	for range pads {
		want1 = append(want1, memdx.OpSASLListMechs)
	}
	want1 = append(want1, memdx.OpGetErrorMap, memdx.OpSASLListMechs)
	want := [][]memdx.OpCode{want1, {memdx.OpSASLAuth}, {memdx.OpSASLStep, memdx.OpVersion, memdx.OpSelectBucket, memdx.OpGetClusterConfig}}
	for i := range want {
		if !slices.Equal(writes[i], want[i]) {
			t.Errorf("write %d: %v, want %v", i+1, writes[i], want[i])
		}
	}
	c := d.c
	if c.Mechanism() != memdx.MechScramSHA256 || c.Bucket() != "b" || string(c.ClusterConfig()) != `{"rev":1}` ||
		c.ServerVersion() != "7.6.2-fake" || c.ErrorMap() == nil || c.Memcached() {
		t.Fatalf("mech %q bucket %q config %q version %q map %v", c.Mechanism(), c.Bucket(), c.ClusterConfig(), c.ServerVersion(), c.ErrorMap())
	}
	if !c.Features().Has(memdx.FeatureXerror) || !c.Features().Has(memdx.FeatureSelectBucket) || c.Features().Has(memdx.FeatureJSON) {
		t.Fatalf("features %v", c.Features())
	}
	asked := f.helloCalls()[0]
	if !slices.Contains(asked, memdx.FeatureXerror) || !slices.Contains(asked, memdx.FeatureJSON) {
		t.Fatalf("HELLO asked for %v", asked)
	}
	st := c.Stats()
	if st.Writes != 3 {
		t.Fatalf("%d writes for the bootstrap, want 3", st.Writes)
	}
	close(g.quit)
}

// A node that, as kv_engine 7.x does, runs nothing but the handshake before
// a login (EACCESS to the rest, the connection left open): a Dial with
// credentials sends it nothing it refuses (HELLO's padding is
// SASL_LIST_MECHS, VERSION goes behind the last SASL message and is
// answered), and a memcached-mode Dial without credentials knows it for a
// Couchbase node by its EACCESS answers.
func TestBootstrapNodeRefusingAllButTheHandshakeBeforeLogin(t *testing.T) {
	for name, o := range map[string]Options{
		"SCRAM": {Username: "u", Password: "p", Bucket: "b"},
		"PLAIN": {Username: "u", Password: "p", Bucket: "b", SASLMechanisms: []string{memdx.MechPlain}, AllowPlainAuthWithoutTLS: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeNode{preAuth: true, errMap: validMap, mechs: "SCRAM-SHA512 PLAIN", user: "u", pass: "p", config: `{"rev":1}`}
			c, err := dialFake(t, f, o)
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			if c.ServerVersion() != "7.6.2-fake" || c.Bucket() != "b" || string(c.ClusterConfig()) != `{"rev":1}` || c.ErrorMap() == nil {
				t.Fatalf("version %q bucket %q config %q map %t", c.ServerVersion(), c.Bucket(), c.ClusterConfig(), c.ErrorMap() != nil)
			}
			f.mu.Lock()
			ops, refused := slices.Clone(f.ops), slices.Clone(f.refused)
			f.mu.Unlock()
			if len(refused) != 0 {
				t.Errorf("the node refused %v before the login", refused)
			}
			login := slices.Index(ops, memdx.OpSASLStep)
			if name == "PLAIN" {
				login = slices.Index(ops, memdx.OpSASLAuth)
			}
			if v := slices.Index(ops, memdx.OpVersion); v < login {
				t.Fatalf("requests %v: VERSION before the login", ops)
			}
		})
	}
	t.Run("memcached mode, no credentials", func(t *testing.T) {
		f := &fakeNode{preAuth: true}
		c, err := dialFake(t, f, Options{Memcached: true})
		var nm *NotMemcachedError
		if !errors.As(err, &nm) || !errors.Is(err, kverr.ErrBootstrap) || !strings.Contains(err.Error(), "EACCESS") {
			t.Fatalf("Dial: %v (%T), conn %v; want a *NotMemcachedError naming EACCESS", err, err, c)
		}
	})
}

func TestBootstrapCorruptErrorMap(t *testing.T) {
	for _, unasked := range []bool{false, true} {
		t.Run(fmt.Sprintf("XERROR granted unasked: %v", unasked), func(t *testing.T) {
			testBootstrapCorruptErrorMap(t, unasked)
		})
	}
}

// A node whose error map does not parse is dialled again without XERROR.
// unasked: it grants XERROR on that second connection too (and would send
// the corrupt map again if asked): Dial still succeeds without a map.
func testBootstrapCorruptErrorMap(t *testing.T, unasked bool) {
	f := &fakeNode{errMap: []byte(`{"version":2,"revision":1,"errors":{"zz":{}}}`), config: `{"rev":3}`}
	if unasked {
		f.grantUnasked = []memdx.HelloFeature{memdx.FeatureXerror}
	}
	c, err := dialFake(t, f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hello := f.helloCalls()
	if len(hello) != 2 {
		t.Fatalf("%d connections, want a redial", len(hello))
	}
	if !slices.Contains(hello[0], memdx.FeatureXerror) || slices.Contains(hello[1], memdx.FeatureXerror) {
		t.Fatalf("HELLO features: first %v, second %v; want XERROR, then none", hello[0], hello[1])
	}
	if c.ErrorMap() != nil || c.Features().Has(memdx.FeatureXerror) != unasked || !errors.Is(c.errMapErr, errmap.ErrCorrupt) {
		t.Fatalf("map %v, features %v, dropped %v", c.ErrorMap(), c.Features(), c.errMapErr)
	}
	f.mu.Lock()
	asked := 0
	for _, op := range f.ops {
		if op == memdx.OpGetErrorMap {
			asked++
		}
	}
	f.mu.Unlock()
	if asked != 1 {
		t.Fatalf("GET_ERROR_MAP sent %d times, want once (not on the connection without XERROR)", asked)
	}
	if string(c.ClusterConfig()) != `{"rev":3}` {
		t.Fatalf("config %q", c.ClusterConfig())
	}
}

// An error map larger than Options.MaxBodyLength is treated like a corrupt
// one (RFC 0013: ignore it and reconnect without XERROR), not as a failed
// Dial: the node is usable, only its map is not.
func TestBootstrapErrorMapOverMaxBodyLength(t *testing.T) {
	big := mockcluster.ErrorMapJSON(2)
	limit := uint32(len(big) - 1)
	f := &fakeNode{errMap: big, config: `{"rev":3}`}
	c, err := dialFake(t, f, Options{MaxBodyLength: limit})
	if err != nil {
		t.Fatalf("Dial failed on an oversized error map: %v", err)
	}
	wantMapOverLimitDropped(t, f, c, limit)
}

// wantMapOverLimitDropped checks a Dial that met an error map over limit:
// a redial without XERROR, no map, the reason naming the limit, and the
// node used all the same.
func wantMapOverLimitDropped(t *testing.T, f *fakeNode, c *Conn, limit uint32) {
	t.Helper()
	hello := f.helloCalls()
	if len(hello) != 2 || !slices.Contains(hello[0], memdx.FeatureXerror) || slices.Contains(hello[1], memdx.FeatureXerror) {
		t.Fatalf("HELLO features per connection: %v; want XERROR, then a redial without it", hello)
	}
	dropped := c.errMapErr
	if c.ErrorMap() != nil || dropped == nil || !strings.Contains(dropped.Error(), "MaxBodyLength") ||
		!strings.Contains(dropped.Error(), fmt.Sprint(limit)) {
		t.Fatalf("map %v, dropped %v; want no map and a reason naming the limit", c.ErrorMap(), dropped)
	}
	if string(c.ClusterConfig()) != `{"rev":3}` {
		t.Fatalf("config %q", c.ClusterConfig())
	}
}

// The same when the map's header arrives in the read that brings the last
// NOOP's answer: the check of what follows a packet (checkFollowing) finds
// the oversized header (the NOOP's answer is delivered first: the header is
// GET_ERROR_MAP's, in flight), and the connection ends while the map is
// awaited; the map is still the one over the limit, and Dial redials
// without XERROR. (It failed the client's test of an oversized map now and
// then, when the proxy's writes met in one read.)
func TestBootstrapErrorMapOverMaxBodyLengthReadWithTheLastNoop(t *testing.T) {
	big := mockcluster.ErrorMapJSON(2)
	limit := uint32(len(big) - 1)
	f := &fakeNode{errMap: big, config: `{"rev":3}`, mapWithNoops: true}
	c, err := dialFake(t, f, Options{MaxBodyLength: limit})
	if err != nil {
		t.Fatalf("Dial failed on an oversized error map read with the last NOOP's answer: %v", err)
	}
	wantMapOverLimitDropped(t, f, c, limit)
}

func TestBootstrapFailures(t *testing.T) {
	cases := []struct {
		name  string
		node  *fakeNode
		opts  Options
		check func(t *testing.T, err error)
	}{
		{"bad SCRAM server signature", &fakeNode{mechs: "SCRAM-SHA512", user: "u", pass: "p", badSignature: true},
			Options{Username: "u", Password: "p"}, func(t *testing.T, err error) {
				var ae *AuthError
				if !errors.As(err, &ae) || ae.Mechanism != memdx.MechScramSHA512 || !errors.Is(err, kverr.ErrAuthenticationFailure) ||
					!errors.Is(err, kverr.ErrAuthenticationFailure) {
					t.Fatalf("%v; want an *AuthError wrapping kverr.ErrAuthenticationFailure", err)
				}
			}},
		{"SCRAM refusal in server-final", &fakeNode{mechs: "SCRAM-SHA512", user: "u", pass: "p", serverFinal: "e=invalid-proof"},
			Options{Username: "u", Password: "p"}, func(t *testing.T, err error) {
				var ae *AuthError
				if !errors.As(err, &ae) || !errors.Is(err, kverr.ErrAuthenticationFailure) {
					t.Fatalf("%v; want an *AuthError wrapping kverr.ErrAuthenticationFailure", err)
				}
			}},
		// A malformed SASL message is a protocol problem, not a refusal of the
		// credentials: not kverr.ErrAuthenticationFailure (RFC 0049
		// AUTHENTICATION_ERROR is for explicit refusals only).
		{"malformed SCRAM server-first", &fakeNode{mechs: "SCRAM-SHA512", user: "u", pass: "p", serverFirst: "r=x,s=c2FsdA==,i=oops"},
			Options{Username: "u", Password: "p"}, func(t *testing.T, err error) {
				var be *BootstrapError
				if !errors.As(err, &be) || be.Step != memdx.OpSASLAuth || !errors.Is(err, memdx.ErrMalformed) ||
					errors.Is(err, kverr.ErrAuthenticationFailure) || !strings.Contains(err.Error(), "server-first") {
					t.Fatalf("%v; want a *BootstrapError at SASL_AUTH naming the server-first message, not kverr.ErrAuthenticationFailure", err)
				}
			}},
		{"malformed SCRAM server-final", &fakeNode{mechs: "SCRAM-SHA512", user: "u", pass: "p", serverFinal: "v=not base64!"},
			Options{Username: "u", Password: "p"}, func(t *testing.T, err error) {
				var be *BootstrapError
				if !errors.As(err, &be) || be.Step != memdx.OpSASLStep || !errors.Is(err, memdx.ErrMalformed) ||
					errors.Is(err, kverr.ErrAuthenticationFailure) || !strings.Contains(err.Error(), "server-final") {
					t.Fatalf("%v; want a *BootstrapError at SASL_STEP naming the server-final message, not kverr.ErrAuthenticationFailure", err)
				}
			}},
		{"wrong SCRAM password", &fakeNode{mechs: "SCRAM-SHA512", user: "u", pass: "p"},
			Options{Username: "u", Password: "x"}, func(t *testing.T, err error) {
				var ae *AuthError
				if !errors.As(err, &ae) || ae.Status != memdx.StatusAuthError {
					t.Fatalf("%v; want an *AuthError with AUTH_ERROR", err)
				}
			}},
		{"no common mechanism", &fakeNode{mechs: "PLAIN GSSAPI"},
			Options{Username: "u", Password: "x"}, func(t *testing.T, err error) {
				var ae *AuthError
				if !errors.As(err, &ae) || !errors.Is(err, kverr.ErrAuthenticationFailure) || !strings.Contains(err.Error(), "PLAIN GSSAPI") {
					t.Fatalf("%v; want an *AuthError naming the offer", err)
				}
			}},
		{"bucket not found", &fakeNode{bucketStatus: memdx.StatusKeyNotFound},
			Options{Bucket: "gone"}, func(t *testing.T, err error) {
				var be *BucketAccessError
				if !errors.As(err, &be) || be.Bucket != "gone" || !strings.Contains(err.Error(), "no such bucket") {
					t.Fatalf("%v; want a *BucketAccessError", err)
				}
			}},
		{"bucket refused otherwise", &fakeNode{bucketStatus: memdx.StatusTmpFail},
			Options{Bucket: "b"}, func(t *testing.T, err error) {
				var be *BootstrapError
				if !errors.As(err, &be) || be.Step != memdx.OpSelectBucket || !errors.Is(err, memdx.StatusTmpFail) {
					t.Fatalf("%v; want a *BootstrapError at SELECT_BUCKET", err)
				}
			}},
		{"HELLO refused", &fakeNode{helloStatus: memdx.StatusInvalidArgs},
			Options{}, func(t *testing.T, err error) {
				var be *BootstrapError
				if !errors.As(err, &be) || be.Step != memdx.OpHello || be.Status != memdx.StatusInvalidArgs {
					t.Fatalf("%v; want a *BootstrapError at HELLO", err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := dialFake(t, tc.node, tc.opts)
			if c != nil {
				t.Fatal("Dial returned a connection")
			}
			if !errors.Is(err, kverr.ErrBootstrap) {
				t.Fatalf("%v does not match kverr.ErrBootstrap", err)
			}
			tc.check(t, err)
		})
	}
}

// A scripted node that answers HELLO with UNKNOWN_COMMAND: Dial closes that
// connection and makes a memcached-mode one.
// A NUL in the credentials would shift SASL PLAIN's fields on the server:
// Dial refuses it before dialing, and the error does not hold the password.
func TestDialRefusesNULCredentials(t *testing.T) {
	dialed := false
	_, err := Dial(testCtx(t), "fake:11210", Options{Username: "alice\x00bob", Password: "secret",
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			dialed = true
			return nil, errors.New("dialed")
		}})
	var ae *AuthError
	if !errors.As(err, &ae) || !errors.Is(err, memdx.ErrInvalidRequest) || dialed || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Dial = %v (dialed %v), want an *AuthError before dialing", err, dialed)
	}
}

func TestBootstrapHelloUnknownRedials(t *testing.T) {
	f := &fakeNode{helloStatus: memdx.StatusUnknownCommand}
	c, err := dialFake(t, f, Options{Username: "u", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Memcached() || c.Mechanism() != "" {
		t.Fatalf("memcached %v mechanism %q", c.Memcached(), c.Mechanism())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// One HELLO only (the second connection is memcached mode), and no
	// password sent to a server that has no SASL.
	if slices.Index(f.ops[1:], memdx.OpHello) >= 0 || slices.Contains(f.ops, memdx.OpSASLAuth) ||
		len(f.helloNoLock()) != 1 {
		t.Fatalf("requests: %v", f.ops)
	}
}

func TestBootstrapContextDeadline(t *testing.T) {
	dial, servers := pipeDialer(nil)
	go func() {
		s := <-servers
		drain(s) // reads, never answers
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Dial(ctx, "silent:11210", Options{DialContext: dial})
	var be *BootstrapError
	if !errors.As(err, &be) || be.Step != memdx.OpHello || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v; want a *BootstrapError at HELLO with DeadlineExceeded", err)
	}
}

func TestTLS(t *testing.T) {
	mc := newMock(t, mockcluster.Options{TLS: true})
	addr := mc.Node(0).TLSAddr()
	o := adminOpts(mockcluster.DefaultBucket)

	// Verification is on by default: the mock's CA is unknown.
	o.TLSConfig = &tls.Config{}
	_, err := Dial(testCtx(t), addr, o)
	var te *TLSError
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &te) || !errors.As(err, &unknown) || !errors.Is(err, kverr.ErrTLS) {
		t.Fatalf("without roots: %v; want a *TLSError wrapping x509.UnknownAuthorityError", err)
	}
	// The wrong name fails too.
	o.TLSConfig = &tls.Config{RootCAs: mc.RootCAs(), ServerName: "not-the-node.example"}
	_, err = Dial(testCtx(t), addr, o)
	var host x509.HostnameError
	if !errors.As(err, &te) || !errors.As(err, &host) {
		t.Fatalf("wrong name: %v; want a *TLSError wrapping x509.HostnameError", err)
	}
	// Custom roots: verified. PLAIN is allowed over TLS without the opt-in.
	o.TLSConfig = &tls.Config{RootCAs: mc.RootCAs()}
	o.SASLMechanisms = []string{memdx.MechPlain}
	c := dialMemcached(t, addr, o)
	if c.Mechanism() != memdx.MechPlain || c.Bucket() != mockcluster.DefaultBucket {
		t.Fatalf("mechanism %q bucket %q", c.Mechanism(), c.Bucket())
	}
	if err := c.Do(testCtx(t), ptr(memdx.NewNoop()), nil); err != nil {
		t.Fatal(err)
	}
	// The explicit opt-out of verification.
	o.TLSConfig = &tls.Config{InsecureSkipVerify: true}
	o.SASLMechanisms = nil
	if c := dialMemcached(t, addr, o); c.Mechanism() != memdx.MechScramSHA512 {
		t.Fatalf("mechanism %q", c.Mechanism())
	}
	if o.TLSConfig.ServerName != "" {
		t.Fatal("Dial modified the caller's tls.Config")
	}
}

// The bootstrap does not count against MaxPending: with a limit of 1, Dial
// works whatever it has to pipeline (SCRAM and PLAIN, a bucket, the longest
// agent, which needs the most padding), and the limit then applies to
// the caller's requests.
func TestBootstrapMaxPendingOne(t *testing.T) {
	long := strings.Repeat("a", maxClientName)
	for _, mech := range []string{memdx.MechScramSHA256, memdx.MechPlain, ""} {
		t.Run("mech="+mech, func(t *testing.T) {
			f := &fakeNode{errMap: validMap, mechs: "SCRAM-SHA256 PLAIN", user: "u", pass: "p", config: `{"rev":1}`, silentKey: "held"}
			o := Options{MaxPending: 1, ClientName: long, Bucket: "b"}
			if mech != "" {
				o.Username, o.Password, o.SASLMechanisms, o.AllowPlainAuthWithoutTLS = "u", "p", []string{mech}, true
			}
			c, err := dialFake(t, f, o)
			if err != nil {
				t.Fatalf("Dial with MaxPending 1: %v", err)
			}
			if c.Mechanism() != mech || c.Bucket() != "b" || c.ErrorMap() == nil || c.Pending() != 0 {
				t.Fatalf("mechanism %q bucket %q map %v pending %d", c.Mechanism(), c.Bucket(), c.ErrorMap(), c.Pending())
			}
			if _, pads := helloKey(long, c.ID()); pads < 8 {
				t.Fatalf("only %d requests of padding: the test does not stress the pipeline", pads)
			}
			held := goGet(testCtx(t), c, "held")
			waitFor(t, "the held GET in flight", func() bool { return c.Pending() == 1 })
			r := doGet(testCtx(t), c, "next")
			if re := requestError(t, r.err); re.Written || !errors.Is(r.err, kverr.ErrOverloaded) {
				t.Fatalf("second request with MaxPending 1: %v; want kverr.ErrOverloaded", r.err)
			}
			c.Close()
			if r := recv(t, held); !errors.Is(r.err, kverr.ErrConnectionClosed) {
				t.Fatalf("held GET: %+v", r)
			}
		})
	}
}

// tlsPeer listens on loopback and runs serve on every connection it
// accepts; the listener closes at the end of the test.
func tlsPeer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				serve(nc)
			}()
		}
	}()
	return ln.Addr().String()
}

// Only TLS's own failures are *TLSError (RFC 0049 TLS_ERROR fails fast): a
// node that goes away during the handshake is a plain dial error, which
// matches neither kverr.ErrTLS nor kverr.ErrBootstrap.
func TestTLSHandshakeFailureKinds(t *testing.T) {
	readSome := func(nc net.Conn) { // the ClientHello arrives, then the node goes away
		nc.Read(make([]byte, 10)) // unread bytes left: the close is a reset
	}
	readHello := func(nc net.Conn) { // the whole ClientHello is read: the close is an EOF
		nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		io.Copy(io.Discard, nc)
	}
	notTLS := func(nc net.Conn) { // a memcached answer where a ServerHello should be
		nc.Read(make([]byte, 4096))
		nc.Write(encode(t, memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpHello, Status: memdx.StatusUnknownCommand}))
		io.Copy(io.Discard, nc)
	}
	alert := func(nc net.Conn) { // a TLS 1.3-only server refuses TLS 1.2 with an alert
		tls.Server(nc, &tls.Config{MinVersion: tls.VersionTLS13}).Handshake()
	}
	badHello := func(nc net.Conn) { // a handshake record with an empty ServerHello: the client sends the alert
		nc.Read(make([]byte, 4096))
		nc.Write([]byte{0x16, 0x03, 0x03, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00})
		io.Copy(io.Discard, nc)
	}
	client := &tls.Config{InsecureSkipVerify: true}
	for _, tc := range []struct {
		name  string
		serve func(net.Conn)
		cfg   *tls.Config
		isTLS bool
		check func(error) bool
	}{
		{"reset", readSome, client, false, nil},
		{"EOF", readHello, client, false, nil},
		{"not TLS", notTLS, client, true, func(err error) bool {
			var rh tls.RecordHeaderError
			return errors.As(err, &rh)
		}},
		{"alert", alert, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}, true, func(err error) bool {
			return strings.Contains(err.Error(), "protocol version")
		}},
		{"malformed ServerHello", badHello, client, true, func(err error) bool {
			var op *net.OpError
			return errors.As(err, &op) && op.Op == "local error"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := tlsPeer(t, tc.serve)
			_, err := Dial(testCtx(t), addr, Options{TLSConfig: tc.cfg})
			var te *TLSError
			if err == nil || errors.As(err, &te) != tc.isTLS || errors.Is(err, kverr.ErrTLS) != tc.isTLS ||
				errors.Is(err, kverr.ErrBootstrap) != tc.isTLS || (tc.check != nil && !tc.check(err)) {
				t.Fatalf("Dial: %v (%T); want a TLS error: %v", err, err, tc.isTLS)
			}
		})
	}
	// A timeout on the socket is the network's too.
	_, err := Dial(testCtx(t), "pipe:11207", Options{TLSConfig: client,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, s := net.Pipe()
			t.Cleanup(func() { s.Close() })
			c.SetDeadline(time.Now()) // every Write times out
			return c, nil
		}})
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, kverr.ErrTLS) || errors.Is(err, kverr.ErrBootstrap) {
		t.Fatalf("timeout: %v; want a plain dial error", err)
	}
}

// The password goes out with PLAIN only if PLAIN is allowed: a node that
// answers HELLO with AUTH_ERROR (as SASL memcached does, but anything can)
// does not get it when SASLMechanisms leaves PLAIN out, even with the
// opt-in or over TLS.
func TestPlainOnlyWhenAllowed(t *testing.T) {
	scramOnly := []string{memdx.MechScramSHA512}
	t.Run("redial after AUTH_ERROR", func(t *testing.T) {
		f := &fakeNode{helloStatus: memdx.StatusAuthError, user: "u", pass: "secret"}
		_, err := dialFake(t, f, Options{Username: "u", Password: "secret", AllowPlainAuthWithoutTLS: true, SASLMechanisms: scramOnly})
		var ae *AuthError
		if !errors.As(err, &ae) || ae.Mechanism != memdx.MechPlain || !errors.Is(err, kverr.ErrAuthenticationFailure) ||
			!strings.Contains(err.Error(), "SASLMechanisms") || strings.Contains(err.Error(), "secret") {
			t.Fatalf("Dial: %v; want an *AuthError saying PLAIN is not allowed", err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if slices.Contains(f.ops, memdx.OpSASLAuth) || len(f.hello) != 1 {
			t.Fatalf("requests %v: the password was offered, or a second connection made", f.ops)
		}
	})
	t.Run("allowed", func(t *testing.T) { // the same node with PLAIN listed: it is used
		f := &fakeNode{helloStatus: memdx.StatusAuthError, user: "u", pass: "secret"}
		_, err := dialFake(t, f, Options{Username: "u", Password: "secret", AllowPlainAuthWithoutTLS: true,
			SASLMechanisms: append(scramOnly, memdx.MechPlain)})
		f.mu.Lock()
		defer f.mu.Unlock()
		// The fake node answers NOOP in memcached mode too, so Dial works.
		if err != nil || !slices.Contains(f.ops, memdx.OpSASLAuth) {
			t.Fatalf("Dial: %v; requests %v", err, f.ops)
		}
	})
	// Memcached mode asks the server for its mechanisms first, which
	// carries no secret; a server with SASL then gets the password only
	// if PLAIN is allowed.
	for name, o := range map[string]Options{
		"memcached mode, PLAIN not listed": {Memcached: true, AllowPlainAuthWithoutTLS: true, SASLMechanisms: scramOnly},
		"memcached mode, no TLS":           {Memcached: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeNode{mechs: "PLAIN", user: "u", pass: "secret"}
			o.Username, o.Password = "u", "secret"
			_, err := dialFake(t, f, o)
			var ae *AuthError
			if !errors.As(err, &ae) || ae.Mechanism != memdx.MechPlain || !errors.Is(err, kverr.ErrAuthenticationFailure) ||
				!errors.Is(err, kverr.ErrPlainAuthRefused) || strings.Contains(err.Error(), "secret") {
				t.Fatalf("Dial: %v; want an *AuthError matching kverr.ErrPlainAuthRefused", err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if !slices.Equal(f.ops, []memdx.OpCode{memdx.OpSASLListMechs}) {
				t.Fatalf("requests %v; want SASL_LIST_MECHS alone", f.ops)
			}
		})
	}
}

// A user configured for a memcached server without SASL (it does not know
// SASL_LIST_MECHS) is not sent, even where PLAIN is allowed: the
// connection goes on unauthenticated, as libmemcached's does. A server
// with SASL gets PLAIN when it is allowed.
func TestMemcachedModeLogsInOnlyWhereSASLIs(t *testing.T) {
	for _, allow := range []bool{false, true} {
		f := &fakeNode{noSASL: true, user: "u", pass: "secret"}
		c, err := dialFake(t, f, Options{Memcached: true, Username: "u", Password: "secret", AllowPlainAuthWithoutTLS: allow})
		if err != nil {
			t.Fatalf("allow PLAIN %v: Dial: %v", allow, err)
		}
		if c.Mechanism() != "" {
			t.Fatalf("allow PLAIN %v: mechanism %q on a server without SASL", allow, c.Mechanism())
		}
		f.mu.Lock()
		ops := slices.Clone(f.ops)
		f.mu.Unlock()
		if want := []memdx.OpCode{memdx.OpSASLListMechs, memdx.OpVersion, memdx.OpGet, memdx.OpNoop}; !slices.Equal(ops, want) {
			t.Fatalf("allow PLAIN %v: requests %v, want %v", allow, ops, want)
		}
	}
	f := &fakeNode{mechs: "PLAIN", user: "u", pass: "secret"}
	c, err := dialFake(t, f, Options{Memcached: true, Username: "u", Password: "secret", AllowPlainAuthWithoutTLS: true})
	if err != nil || c.Mechanism() != memdx.MechPlain {
		t.Fatalf("Dial with SASL: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := []memdx.OpCode{memdx.OpSASLListMechs, memdx.OpSASLAuth, memdx.OpVersion, memdx.OpGet, memdx.OpNoop}; !slices.Equal(f.ops, want) {
		t.Fatalf("requests %v, want %v", f.ops, want)
	}
}

// A memcached server whose SASL does not offer PLAIN (Cyrus SASL with
// mech_list: cram-md5, say) is not sent the password with PLAIN, which it
// would refuse as if the password were wrong: Dial fails with an
// *AuthError naming what the server offers, having sent nothing but
// SASL_LIST_MECHS.
func TestMemcachedModeNoPlainOffered(t *testing.T) {
	f := &fakeNode{mechs: "CRAM-MD5 DIGEST-MD5", user: "u", pass: "secret"}
	_, err := dialFake(t, f, Options{Memcached: true, Username: "u", Password: "secret", AllowPlainAuthWithoutTLS: true})
	var ae *AuthError
	if !errors.As(err, &ae) || !errors.Is(err, kverr.ErrAuthenticationFailure) || ae.Status != 0 ||
		!strings.Contains(err.Error(), "CRAM-MD5") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Dial: %v; want an *AuthError naming the mechanisms offered", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(f.ops, []memdx.OpCode{memdx.OpSASLListMechs}) {
		t.Fatalf("requests %v; want SASL_LIST_MECHS alone", f.ops)
	}
}

// Callbacks fire only for the connection Dial returns: not OnClose for the
// connections it discards (the one with the corrupt error map here, or all
// of them when Dial fails), nor the notifications those received. A
// notification that arrives during the bootstrap of the returned
// connection is delivered before Dial returns.
func TestCallbacksOnlyForReturnedConn(t *testing.T) {
	var mu sync.Mutex
	var closes int
	var revs []int64
	o := Options{
		OnClose: func(error) { mu.Lock(); closes++; mu.Unlock() },
		OnClustermapNotification: func(n memdx.ClustermapNotification) {
			mu.Lock()
			revs = append(revs, n.Version.Revision)
			mu.Unlock()
		},
	}
	counts := func() (int, []int64) {
		mu.Lock()
		defer mu.Unlock()
		return closes, slices.Clone(revs)
	}
	f := &fakeNode{errMap: []byte(`{"version":2,"revision":1,"errors":{"zz":{}}}`), notify: true}
	c, err := dialFake(t, f, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.helloCalls()) != 2 {
		t.Fatal("no redial: the test does not cover a discarded connection")
	}
	// Dial waited for the discarded connection to end: had it fired
	// OnClose, that would show now.
	if n, r := counts(); n != 0 || !slices.Equal(r, []int64{2}) {
		t.Fatalf("after Dial: %d OnClose calls, notifications %v; want none, [2] (the returned connection's)", n, r)
	}
	c.Close()
	if n, _ := counts(); n != 1 {
		t.Fatalf("after Close: %d OnClose calls, want 1", n)
	}

	// A failed Dial fires nothing.
	f = &fakeNode{bucketStatus: memdx.StatusKeyNotFound, notify: true}
	if _, err := dialFake(t, f, withBucket(o, "gone")); !errors.Is(err, kverr.ErrBucketNotFound) {
		t.Fatalf("Dial: %v; want kverr.ErrBucketNotFound", err)
	}
	if n, r := counts(); n != 1 || len(r) != 1 {
		t.Fatalf("after a failed Dial: %d OnClose calls, notifications %v", n, r)
	}
}

func withBucket(o Options, b string) Options { o.Bucket = b; return o }

// A Couchbase bootstrap without credentials against a node that refuses
// everything before a login (kv_engine 7.x) fails at SELECT_BUCKET with
// EACCESS: the error says that no login was given, not only that access to
// the bucket was refused (which reads as a permissions problem of a user).
func TestBootstrapWithoutCredentialsSaysNoLoginWasGiven(t *testing.T) {
	f := &fakeNode{preAuth: true, errMap: validMap, mechs: "SCRAM-SHA512 PLAIN", user: "u", pass: "p", config: `{"rev":1}`}
	_, err := dialFake(t, f, Options{Bucket: "b"})
	var ba *BucketAccessError
	if !errors.As(err, &ba) || !errors.Is(err, kverr.ErrBucketNotFound) {
		t.Fatalf("Dial: %v (%T); want a *BucketAccessError", err, err)
	}
	if !strings.Contains(err.Error(), "no credentials were given") {
		t.Fatalf("Dial: %v; want it to say that no credentials were given", err)
	}
}
