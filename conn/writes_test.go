package conn

import (
	"context"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// WritesInFlight counts a request that may change data from when it is
// queued until the server is known to have processed it: a set until its
// answer, a quiet set until a later NOOP's answer, a set sent and then
// cancelled (a tombstone) until its late answer; a read never, a set
// withdrawn before it was written not at all, and nothing once the
// connection has ended.
func TestWritesInFlightCountsWritesUntilTheServerHasProcessedThem(t *testing.T) {
	c, peer := dialPipe(t, Options{ProbeAfter: -1}, nil) // no health probe among the requests read
	n := make(tagNotifier, 16)
	want := func(w int, what string) {
		t.Helper()
		if got := c.WritesInFlight(); got != w {
			t.Fatalf("%s: %d writes in flight, want %d", what, got, w)
		}
	}
	set := func(op memdx.OpCode, key string, tag uint64) Pending {
		t.Helper()
		req := memdx.NewStore(op, []byte(key), []byte("v"), 0, 0)
		p, err := c.Start(time.Time{}, &req, nil, n, tag, nil)
		if err != nil {
			t.Fatalf("Start %s %s: %v", op, key, err)
		}
		return p
	}
	ended := func(tag uint64) {
		t.Helper()
		if got := recv(t, (<-chan uint64)(n)); got != tag {
			t.Fatalf("request %d ended, want %d", got, tag)
		}
	}
	written := func(p Pending) {
		waitFor(t, "written", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return callOf(c, p.Opaque).state == reqWritten })
	}
	want(0, "after the bootstrap")

	var v string
	startGet(t, c, memdx.OpGet, "g", n, 1, &v)
	want(0, "a get in flight")
	peer.write(ok(peer.read(), "G"))
	ended(1)

	c.Cork()
	p := set(memdx.OpSet, "a", 2)
	want(1, "a queued set")
	if err, done := p.Cancel(context.Canceled); err == nil || done {
		t.Fatalf("withdrawing the corked set: %v, %v", err, done)
	}
	c.Uncork()
	want(0, "a withdrawn set")

	set(memdx.OpSet, "b", 3)
	r := peer.read()
	want(1, "a set sent")
	peer.write(res(r, memdx.StatusSuccess, ""))
	ended(3)
	want(0, "an answered set")

	set(memdx.OpSetQ, "c", 4)
	set(memdx.OpSetQ, "d", 5)
	noop := memdx.NewNoop()
	if _, err := c.Start(time.Time{}, &noop, nil, n, 6, nil); err != nil {
		t.Fatal(err)
	}
	peer.read()
	peer.read()
	rn := peer.read()
	want(2, "quiet sets before their NOOP's answer")
	peer.write(ok(rn, ""))
	for range 3 {
		recv(t, (<-chan uint64)(n))
	}
	want(0, "quiet sets settled by the NOOP")

	p = set(memdx.OpSet, "e", 7)
	r = peer.read()
	written(p)
	if err, done := p.Cancel(context.Canceled); err == nil || done {
		t.Fatalf("abandoning the sent set: %v, %v", err, done)
	}
	want(1, "a set's tombstone")
	peer.write(res(r, memdx.StatusSuccess, ""))
	g := goGet(context.Background(), c, "h")
	peer.write(ok(peer.read(), "H"))
	recv(t, g) // answered after the late answer: the tombstone is gone
	want(0, "a tombstone answered late")

	set(memdx.OpSet, "f", 8)
	peer.read()
	want(1, "a set sent")
	c.Close()
	ended(8)
	want(0, "after the connection ended")
}

// A write's tombstone evicted past MaxAbandoned still counts until a
// later request is answered: the server, which answers a connection's
// requests in order, may not have processed it yet, and a read on another
// connection could overtake it.
func TestWritesInFlightKeepsAnEvictedWriteUntilALaterAnswer(t *testing.T) {
	c, peer := dialPipe(t, Options{MaxAbandoned: 1, ProbeAfter: -1}, nil) // no health probe: its NOOP would be the later answer
	n := make(tagNotifier, 16)
	abandon := func(req memdx.Request) memdx.Packet {
		t.Helper()
		p, err := c.Start(time.Time{}, &req, nil, n, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := peer.read()
		waitFor(t, "written", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return callOf(c, p.Opaque).state == reqWritten })
		if err, done := p.Cancel(context.Canceled); err == nil || done {
			t.Fatalf("abandoning %s: %v, %v", req.OpCode, err, done)
		}
		return r
	}
	abandon(memdx.NewStore(memdx.OpSet, []byte("a"), []byte("v"), 0, 0))
	rg := abandon(memdx.NewGet([]byte("b"))) // evicts the set's tombstone
	if s := c.Stats(); s.Abandoned != 1 {
		t.Fatalf("%d tombstones, want 1 (MaxAbandoned)", s.Abandoned)
	}
	if got := c.WritesInFlight(); got != 1 {
		t.Fatalf("%d writes in flight after the set's tombstone was evicted, want 1", got)
	}
	peer.write(ok(rg, "B")) // the set was processed before this
	g := goGet(context.Background(), c, "c")
	peer.write(ok(peer.read(), "C"))
	recv(t, g)
	if got := c.WritesInFlight(); got != 0 {
		t.Fatalf("%d writes in flight after a later answer, want 0", got)
	}
}
