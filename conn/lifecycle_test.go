package conn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// doDeadline runs DoDeadline(GET key) on a goroutine; the result arrives on
// the channel.
func doDeadline(c *Conn, key string, deadline time.Time) <-chan result {
	ch := make(chan result, 1)
	go func() {
		var r result
		req := memdx.NewGet([]byte(key))
		_, r.err = c.DoDeadline(context.Background(), deadline, &req, func(p *memdx.Packet) error {
			r.calls++
			r.value = string(p.Value)
			return nil
		}, nil)
		ch <- r
	}()
	return ch
}

// expectDeadline checks r is a written DeadlineExceeded RequestError.
func expectDeadline(t *testing.T, name string, r result) {
	t.Helper()
	if re := requestError(t, r.err); !re.Written || !errors.Is(r.err, context.DeadlineExceeded) || r.calls != 0 {
		t.Fatalf("%s: %+v; want written, DeadlineExceeded", name, r)
	}
}

// Requests abandoned after they were written (their deadline passed, the
// node never answered) do not count against MaxPending: new requests still
// go out and are answered.
func TestAbandonedRequestsDoNotCountAgainstMaxPending(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{MaxPending: 2, ProbeAfter: -1, clock: fc}, nil)
	deadline := fc.Now().Add(time.Second)
	a, b := doDeadline(c, "a", deadline), doDeadline(c, "b", deadline)
	p.read()
	p.read()
	fc.Advance(time.Second)
	expectDeadline(t, "a", recv(t, a))
	expectDeadline(t, "b", recv(t, b))
	if st := c.Stats(); st.Abandoned != 2 || c.Pending() != 2 {
		t.Fatalf("stats %+v, pending %d; want two tombstones", st, c.Pending())
	}
	for _, k := range []string{"c", "d", "e"} {
		ch := goGet(testCtx(t), c, k)
		p.write(ok(p.read(), strings.ToUpper(k)))
		if r := recv(t, ch); r.err != nil || r.value != strings.ToUpper(k) {
			t.Fatalf("%s after two tombstones with MaxPending 2: %+v", k, r)
		}
	}
}

// At most MaxAbandoned tombstones are kept: past it the oldest is forgotten,
// and its answer, when it comes, is a stray like any unknown opaque; the
// answer to a tombstone still kept is a late answer.
func TestTombstonesBoundedByMaxAbandoned(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{MaxAbandoned: 2, ProbeAfter: -1, clock: fc}, nil)
	var reqs []memdx.Packet
	for i, k := range []string{"a", "b", "c"} {
		ch := doDeadline(c, k, fc.Now().Add(time.Second))
		reqs = append(reqs, p.read())
		fc.Advance(time.Second)
		expectDeadline(t, k, recv(t, ch))
		if st := c.Stats(); st.Abandoned != min(i+1, 2) {
			t.Fatalf("after %s: stats %+v", k, st)
		}
	}
	if st := c.Stats(); st.Forgotten != 1 || c.Pending() != 2 {
		t.Fatalf("stats %+v, pending %d; want the oldest forgotten", st, c.Pending())
	}
	p.write(ok(reqs[0], "late a"), ok(reqs[1], "late b"))
	waitFor(t, "both answers dropped", func() bool { return c.Stats().StrayResponses == 2 })
	if st := c.Stats(); st.LateResponses != 1 || st.Abandoned != 1 || c.Err() != nil {
		t.Fatalf("stats %+v, err %v; want one late answer, c still a tombstone", st, c.Err())
	}
}

// "Written" means accepted by the socket. A large value goes out in chunks;
// while the first chunk is stalled in Write, the request queued after the
// value in the same batch has not been written: an answer to it is a stray
// (the server cannot have read it), and cancelling it takes it out of the
// batch (not written: the server never sees it).
func TestRequestBehindStalledLargeWriteIsNotWritten(t *testing.T) {
	c, p, g := dialGated(t, Options{})
	go func() { // the server reads everything; the test reads what was written from the gate
		for {
			if _, err := p.tryRead(); err != nil {
				return
			}
		}
	}()
	ctx := testCtx(t)
	x := goGet(ctx, c, "x")
	xw := packets(t, recv(t, g.calls)) // the writer waits in Write([X])
	big := make(chan error, 1)
	go func() {
		req := memdx.NewStore(memdx.OpSet, []byte("big"), make([]byte, 200<<10), 0, 0)
		big <- c.Do(ctx, &req, nil)
	}()
	waitFor(t, "the large SET queued", func() bool { return c.Pending() == 2 })
	yctx, cancelY := context.WithCancel(ctx)
	y := goGet(yctx, c, "y")
	waitFor(t, "Y queued behind it", func() bool { return c.Pending() == 3 })
	g.acts <- gateWrite{n: -1} // X goes out
	first := recv(t, g.calls)  // the writer waits in Write(first chunk of [BIG Y])
	if len(first) != writeChunk {
		t.Fatalf("first chunk of the batch is %d bytes, want %d", len(first), writeChunk)
	}
	// Y's opaque follows BIG's, which follows X's.
	forged := memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpGet, Opaque: xw[0].Opaque + 2, Value: []byte("forged")}
	go p.nc.Write(encode(t, forged))
	waitFor(t, "the forged answer dropped", func() bool { return c.Stats().StrayResponses == 1 })
	cancelY()
	ry := recv(t, y)
	if re := requestError(t, ry.err); re.Written || !errors.Is(ry.err, context.Canceled) || ry.calls != 0 {
		t.Fatalf("Y: %+v; want not written, Canceled, no handle call", ry)
	}
	g.acts <- gateWrite{n: -1}
	var rest []byte
	for len(first)+len(rest) < len(encode(t, memdx.Packet{Magic: memdx.MagicReq, OpCode: memdx.OpSet,
		Extras: make([]byte, 8), Key: []byte("big"), Value: make([]byte, 200<<10)})) {
		rest = append(rest, recv(t, g.calls)...)
		g.acts <- gateWrite{n: -1}
	}
	if got := packets(t, append(first, rest...)); len(got) != 1 || got[0].OpCode != memdx.OpSet {
		t.Fatalf("the batch carried %d requests; want the SET alone", len(got))
	}
	select {
	case r := <-x:
		t.Fatalf("x ended: %+v", r)
	case err := <-big:
		t.Fatalf("big ended: %v", err)
	default:
	}
	if c.Err() != nil || c.Stats().Writes < 4 {
		t.Fatalf("err %v, %d writes", c.Err(), c.Stats().Writes)
	}
}
