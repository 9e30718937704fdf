package conn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// tagNotifier sends every RequestEnded tag on a channel.
type tagNotifier chan uint64

func (n tagNotifier) RequestEnded(tag uint64, _ bool, _ error) bool { n <- tag; return true }
func (n tagNotifier) Wake()                                         {}

func startGet(t *testing.T, c *Conn, op memdx.OpCode, key string, n Notifier, tag uint64, into *string) Pending {
	t.Helper()
	req := memdx.NewGet([]byte(key))
	req.OpCode = op
	p, err := c.Start(time.Time{}, &req, func(p *memdx.Packet) error { *into = string(p.Value); return nil }, n, tag, nil)
	if err != nil {
		t.Fatalf("Start %s %s: %v", op, key, err)
	}
	return p
}

// Quiet gets sent before a NOOP and not answered by the time the NOOP is
// answered end as unanswered (a miss) with no error; an answered one has
// its response; a quiet get sent after the NOOP waits for a later one.
// Corked, the whole batch reaches the server in one write.
func TestStartQuietGetsAreSettledByTheNoopAnswer(t *testing.T) {
	c, peer := dialPipe(t, Options{}, nil)
	n := make(tagNotifier, 16)
	var v [5]string
	writes := c.Stats().Writes
	c.Cork()
	p1 := startGet(t, c, memdx.OpGetQ, "a", n, 1, &v[1])
	p2 := startGet(t, c, memdx.OpGetQ, "b", n, 2, &v[2])
	p3 := startGet(t, c, memdx.OpGetQ, "c", n, 3, &v[3])
	noop := memdx.Request{OpCode: memdx.OpNoop}
	pn, err := c.Start(time.Time{}, &noop, nil, n, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	p4 := startGet(t, c, memdx.OpGetQ, "d", n, 4, &v[4])
	c.Uncork()
	var reqs []memdx.Packet
	for range 5 {
		reqs = append(reqs, clonePacket(peer.read()))
	}
	if got := c.Stats().Writes - writes; got != 1 {
		t.Errorf("%d writes for the corked batch, want 1", got)
	}
	peer.write(ok(reqs[1], "B"), ok(reqs[3], ""))
	got := map[uint64]bool{}
	for range 4 {
		got[recv(t, (<-chan uint64)(n))] = true
	}
	for _, tag := range []uint64{0, 1, 2, 3} {
		if !got[tag] {
			t.Errorf("request %d not ended by the NOOP's answer", tag)
		}
	}
	for i, p := range []Pending{p1, p3} {
		if answered, err := p.Result(); answered || err != nil {
			t.Errorf("quiet get %d: answered %v, %v; want settled unanswered", i, answered, err)
		}
	}
	if answered, err := p2.Result(); !answered || err != nil || v[2] != "B" {
		t.Errorf("answered quiet get: %v, %v, %q", answered, err, v[2])
	}
	if answered, err := pn.Result(); !answered || err != nil {
		t.Errorf("NOOP: %v, %v", answered, err)
	}
	select {
	case tag := <-n:
		t.Fatalf("request %d ended; the quiet get after the NOOP must wait for another", tag)
	default:
	}
	done := make(chan error, 1)
	go func() { done <- c.Do(context.Background(), &noop, nil) }()
	peer.write(ok(peer.read(), ""))
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if tag := recv(t, (<-chan uint64)(n)); tag != 4 {
		t.Fatalf("tag %d ended", tag)
	}
	if answered, err := p4.Result(); answered || err != nil {
		t.Errorf("quiet get after the first NOOP: %v, %v", answered, err)
	}
	if c.Pending() != 0 {
		t.Errorf("%d pending", c.Pending())
	}
}

// Cancel withdraws a request still corked (never written), abandons a sent
// one (written; its late answer is dropped), and a later NOOP's answer
// drops the tombstone of an abandoned quiet get. The connection carries
// on.
func TestStartCancelWithdrawsOrAbandonsAndKeepsTheConnection(t *testing.T) {
	c, peer := dialPipe(t, Options{}, nil)
	n := make(tagNotifier, 16)
	var v string
	c.Cork()
	pa := startGet(t, c, memdx.OpGet, "a", n, 1, &v)
	err, ended := pa.Cancel(context.Canceled)
	c.Uncork()
	if re := requestError(t, err); ended || re.Written || !errors.Is(err, context.Canceled) {
		t.Fatalf("corked request: %v, %v", ended, err)
	}
	pb := startGet(t, c, memdx.OpGet, "b", n, 2, &v)
	rb := clonePacket(peer.read())
	if rb.Opaque != pb.Opaque || string(rb.Key) != "b" {
		t.Fatalf("server read %s %q: the withdrawn request reached it", rb.OpCode, rb.Key)
	}
	waitFor(t, "b written", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return callOf(c, pb.Opaque).state == reqWritten })
	err, ended = pb.Cancel(context.Canceled)
	if re := requestError(t, err); ended || !re.Written {
		t.Fatalf("sent request: %v, %v", ended, err)
	}
	pq := startGet(t, c, memdx.OpGetQ, "q", n, 3, &v)
	peer.read()
	waitFor(t, "q written", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return callOf(c, pq.Opaque).state == reqWritten })
	if err, _ := pq.Cancel(context.Canceled); err == nil {
		t.Fatal("cancelled quiet get: no error")
	}
	if s := c.Stats(); s.Abandoned != 2 {
		t.Fatalf("%d tombstones, want 2", s.Abandoned)
	}
	pe := startGet(t, c, memdx.OpGet, "e", n, 5, &v)
	peer.write(ok(peer.read(), "E"))
	if tag := recv(t, (<-chan uint64)(n)); tag != 5 {
		t.Fatalf("tag %d", tag)
	}
	if err, ended := pe.Cancel(context.Canceled); !ended || err != nil {
		t.Fatalf("cancel after the answer: %v, %v; want ended", err, ended)
	}
	if answered, err := pe.Result(); !answered || err != nil || v != "E" {
		t.Fatalf("answered before the cancel: %v, %v, %q", answered, err, v)
	}
	peer.write(ok(rb, "late"))
	res := make(chan result, 1)
	go func() { res <- doGet(context.Background(), c, "c") }()
	rc := peer.read()
	peer.write(ok(rc, "C"))
	if r := recv(t, res); r.err != nil || r.value != "C" {
		t.Fatalf("Get after the cancels: %+v", r)
	}
	noop := memdx.Request{OpCode: memdx.OpNoop}
	done := make(chan error, 1)
	go func() { done <- c.Do(context.Background(), &noop, nil) }()
	peer.write(ok(peer.read(), ""))
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Abandoned != 0 || s.LateResponses != 1 {
		t.Fatalf("after the NOOP: %d tombstones, %d late answers; want 0, 1", s.Abandoned, s.LateResponses)
	}
	select {
	case tag := <-n:
		t.Fatalf("Notifier told of request %d, which its caller cancelled", tag)
	default:
	}
}

