package faultnode_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// seed stores key=value in the mock and returns the key's vbucket.
func seed(t *testing.T, mc *mockcluster.Cluster, key, value string) uint16 {
	t.Helper()
	b := mc.Bucket(mockcluster.DefaultBucket)
	if _, err := b.Set("_default", "_default", key, []byte(value), 0, 0); err != nil {
		t.Fatal(err)
	}
	return b.VbucketForKey([]byte(key))
}

func TestProxyRelaysBothWays(t *testing.T) {
	mc, p := proxied(t)
	vb := seed(t, mc, "k", "v")
	c := dial(t, p.Addr(), opts())
	st, val, err := get(testCtx(t), c, vb, "k")
	if err != nil || st != memdx.StatusSuccess || string(val) != "v" {
		t.Fatalf("GET through the proxy: %s %q %v", st, val, err)
	}
	if p.Requests(memdx.OpGet) != 1 || p.Requests(memdx.OpHello) != 1 || p.Accepted() != 1 || len(p.Conns()) != 1 {
		t.Fatalf("GET %d, HELLO %d, accepted %d, open %d", p.Requests(memdx.OpGet), p.Requests(memdx.OpHello), p.Accepted(), len(p.Conns()))
	}
	if n := mc.Node(0).RequestCount(memdx.OpGet); n != 1 {
		t.Fatalf("the node saw %d GETs", n)
	}
}

// A black hole swallows requests: the operation times out, and after the
// black hole the connection works again.
func TestProxyBlackholeTimesOutThenRecovers(t *testing.T) {
	mc, p := proxied(t)
	vb := seed(t, mc, "k", "v")
	c := dial(t, p.Addr(), opts())
	p.Blackhole(true)
	err := cancelAfter(t, p.NextRequest(memdx.OpGet), func(ctx context.Context) error {
		_, _, err := get(ctx, c, vb, "k")
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("GET into the black hole: %v; want it unanswered until cancelled", err)
	}
	if p.Dropped() != 1 || mc.Node(0).RequestCount(memdx.OpGet) != 0 {
		t.Fatalf("dropped %d, the node saw %d GETs", p.Dropped(), mc.Node(0).RequestCount(memdx.OpGet))
	}
	p.Blackhole(false)
	if st, val, err := get(testCtx(t), c, vb, "k"); err != nil || st != memdx.StatusSuccess || string(val) != "v" {
		t.Fatalf("GET after the black hole: %s %q %v", st, val, err)
	}
}

func TestProxyDuplicateResponsesSendsTwoAnswersToOneOpaque(t *testing.T) {
	for _, delay := range []time.Duration{0, 20 * time.Millisecond} {
		_, p := proxied(t)
		p.DuplicateResponses(func(req, resp *memdx.Packet) bool { return resp.OpCode == memdx.OpHello }, delay)
		r := rawDial(t, p.Addr())
		start := time.Now()
		r.send(memdx.NewHello([]byte("dup"), nil), 7)
		a, b := r.read(), r.read()
		if a.Opaque != 7 || b.Opaque != 7 || a.OpCode != memdx.OpHello || b.OpCode != memdx.OpHello {
			t.Fatalf("delay %v: got %s/%d and %s/%d; want two HELLO answers to opaque 7", delay, a.OpCode, a.Opaque, b.OpCode, b.Opaque)
		}
		if since := time.Since(start); since < delay {
			t.Fatalf("the copy came after %v; want at least %v", since, delay)
		}
		// Only matching responses are doubled.
		r.send(memdx.NewNoop(), 8)
		r.send(memdx.NewNoop(), 9)
		if n, h := r.read(), r.read(); n.Opaque != 8 || h.Opaque != 9 {
			t.Fatalf("delay %v: after the copy got opaques %d, %d; want 8, 9", delay, n.Opaque, h.Opaque)
		}
		if p.Forwarded() != 4 {
			t.Fatalf("delay %v: forwarded %d; want 4", delay, p.Forwarded())
		}
	}
}

func TestProxyInjectResponseReachesClientWithStrayOpaque(t *testing.T) {
	_, p := proxied(t)
	r := rawDial(t, p.Addr())
	r.send(memdx.NewNoop(), 1)
	r.read() // the proxy has the connection
	if n, err := p.InjectResponse(memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpCollectionsGetID,
		Status: memdx.StatusUnknownCollection, Opaque: faultnode.StrayOpaque}); n != 1 || err != nil {
		t.Fatalf("InjectResponse: %d, %v", n, err)
	}
	if got := r.read(); got.Opaque != faultnode.StrayOpaque || got.Status != memdx.StatusUnknownCollection {
		t.Fatalf("got %s %s opaque %#x", got.OpCode, got.Status, got.Opaque)
	}
}

// Bytes that are not a packet are a framing error: kvwire closes the
// connection.
func TestProxyGarbageClosesClientConnection(t *testing.T) {
	_, p := proxied(t)
	c := dial(t, p.Addr(), opts())
	if n := p.Inject(bytes.Repeat([]byte{0x42}, memdx.HeaderSize)); n != 1 {
		t.Fatalf("Inject reached %d connections", n)
	}
	recv(t, c.Done())
	if !errors.Is(c.Err(), memdx.ErrMalformed) {
		t.Fatalf("connection ended with %v; want a malformed-packet error", c.Err())
	}
}

