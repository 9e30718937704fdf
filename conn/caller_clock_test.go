package conn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// Options.Clock drives the health check: a tombstone calls for a probe
// ProbeAfter later on that clock, and the probe's silence closes the
// connection ProbeTimeout after it, on that clock. Everything else keeps
// the connection's own clock (the system's; here a second fake one), so a
// Clock nobody moves holds nothing up: the dial (its bootstrap watch
// included) completes, and a request's deadline expires on the
// connection's clock while the Clock stands still. An idle connection arms
// no timer on the Clock.
func TestCallerClockDrivesHealthCheck(t *testing.T) {
	fc := retry.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	// The connection's own clock (the system's unless a test sets it), on
	// which the request's deadline passes when the test says so: a
	// deadline of the real clock could pass before the request is
	// written, on a machine slow enough.
	own := newFakeClock()
	c, p := dialPipe(t, Options{Clock: fc, clock: own}, nil)
	start := fc.Now()
	if timers := fc.Timers(); len(timers) != 0 {
		t.Fatalf("timers armed on the caller's clock by an idle connection: %v", timers)
	}
	get := memdx.NewGet([]byte("k"))
	ch := make(chan error, 1)
	go func() {
		_, err := c.DoDeadline(context.Background(), own.Now().Add(50*time.Millisecond), &get, nil, nil)
		ch <- err
	}()
	if req := p.read(); req.OpCode != memdx.OpGet {
		t.Fatalf("got %s", req.OpCode)
	}
	own.Advance(50 * time.Millisecond)
	if err := recv(t, ch); !errors.Is(err, context.DeadlineExceeded) || !requestError(t, err).Written {
		t.Fatalf("GET past its deadline: %v; want written, context.DeadlineExceeded", err)
	}
	due := start.Add(DefaultProbeAfter)
	waitFor(t, "the probe's timer on the caller's clock", func() bool {
		ts := fc.Timers()
		return len(ts) == 1 && ts[0].Equal(due)
	})
	if c.Stats().Probes != 0 {
		t.Fatal("a probe before ProbeAfter passed on the caller's clock")
	}
	fc.Advance(DefaultProbeAfter)
	if probe := p.read(); probe.OpCode != memdx.OpNoop {
		t.Fatalf("got %s, want the probe", probe.OpCode)
	}
	go drain(p.nc)
	for i := 0; !closed(c)(); i++ {
		if i == 2 {
			t.Fatal("still open two probe timeouts after the probe was written")
		}
		waitFor(t, "the probe's timeout on the caller's clock", func() bool {
			ts := fc.Timers()
			return closed(c)() || len(ts) == 1 && ts[0].Equal(fc.Now().Add(DefaultProbeTimeout))
		})
		fc.Advance(DefaultProbeTimeout)
		waitFor(t, "the check", func() bool { return closed(c)() || len(fc.Timers()) == 1 })
	}
	if !errors.Is(c.Err(), kverr.ErrUnresponsive) {
		t.Fatalf("connection error %v; want kverr.ErrUnresponsive", c.Err())
	}
}

// A connection that has ended leaves no timer armed on the caller's
// Clock, even when a caller gives up on a written request after the
// monitor stopped (between the connection's failure and its teardown,
// which waits for the reader: here inside a STAT's handle). Such a
// tombstone arms no health check: a fake Clock would hold its timer for
// good.
func TestCallerClockNoTimerAfterEnd(t *testing.T) {
	fc := retry.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	c, p := dialPipe(t, Options{Clock: fc}, nil)
	// A durable write abandoned: its tombstone is due a minute on, which
	// makes the health timer.
	wctx, wcancel := context.WithCancel(context.Background())
	w := goDurablePipe(wctx, c, "w", 60000)
	p.read()
	waitFor(t, "the write accepted", func() bool { return c.Pending() == 1 && wireEmpty(c)() })
	wcancel()
	if err := recv(t, w); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	waitFor(t, "the health timer", func() bool { return len(fc.Timers()) == 1 })
	gctx, gcancel := context.WithCancel(context.Background())
	g := goGet(gctx, c, "g")
	p.read()
	entered, release := make(chan struct{}), make(chan struct{})
	stat := make(chan error, 1)
	go func() {
		req := memdx.NewStat(nil)
		stat <- c.Do(context.Background(), &req, func(*memdx.Packet) error {
			close(entered)
			<-release
			return nil
		})
	}()
	sreq := p.read()
	first := ok(sreq, "1")
	first.Key = []byte("a")
	p.write(first)
	<-entered // the reader is inside handle: the teardown waits for it
	c.Abort(nil)
	waitFor(t, "the monitor's end", func() bool { return len(fc.Timers()) == 0 })
	gcancel() // the GET, written, is abandoned while the connection ends
	if r := recv(t, g); r.err == nil {
		t.Fatal("the GET succeeded")
	}
	close(release)
	if err := recv(t, stat); !errors.Is(err, kverr.ErrConnectionClosed) {
		t.Fatalf("STAT: %v", err)
	}
	c.Close()
	if ts := fc.Timers(); len(ts) != 0 {
		t.Fatalf("timers armed on the caller's clock by a closed connection: %v", ts)
	}
}