// Start refuses multi-packet opcodes; it reads no clock, so a request
// whose deadline has passed is ended by the monitor (DeadlineExceeded).
func TestStartRefusesMultiPacketOpcodesAndExpiresPassedDeadlines(t *testing.T) {
	c, _ := dialPipe(t, Options{}, nil)
	req := memdx.Request{OpCode: memdx.OpStat}
	if _, err := c.Start(time.Time{}, &req, nil, nil, 0, nil); !errors.Is(err, memdx.ErrInvalidRequest) {
		t.Fatalf("STAT: %v", err)
	}
	n := make(tagNotifier, 1)
	get := memdx.NewGet([]byte("k"))
	p, err := c.Start(time.Now().Add(-time.Second), &get, nil, n, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tag := recv(t, (<-chan uint64)(n)); tag != 7 {
		t.Fatalf("tag %d", tag)
	}
	if _, err := p.Result(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past deadline: %v", err)
	}
}

// A NOOP started after quiet gets that filled the connection
// (MaxPending) is admitted: it is what settles them. Another request is
// still refused (ErrOverloaded).
func TestStartAdmitsTheSettlingNoopPastMaxPending(t *testing.T) {
	c, peer := dialPipe(t, Options{MaxPending: 2}, nil)
	n := make(tagNotifier, 16)
	var v [3]string
	c.Cork()
	p1 := startGet(t, c, memdx.OpGetQ, "a", n, 1, &v[1])
	p2 := startGet(t, c, memdx.OpGetQ, "b", n, 2, &v[2])
	get := memdx.NewGet([]byte("c"))
	if _, err := c.Start(time.Time{}, &get, nil, n, 3, nil); !errors.Is(err, kverr.ErrOverloaded) {
		c.Uncork()
		t.Fatalf("third request on a full connection: %v, want ErrOverloaded", err)
	}
	noop := memdx.Request{OpCode: memdx.OpNoop}
	pn, err := c.Start(time.Time{}, &noop, nil, n, 0, nil)
	c.Uncork()
	if err != nil {
		t.Fatalf("settling NOOP refused: %v", err)
	}
	var reqs []memdx.Packet
	for range 3 {
		reqs = append(reqs, clonePacket(peer.read()))
	}
	peer.write(ok(reqs[2], ""))
	for range 3 {
		recv(t, (<-chan uint64)(n))
	}
	for _, p := range []Pending{p1, p2, pn} {
		if _, err := p.Result(); err != nil {
			t.Fatal(err)
		}
	}
}

// Start without a Notifier is refused, naming what is missing: its
// outcome would go on a channel no one reads and Result would report a
// nil error for whatever happened.
func TestStartRefusesANilNotifier(t *testing.T) {
	c, _ := dialPipe(t, Options{}, nil)
	get := memdx.NewGet([]byte("k"))
	if _, err := c.Start(time.Time{}, &get, nil, nil, 1, nil); !errors.Is(err, memdx.ErrInvalidRequest) {
		t.Fatalf("Start with a nil Notifier: %v, want ErrInvalidRequest", err)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d pending", c.Pending())
	}
}

// A request started with its deadline already passed (Start reads no
// clock) races the writer against the monitor, and its outcome says which
// won: one that ended not written never reaches the node (the monitor
// withdrew it from the buffer before the writer took it), one that
// reached the node ended written or answered. The node answers every
// request; a GET of "fence" queued after each one shows whether its bytes
// came before it.
func TestStartPastDeadlineOutcomeSaysWhetherItWasSent(t *testing.T) {
	c, p := dialPipe(t, Options{ProbeAfter: -1}, nil)
	n := make(tagNotifier, 1)
	counts := map[string]int{}
	for i := range 300 {
		get := memdx.NewGet([]byte("late"))
		pend, err := c.Start(time.Now().Add(-time.Nanosecond), &get, nil, n, uint64(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		fenced := make(chan result, 1)
		go func() { fenced <- doGet(context.Background(), c, "fence") }()
		sent := false
		for {
			r := p.read()
			p.write(ok(r, string(r.Key)))
			if string(r.Key) == "fence" {
				break
			}
			sent = true
		}
		if r := recv(t, fenced); r.err != nil {
			t.Fatalf("the fence: %v", r.err)
		}
		if tag := recv(t, (<-chan uint64)(n)); tag != uint64(i) {
			t.Fatalf("tag %d; want %d", tag, i)
		}
		answered, err := pend.Result()
		var outcome string
		switch {
		case answered && err == nil:
			outcome = "answered"
		case errors.Is(err, context.DeadlineExceeded) && requestError(t, err).Written:
			outcome = "expired written"
		case errors.Is(err, context.DeadlineExceeded):
			outcome = "expired not written"
		default:
			t.Fatalf("round %d: answered %v, %v", i, answered, err)
		}
		if sent != (outcome != "expired not written") {
			t.Fatalf("round %d: the node received the request: %v; its outcome: %s", i, sent, outcome)
		}
		counts[outcome]++
	}
	t.Logf("outcomes: %v", counts)
}
