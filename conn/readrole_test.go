//go:build unix

package conn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// These tests run over loopback TCP, where the reader goroutine lends the
// read role to a lone caller (readrole.go); net.Pipe has no raw reads, so
// the tests on it never lend.

// dialTCP dials a memcached-mode Conn over loopback TCP; serve runs the
// server's side of the one connection after its bootstrap.
func dialTCP(t *testing.T, opts Options, serve func(p *peer)) *Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	c := dialServed(t, ln, opts, serve)
	if c.reader.raw == nil {
		t.Fatal("no raw reads on a TCP connection")
	}
	return c
}

func (c *Conn) roleState() (roleState, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reader.role, c.reader.lends
}

// waitLent waits until the reader goroutine has lent the read role.
func waitLent(t *testing.T, c *Conn) {
	t.Helper()
	waitFor(t, "the read role lent", func() bool {
		r, _ := c.roleState()
		return r == roleLent
	})
}

// answerFirstHoldSecond answers the first request, reads the second and
// closes got without answering it, then reads until the client closes.
func answerFirstHoldSecond(got chan<- struct{}) func(p *peer) {
	return func(p *peer) {
		r := p.read()
		p.write(ok(r, "first"))
		p.read() // held: never answered
		close(got)
		p.tryRead() // until the client closes
	}
}

// answerAll answers every GET with its key as the value, until the
// connection ends.
func answerAll(p *peer) {
	for {
		r, err := p.tryRead()
		if err != nil {
			return
		}
		p.write(ok(r, string(r.Key)))
	}
}

// A caller alone on the connection reads its own answer (the role is lent
// and borrowed, and lent again afterwards), and gets it right, whether its
// context can be cancelled or not; a Start gives the role back to the
// reader goroutine, which reads its answer.
func TestLoneCallerReadsItsOwnAnswer(t *testing.T) {
	c := dialTCP(t, Options{clock: newFakeClock(), ProbeAfter: -1}, answerAll)
	ctx := context.Background()
	if r := doGet(ctx, c, "first"); r.err != nil || r.value != "first" {
		t.Fatalf("first: %+v", r)
	}
	for i, key := range []string{"a", "b", "c"} {
		waitLent(t, c)
		_, before := c.roleState()
		if r := doGet(ctx, c, key); r.err != nil || r.value != key || r.calls != 1 {
			t.Fatalf("%s: %+v", key, r)
		}
		if role, lends := c.roleState(); lends != before+1 || role != roleLent {
			t.Fatalf("after Get %d: role %d, %d lends (%d before); want it borrowed once and lent again", i, role, lends, before)
		}
	}
	// A context that can be cancelled (and one with a deadline) borrows
	// the same way.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tctx, tcancel := context.WithTimeout(ctx, time.Hour)
	defer tcancel()
	for _, ctx := range []context.Context{cctx, tctx} {
		waitLent(t, c)
		_, before := c.roleState()
		if r := doGet(ctx, c, "cancellable"); r.err != nil || r.value != "cancellable" {
			t.Fatalf("cancellable: %+v", r)
		}
		if role, lends := c.roleState(); lends != before+1 || role != roleLent {
			t.Fatalf("a caller with a cancellable context: role %d, %d lends (%d before); want it borrowed once and lent again", role, lends, before)
		}
	}
	// A Start while the role is lent takes it back at once.
	waitLent(t, c)
	n := make(tagNotifier, 1)
	var v string
	pd := startGet(t, c, memdx.OpGet, "started", n, 1, &v)
	if role, _ := c.roleState(); role == roleLent {
		t.Fatal("the role is still lent after a Start")
	}
	recv(t, (<-chan uint64)(n))
	if answered, err := pd.Result(); !answered || err != nil || v != "started" {
		t.Fatalf("started: answered %v, %v, %q", answered, err, v)
	}
}

