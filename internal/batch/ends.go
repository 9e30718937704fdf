package batch

import "sync"

// Ends is the bookkeeping behind the conn.Notifier of a goroutine that
// starts many requests and collects their ends itself (a Schedule, a
// memcached GetMany's quiet groups): the tags of the requests that ended,
// the count of started requests it has not been told of, and the
// capacity-1 signal that wakes it. Make it ready with Init.
type Ends struct {
	mu    sync.Mutex
	ended []uint64 // tags of the requests that ended, from Ended
	// expect counts the started requests not yet told of (ExpectAdd).
	expect int
	// wantRoom: the next request that ends, even a clean one, wakes the
	// goroutine (AwaitRoom).
	wantRoom bool
	spare    []uint64
	kick     chan struct{} // capacity 1: Wake's signal
}

// Init makes e's wake signal, once.
func (e *Ends) Init() {
	if e.kick == nil {
		e.kick = make(chan struct{}, 1)
	}
}

// Reset forgets the tags and counts of e's last use, keeping its buffers
// (a late Wake may still signal: the next user looks once at an empty
// list).
func (e *Ends) Reset() {
	e.ended, e.spare, e.expect, e.wantRoom = e.ended[:0], e.spare[:0], 0, false
}

// Ended records the tag of a request that ended, and reports whether to
// wake the goroutine: for an outcome that is not clean (the caller says
// which need judging at once), for the last request expected, or for the
// first to end after AwaitRoom.
func (e *Ends) Ended(tag uint64, clean bool) bool {
	e.mu.Lock()
	e.ended = append(e.ended, tag)
	e.expect--
	wake := !clean || e.expect == 0 || e.wantRoom
	e.wantRoom = false
	e.mu.Unlock()
	return wake
}

// AwaitRoom has the next request to end wake the goroutine, even a clean
// one; a request that has ended already and was not collected wakes it at
// once.
func (e *Ends) AwaitRoom() {
	e.mu.Lock()
	ended := len(e.ended) > 0
	e.wantRoom = !ended
	e.mu.Unlock()
	if ended {
		e.Wake()
	}
}

// ExpectAdd changes the count of started requests whose end the goroutine
// has not been told of; a request taken back (not started, cancelled) is
// taken off, and when that leaves none expected with ends not collected,
// the goroutine is woken for them.
func (e *Ends) ExpectAdd(d int) {
	e.mu.Lock()
	e.expect += d
	kick := d < 0 && e.expect == 0 && len(e.ended) > 0
	e.mu.Unlock()
	if kick {
		e.Wake()
	}
}

// Wake is the conn.Notifier's Wake: it wakes the goroutine.
func (e *Ends) Wake() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Kick is the wake signal the goroutine waits on.
func (e *Ends) Kick() <-chan struct{} { return e.kick }

// TakeEnded returns the tags of the requests that ended since the last
// call; the caller gives the slice back (GiveBack) once through it.
func (e *Ends) TakeEnded() []uint64 {
	e.mu.Lock()
	ended := e.ended
	e.ended = e.spare[:0]
	e.mu.Unlock()
	return ended
}

// GiveBack takes back the slice TakeEnded returned, for reuse.
func (e *Ends) GiveBack(ended []uint64) { e.spare = ended[:0] }
