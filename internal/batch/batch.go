// Package batch keeps the schedule of a batch: many operations run from
// one goroutine, each through the request engine's steps (place, send,
// judge, wait), with the sends started without waiting (conn.Start),
// grouped per connection and written together, and the waits kept in one
// heap on the client's clock. A Schedule holds each key's place in that
// lifecycle (Key), the keys to send in the next round, the waits, the
// NOOPs that settle quiet gets (fences), and the bookkeeping of the
// conn.Notifier through which the connections tell which requests ended.
//
// It decides nothing about an operation: the caller (client's GetMany,
// UpsertMany, RemoveMany) places, sends and judges each key, and moves it
// between the states here with direct calls, so that a key costs no call
// through an interface and no allocation.
package batch

import (
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/timeheap"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// State is where a key is in its lifecycle.
type State uint8

const (
	Done     State = iota // has its result (or has none to get)
	Ready                 // to be placed and sent
	InFlight              // started on a connection
	Waiting               // waiting for a retry
	Got                   // a hit read in a group: its result is given
)

// Key is one key's operation in a batch: its schedule, and Op, the
// caller's own state of it.
type Key[T any] struct {
	State State
	// Gen is bumped at each send and each wait: tags and heap entries of
	// older ones are stale.
	Gen     uint32
	Attempt int
	Pend    conn.Pending
	Plan    retry.Plan
	Wake    <-chan struct{}
	Op      T
}

// Tag is the conn.Start tag of key i's request of generation gen.
func Tag(i int, gen uint32) uint64 { return uint64(i)<<32 | uint64(gen) }

// IsFence reports whether tag is a fence's.
func IsFence(tag uint64) bool { return tag&fenceTag != 0 }

// KeyOf is the key a key's tag names (IsFence false).
func KeyOf(tag uint64) int { return int(tag >> 32) }

// fenceTag marks a NOOP's tag; the rest is its index in fences.
const fenceTag = 1 << 63

// MaxInFlight bounds a batch's keys in flight at once; the others wait for
// room. A connection refuses requests past its MaxPending (4096 by
// default) as overloaded, which a batch of more keys would meet as
// retries, so a batch also keeps to half of MaxPendingPerConnection
// (InFlightBound), leaving the other half to other callers.
const MaxInFlight = 2048

// InFlightBound is the bound on a batch's keys in flight for a client
// whose connections take maxPending requests each (0: the default).
func InFlightBound(maxPending int) int {
	if maxPending <= 0 {
		maxPending = conn.DefaultMaxPending
	}
	return max(1, min(MaxInFlight, maxPending/2))
}

// maxPooled bounds the keys of a Schedule kept for reuse.
const maxPooled = 4096

// Schedule is a batch's keys and the state of their rounds, waits and
// fences. It is reused (Reset), with its buffers.
type Schedule[T any] struct {
	Keys []Key[T]
	// Canceled: the context ended; no key is sent or waits any more.
	Canceled bool
	Left     int // keys and fences not ended
	InFlight int // keys in InFlight (at most MaxInFlight)
	// MaxInFlight is this batch's bound on InFlight.
	MaxInFlight int
	// Ready are the keys to place and send in the next round.
	Ready []int32
	// Groups are the connections of the round being sent, one each.
	Groups []Group

	clock   retry.Clock
	sending []int32       // the round's keys (TakeReady swaps it with Ready)
	waiting timeheap.Heap // the waiting keys, by the end of their wait
	timer   retry.Timer
	timerAt time.Time
	watch   <-chan struct{} // the wake of a waiting key (see NextWoken)
	fences  []conn.Pending  // NOOPs in flight
	ctxDone <-chan struct{} // the batch's context's
	closing <-chan struct{} // the client's: closed when it closes

	// Ends is what the batch's conn.Notifier was told: the requests that
	// ended and those still expected.
	Ends
}

// Group is one connection's share of a round.
type Group struct {
	Conn  *conn.Conn
	Quiet bool
}

// Start prepares s for n keys, timed on clock, at most maxInFlight of them
// in flight at once.
func (s *Schedule[T]) Start(clock retry.Clock, n, maxInFlight int) {
	s.clock, s.MaxInFlight = clock, maxInFlight
	s.Ends.Init()
	if cap(s.Keys) < n {
		s.Keys = make([]Key[T], n)
	}
	s.Keys = s.Keys[:n]
	if cap(s.Ready) < n {
		s.Ready = make([]int32, 0, n)
	}
}

// Reset stops s's timer and drops what a reused Schedule must not keep; it
// reports whether s is small enough to be kept for reuse.
func (s *Schedule[T]) Reset() bool {
	if s.timer != nil {
		s.timer.Stop()
	}
	if cap(s.Keys) > maxPooled {
		return false
	}
	clear(s.Keys)
	clear(s.fences)
	clear(s.Groups)
	// Field by field: a late Wake may read kick meanwhile.
	s.clock, s.Canceled, s.Left, s.InFlight = nil, false, 0, 0
	s.Keys, s.Ready, s.sending, s.waiting = s.Keys[:0], s.Ready[:0], s.sending[:0], s.waiting[:0]
	s.timer, s.timerAt, s.watch, s.ctxDone, s.closing = nil, time.Time{}, nil, nil, nil
	s.fences, s.Groups = s.fences[:0], s.Groups[:0]
	s.Ends.Reset()
	return true
}

// Event is what ended a Sleep.
type Event uint8

const (
	EventEnded    Event = iota // requests ended: TakeEnded
	EventDue                   // the earliest wait is over: PopDue
	EventWoken                 // a waiting key's wake closed: NextWoken
	EventClosing               // the client is closing: NextWaiting
	EventCanceled              // the batch's context ended
)

// Watch sets the channels Sleep also waits on: the batch's context's
// Done, and the client's, closed when it closes.
func (s *Schedule[T]) Watch(ctxDone, closing <-chan struct{}) {
	s.ctxDone, s.closing = ctxDone, closing
}

// CanSend reports whether a round is due: keys are ready, and there is
// room in flight for them (or the batch is canceled, which ends them).
func (s *Schedule[T]) CanSend() bool {
	return len(s.Ready) > 0 && (s.InFlight < s.MaxInFlight || s.Canceled)
}

// Sleep waits for the next event: a request that ended, the earliest
// wait's end, a waiting key's wake, the client closing, or the batch's
// context ending (once; not after the batch was canceled).
func (s *Schedule[T]) Sleep() Event {
	if len(s.Ready) > 0 {
		// The next request to end makes room, so it wakes the batch,
		// even a success that would not otherwise (a key held by a
		// node that stopped answering must not hold back the keys
		// waiting behind it until its deadline, when they could only
		// time out unsent).
		s.AwaitRoom()
	}
	s.armTimer()
	var timerC <-chan time.Time
	if s.timer != nil && !s.timerAt.IsZero() {
		timerC = s.timer.C()
	}
	ctxDone := s.ctxDone
	if s.Canceled {
		ctxDone = nil
	}
	select {
	case <-s.Kick():
		return EventEnded
	case <-timerC:
		s.timerAt = time.Time{}
		return EventDue
	case <-s.watch:
		return EventWoken
	case <-s.closing:
		s.closing = nil
		return EventClosing
	case <-ctxDone:
		return EventCanceled
	}
}

// TakeReady returns the keys ready and empties Ready, which keys may join
// again while the caller goes through the ones returned.
func (s *Schedule[T]) TakeReady() []int32 {
	ready := s.Ready
	s.Ready, s.sending = s.sending[:0], ready
	return ready
}

// TakeRound begins a round: it returns the ready keys that have room in
// flight, the others left ready ahead of those that become ready during
// the round (TakeReady), and empties the round's Groups.
func (s *Schedule[T]) TakeRound() []int32 {
	ready := s.TakeReady()
	if room := s.MaxInFlight - s.InFlight; len(ready) > room {
		// The rest wait for room, ahead of what becomes ready meanwhile.
		s.Ready = append(s.Ready, ready[room:]...)
		ready = ready[:room]
	}
	s.Groups = s.Groups[:0]
	return ready
}

// Group adds cn to the round's Groups unless it is there already.
func (s *Schedule[T]) Group(cn *conn.Conn) {
	for _, g := range s.Groups {
		if g.Conn == cn {
			return
		}
	}
	s.Groups = append(s.Groups, Group{Conn: cn})
}

// Fence queues, on cn, the NOOP that settles the quiet gets started there
// before it, with their deadline, told to n, carrying from (conn.Origin:
// what the orphan report says of it; nil: its opcode only); it reports an
// error when the NOOP could not be queued.
func (s *Schedule[T]) Fence(cn *conn.Conn, deadline time.Time, n conn.Notifier, from *conn.Origin) error {
	req := memdx.Request{OpCode: memdx.OpNoop}
	p, err := cn.Start(deadline, &req, nil, n, fenceTag|uint64(len(s.fences)), from)
	if err != nil {
		return err
	}
	s.fences = append(s.fences, p)
	s.Left++
	return nil
}

// Live reports which key an ended request's tag is of, when it is a live
// key's, still in flight with that request: a fence's ends the fence, and
// a key's older request (ended by Cancel) is stale.
func (s *Schedule[T]) Live(tag uint64) (int, bool) {
	if IsFence(tag) {
		f := int(tag &^ fenceTag)
		if s.fences[f] != (conn.Pending{}) {
			_, _ = s.fences[f].Result()
			s.fences[f] = conn.Pending{}
			s.Left--
		}
		return 0, false
	}
	i, gen := KeyOf(tag), uint32(tag)
	k := &s.Keys[i]
	return i, k.State == InFlight && k.Gen == gen
}

// WaitUntil has key i wait in the heap until at, or its wake.
func (s *Schedule[T]) WaitUntil(i int, at time.Time) {
	k := &s.Keys[i]
	k.State = Waiting
	s.waiting.Push(timeheap.Entry{At: at, I: int32(i), Gen: k.Gen})
	if k.Wake != nil && s.watch == nil {
		s.watch = k.Wake
	}
}

// armTimer sets the timer for the earliest wait.
func (s *Schedule[T]) armTimer() {
	for len(s.waiting) > 0 {
		e := s.waiting[0]
		if k := &s.Keys[e.I]; k.State != Waiting || k.Gen != e.Gen {
			s.waiting.Pop()
			continue
		}
		if e.At.Equal(s.timerAt) {
			return
		}
		d := e.At.Sub(s.clock.Now())
		if s.timer == nil {
			s.timer = s.clock.NewTimer(d)
		} else {
			s.timer.Reset(d)
		}
		s.timerAt = e.At
		return
	}
	if !s.timerAt.IsZero() {
		s.timer.Stop()
		s.timerAt = time.Time{}
	}
}

// PopDue returns the next key whose wait is over by now, taking it off
// the heap; false when there is none.
func (s *Schedule[T]) PopDue(now time.Time) (int, bool) {
	for len(s.waiting) > 0 && !s.waiting[0].At.After(now) {
		e := s.waiting.Pop()
		if k := &s.Keys[e.I]; k.State == Waiting && k.Gen == e.Gen {
			return int(e.I), true
		}
	}
	return 0, false
}

// Unwatch forgets the wake watched: the caller is about to go through the
// waiting keys (NextWoken, NextWaiting), which picks the next one.
func (s *Schedule[T]) Unwatch() { s.watch = nil }

// NextWoken returns the first waiting key from i on whose wake is closed
// (the topology was replaced: a newer config, or a node that has a
// connection again; see Topology.Wake), or -1. Only the current
// topology's wake is open, so every waiting key with a wake is either
// woken or waits on that one, which the keys passed over make the one
// watched.
func (s *Schedule[T]) NextWoken(i int) int {
	for ; i < len(s.Keys); i++ {
		k := &s.Keys[i]
		if k.State != Waiting || k.Wake == nil {
			continue
		}
		if Closed(k.Wake) {
			return i
		} else if s.watch == nil {
			s.watch = k.Wake
		}
	}
	return -1
}

// NextWaiting returns the first waiting key from i on, or -1.
func (s *Schedule[T]) NextWaiting(i int) int {
	for ; i < len(s.Keys); i++ {
		if s.Keys[i].State == Waiting {
			return i
		}
	}
	return -1
}

// CancelFences withdraws, with cause, the fences in flight that have not
// ended; those that have are collected as usual.
func (s *Schedule[T]) CancelFences(cause error) {
	for f := range s.fences {
		if s.fences[f] != (conn.Pending{}) {
			if _, ended := s.fences[f].Cancel(cause); !ended {
				s.fences[f] = conn.Pending{}
				s.Left--
				s.ExpectAdd(-1)
			}
		}
	}
}

// Closed reports whether ch is closed.
func Closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
