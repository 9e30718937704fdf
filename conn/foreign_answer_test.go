package conn

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// A group's sink that finds an answer naming another key than its get's
// (GETKQ: the server gave the first key's answer the second get's opaque)
// refuses it as a protocol violation: the connection closes before the
// NOOP's answer, written in the same write, is dispatched. So the group
// ends with the connection's error (written), not answered, and settles
// nothing as a miss; the sink keeps no answer.
func TestGroupAnswerForAnotherKeyClosesTheConnection(t *testing.T) {
	c, peer := dialPipe(t, Options{}, nil)
	n := make(tagNotifier, 4)
	s := newTestSink()
	keys := []string{"k0", "k1", "k2"}
	s.keys = keys
	pg := startGets(t, c, memdx.OpGetKQ, keys, s, n, 5)
	reqs := readGroup(t, peer, pg, memdx.OpGetKQ, keys)
	go drain(peer.nc)
	lie := ok(reqs[0], "v-k0")
	lie.Key, lie.Opaque = reqs[0].Key, reqs[1].Opaque
	peer.write(lie, ok(reqs[3], ""))
	if tag := recv(t, (<-chan uint64)(n)); tag != 5 {
		t.Fatalf("tag %d ended, want 5", tag)
	}
	answered, err := pg.Result()
	if answered || !errors.Is(err, kverr.ErrConnectionClosed) || !errors.Is(err, kverr.ErrProtocol) || !requestError(t, err).Written {
		t.Fatalf("group: answered %v, %v; want the connection's end by a protocol violation, written", answered, err)
	}
	if got, offered := s.answers(); len(got) != 0 || offered != 1 {
		t.Fatalf("sink kept %v of %d offered; want nothing of 1", got, offered)
	}
	<-c.Done()
	var pe *ProtocolError
	if !errors.As(c.Err(), &pe) || !errors.Is(pe, kverr.ErrProtocol) {
		t.Fatalf("connection ended with %v; want a *ProtocolError", c.Err())
	}
}

// A request's handle that finds its response is another request's (it
// returns an error matching kverr.ErrProtocol) closes the connection the
// same way: the quiet get ends with the connection's error, not with the
// handle's value nor as a miss settled by the NOOP after it, and the
// request in flight beside it fails as written.
func TestHandleRefusingItsAnswerClosesTheConnection(t *testing.T) {
	c, peer := dialPipe(t, Options{}, nil)
	n := make(tagNotifier, 4)
	c.Cork()
	req := memdx.NewGet([]byte("k0"))
	req.OpCode = memdx.OpGetKQ
	pq, err := c.Start(time.Time{}, &req, func(p *memdx.Packet) error {
		if string(p.Key) != "k0" {
			return fmt.Errorf("answer for %q: %w", p.Key, kverr.ErrProtocol)
		}
		return nil
	}, n, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	noop := memdx.Request{OpCode: memdx.OpNoop}
	pn, err := c.Start(time.Time{}, &noop, nil, n, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Uncork()
	rq, rn := peer.read(), peer.read()
	other := goGet(testCtx(t), c, "other")
	peer.read()
	go drain(peer.nc)
	lie := ok(rq, "v-k9")
	lie.Key = []byte("k9")
	peer.write(lie, ok(rn, ""))
	for range 2 {
		recv(t, (<-chan uint64)(n))
	}
	for name, p := range map[string]Pending{"quiet get": pq, "NOOP": pn} {
		answered, err := p.Result()
		if answered || !errors.Is(err, kverr.ErrConnectionClosed) || !errors.Is(err, kverr.ErrProtocol) {
			t.Fatalf("%s: answered %v, %v; want the connection's end by a protocol violation", name, answered, err)
		}
	}
	if r := recv(t, other); r.calls != 0 || !errors.Is(r.err, kverr.ErrConnectionClosed) || !requestError(t, r.err).Written {
		t.Fatalf("GET beside them: %+v", r)
	}
}

// A quiet get's answer sent with the opaque of the NOOP behind it (a
// server answering each get with the next request's opaque) is a
// protocol violation, not a stray: dropped, it would leave the NOOP to
// settle the get as a miss. The connection closes before the NOOP's own
// answer is read; the get ends with the connection's error.
func TestQuietAnswerWithTheNoopsOpaqueClosesTheConnection(t *testing.T) {
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("group=%v", group), func(t *testing.T) {
			c, peer := dialPipe(t, Options{}, nil)
			n := make(tagNotifier, 4)
			var pg Pending
			var rq, rn memdx.Packet
			if group {
				pg = startGets(t, c, memdx.OpGetKQ, []string{"k0"}, newTestSink(), n, 1)
				reqs := readGroup(t, peer, pg, memdx.OpGetKQ, []string{"k0"})
				rq, rn = reqs[0], reqs[1]
			} else {
				var v string
				c.Cork()
				pg = startGet(t, c, memdx.OpGetKQ, "k0", n, 1, &v)
				noop := memdx.Request{OpCode: memdx.OpNoop}
				if _, err := c.Start(time.Time{}, &noop, nil, n, 2, nil); err != nil {
					t.Fatal(err)
				}
				c.Uncork()
				rq, rn = peer.read(), peer.read()
			}
			go drain(peer.nc)
			lie := ok(rq, "v-k0")
			lie.Key, lie.Opaque = rq.Key, rn.Opaque
			peer.write(lie, ok(rn, ""))
			for recv(t, (<-chan uint64)(n)) != 1 {
			}
			answered, err := pg.Result()
			if answered || !errors.Is(err, kverr.ErrConnectionClosed) || !errors.Is(err, kverr.ErrProtocol) {
				t.Fatalf("get: answered %v, %v; want the connection's end by a protocol violation, not a miss", answered, err)
			}
		})
	}
}