// A borrower whose request expires is woken at its deadline (its read is
// interrupted): the request ends as written and DeadlineExceeded, the role
// goes back to the reader goroutine (a tombstone waits for its answer),
// the late answer is dropped, and the connection carries on.
func TestBorrowerExpiresAtItsDeadline(t *testing.T) {
	fc := newFakeClock()
	got := make(chan memdx.Packet)
	answer := make(chan memdx.Packet)
	c := dialTCP(t, Options{clock: fc, ProbeAfter: -1}, func(p *peer) {
		for {
			r, err := p.tryRead()
			if err != nil {
				return
			}
			if string(r.Key) != "held" {
				p.write(ok(r, string(r.Key)))
				continue
			}
			got <- r
			p.write(<-answer)
		}
	})
	ctx := context.Background()
	if r := doGet(ctx, c, "first"); r.err != nil {
		t.Fatal(r.err)
	}
	waitLent(t, c)
	out := make(chan error, 1)
	go func() {
		req := memdx.NewGet([]byte("held"))
		_, err := c.DoDeadline(ctx, fc.Now().Add(50*time.Millisecond), &req, nil, nil)
		out <- err
	}()
	held := recv(t, got)
	if role, _ := c.roleState(); role != roleBorrowed {
		t.Fatalf("role %d while the held request waits; want it borrowed", role)
	}
	waitFor(t, "the deadline's timer", func() bool { return fc.armedWithin(50 * time.Millisecond) })
	fc.Advance(50 * time.Millisecond)
	err := recv(t, out)
	var re *RequestError
	if !errors.As(err, &re) || !re.Written || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held: %v; want a written DeadlineExceeded RequestError", err)
	}
	if role, _ := c.roleState(); role != roleReader {
		t.Fatalf("role %d with a tombstone; want it back with the reader goroutine", role)
	}
	answer <- ok(held, "late")
	waitFor(t, "the late answer dropped", func() bool { return c.Stats().LateResponses == 1 })
	if r := doGet(ctx, c, "after"); r.err != nil || r.value != "after" {
		t.Fatalf("after: %+v", r)
	}
	if c.Err() != nil || c.Pending() != 0 {
		t.Fatalf("err %v, %d pending", c.Err(), c.Pending())
	}
}

// A borrower whose context is cancelled while it reads for its written
// request is woken (its read is interrupted): Do returns context.Canceled,
// written, without anything else ending the wait (no deadline); the role
// goes back to the reader goroutine, which drops the late answer, and the
// connection carries on, lending the role again.
func TestCancelledBorrowerReturnsAtOnce(t *testing.T) {
	got := make(chan memdx.Packet)
	answer := make(chan memdx.Packet)
	quit := make(chan struct{})
	c := dialTCP(t, Options{clock: newFakeClock(), ProbeAfter: -1}, holdKey("held", got, answer, quit))
	t.Cleanup(func() { close(quit) }) // before the connection's
	if r := doGet(context.Background(), c, "first"); r.err != nil {
		t.Fatal(r.err)
	}
	waitLent(t, c)
	_, before := c.roleState()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := goGet(ctx, c, "held")
	held := recv(t, got)
	if role, lends := c.roleState(); role != roleBorrowed || lends != before+1 {
		t.Fatalf("role %d, %d lends (%d before) while the held request waits; want it borrowed", role, lends, before)
	}
	cancel()
	r := recv(t, out)
	if re := requestError(t, r.err); !re.Written || !errors.Is(r.err, context.Canceled) || r.calls != 0 {
		t.Fatalf("held: %+v; want a written Canceled RequestError", r)
	}
	if role, _ := c.roleState(); role != roleReader {
		t.Fatalf("role %d with a tombstone; want it back with the reader goroutine", role)
	}
	answer <- ok(held, "late")
	waitFor(t, "the late answer dropped", func() bool { return c.Stats().LateResponses == 1 })
	for _, key := range []string{"after", "again"} {
		if r := doGet(context.Background(), c, key); r.err != nil || r.value != key {
			t.Fatalf("%s: %+v", key, r)
		}
	}
	waitLent(t, c)
	if c.Err() != nil || c.Pending() != 0 || c.Stats().StrayResponses != 1 {
		t.Fatalf("err %v, %d pending, stats %+v", c.Err(), c.Pending(), c.Stats())
	}
}

// holdKey answers every GET with its key as the value, except one for
// key: that one goes to got, and its answer is what comes on answer (or
// none, once quit is closed: a test that failed ends).
func holdKey(key string, got chan<- memdx.Packet, answer <-chan memdx.Packet, quit <-chan struct{}) func(p *peer) {
	return holdKeys([]string{key}, got, answer, quit)
}

// holdKeys is holdKey for each of keys.
func holdKeys(keys []string, got chan<- memdx.Packet, answer <-chan memdx.Packet, quit <-chan struct{}) func(p *peer) {
	return func(p *peer) {
		for {
			r, err := p.tryRead()
			if err != nil {
				return
			}
			if !slices.Contains(keys, string(r.Key)) {
				p.write(ok(r, string(r.Key)))
				continue
			}
			got <- r
			select {
			case a := <-answer:
				p.write(a)
			case <-quit:
				return
			}
		}
	}
}

