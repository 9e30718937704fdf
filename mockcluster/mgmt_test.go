package mockcluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/conformance"
	"github.com/kvwire/kvwire/vbmap"
)

// restClient speaks to one node's REST port.
type restClient struct {
	t      *testing.T
	base   string // "http://host:port" or "https://..."
	client *http.Client
}

func newREST(t *testing.T, base string, tlsCfg *tls.Config) *restClient {
	tr := &http.Transport{TLSClientConfig: tlsCfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &restClient{t: t, base: base, client: &http.Client{Transport: tr}}
}

// get sends GET path with Basic auth (none when user is "") and returns the
// status, body and headers.
func (c *restClient) get(path, user, pass string) (int, []byte, http.Header) {
	c.t.Helper()
	return c.do("GET", path, user, pass)
}

func (c *restClient) do(method, path, user, pass string) (int, []byte, http.Header) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, body, resp.Header
}

// configStream is an open streaming endpoint: each Next returns the next
// config, checked to be followed by the four-newline separator.
type configStream struct {
	t      *testing.T
	resp   *http.Response
	cancel context.CancelFunc
	sc     *bufio.Scanner
}

// openStream GETs a streaming endpoint as user. The request's context ends
// after a minute at most, so that a stream that never pushes fails the
// test instead of hanging it.
func (c *restClient) openStream(path, user, pass string) *configStream {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.SetBasicAuth(user, pass)
	resp, err := c.client.Do(req)
	if err != nil {
		cancel()
		c.t.Fatal(err)
	}
	s := &configStream{t: c.t, resp: resp, cancel: cancel, sc: bufio.NewScanner(resp.Body)}
	s.sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	s.sc.Split(splitConfigStream)
	c.t.Cleanup(s.close)
	return s
}