func TestProxyStallHoldsRestOfResponseUntilRelease(t *testing.T) {
	_, p := proxied(t)
	r := rawDial(t, p.Addr())
	st := p.StallNextResponse(10)
	r.send(memdx.NewHello([]byte("stall"), nil), 3)
	recv(t, st.Reached())
	first := r.readN(10)
	// Nothing more comes while stalled. A short read deadline can only
	// miss a defect under load, never fail a correct proxy.
	r.nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var one [1]byte
	if n, err := r.nc.Read(one[:]); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read during the stall: %d bytes, %v", n, err)
	}
	r.nc.SetReadDeadline(time.Now().Add(testTimeout))
	st.Release()
	size, err := memdx.PacketSize(append(first, r.readN(memdx.HeaderSize-10)...), 0)
	if err != nil {
		t.Fatal(err)
	}
	rest := r.readN(size - memdx.HeaderSize)
	_ = rest
	r.send(memdx.NewNoop(), 4)
	if got := r.read(); got.Opaque != 4 {
		t.Fatalf("after the stall got opaque %d", got.Opaque)
	}
}

func TestProxyResetAndRefuseNew(t *testing.T) {
	_, p := proxied(t)
	c := dial(t, p.Addr(), opts())
	p.Reset()
	recv(t, c.Done())
	if !errors.Is(c.Err(), syscall.ECONNRESET) {
		t.Fatalf("connection ended with %v; want a connection reset", c.Err())
	}
	p.RefuseNew(true)
	if _, err := conn.Dial(testCtx(t), p.Addr(), opts()); err == nil {
		t.Fatal("Dial succeeded against a refusing proxy")
	}
	p.RefuseNew(false)
	dial(t, p.Addr(), opts())
	if p.Accepted() != 3 {
		t.Fatalf("accepted %d connections; want 3", p.Accepted())
	}
}

func TestProxyOnResponseRewritesAnswers(t *testing.T) {
	mc, p := proxied(t)
	vb := seed(t, mc, "k", "v")
	c := dial(t, p.Addr(), opts())
	huge := bytes.Repeat([]byte("x"), 4<<20)
	cases := []struct {
		name   string
		action func(req *memdx.Packet) faultnode.Action
		status memdx.Status
		value  []byte
	}{
		{"NMV without config", func(req *memdx.Packet) faultnode.Action {
			return faultnode.Action{Send: []memdx.Packet{faultnode.NotMyVbucket(req, nil)}}
		}, memdx.StatusNotMyVbucket, nil},
		{"NMV with config", func(req *memdx.Packet) faultnode.Action {
			return faultnode.Action{Send: []memdx.Packet{faultnode.NotMyVbucket(req, []byte(`{"rev":99}`))}}
		}, memdx.StatusNotMyVbucket, []byte(`{"rev":99}`)},
		{"huge body", func(req *memdx.Packet) faultnode.Action {
			return faultnode.Action{Send: []memdx.Packet{faultnode.Reply(req, memdx.StatusSuccess, huge)}}
		}, memdx.StatusSuccess, huge},
	}
	for _, tc := range cases {
		p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
			if req == nil || req.OpCode != memdx.OpGet {
				return faultnode.Action{}
			}
			return tc.action(req)
		})
		st, val, err := get(testCtx(t), c, vb, "k")
		if err != nil || st != tc.status || !bytes.Equal(val, tc.value) {
			t.Fatalf("%s: %s, %d bytes, %v", tc.name, st, len(val), err)
		}
	}
	// Drop: the answer never comes.
	dropped := make(chan struct{}, 1)
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		dropped <- struct{}{}
		return faultnode.Action{Drop: true}
	})
	err := cancelAfter(t, dropped, func(ctx context.Context) error {
		_, _, err := get(ctx, c, vb, "k")
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("dropped answer: %v; want it unanswered until cancelled", err)
	}
	if mc.Node(0).RequestCount(memdx.OpGet) != 4 {
		t.Fatalf("the node saw %d GETs; want 4", mc.Node(0).RequestCount(memdx.OpGet))
	}
}

// The request hook answers GET_CLUSTER_CONFIG itself: the node never sees
// it and Dial gets the scripted config.
func TestProxyOnRequestAnswersLocally(t *testing.T) {
	mc, p := proxied(t)
	cfg := []byte(`{"rev":42,"name":"scripted"}`)
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		if req.OpCode == memdx.OpGetClusterConfig {
			return faultnode.Action{Send: []memdx.Packet{faultnode.Reply(req, memdx.StatusSuccess, cfg)}}
		}
		return faultnode.Action{}
	})
	c := dial(t, p.Addr(), opts())
	if !bytes.Equal(c.ClusterConfig(), cfg) {
		t.Fatalf("config %.80q; want %q", c.ClusterConfig(), cfg)
	}
	if n := mc.Node(0).RequestCount(memdx.OpGetClusterConfig); n != 0 || p.Requests(memdx.OpGetClusterConfig) != 1 {
		t.Fatalf("the node saw %d GET_CLUSTER_CONFIG, the proxy %d", n, p.Requests(memdx.OpGetClusterConfig))
	}
}

// Close returns with a stalled response and a delayed duplicate pending;
// leakcheck (TestMain) proves their goroutines ended.
func TestProxyCloseEndsStallsAndDelayedCopies(t *testing.T) {
	_, p := proxied(t)
	r := rawDial(t, p.Addr())
	p.DuplicateResponses(func(req, resp *memdx.Packet) bool { return true }, time.Hour)
	r.send(memdx.NewNoop(), 1)
	r.read()
	st := p.StallNextResponse(5)
	r.send(memdx.NewNoop(), 2)
	recv(t, st.Reached())
	p.Close()
	if len(p.Conns()) != 0 {
		t.Fatalf("%d connections open after Close", len(p.Conns()))
	}
}
