package conn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// DoDeadline: an answer held past the deadline ends the request as a
// written, DeadlineExceeded RequestError carrying the opaque; the late answer
// is dropped and the connection carries on; an answer in time succeeds.
func TestDoDeadline(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{clock: fc, ProbeAfter: -1}, nil)
	type out struct {
		opaque uint32
		err    error
		value  string
	}
	do := func(key string, deadline time.Time) chan out {
		ch := make(chan out, 1)
		go func() {
			req := memdx.NewGet([]byte(key))
			var v string
			op, err := c.DoDeadline(context.Background(), deadline, &req, func(p *memdx.Packet) error {
				v = string(p.Value)
				return nil
			}, nil)
			ch <- out{op, err, v}
		}()
		return ch
	}
	held := do("held", fc.Now().Add(50*time.Millisecond))
	rh := p.read()
	// The call ends at its deadline on the connection's clock, not before.
	fc.Advance(50*time.Millisecond - time.Nanosecond)
	waitFor(t, "the deadline's timer", func() bool { return fc.armedWithin(time.Nanosecond) })
	select {
	case r := <-held:
		t.Fatalf("returned before the deadline: %+v", r)
	default:
	}
	fc.Advance(time.Nanosecond)
	r := recv(t, held)
	var re *RequestError
	if !errors.As(r.err, &re) || !re.Written || !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("held: %+v; want a written DeadlineExceeded RequestError", r)
	}
	if r.opaque != rh.Opaque || re.Opaque != rh.Opaque {
		t.Fatalf("opaque %d / %d, the request carried %d", r.opaque, re.Opaque, rh.Opaque)
	}
	quick := do("quick", fc.Now().Add(10*time.Second))
	rq := p.read()
	p.write(ok(rh, "late"), ok(rq, "Q"))
	if r := <-quick; r.err != nil || r.value != "Q" || r.opaque != rq.Opaque {
		t.Fatalf("quick: %+v", r)
	}
	if c.Err() != nil || c.Pending() != 0 {
		t.Fatalf("err %v pending %d after the late response", c.Err(), c.Pending())
	}
	// A deadline already passed: refused without sending.
	req := memdx.NewGet([]byte("x"))
	op, err := c.DoDeadline(context.Background(), fc.Now().Add(-time.Millisecond), &req, nil, nil)
	if !errors.As(err, &re) || re.Written || op != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past deadline: opaque %d, %v", op, err)
	}
}

// A deadline costs no allocation: the timer is reused with the pooled call.
func TestDoDeadlineAllocs(t *testing.T) {
	c := dialEchoGets(t)
	req := memdx.NewGet([]byte("some-key"))
	handle := func(p *memdx.Packet) error { return nil }
	ctx := context.Background()
	do := func() {
		if _, err := c.DoDeadline(ctx, time.Now().Add(time.Minute), &req, handle, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		do()
	}
	got := testing.AllocsPerRun(1000, do)
	limit := 0.0
	if raceEnabled {
		limit = 1.5 // sync.Pool drops items under -race: see TestDoAllocs
	}
	if got > limit {
		t.Fatalf("%v allocations per DoDeadline, want <= %v", got, limit)
	}
}

// Requests with different timeouts, none answered, expire in deadline order
// (the list keeps the earliest first whatever the order they were sent in),
// each at its deadline on the connection's clock, not before.
func TestDoDeadlineMixedTimeouts(t *testing.T) {
	fc := newFakeClock()
	c, p := dialPipe(t, Options{clock: fc, ProbeAfter: -1}, nil)
	type ended struct {
		name string
		err  error
	}
	out := make(chan ended, 3)
	start := fc.Now()
	type timeout struct {
		name string
		d    time.Duration
	}
	for _, tt := range []timeout{{"long", 300 * time.Millisecond}, {"short", 50 * time.Millisecond}, {"mid", 150 * time.Millisecond}} {
		go func() {
			req := memdx.NewGet([]byte(tt.name))
			_, err := c.DoDeadline(context.Background(), start.Add(tt.d), &req, nil, nil)
			out <- ended{tt.name, err}
		}()
		if got := string(p.read().Key); got != tt.name { // written in this order, never answered
			t.Fatalf("the peer read %q, want %q", got, tt.name)
		}
	}
	for _, tt := range []timeout{{"short", 50 * time.Millisecond}, {"mid", 150 * time.Millisecond}, {"long", 300 * time.Millisecond}} {
		fc.Advance(start.Add(tt.d - time.Nanosecond).Sub(fc.Now()))
		waitFor(t, tt.name+"'s deadline timer", func() bool { return fc.armedWithin(time.Nanosecond) })
		select {
		case e := <-out:
			t.Fatalf("%s ended before %s's deadline: %v", e.name, tt.name, e.err)
		default:
		}
		fc.Advance(time.Nanosecond)
		e := recv(t, out)
		if e.name != tt.name || !errors.Is(e.err, context.DeadlineExceeded) {
			t.Fatalf("%s ended (%v) at %s's deadline; want %s, DeadlineExceeded", e.name, e.err, tt.name, tt.name)
		}
	}
	if c.Pending() != 3 {
		t.Fatalf("pending %d: the written requests stay as tombstones until answered", c.Pending())
	}
}

// Origin.SentIsNow hands DoDeadline the caller's reading of the system
// clock for its deadline check: a deadline that reading has passed is
// refused unsent, though the clock read now would not have passed it; a
// connection on a clock of its own ignores it.
func TestDoDeadlineSentIsNow(t *testing.T) {
	c := dialEchoGets(t)
	deadline := time.Now().Add(time.Hour)
	late := &Origin{Operation: "get", Sent: deadline, SentIsNow: true}
	req := memdx.NewGet([]byte("k"))
	op, err := c.DoDeadline(context.Background(), deadline, &req, nil, late)
	var re *RequestError
	if !errors.As(err, &re) || re.Written || op != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sent at the deadline: opaque %d, %v; want it refused unsent", op, err)
	}
	// Without SentIsNow, Sent is only recorded: the clock says an hour is left.
	late.SentIsNow = false
	if _, err := c.DoDeadline(context.Background(), deadline, &req, func(*memdx.Packet) error { return nil }, late); err != nil {
		t.Fatalf("Sent recorded only: %v", err)
	}

	fc := newFakeClock()
	cf, p := dialPipe(t, Options{clock: fc, ProbeAfter: -1}, nil)
	fdl := fc.Now().Add(time.Minute)
	ch := make(chan error, 1)
	go func() {
		_, err := cf.DoDeadline(context.Background(), fdl, &req, func(*memdx.Packet) error { return nil },
			&Origin{Sent: fdl, SentIsNow: true})
		ch <- err
	}()
	p.write(ok(p.read(), "v"))
	if err := <-ch; err != nil {
		t.Fatalf("fake clock: %v; want SentIsNow ignored", err)
	}
}
