package faultnode_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/leakcheck"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// testTimeout bounds every wait; tests end as soon as the event happens.
const testTimeout = 10 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// proxied starts a one-node mock cluster and a proxy in front of it.
func proxied(t *testing.T) (*mockcluster.Cluster, *faultnode.Proxy) {
	t.Helper()
	mc, err := mockcluster.New(mockcluster.Options{Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	p, err := faultnode.NewProxy(mc.Node(0).Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return mc, p
}

// opts are the options of a kvwire connection to the proxy or the server.
// The probe timeout is a minute, not the default second: the node and the
// proxy run in this process, so a busy machine delays their answers as much
// as the client's, and no test here is about the connection's health check.
func opts() conn.Options {
	return conn.Options{Username: faultnode.DefaultUser, Password: faultnode.DefaultPassword, Bucket: mockcluster.DefaultBucket,
		ProbeTimeout: time.Minute}
}

// dial bootstraps a kvwire connection to addr.
func dial(t *testing.T, addr string, o conn.Options) *conn.Conn {
	t.Helper()
	c, err := conn.Dial(testCtx(t), addr, o)
	if err != nil {
		t.Fatalf("Dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// get runs a GET of key on vbucket vb and returns the response's status and
// value.
func get(ctx context.Context, c *conn.Conn, vb uint16, key string) (memdx.Status, []byte, error) {
	req := memdx.NewGet([]byte(key))
	req.Vbucket = vb
	var st memdx.Status
	var val []byte
	err := c.Do(ctx, &req, func(p *memdx.Packet) error {
		st, val = p.Status, append([]byte(nil), p.Value...)
		return nil
	})
	return st, val, err
}

// rawConn is a plain TCP client that writes requests and reads packets,
// to see exactly what the proxy sends.
type rawConn struct {
	t  *testing.T
	nc net.Conn
}

func rawDial(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(testTimeout))
	return &rawConn{t: t, nc: nc}
}

func (r *rawConn) send(req memdx.Request, opaque uint32) {
	r.t.Helper()
	b, err := req.AppendTo(nil, opaque)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// read returns the next packet.
func (r *rawConn) read() memdx.Packet {
	r.t.Helper()
	h := r.readN(memdx.HeaderSize)
	size, err := memdx.PacketSize(h, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	b := append(h, r.readN(size-memdx.HeaderSize)...)
	p, _, err := memdx.DecodePacket(b, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

func (r *rawConn) readN(n int) []byte {
	r.t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(r.nc, b); err != nil {
		r.t.Fatalf("read %d bytes: %v", n, err)
	}
	return b
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatal("timed out waiting for an event")
		panic("unreachable")
	}
}

// cancelAfter runs do with a context it cancels once event fires (the
// request has reached the fault), and returns do's error: an answer that
// came anyway makes it nil.
func cancelAfter[T any](t *testing.T, event <-chan T, do func(context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- do(ctx) }()
	select {
	case <-event:
	case err := <-done:
		t.Fatalf("returned before the request reached the fault: %v", err)
	case <-time.After(testTimeout):
		t.Fatal("the request never reached the fault")
	}
	cancel()
	return recv(t, done)
}