func (s *configStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the next config of the stream.
func (s *configStream) next() []byte {
	s.t.Helper()
	if !s.sc.Scan() {
		s.t.Fatalf("stream ended: %v", s.sc.Err())
	}
	return append([]byte(nil), s.sc.Bytes()...)
}

// ended reports whether the stream ends (EOF) without another config.
func (s *configStream) ended() bool {
	return !s.sc.Scan() && s.sc.Err() == nil
}

// splitConfigStream is a bufio.SplitFunc that cuts a config stream as
// Couchbase Server writes it: each token is one JSON config immediately
// followed by "\n\n\n\n"; any other byte where a config should start, or
// bytes left at EOF, are an error. It is strict so that the mock's stream
// is held to the capture's framing.
func splitConfigStream(data []byte, atEOF bool) (int, []byte, error) {
	if len(data) > 0 && data[0] != '{' {
		return 0, nil, errors.New("stream: a config does not start here: " + strings.TrimSpace(string(data[:min(len(data), 20)])))
	}
	if i := bytes.Index(data, streamSeparator); i >= 0 {
		return i + len(streamSeparator), data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return 0, nil, errors.New("stream: bytes after the last separator")
	}
	return 0, nil, nil
}

// The corpus capture of a server's terse stream holds to splitConfigStream's
// framing; the mock's streams are checked with the same function.
func TestConfigStreamFramingOfServerCapture(t *testing.T) {
	data := conformance.Read(t, "configs/http_terse_streaming_two_configs.txt")
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	sc.Split(splitConfigStream)
	var revs []uint64
	for sc.Scan() {
		cfg, err := vbmap.Parse(sc.Bytes(), "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, cfg.Version().Rev)
	}
	if err := sc.Err(); err != nil || len(revs) != 2 || revs[0] != 18815 || revs[1] != 18820 {
		t.Fatalf("capture: revs %v, err %v", revs, err)
	}
}

// Basic auth and RBAC as ns_server answers them: no or wrong credentials
// 401 (with the Basic challenge), a bucket the user may not read 403 with
// the missing permission, a bucket that does not exist 404 (for a user
// who may read any bucket), other methods 405.
func TestRESTAuth(t *testing.T) {
	c := newCluster(t, Options{Nodes: 2, Users: []User{
		{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}},
		{Name: "app", Password: "app-pw", Buckets: []string{"travel"}},
	}, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 16}, {Name: "travel", NumVbuckets: 16}}})
	rc := newREST(t, "http://"+c.Node(0).MgmtAddr(), nil)

	for _, path := range []string{"/pools", "/pools/default", "/pools/default/b/default", "/pools/default/bs/default"} {
		code, _, h := rc.get(path, "", "")
		if code != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic ") {
			t.Fatalf("%s without credentials: %d %q", path, code, h.Get("WWW-Authenticate"))
		}
		if code, _, _ := rc.get(path, DefaultUser, "wrong"); code != 401 {
			t.Fatalf("%s with a wrong password: %d", path, code)
		}
		if code, _, _ := rc.get(path, "nobody", DefaultPassword); code != 401 {
			t.Fatalf("%s as an unknown user: %d", path, code)
		}
	}
	if code, body, _ := rc.get("/pools", "app", "app-pw"); code != 200 || !bytes.Contains(body, []byte(`"name":"default"`)) {
		t.Fatalf("/pools as a bucket user: %d %s", code, body)
	}
	if code, _, _ := rc.get("/pools/default/b/travel", "app", "app-pw"); code != 200 {
		t.Fatalf("app reads its bucket: %d", code)
	}
	code, body, _ := rc.get("/pools/default/b/default", "app", "app-pw")
	if code != 403 || !bytes.Contains(body, []byte("cluster.bucket[default].settings!read")) {
		t.Fatalf("app reads a bucket it may not: %d %s", code, body)
	}
	if code, _, _ := rc.get("/pools/default/b/nope", "app", "app-pw"); code != 403 {
		t.Fatalf("app asks for a bucket it may not use that does not exist: %d, want 403 (permission first)", code)
	}
	if code, _, _ := rc.get("/pools/default/b/nope", DefaultUser, DefaultPassword); code != 404 {
		t.Fatalf("admin asks for a bucket that does not exist: %d", code)
	}
	if code, _, _ := rc.get("/pools/default/nothing", DefaultUser, DefaultPassword); code != 404 {
		t.Fatalf("unknown path: %d", code)
	}
	if code, _, _ := rc.do("POST", "/pools/default/b/default", DefaultUser, DefaultPassword); code != 405 {
		t.Fatalf("POST: %d", code)
	}
	// RESTRequestCount counts what passed authentication, by path: the
	// 401s above are not counted; app's 403 and the POST's 405 are.
	if n := c.RESTRequestCount("/pools/default/b/default"); n != 2 {
		t.Fatalf("RESTRequestCount(/pools/default/b/default) = %d, want 2 (app's 403, the POST)", n)
	}
	if n := c.RESTRequestCount("/pools/default/bs/default"); n != 0 {
		t.Fatalf("RESTRequestCount(/pools/default/bs/default) = %d, want 0 (only refused credentials)", n)
	}
	// A user removed is refused at once.
	if err := c.RemoveUser("app"); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := rc.get("/pools/default/b/travel", "app", "app-pw"); code != 401 {
		t.Fatalf("removed user: %d", code)
	}
}

