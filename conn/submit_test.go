package conn

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// These tests cover the submission stack (submit.go). Most make the
// connection crowded by hand (crowd) while the writer is held in a Write
// (dialGated): what a caller pushes then stays on the stack until the test
// lets the writer go, or until the monitor's sweep queues it.

// crowd makes c's callers submit, as if the writer had counted submitAt
// requests in flight at its last batch. It lasts until the writer's next
// batch.
func crowd(c *Conn) { c.sub.crowded.Store(true) }

// stacked reports whether a call is on c's submission stack.
func stacked(c *Conn) bool {
	h := c.sub.head.Load()
	return h != nil && h != submissionsClosed
}

// pushBehindWrite sends a GET of a, waits for the writer to hold it in a
// Write (dialGated), makes the connection crowded and sends a GET of bKey
// with bctx, which stays on the stack until the writer is let go.
func pushBehindWrite(t *testing.T, c *Conn, g *gate, ctx, bctx context.Context, bKey string) (a, b <-chan result) {
	t.Helper()
	a = goGet(ctx, c, "a")
	<-g.calls
	crowd(c)
	b = goGet(bctx, c, bKey)
	waitFor(t, "b on the stack", func() bool { return stacked(c) })
	return a, b
}

// deadlineResult is what one DoDeadline produced: its opaque, and what
// doGet reports.
type deadlineResult struct {
	opaque uint32
	result
}

// goDoDeadline runs DoDeadline(GET key) on a goroutine; its opaque and
// outcome arrive on the channel.
func goDoDeadline(ctx context.Context, c *Conn, deadline time.Time, key string) <-chan deadlineResult {
	ch := make(chan deadlineResult, 1)
	go func() {
		var r deadlineResult
		req := memdx.NewGet([]byte(key))
		r.opaque, r.err = c.DoDeadline(ctx, deadline, &req, func(p *memdx.Packet) error {
			r.calls++
			r.value = string(p.Value)
			r.status = p.Status
			return nil
		}, nil)
		ch <- r
	}()
	return ch
}

// A caller that cancels while its call is on the stack gets a not-written
// error, and its request never reaches the server. The next caller's
// request goes out alone, with the opaque its DoDeadline returns.
func TestSubmitCancelOnTheStack(t *testing.T) {
	c, p, g := dialGated(t, Options{ProbeAfter: -1})
	seen := make(chan string, 8)
	go answerAllSeen(seen)(p)
	ctx := testCtx(t)

	bctx, cancel := context.WithCancel(ctx)
	a, b := pushBehindWrite(t, c, g, ctx, bctx, "b")
	cancel()
	rb := recv(t, b)
	re := requestError(t, rb.err)
	if re.Written || !errors.Is(rb.err, context.Canceled) || re.Opaque != 0 || rb.calls != 0 {
		t.Fatalf("b: written=%v opaque=%d calls=%d err=%v; want not written, opaque 0, context.Canceled", re.Written, re.Opaque, rb.calls, rb.err)
	}

	g.acts <- gateWrite{n: -1}
	if r := recv(t, a); r.err != nil || r.value != "a" {
		t.Fatalf("a: %+v", r)
	}
	crowd(c)
	d := goDoDeadline(ctx, c, time.Time{}, "d")
	got := packets(t, <-g.calls)
	if len(got) != 1 || string(got[0].Key) != "d" {
		t.Fatalf("the write after b's cancel carries %v, want d alone", got)
	}
	g.acts <- gateWrite{n: -1}
	rd := recv(t, d)
	if rd.err != nil || rd.value != "d" || rd.opaque != got[0].Opaque {
		t.Fatalf("d: %+v; want value d, opaque %d", rd, got[0].Opaque)
	}
	if s := c.Stats(); s.Submitted != 1 {
		t.Fatalf("Submitted %d, want 1 (d; b was withdrawn)", s.Submitted)
	}
	for _, want := range []string{"a", "d"} {
		if k := recv(t, seen); k != want {
			t.Fatalf("server saw %q, want %q", k, want)
		}
	}
	select {
	case k := <-seen:
		t.Fatalf("server saw %q too", k)
	default:
	}
}

