//go:build unix

package conn

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Edge cases of a borrower's cancel (readrole.go): a request cancelled
// before it is written, and a cancel's callback that lands late, on the
// next borrower, at a moment the test chooses.

// A borrower whose request is still queued when its context is cancelled
// (here a Cork holds the writer back, so that neither the inline write nor
// the writer goroutine writes it) is woken, and its request withdrawn: Do
// returns context.Canceled, not written, and the server never sees the
// request, even once the writer is free again; the connection serves the
// next request and lends the role again.
func TestBorrowerCancelledWhileQueued(t *testing.T) {
	seen := make(chan string, 16)
	c := dialTCP(t, Options{clock: newFakeClock(), ProbeAfter: -1}, answerAllSeen(seen))
	bg := context.Background()
	if r := doGet(bg, c, "first"); r.err != nil {
		t.Fatal(r.err)
	}
	if k := recv(t, seen); k != "first" {
		t.Fatalf("server saw %q", k)
	}
	waitLent(t, c)
	_, before := c.roleState()
	c.Cork()
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	out := goGet(ctx, c, "withdrawn")
	waitFor(t, "the borrower's request queued", func() bool {
		role, lends := c.roleState()
		return role == roleBorrowed && lends == before+1 && queuedCalls(c) == 1
	})
	cancel()
	r := recv(t, out)
	if re := requestError(t, r.err); re.Written || !errors.Is(r.err, context.Canceled) || r.calls != 0 {
		t.Fatalf("withdrawn: %+v; want a Canceled RequestError, not written", r)
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d pending after the withdrawal; want none", n)
	}
	c.Uncork()
	if r := doGet(bg, c, "after"); r.err != nil || r.value != "after" {
		t.Fatalf("after: %+v", r)
	}
	// The server reads in order: had the withdrawn request gone out, it
	// would have come before "after".
	if k := recv(t, seen); k != "after" {
		t.Fatalf("the server saw %q; want the withdrawn request never sent", k)
	}
	waitLent(t, c)
	if c.Err() != nil || c.Pending() != 0 || c.Stats().StrayResponses != 0 {
		t.Fatalf("err %v, %d pending, stats %+v", c.Err(), c.Pending(), c.Stats())
	}
}

// lateCancel sets up a cancel's callback that runs late, when the test
// says: the connection's onCancel is wrapped so that the callback, once the
// context package has started it, reports on started and waits for
// release before it calls borrowerCancelled; ran is closed once that has
// returned.
type lateCancel struct {
	started, release, ran chan struct{}
}

func delayCancels(c *Conn) *lateCancel {
	lc := &lateCancel{started: make(chan struct{}, 1), release: make(chan struct{}), ran: make(chan struct{})}
	inner := c.reader.onCancel
	c.reader.onCancel = func() {
		lc.started <- struct{}{}
		<-lc.release
		inner()
		close(lc.ran)
	}
	return lc
}

// cancelAfterAnswer has a borrower (key "one", its context cancellable)
// cancelled while it reads, its callback held (lc), then answered: the
// borrower's stop loses the race to the cancel, so the callback is still
// to run when the borrower has its answer, which it returns (a cancel that
// comes before the interrupt does not lose an answer). It returns with the
// role lent again.
func cancelAfterAnswer(t *testing.T, c *Conn, lc *lateCancel, got <-chan memdx.Packet, answer chan<- memdx.Packet) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := goGet(ctx, c, "one")
	held := recv(t, got)
	cancel()
	recv(t, lc.started) // the context package started the callback: stop returns false
	answer <- ok(held, "one")
	if r := recv(t, out); r.err != nil || r.value != "one" || r.calls != 1 {
		t.Fatalf("one, cancelled after its answer was on its way: %+v; want the answer", r)
	}
	waitLent(t, c)
}

