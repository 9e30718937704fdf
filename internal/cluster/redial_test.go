package cluster

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kvwire/kvwire/conn"
)

// TestRedialerRule: the waits a node's maintainer makes before its dials,
// for connections that end early or late and dials that fail, on a clock
// the test moves (redialer's comment states the rule).
func TestRedialerRule(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	// What each connection read, and its error: by default nothing past
	// its bootstrap (it served nothing).
	read := map[*conn.Conn]uint64{}
	errs := map[*conn.Conn]error{}
	r := redialer{backoff: ReconnectMin, lives: map[*conn.Conn]*connLife{},
		state: func(cn *conn.Conn) (uint64, error) { return read[cn], errs[cn] }}
	now := t0
	// made adds a connection to the pool now; end ends it after lived
	// (the clock moves) and returns the wait the maintainer makes.
	made := func() *conn.Conn {
		cn := new(conn.Conn)
		r.lives[cn] = &connLife{born: now}
		return cn
	}
	end := func(cn *conn.Conn, lived time.Duration) time.Duration {
		now = now.Add(lived)
		at := now
		r.lives[cn].ended.Store(&at)
		now = now.Add(time.Hour) // noticed later: the recorded end counts
		w, _ := r.ended([]*conn.Conn{cn}, now)
		return w
	}

	assert.Zero(t, end(made(), time.Millisecond), "the first early end: at once")
	for _, want := range []time.Duration{10, 20, 40, 80, 160, 320, 640, 1280, 2000, 2000} {
		assert.Equal(t, want*time.Millisecond, end(made(), ConnMinLife-time.Nanosecond), "each later early end waits, doubling to ReconnectMax")
	}
	assert.Zero(t, end(made(), ConnMinLife), "a long-lived connection: at once")
	assert.Zero(t, end(made(), 0), "and the next early end")
	assert.Equal(t, ReconnectMin, end(made(), 0), "the back-off starts again")

	// A failed dial doubles the back-off; a successful one keeps it; an
	// early end after a failed dial is redialed at once.
	assert.Equal(t, 20*time.Millisecond, r.dialFailed(false))
	assert.Equal(t, ReconnectMin, r.dialFailed(true), "an attempt that waited out a timeout")
	assert.Zero(t, end(made(), 0))
	assert.Equal(t, 40*time.Millisecond, end(made(), 0))

	// Several ended at once are one end: early unless one lived long. A
	// connection ended before its birth was recorded lived no time; one
	// without an end recorded (the seed's OnClose is not the node's) ended
	// when noticed.
	a, b := made(), made()
	now = now.Add(ConnMinLife)
	w, _ := r.ended([]*conn.Conn{a, b, made()}, now)
	assert.Zero(t, w, "one of them lived long")
	c, d := made(), made()
	before := now.Add(-time.Second)
	r.lives[c].ended.Store(&before)
	w, _ = r.ended([]*conn.Conn{c, d}, now)
	assert.Zero(t, w, "the first early end")
	w, lived := r.ended([]*conn.Conn{made()}, now)
	assert.Equal(t, ReconnectMin, w)
	assert.Zero(t, lived)
	w, _ = r.ended(nil, now)
	assert.Zero(t, w, "nothing ended")

	// A connection the node answered requests on, ended early by the
	// node or the network (a restart, a cut), is redialed at once and
	// resets the back-off, as before; one the client dropped for a
	// conn-state-invalidated status counts as early however much it
	// served.
	assert.Equal(t, 20*time.Millisecond, end(made(), 0), "early ends in a row")
	served := made()
	read[served] = 100
	assert.Zero(t, end(served, time.Millisecond), "served, then cut: at once")
	assert.Zero(t, end(made(), 0), "the back-off started again: the first early end")
	assert.Equal(t, ReconnectMin, end(made(), 0))
	dropped := made()
	read[dropped] = 100
	errs[dropped] = fmt.Errorf("conn: closed: %w", &ConnInvalidatedError{Err: errors.New("EINTERNAL")})
	assert.Equal(t, 20*time.Millisecond, end(dropped, time.Millisecond), "dropped by the client: early")
	assert.Empty(t, r.lives, "ended connections are forgotten")
}
