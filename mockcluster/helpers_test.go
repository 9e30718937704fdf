package mockcluster

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/leakcheck"
	"github.com/kvwire/kvwire/memdx"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// rawClient is a minimal memcached binary protocol client over memdx for
// the mock's tests: one request at a time, or raw pipelined bytes.
type rawClient struct {
	t      testing.TB
	nc     net.Conn
	buf    []byte
	opaque uint32
	// feats are the features the server granted in HELLO.
	feats map[memdx.HelloFeature]bool
	// notes collects server-initiated packets read while waiting for
	// responses.
	notes []memdx.Packet
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, feats: map[memdx.HelloFeature]bool{}}
}

func dialTLS(t testing.TB, addr string, cfg *tls.Config) *rawClient {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, feats: map[memdx.HelloFeature]bool{}}
}

// send writes one request with the next opaque and returns the opaque.
func (c *rawClient) send(r memdx.Request) uint32 {
	c.t.Helper()
	c.opaque++
	b, err := r.AppendTo(nil, c.opaque)
	if err != nil {
		c.t.Fatalf("encode %s: %v", r.OpCode, err)
	}
	c.write(b)
	return c.opaque
}

func (c *rawClient) write(b []byte) {
	c.t.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// read returns the next packet (of any kind) within the timeout. The
// packet's slices are copies.
func (c *rawClient) read(timeout time.Duration) (memdx.Packet, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
	for {
		if len(c.buf) >= memdx.HeaderSize {
			n, err := memdx.PacketSize(c.buf, 0)
			if err != nil {
				return memdx.Packet{}, err
			}
			if len(c.buf) >= n {
				raw := append([]byte(nil), c.buf[:n]...)
				c.buf = c.buf[n:]
				p, _, err := memdx.DecodePacket(raw, 0)
				return p, err
			}
		}
		tmp := make([]byte, 64<<10)
		n, err := c.nc.Read(tmp)
		c.buf = append(c.buf, tmp[:n]...)
		if err != nil {
			return memdx.Packet{}, err
		}
	}
}

// recv reads the response with the given opaque, keeping server-initiated
// packets in notes.
func (c *rawClient) recv(opaque uint32) memdx.Packet {
	c.t.Helper()
	for {
		p, err := c.read(5 * time.Second)
		if err != nil {
			c.t.Fatalf("read response %d: %v", opaque, err)
		}
		if p.Magic == memdx.MagicServerReq {
			c.notes = append(c.notes, p)
			continue
		}
		if p.Opaque != opaque {
			c.t.Fatalf("response opaque %d (%s %s), want %d", p.Opaque, p.OpCode, p.Status, opaque)
		}
		return p
	}
}

func (c *rawClient) do(r memdx.Request) memdx.Packet {
	c.t.Helper()
	return c.recv(c.send(r))
}

// expectClosed checks that the server closes the connection (after any
// responses already queued, which it returns).
func (c *rawClient) expectClosed() []memdx.Packet {
	c.t.Helper()
	var got []memdx.Packet
	for {
		p, err := c.read(5 * time.Second)
		if err == nil {
			got = append(got, p)
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatalf("connection still open after 5s")
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			var oe *net.OpError
			if !errors.As(err, &oe) {
				c.t.Fatalf("read: %v", err)
			}
		}
		return got
	}
}

// passed sends a GET and waits for its answer: on a connection with
// UnorderedExecution, once it is answered the node has handled every
// request sent before it, those whose answers it delays included. (A NOOP
// would wait for those answers: kv_engine may not reorder it.)
func (c *rawClient) passed(b *Bucket) {
	c.t.Helper()
	c.do(keyReq(c, b, memdx.NewGet([]byte("mocktest-passed"))))
}

func (c *rawClient) hello(fs ...memdx.HelloFeature) []memdx.HelloFeature {
	c.t.Helper()
	p := c.do(memdx.NewHello(memdx.HelloKey("mocktest", "0000000000000001"), fs))
	if p.Status != memdx.StatusSuccess {
		c.t.Fatalf("HELLO: %s", p.Status)
	}
	got, err := memdx.DecodeHelloFeatures(p.Value)
	if err != nil {
		c.t.Fatal(err)
	}
	c.feats = map[memdx.HelloFeature]bool{}
	for _, f := range got {
		c.feats[f] = true
	}
	return got
}

func (c *rawClient) authPlain(user, pass string) memdx.Status {
	c.t.Helper()
	return c.do(memdx.NewSASLAuth(memdx.MechPlain, memdx.PlainPayload(user, pass))).Status
}

func (c *rawClient) selectBucket(name string) memdx.Status {
	c.t.Helper()
	return c.do(memdx.NewSelectBucket(name)).Status
}

// stdFeatures are what the tests negotiate unless they say otherwise.
var stdFeatures = []memdx.HelloFeature{
	memdx.FeatureXerror, memdx.FeatureSelectBucket, memdx.FeatureJSON, memdx.FeatureCollections,
	memdx.FeatureAltRequests, memdx.FeatureSyncReplication, memdx.FeatureMutationSeqno,
	memdx.FeatureSnappy, memdx.FeatureDuplex, memdx.FeatureClustermapChangeNotification,
	memdx.FeatureDedupeNotMyVbucketClustermap,
}

// bootstrap connects to addr, negotiates fs (stdFeatures when nil), logs in
// as the default user and selects bucket.
func bootstrap(t testing.TB, addr, bucket string, fs []memdx.HelloFeature) *rawClient {
	t.Helper()
	c := dialRaw(t, addr)
	if fs == nil {
		fs = stdFeatures
	}
	c.hello(fs...)
	if st := c.authPlain(DefaultUser, DefaultPassword); st != memdx.StatusSuccess {
		t.Fatalf("auth: %s", st)
	}
	if bucket != "" {
		if st := c.selectBucket(bucket); st != memdx.StatusSuccess {
			t.Fatalf("select %s: %s", bucket, st)
		}
	}
	return c
}

func newCluster(t testing.TB, o Options) *Cluster {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// keyReq builds a request for key in the default collection routed to its
// vbucket.
func keyReq(c *rawClient, b *Bucket, r memdx.Request) memdx.Request {
	r.Vbucket = b.VbucketForKey(r.Key)
	if c.feats[memdx.FeatureCollections] {
		r.Collections = true
	}
	return r
}

// owner returns a client connected to the active node of key's vbucket.
func ownerOf(b *Bucket, key string) int {
	return b.VbucketMap()[b.VbucketForKey([]byte(key))][0]
}

func u32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func mustPort(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		panic(err)
	}
	n := 0
	for _, c := range p {
		n = n*10 + int(c-'0')
	}
	return n
}

func tlsConfig(c *Cluster) *tls.Config {
	return &tls.Config{RootCAs: c.RootCAs(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// expectAnswer checks that p, the answer to the request named name, has
// status st and, when ctx is not empty, an error context of exactly ctx.
func expectAnswer(t *testing.T, name string, p memdx.Packet, st memdx.Status, ctx string) {
	t.Helper()
	if p.Status != st {
		t.Errorf("%s: %s %q, want %s", name, p.Status, p.Value, st)
		return
	}
	if ctx == "" {
		return
	}
	if ec, ok := memdx.DecodeErrorContext(p.Datatype, p.Value); !ok || ec.Context != ctx {
		t.Errorf("%s: context %q, want %q", name, p.Value, ctx)
	}
}
