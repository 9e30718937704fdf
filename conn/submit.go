package conn

import (
	"sync/atomic"

	"github.com/kvwire/kvwire/memdx"
)

// This file is the submission stack: how a caller in Do hands its request
// to the writer goroutine without taking Conn.mu, when the connection is
// crowded.
//
// Queueing a request is a few hundred nanoseconds of work under Conn.mu:
// an opaque, the encoding, the in-flight table, the wire and deadline
// lists. With a couple of hundred callers on a connection, on two cores,
// that lock and the lines it guards move between the cores at every
// request: against memcached with 256 goroutines the callers spent 5.5–8
// µs per request waiting for mu (make bench's mutex wait), where the best
// raw loop spends 0.9–1.2 µs of CPU on a whole request.
// So on a crowded connection a caller pushes its call onto a lock-free
// stack, one compare-and-swap, and the writer goroutine, which takes mu
// for its batch anyway, queues everything pushed since its last look, in
// the order it was pushed, before it writes. Measured against queueing
// under mu (256 goroutines, memcached, an interleaved A/B of 12 rounds):
// CPU per request ×0.79, requests per second ×1.17 (32-byte values) and
// ×1.30 (1 KiB), mutex wait from 8 µs per request to 0.1. With 16 or 32
// goroutines it cost 5–20% more CPU per request at the same throughput
// (the lock is hardly contended there, the writer's queueing is no longer
// spread over the callers, and a lone request loses its inline write), so
// a connection uses the stack only while crowded: the writer saw at least
// submitAt requests in flight when it last took a batch
// (submissions.crowded).
//
// A submitted call is in the state submitted (request.go): not in the
// table, no opaque, no bytes. Its caller may cancel it (withdrawn, never
// written: the writer pools it when it finds it); an error at queueing
// (the connection ended, MaxPending, an encoding error) is its outcome, on
// done, not written. The connection's end closes the stack (teardown) and
// fails what is on it, not written; a caller that finds the stack closed
// queues under mu, where it finds the connection's error. Every step on a
// submitted call but the push itself is under mu.

// submitAt is how many requests in flight make a connection crowded.
// With it, against the lock alone, goroutines in Get on memcached (client
// CPU per request, medians of 8 interleaved rounds' ratios):
//
//	goroutines    16     32     48     64     128    256
//	CPU/request   ×0.96  ×0.92  ×0.98  ×0.89  ×0.85  ×0.88
//	raw (control) ×0.97  ×1.03  ×0.98  ×1.00  ×1.01  ×1.06
//
//	BENCH_BASE=090c3ae BENCH_AB_ROUNDS=8 BENCH_ARGS='-conc 16,32,48,64,128,256
//	  -only ^memcached/get-32B/[0-9]+/(kvwire|raw)$ -duration 1s -warmup 300ms
//	  -keys 2000' scripts/bench.sh
//
// At 64 goroutines the mutex wait fell from 1.7 µs per request to 0.2. A
// lower threshold costs where the lock is hardly contended: built with 32,
// the stack cost 5–20% more CPU per request at 32 goroutines (0.2 µs of
// mutex wait per request); built with 64, it saved about half as much as
// 48 at 64 goroutines, which seldom have 64 requests in flight at once.
const submitAt = 48

// submissions is the stack: calls pushed and not yet queued, newest
// first, linked through call.subNext.
type submissions struct {
	head atomic.Pointer[call]
	// crowded: at its last batch the writer counted at least submitAt
	// (Options.submitAt) requests in flight. Written by the writer only
	// when it changes, so that callers read it from a line they share.
	crowded atomic.Bool
	// sweepAt mirrors monitor.dlAt, in Unix nanoseconds (0: disarmed), for
	// callers without mu: a call with a deadline that the sweeper is not
	// armed to reach asks the monitor for a sweep (submit).
	sweepAt atomic.Int64
	// queued counts the calls queued from the stack (Stats.Submitted).
	// Guarded by Conn.mu.
	queued uint64
}

// submissionsClosed is the head of a closed stack (teardown).
var submissionsClosed = new(call)

// push puts cl on the stack. first: the stack was empty, so the writer
// goroutine needs a wake-up; ok false: the stack is closed, cl is not on
// it.
func (s *submissions) push(cl *call) (first, ok bool) {
	for {
		old := s.head.Load()
		if old == submissionsClosed {
			return false, false
		}
		cl.subNext = old
		if s.head.CompareAndSwap(old, cl) {
			return old == nil, true
		}
	}
}