// A borrower cancelled while it reads another caller's answer, half of
// which it has read, leaves it to the reader goroutine: the half read is
// kept, and the other caller gets its whole answer; the borrower's own
// late answer is dropped.
func TestCancelledBorrowerLeavesOthersAnswers(t *testing.T) {
	got := make(chan memdx.Packet, 2)
	half, rest, quit := make(chan struct{}), make(chan struct{}), make(chan struct{})
	c := dialTCP(t, Options{clock: newFakeClock(), ProbeAfter: -1}, func(p *peer) {
		r := p.read()
		p.write(ok(r, "first"))
		held := p.read()
		got <- held
		other := p.read()
		got <- other
		answer := encode(t, ok(other, "other's value"))
		for _, step := range []chan struct{}{half, rest} {
			select {
			case <-step:
			case <-quit:
				return
			}
			if step == half {
				p.writeRaw(answer[:len(answer)/2])
			} else {
				p.writeRaw(answer[len(answer)/2:])
			}
		}
		p.write(ok(held, "late"))
		answerAll(p)
	})
	t.Cleanup(func() { close(quit) }) // before the connection's
	if r := doGet(context.Background(), c, "first"); r.err != nil {
		t.Fatal(r.err)
	}
	waitLent(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := goGet(ctx, c, "held")
	recv(t, got)
	if role, _ := c.roleState(); role != roleBorrowed {
		t.Fatalf("role %d while the held request waits; want it borrowed", role)
	}
	other := goGet(context.Background(), c, "other")
	recv(t, got)
	in := c.Stats().BytesRead
	half <- struct{}{}
	waitFor(t, "half of the other's answer read by the borrower", func() bool { return c.Stats().BytesRead > in })
	cancel()
	r := recv(t, out)
	if re := requestError(t, r.err); !re.Written || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("held: %+v; want a written Canceled RequestError", r)
	}
	select {
	case r := <-other:
		t.Fatalf("the other caller ended with half its answer: %+v", r)
	default:
	}
	rest <- struct{}{}
	if r := recv(t, other); r.err != nil || r.value != "other's value" || r.calls != 1 {
		t.Fatalf("other: %+v", r)
	}
	waitFor(t, "the late answer dropped", func() bool { return c.Stats().LateResponses == 1 })
	if r := doGet(context.Background(), c, "after"); r.err != nil || r.value != "after" {
		t.Fatalf("after: %+v", r)
	}
	if c.Err() != nil || c.Pending() != 0 {
		t.Fatalf("err %v, %d pending", c.Err(), c.Pending())
	}
}

// Lone callers whose contexts are cancelled at any moment (another
// goroutine cancels after yielding a varying number of times: before the
// borrow, during the read, after the answer and before the watch is
// stopped), the answers coming at once: each Do ends with its answer or
// with context.Canceled (written or not), never hangs, and the connection
// stays usable (an interrupt left behind would fail the reader goroutine's
// next read and end the connection).
func TestBorrowersCancelledAtAnyMoment(t *testing.T) {
	c := dialTCP(t, Options{ProbeAfter: -1}, answerAll)
	bg := context.Background()
	if r := doGet(bg, c, "first"); r.err != nil {
		t.Fatal(r.err)
	}
	_, lends := c.roleState()
	var answered, cancelled, written int
	for i := range 2000 {
		// A Get that cannot be cancelled first: its answer, read by the
		// reader goroutine after a cancel left a tombstone, has the role
		// lent again.
		if r := doGet(bg, c, "warm"); r.err != nil {
			t.Fatalf("warm: %+v: %v", r, r.err)
		}
		ctx, cancel := context.WithCancel(bg)
		key := fmt.Sprint(i)
		go func() {
			for range i % 200 {
				runtime.Gosched()
			}
			cancel()
		}()
		r := doGet(ctx, c, key)
		switch {
		case r.err == nil && r.value == key:
			answered++
		case errors.Is(r.err, context.Canceled) && r.calls == 0:
			cancelled++
			if requestError(t, r.err).Written {
				written++
			}
		default:
			t.Fatalf("%s: %+v", key, r)
		}
		cancel()
	}
	waitFor(t, "the late answers", func() bool { return c.Pending() == 0 })
	if r := doGet(bg, c, "last"); r.err != nil || r.value != "last" {
		t.Fatalf("last: %+v", r)
	}
	_, after := c.roleState()
	t.Logf("%d answered, %d cancelled (%d written), %d borrows", answered, cancelled, written, after-lends)
	if after == lends || c.Err() != nil {
		t.Fatalf("%d borrows, err %v", after-lends, c.Err())
	}
}