// /pools/default/b/<bucket> is the terse config with "$HOST" placeholders,
// thisNode on the serving node; /pools/default/buckets/<bucket> the same
// config with the host filled in. /pools and /pools/default describe the
// cluster.
func TestRESTConfigEndpoints(t *testing.T) {
	c := newCluster(t, Options{Nodes: 3})
	b := c.Bucket(DefaultBucket)
	rc := newREST(t, "http://"+c.Node(1).MgmtAddr(), nil)

	code, terse, _ := rc.get("/pools/default/b/default", DefaultUser, DefaultPassword)
	if code != 200 || !bytes.Equal(terse, b.ConfigJSON(1)) || !bytes.Contains(terse, []byte("$HOST")) {
		t.Fatalf("b: %d %.200s", code, terse)
	}
	code, verbose, _ := rc.get("/pools/default/buckets/default", DefaultUser, DefaultPassword)
	if code != 200 || bytes.Contains(verbose, []byte("$HOST")) || !bytes.Contains(verbose, []byte(`"127.0.0.1:`)) {
		t.Fatalf("buckets: %d %.200s", code, verbose)
	}
	for _, body := range [][]byte{terse, verbose} {
		cfg, err := vbmap.Parse(body, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Version().Rev != uint64(b.Rev()) || cfg.NumVbuckets() != b.NumVbuckets() || !cfg.Nodes()[1].ThisNode {
			t.Fatalf("config rev %v vbuckets %d nodes %+v", cfg.Version(), cfg.NumVbuckets(), cfg.Nodes())
		}
		if a, _ := cfg.ServerKVAddr(0, "", false); a != c.Node(0).Addr() {
			t.Fatalf("server 0 at %s, want %s", a, c.Node(0).Addr())
		}
	}

	code, body, _ := rc.get("/pools", DefaultUser, DefaultPassword)
	var pools struct {
		Pools []struct{ Name, URI string }
		UUID  string
	}
	if code != 200 || json.Unmarshal(body, &pools) != nil || len(pools.Pools) != 1 || pools.Pools[0].Name != "default" || pools.UUID == "" {
		t.Fatalf("/pools: %d %s", code, body)
	}
	code, body, _ = rc.get("/pools/default", DefaultUser, DefaultPassword)
	var pool struct {
		Nodes []struct {
			Hostname string
			ThisNode bool
		}
		RebalanceStatus string
	}
	if code != 200 || json.Unmarshal(body, &pool) != nil || len(pool.Nodes) != 3 || !pool.Nodes[1].ThisNode ||
		pool.Nodes[2].Hostname != c.Node(2).MgmtAddr() || pool.RebalanceStatus != "none" {
		t.Fatalf("/pools/default: %d %s", code, body)
	}
	code, body, _ = rc.get("/pools/default/nodeServices", DefaultUser, DefaultPassword)
	if cfg, err := vbmap.Parse(body, "127.0.0.1"); code != 200 || err != nil || cfg.Locator() != vbmap.LocatorNone || len(cfg.Nodes()) != 3 {
		t.Fatalf("nodeServices: %d %v %s", code, err, body)
	}
}

// The streaming endpoint writes the current config, then pushes each new
// one as it is published: a rebalance's start (forward map), steps and end,
// a failover, a node added and removed. Each push is waited for as an
// event (the stream's next config), never by sleeping; the time each push
// took from the call that published it is logged.
func TestRESTStreamPushesEveryNewConfig(t *testing.T) {
	c := newCluster(t, Options{Nodes: 3, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 32}}})
	b := c.Bucket(DefaultBucket)
	rc := newREST(t, "http://"+c.Node(0).MgmtAddr(), nil)
	st := rc.openStream("/pools/default/bs/default", DefaultUser, DefaultPassword)
	if te := st.resp.TransferEncoding; len(te) != 1 || te[0] != "chunked" {
		t.Fatalf("transfer encoding %v, want chunked", te)
	}
	parse := func(body []byte) *vbmap.Config {
		t.Helper()
		cfg, err := vbmap.Parse(body, "127.0.0.1")
		if err != nil {
			t.Fatalf("%v: %.200s", err, body)
		}
		return cfg
	}
	if cfg := parse(st.next()); cfg.Version().Rev != uint64(b.Rev()) {
		t.Fatalf("first config rev %v, bucket at %d", cfg.Version(), b.Rev())
	}
	// expect runs publish and returns the next config of the stream, which
	// must be the bucket's config as publish left it.
	expect := func(what string, publish func()) *vbmap.Config {
		t.Helper()
		start := time.Now()
		publish()
		cfg := parse(st.next())
		t.Logf("%s: pushed %v after the call", what, time.Since(start))
		if cfg.Version().Rev != uint64(b.Rev()) {
			t.Fatalf("%s: stream rev %v, bucket at %d", what, cfg.Version(), b.Rev())
		}
		return cfg
	}
	n3, err := c.AddNode()
	if err != nil {
		t.Fatal(err)
	}
	_ = n3
	// AddNode published the new member; the stream sends it.
	if cfg := parse(st.next()); len(cfg.Nodes()) != 4 || cfg.Version().Rev != uint64(b.Rev()) {
		t.Fatalf("after AddNode: %d nodes, rev %v", len(cfg.Nodes()), cfg.Version())
	}
	var r *Rebalance
	cfg := expect("rebalance start", func() {
		if r, err = c.StartRebalance(RebalanceOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if !cfg.HasForwardMap() || cfg.NumServers() != 4 {
		t.Fatalf("rebalance start: forward map %v, %d servers", cfg.HasForwardMap(), cfg.NumServers())
	}
	expect("rebalance step", func() {
		if n, err := r.Step(4); err != nil || n == 0 {
			t.Fatalf("step: %d %v", n, err)
		}
	})
	if cfg := expect("rebalance end", func() {
		if err := r.Finish(); err != nil {
			t.Fatal(err)
		}
	}); cfg.HasForwardMap() {
		t.Fatal("the finished rebalance's config still has a forward map")
	}
	expect("failover", func() {
		if err := c.Failover(2); err != nil {
			t.Fatal(err)
		}
	})
	expect("node removed", func() {
		if err := c.RemoveNode(3); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := b.AddScope("inventory"); err != nil {
		t.Fatal(err)
	}
	if cfg := parse(st.next()); cfg.Version().Rev != uint64(b.Rev()) {
		t.Fatalf("after AddScope: rev %v, bucket at %d", cfg.Version(), b.Rev())
	}

	// The bucket's removal ends its stream.
	if err := c.RemoveBucket(DefaultBucket); err != nil {
		t.Fatal(err)
	}
	if !st.ended() {
		t.Fatal("the stream of a removed bucket did not end")
	}
}

// A node that stops ends its streams (the client sees the connection end),
// and Close leaves no stream handler running (TestMain's leak check).
func TestRESTStreamEndsWhenNodeStops(t *testing.T) {
	c := newCluster(t, Options{Nodes: 2, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 16}}})
	rc := newREST(t, "http://"+c.Node(1).MgmtAddr(), nil)
	bucketStream := rc.openStream("/pools/default/bs/default", DefaultUser, DefaultPassword)
	bucketStream.next()
	clusterStream := rc.openStream("/pools/default/nodeServicesStreaming", DefaultUser, DefaultPassword)
	if cfg, err := vbmap.Parse(clusterStream.next(), "127.0.0.1"); err != nil || cfg.Locator() != vbmap.LocatorNone {
		t.Fatalf("cluster stream: %v", err)
	}
	c.Node(1).Stop()
	for _, s := range []*configStream{bucketStream, clusterStream} {
		if s.sc.Scan() {
			t.Fatalf("a stopped node's stream sent %.100s", s.sc.Bytes())
		}
	}
	if err := c.Node(1).Restart(); err != nil {
		t.Fatal(err)
	}
	again := rc.openStream("/pools/default/bs/default", DefaultUser, DefaultPassword)
	again.next()
}

// With TLS the nodes serve the same endpoints over HTTPS on their mgmtSSL
// port, which the configs list; HTTPConnString names those ports.
func TestRESTOverTLS(t *testing.T) {
	c := newCluster(t, Options{Nodes: 2, TLS: true, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 16}}})
	n := c.Node(0)
	if n.MgmtTLSAddr() == "" {
		t.Fatal("no HTTPS address with TLS")
	}
	rc := newREST(t, "https://"+n.MgmtTLSAddr(), tlsConfig(c))
	code, body, _ := rc.get("/pools/default/b/default", DefaultUser, DefaultPassword)
	if code != 200 {
		t.Fatalf("HTTPS: %d %s", code, body)
	}
	cfg, err := vbmap.Parse(body, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Nodes()[0].Ports.MgmtTLS; got != mustPort(n.MgmtTLSAddr()) {
		t.Fatalf("config lists mgmtSSL %d, node serves HTTPS on %s", got, n.MgmtTLSAddr())
	}
	st := rc.openStream("/pools/default/bs/default", DefaultUser, DefaultPassword)
	st.next()
	if _, err := c.Bucket(DefaultBucket).AddScope("s"); err != nil {
		t.Fatal(err)
	}
	st.next()
	want := "couchbases://" + c.MgmtTLSAddrs()[0] + "=http," + c.MgmtTLSAddrs()[1] + "=http"
	if got := c.HTTPConnString(); got != want {
		t.Fatalf("HTTPConnString %q, want %q", got, want)
	}
	// Plain HTTP is still served, as a server's 8091 is beside 18091.
	if code, _, _ := newREST(t, "http://"+n.MgmtAddr(), nil).get("/pools", DefaultUser, DefaultPassword); code != 200 {
		t.Fatalf("plain HTTP beside HTTPS: %d", code)
	}
}

func TestHTTPConnString(t *testing.T) {
	c := newCluster(t, Options{Nodes: 2, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 16}}})
	want := "couchbase://" + c.Node(0).MgmtAddr() + "=http," + c.Node(1).MgmtAddr() + "=http"
	if got := c.HTTPConnString(); got != want {
		t.Fatalf("HTTPConnString %q, want %q", got, want)
	}
	if got := c.MgmtTLSAddrs(); got != nil {
		t.Fatalf("MgmtTLSAddrs without TLS: %v", got)
	}
}