// A cancel whose callback runs after its borrower stopped watching (the
// cancel raced the answer) interrupts the next borrower: landing as that
// borrower's catch-up read begins, or while it reads for its request, it
// is a spurious wake-up: the next borrower gets its answer, and the
// connection carries on.
func TestLateCancelLandsOnTheNextBorrower(t *testing.T) {
	for _, during := range []string{"catchUp", "readFor"} {
		t.Run(during, func(t *testing.T) {
			fc := newFakeClock()
			got, answer, quit := make(chan memdx.Packet), make(chan memdx.Packet), make(chan struct{})
			c := dialTCP(t, Options{clock: fc, ProbeAfter: -1}, holdKeys([]string{"one", "two"}, got, answer, quit))
			t.Cleanup(func() { close(quit) })
			if r := doGet(context.Background(), c, "first"); r.err != nil {
				t.Fatal(r.err)
			}
			waitLent(t, c)
			lc := delayCancels(c)
			cancelAfterAnswer(t, c, lc, got, answer)
			_, before := c.roleState()
			reads := c.Stats().Reads
			var out <-chan result
			// The next borrower's context can be cancelled too (and is
			// not): readFor checks it on the interrupt.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			switch during {
			case "catchUp":
				// Lent long enough ago that the borrower catches up; the
				// callback runs as it begins.
				fc.Advance(catchUpAfter)
				c.reader.catchUpHook = func() {
					close(lc.release)
					<-lc.ran
				}
				out = goGet(ctx, c, "two")
			case "readFor":
				// The server has the request: its borrower reads for it.
				out = goGet(ctx, c, "two")
			}
			var held memdx.Packet
			select {
			case held = <-got:
			case r := <-out:
				t.Fatalf("two ended before the server had it: %+v", r)
			case <-time.After(testTimeout):
				t.Fatal("the server never had two")
			}
			if role, lends := c.roleState(); role != roleBorrowed || lends != before+1 {
				t.Fatalf("role %d, %d lends (%d before) while two waits; want it borrowed", role, lends, before)
			}
			if during == "readFor" {
				close(lc.release)
				recv(t, lc.ran)
				// The interrupt ends the borrower's read, which clears it.
				waitFor(t, "the borrower's interrupted read", func() bool {
					c.mu.Lock()
					interrupted := c.reader.interrupted
					c.mu.Unlock()
					return !interrupted && c.Stats().Reads > reads
				})
			}
			answer <- ok(held, "two")
			if r := recv(t, out); r.err != nil || r.value != "two" || r.calls != 1 {
				t.Fatalf("two, the late interrupt during its %s: %+v; want its answer", during, r)
			}
			if role, lends := c.roleState(); role != roleLent || lends != before+1 {
				t.Fatalf("after two: role %d, %d lends (%d before); want it read by its borrower and lent again", role, lends, before)
			}
			if r := doGet(context.Background(), c, "after"); r.err != nil || r.value != "after" {
				t.Fatalf("after: %+v", r)
			}
			if c.Err() != nil || c.Pending() != 0 || c.Stats().StrayResponses != 0 {
				t.Fatalf("err %v, %d pending, stats %+v", c.Err(), c.Pending(), c.Stats())
			}
		})
	}
}

// A borrower cancelled as its answer arrives gets the answer: cancelled
// after the answer was on its way and interrupted once it has read it
// (cancelAfterAnswer), or interrupted while its handle runs with the
// answer. Either way its own interrupt is cleared before the role moves
// on (the reader goroutine's next read does not fail) and the connection
// carries on. (Cancelled and interrupted before the answer is read, it
// returns Canceled, written: TestCancelledBorrowerReturnsAtOnce; at any
// moment in between, at random: TestBorrowersCancelledAtAnyMoment.)
func TestBorrowerCancelledAsItsAnswerArrives(t *testing.T) {
	got, answer, quit := make(chan memdx.Packet), make(chan memdx.Packet), make(chan struct{})
	c := dialTCP(t, Options{clock: newFakeClock(), ProbeAfter: -1}, holdKey("one", got, answer, quit))
	t.Cleanup(func() { close(quit) })
	bg := context.Background()
	if r := doGet(bg, c, "first"); r.err != nil {
		t.Fatal(r.err)
	}
	waitLent(t, c)
	lc := delayCancels(c)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	out := make(chan error, 1)
	inHandle := make(chan struct{})
	go func() {
		req := memdx.NewGet([]byte("one"))
		out <- c.Do(ctx, &req, func(p *memdx.Packet) error {
			if string(p.Value) != "one" {
				return fmt.Errorf("value %q", p.Value)
			}
			close(inHandle)
			<-lc.ran // interrupted while its answer is handed over
			return nil
		})
	}()
	held := recv(t, got)
	cancel()
	recv(t, lc.started)
	answer <- ok(held, "one")
	recv(t, inHandle)
	if role, _ := c.roleState(); role != roleBorrowed {
		t.Fatalf("role %d while the borrower's handle runs", role)
	}
	close(lc.release)
	if err := recv(t, out); err != nil {
		t.Fatalf("one, interrupted while its answer was handed over: %v; want the answer", err)
	}
	waitLent(t, c)
	c.mu.Lock()
	interrupted := c.reader.interrupted
	c.mu.Unlock()
	if interrupted {
		t.Fatal("the borrower's interrupt was left behind")
	}
	// The role taken back by a Start: the reader goroutine's read must not
	// see a deadline left in the past.
	n := make(tagNotifier, 1)
	var v string
	pd := startGet(t, c, memdx.OpGet, "started", n, 1, &v)
	recv(t, (<-chan uint64)(n))
	if answered, err := pd.Result(); !answered || err != nil || v != "started" {
		t.Fatalf("started: answered %v, %v, %q", answered, err, v)
	}
	if r := doGet(bg, c, "after"); r.err != nil || r.value != "after" {
		t.Fatalf("after: %+v", r)
	}
	if c.Err() != nil || c.Pending() != 0 || c.Stats().StrayResponses != 0 {
		t.Fatalf("err %v, %d pending, stats %+v", c.Err(), c.Pending(), c.Stats())
	}
}