// take empties the stack and returns what was on it, oldest first. Called
// with mu held (by the writer, which queues them).
func (s *submissions) take() *call {
	if h := s.head.Load(); h == nil || h == submissionsClosed {
		return nil // (close is under mu too: it cannot come in between)
	}
	return reverse(s.head.Swap(nil))
}

// close empties the stack for good and returns what was on it, oldest
// first. Called with mu held (teardown).
func (s *submissions) close() *call {
	return reverse(s.head.Swap(submissionsClosed))
}

// reverse reverses a list linked through call.subNext.
func reverse(l *call) *call {
	var r *call
	for l != nil {
		next := l.subNext
		l.subNext = r
		r, l = l, next
	}
	return r
}

// noteCrowding is the writer, under mu, about to take a batch: it tells
// the callers whether the connection is crowded.
func (c *Conn) noteCrowding() {
	s := &c.sub
	if crowded := c.inflight.active >= c.opts.submitAt; crowded != s.crowded.Load() {
		s.crowded.Store(crowded)
	}
}

// submit pushes cl, a Do call not yet queued, with its request, and wakes
// the writer goroutine if the stack was empty. It reports false when the
// stack is closed: the caller then queues under mu (start).
//
// The writer queues what is on the stack at every turn, but not while it
// is blocked in a Write (a node that stopped reading): the monitor's
// sweep queues it too, before it expires anything, so that a submitted
// call's deadline holds as a queued one's does. A call whose deadline
// comes before the sweep the monitor is armed for (or when it is not
// armed) asks it for a sweep now, which queues the call and arms the
// timer for it. The sweeper is usually armed already, for an earlier
// request's deadline: that costs no more than a load.
func (c *Conn) submit(cl *call, req *memdx.Request) bool {
	cl.state = reqSubmitted
	cl.req = req
	deadline := cl.deadline
	first, ok := c.sub.push(cl)
	if !ok {
		cl.state, cl.req = reqQueued, nil
		return false
	}
	// From here cl may be queued, answered and pooled: only the copies.
	if first {
		c.writer.wake()
	}
	if !deadline.IsZero() {
		// Read after the push: a sweep that disarmed the timer before
		// this load is seen; one after it finds cl on the stack.
		if at := c.sub.sweepAt.Load(); at == 0 || at > deadline.UnixNano() {
			c.monitor.sweepSoon()
		}
	}
	return true
}

// queueSubmitted queues the calls pushed since it last ran, in the order
// they were pushed: each as start would have, or, on an error, ended with
// it (not written). It reports whether the writer goroutine needs a
// wake-up (see commit). Called with mu held, by the writer goroutine and
// the monitor's sweep.
func (c *Conn) queueSubmitted() (wake bool) {
	c.eachLive(c.sub.take(), func(cl *call) {
		req := cl.req
		cl.req = nil
		w, err := c.queue(cl, req, true)
		if err != nil {
			cl.state = reqEnded
			cl.done <- err
		} else {
			c.sub.queued++
		}
		wake = wake || w
	})
	return wake
}

// failSubmitted closes the stack and fails the calls on it with the
// connection's end (cause), not written. Called with mu held, by the
// teardown.
func (c *Conn) failSubmitted(cause error) {
	c.eachLive(c.sub.close(), func(cl *call) {
		cl.state, cl.req = reqEnded, nil
		cl.done <- &RequestError{Op: cl.op, Addr: c.addr, Err: cause, connEnded: true}
	})
}

// eachLive calls do for each call of list, a list taken off the stack
// (take, close), oldest first, unlinking each; a call its caller withdrew
// meanwhile (cancel) is pooled instead. Called with mu held.
func (c *Conn) eachLive(list *call, do func(*call)) {
	for cl := list; cl != nil; {
		next := cl.subNext
		cl.subNext = nil
		if cl.state != reqSubmitted {
			c.release(cl)
		} else {
			do(cl)
		}
		cl = next
	}
}

// withdrawSubmitted is a cancelling caller taking back its submitted
// call: it ends, never written, and the writer pools it when it finds it
// on the stack. Called with mu held.
func (c *Conn) withdrawSubmitted(cl *call) {
	cl.state, cl.req = reqEnded, nil
	cl.owner = ownConn
}