// A submitted call's deadline holds while the writer is stuck in a Write:
// the monitor queues it and expires it, not written.
func TestSubmitDeadlineWhileWriterBlocked(t *testing.T) {
	fc := newFakeClock()
	c, p, g := dialGated(t, Options{clock: fc, ProbeAfter: -1})
	seen := make(chan string, 8)
	go answerAllSeen(seen)(p)
	ctx := testCtx(t)

	a := goGet(ctx, c, "a") // no deadline: the sweeper is not armed
	<-g.calls
	crowd(c)
	b := goDoDeadline(ctx, c, fc.Now().Add(time.Second), "b")
	// b asks the monitor for a sweep, which queues it behind the write.
	waitFor(t, "b queued by the monitor", func() bool { return queuedCalls(c) == 1 })
	if !fc.armedWithin(time.Second) {
		t.Fatal("the sweeper is not armed for b's deadline")
	}
	fc.Advance(time.Second)
	rb := recv(t, b)
	re := requestError(t, rb.err)
	if re.Written || !errors.Is(rb.err, context.DeadlineExceeded) || rb.opaque == 0 || rb.opaque != re.Opaque {
		t.Fatalf("b: written=%v opaque=%d/%d err=%v; want not written, DeadlineExceeded, its opaque", re.Written, rb.opaque, re.Opaque, rb.err)
	}
	g.acts <- gateWrite{n: -1}
	if r := recv(t, a); r.err != nil {
		t.Fatalf("a: %v", r.err)
	}
	if k := recv(t, seen); k != "a" {
		t.Fatalf("server saw %q, want a", k)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d pending", c.Pending())
	}
}

// The connection's end fails what is on the stack as not written, and a
// caller that comes after finds the stack closed and the connection's
// error.
func TestSubmitConnectionEnds(t *testing.T) {
	c, p, g := dialGated(t, Options{ProbeAfter: -1})
	go drain(p.nc)
	ctx := testCtx(t)

	a, b := pushBehindWrite(t, c, g, ctx, ctx, "b")
	g.acts <- gateWrite{n: -1, err: syscall.ECONNRESET} // a written, then the reset

	for k, want := range map[string]bool{"a": true, "b": false} {
		ch := a
		if k == "b" {
			ch = b
		}
		r := recv(t, ch)
		re := requestError(t, r.err)
		if re.Written != want || r.calls != 0 || !errors.Is(r.err, kverr.ErrConnectionClosed) || !errors.Is(r.err, syscall.ECONNRESET) {
			t.Errorf("%s: written=%v calls=%d err=%v; want written=%v, ErrConnectionClosed, ECONNRESET", k, re.Written, r.calls, r.err, want)
		}
	}
	<-c.exited
	if h := c.sub.head.Load(); h != submissionsClosed {
		t.Fatal("the stack is not closed after the teardown")
	}
	crowd(c)
	r := doGet(ctx, c, "late")
	if re := requestError(t, r.err); re.Written || !errors.Is(r.err, kverr.ErrConnectionClosed) {
		t.Fatalf("late: written=%v err=%v; want not written, ErrConnectionClosed", re.Written, r.err)
	}
}

// An error found when the writer queues a submitted call is the call's
// outcome, not written: MaxPending, or a request that cannot be encoded.
// The connection goes on.
func TestSubmitQueueError(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		key  string
		want error
	}{
		{"MaxPending", Options{MaxPending: 1, ProbeAfter: -1}, "b", kverr.ErrOverloaded},
		{"encoding", Options{ProbeAfter: -1}, strings.Repeat("k", 70000), memdx.ErrInvalidRequest}, // a key longer than 65535
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, p, g := dialGated(t, tc.opts)
			go drain(p.nc) // a stays unanswered
			ctx := testCtx(t)

			a, b := pushBehindWrite(t, c, g, ctx, ctx, tc.key)
			g.acts <- gateWrite{n: -1} // the writer's next turn queues b, with a in flight
			rb := recv(t, b)
			re := requestError(t, rb.err)
			if re.Written || !errors.Is(rb.err, tc.want) || rb.calls != 0 {
				t.Fatalf("b: written=%v calls=%d err=%v; want not written, %v", re.Written, rb.calls, rb.err, tc.want)
			}
			if n, err := c.Pending(), c.Err(); n != 1 || err != nil {
				t.Fatalf("%d pending, connection error %v; want 1 (a), none", n, err)
			}
			c.Close()
			if r := recv(t, a); !errors.Is(r.err, kverr.ErrConnectionClosed) {
				t.Fatalf("a: %v", r.err)
			}
		})
	}
}