// A borrower whose connection ends while it waits (the server closes it)
// gets the connection's error, written; the connection is torn down as
// usual (Done, no goroutine left: TestMain checks).
func TestBorrowerSeesTheConnectionEnd(t *testing.T) {
	got := make(chan struct{})
	c := dialTCP(t, Options{clock: newFakeClock(), ProbeAfter: -1}, func(p *peer) {
		r := p.read()
		p.write(ok(r, "first"))
		p.read()
		close(got)
		p.nc.Close()
	})
	ctx := context.Background()
	if r := doGet(ctx, c, "first"); r.err != nil {
		t.Fatal(r.err)
	}
	waitLent(t, c)
	r := doGet(ctx, c, "second")
	<-got
	var re *RequestError
	if !errors.As(r.err, &re) || !re.Written || !errors.Is(r.err, kverr.ErrConnectionClosed) && !errors.Is(r.err, io.EOF) {
		t.Fatalf("second: %+v; want a written RequestError for the connection's end", r)
	}
	recv(t, c.Done())
}

// A Close from another goroutine while a borrower waits ends its request
// with ErrConnectionClosed, written.
func TestCloseWhileBorrowed(t *testing.T) {
	got := make(chan struct{})
	c := dialTCP(t, Options{clock: newFakeClock(), ProbeAfter: -1}, answerFirstHoldSecond(got))
	ctx := context.Background()
	if r := doGet(ctx, c, "first"); r.err != nil {
		t.Fatal(r.err)
	}
	waitLent(t, c)
	out := make(chan result, 1)
	go func() { out <- doGet(ctx, c, "second") }()
	<-got
	waitFor(t, "the role borrowed", func() bool { r, _ := c.roleState(); return r == roleBorrowed })
	c.Close()
	r := recv(t, out)
	var re *RequestError
	if !errors.As(r.err, &re) || !re.Written || !errors.Is(r.err, kverr.ErrConnectionClosed) {
		t.Fatalf("second: %+v; want a written ErrConnectionClosed", r)
	}
}

// A caller that takes a role lent catchUpAfter ago or longer reads first:
// a connection the server closed meanwhile ends before the request is
// written (not written: safe to send elsewhere).
func TestBorrowerCatchesUpOnAClose(t *testing.T) {
	fc := newFakeClock()
	closed := make(chan struct{})
	c := dialTCP(t, Options{clock: fc, ProbeAfter: -1}, func(p *peer) {
		r := p.read()
		p.write(ok(r, "first"))
		p.nc.Close()
		close(closed)
	})
	ctx := context.Background()
	if r := doGet(ctx, c, "first"); r.err != nil {
		t.Fatal(r.err)
	}
	waitLent(t, c)
	<-closed
	waitFor(t, "the close to reach the client's socket", func() bool { return peekEOF(t, c.nc) })
	fc.Advance(catchUpAfter)
	r := doGet(ctx, c, "second")
	var re *RequestError
	if !errors.As(r.err, &re) || re.Written || !errors.Is(r.err, io.EOF) {
		t.Fatalf("second: %+v; want a RequestError, not written, for the connection's end", r)
	}
}

// catchUpReads dials a connection whose server answers a first GET and
// holds the next request unanswered, waits for the reader goroutine to
// lend the role, moves the clock on by lent, and calls send, which starts
// the borrower's request on a goroutine of its own. It returns how many
// reads the connection made before the server had that request: the
// borrower's read for it has not returned by then (nothing answers it), so
// those are the catch-up's.
func catchUpReads(t *testing.T, lent time.Duration, send func(c *Conn, fc *fakeClock)) (*Conn, *fakeClock, uint64) {
	t.Helper()
	fc := newFakeClock()
	got := make(chan struct{})
	c := dialTCP(t, Options{clock: fc, ProbeAfter: -1}, answerFirstHoldSecond(got))
	if r := doGet(context.Background(), c, "first"); r.err != nil {
		t.Fatal(r.err)
	}
	waitLent(t, c)
	fc.Advance(lent)
	reads := c.Stats().Reads
	send(c, fc)
	<-got
	return c, fc, c.Stats().Reads - reads
}

