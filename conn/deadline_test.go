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
	c, p := dialPipe(t, Options{}, nil)
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
			})
			ch <- out{op, err, v}
		}()
		return ch
	}
	start := time.Now()
	held := do("held", time.Now().Add(50*time.Millisecond))
	rh := p.read()
	r := <-held
	if elapsed := time.Since(start); elapsed < 50*time.Millisecond {
		t.Fatalf("returned after %v, before the deadline", elapsed)
	}
	var re *RequestError
	if !errors.As(r.err, &re) || !re.Written || !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("held: %+v; want a written DeadlineExceeded RequestError", r)
	}
	if r.opaque != rh.Opaque || re.Opaque != rh.Opaque {
		t.Fatalf("opaque %d / %d, the request carried %d", r.opaque, re.Opaque, rh.Opaque)
	}
	quick := do("quick", time.Now().Add(10*time.Second))
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
	op, err := c.DoDeadline(context.Background(), time.Now().Add(-time.Millisecond), &req, nil)
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
		if _, err := c.DoDeadline(ctx, time.Now().Add(time.Minute), &req, handle); err != nil {
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
// each no earlier than its deadline.
func TestDoDeadlineMixedTimeouts(t *testing.T) {
	c, p := dialPipe(t, Options{}, nil)
	go func() { // read and never answer
		for {
			if _, err := p.tryRead(); err != nil {
				return
			}
		}
	}()
	type ended struct {
		name string
		at   time.Time
		err  error
	}
	out := make(chan ended, 3)
	start := time.Now()
	timeouts := []struct {
		name string
		d    time.Duration
	}{{"long", 300 * time.Millisecond}, {"short", 50 * time.Millisecond}, {"mid", 150 * time.Millisecond}}
	for _, tt := range timeouts {
		go func() {
			req := memdx.NewGet([]byte(tt.name))
			_, err := c.DoDeadline(context.Background(), start.Add(tt.d), &req, nil)
			out <- ended{tt.name, time.Now(), err}
		}()
		time.Sleep(5 * time.Millisecond) // send in this order
	}
	want := map[string]time.Duration{"short": 50 * time.Millisecond, "mid": 150 * time.Millisecond, "long": 300 * time.Millisecond}
	var order []string
	for range 3 {
		e := <-out
		order = append(order, e.name)
		if !errors.Is(e.err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v", e.name, e.err)
		}
		if got := e.at.Sub(start); got < want[e.name] {
			t.Fatalf("%s ended after %v, before its deadline %v", e.name, got, want[e.name])
		}
	}
	if order[0] != "short" || order[1] != "mid" || order[2] != "long" {
		t.Fatalf("expired in order %v, want short, mid, long", order)
	}
	if c.Pending() != 3 {
		t.Fatalf("pending %d: the written requests stay as tombstones until answered", c.Pending())
	}
}