// A request its caller resends anyway (Origin.Resendable) is written
// without the catch-up read, however long the role was lent; any other
// borrower of a role lent catchUpAfter ago reads first (catchUpReads).
func TestResendableBorrowerSkipsTheCatchUp(t *testing.T) {
	for _, resendable := range []bool{false, true} {
		out := make(chan error, 1)
		c, fc, n := catchUpReads(t, catchUpAfter, func(c *Conn, fc *fakeClock) {
			go func() {
				req := memdx.NewGet([]byte("held"))
				_, err := c.DoDeadline(context.Background(), fc.Now().Add(50*time.Millisecond), &req, nil, &Origin{Resendable: resendable})
				out <- err
			}()
		})
		want := uint64(1) // the catch-up
		if resendable {
			want = 0
		}
		if n != want {
			t.Fatalf("resendable %v: %d reads before the request reached the server; want %d", resendable, n, want)
		}
		waitFor(t, "the deadline's timer", func() bool { return fc.armedWithin(50 * time.Millisecond) })
		fc.Advance(50 * time.Millisecond)
		err := recv(t, out)
		var re *RequestError
		if !errors.As(err, &re) || !re.Written || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("resendable %v: %v; want a written DeadlineExceeded RequestError", resendable, err)
		}
		c.Close()
	}
}

// A borrower without a deadline (Do) has no reading of the clock from
// DoDeadline: the role's lend is timed all the same, so that one that comes
// back sooner than catchUpAfter writes at once and one that comes later
// reads first (catchUpReads). The request, never answered, ends with the
// connection.
func TestBorrowerWithoutDeadlineCatchesUpOnlyAfterTheLend(t *testing.T) {
	for _, lent := range []time.Duration{catchUpAfter - time.Microsecond, catchUpAfter} {
		var out <-chan result
		c, _, n := catchUpReads(t, lent, func(c *Conn, _ *fakeClock) {
			out = goGet(context.Background(), c, "held")
		})
		want := uint64(0)
		if lent >= catchUpAfter {
			want = 1 // the catch-up
		}
		if n != want {
			t.Fatalf("lent %v: %d reads before the request reached the server; want %d", lent, n, want)
		}
		c.Close()
		if r := recv(t, out); !errors.Is(r.err, kverr.ErrConnectionClosed) {
			t.Fatalf("lent %v: %+v; want the connection's end", lent, r)
		}
	}
}

// peekEOF reports whether the socket has reached its end, without reading.
func peekEOF(t *testing.T, nc net.Conn) bool {
	rc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	eof := false
	var b [1]byte
	if err := rc.Control(func(fd uintptr) {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		eof = n == 0 && err == nil
	}); err != nil {
		t.Fatal(err)
	}
	return eof
}

// A server's request that arrives while the role is lent and no caller
// comes is read by the reader goroutine once it takes the role back, after
// lendFor without a borrow.
func TestServerRequestWhileLent(t *testing.T) {
	fc := newFakeClock()
	notified := make(chan memdx.ClustermapNotification, 1)
	sent := make(chan struct{})
	c := dialTCP(t, Options{clock: fc, ProbeAfter: -1,
		OnClustermapNotification: func(n memdx.ClustermapNotification) { notified <- n }}, func(p *peer) {
		r := p.read()
		p.write(ok(r, "first"))
		<-sent
		p.write(notification(7, "b", `{"rev":7}`))
		p.tryRead()
	})
	if r := doGet(context.Background(), c, "first"); r.err != nil {
		t.Fatal(r.err)
	}
	waitLent(t, c)
	close(sent)
	waitFor(t, "the lend timer", func() bool { return fc.armedWithin(lendFor) })
	select {
	case n := <-notified:
		t.Fatalf("notification %+v delivered while the role was lent", n)
	default:
	}
	fc.Advance(lendFor)
	if n := recv(t, notified); n.Version.Revision != 7 {
		t.Fatalf("notification %+v", n)
	}
	if role, _ := c.roleState(); role != roleReader {
		t.Fatalf("role %d after the lend timed out; want the reader goroutine's", role)
	}
}

// A protocol violation read by a borrower closes the connection, and the
// borrower's request ends with it; nothing read after it is dispatched.
func TestBorrowerReadsAProtocolViolation(t *testing.T) {
	c := dialTCP(t, Options{clock: newFakeClock(), ProbeAfter: -1}, func(p *peer) {
		r := p.read()
		p.write(ok(r, "first"))
		r = p.read()
		bad := encode(t, ok(r, "x"))
		bad[0] = 0x42 // no magic
		p.writeRaw(bad)
		p.tryRead()
	})
	ctx := context.Background()
	if r := doGet(ctx, c, "first"); r.err != nil {
		t.Fatal(r.err)
	}
	waitLent(t, c)
	r := doGet(ctx, c, "second")
	var pe *ProtocolError
	if !errors.As(r.err, &pe) || r.calls != 0 {
		t.Fatalf("second: %+v; want the connection's ProtocolError", r)
	}
	recv(t, c.Done())
}
