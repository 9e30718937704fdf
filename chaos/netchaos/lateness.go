package main

import (
	"sort"
	"sync"
	"time"
)

// Deadlines. The client ends an operation at its deadline (KVTimeout from
// its start) through a timer, so what it may legitimately overshoot by is how
// late the runtime wakes that goroutine, plus the work of building the
// error. An operation passes when it ends no later than its deadline plus
// baseMargin plus twice the worst scheduler lateness measured from latLead
// before its deadline to its end. The lateness is measured by a goroutine
// that sleeps 2 ms in a loop, and doubled because, after a stall, every
// goroutine that became runnable meanwhile competes for the same two CPUs.
// The margin therefore stays 50 ms on a quiet machine (where the measured
// lateness is a few ms), and an operation that sleeps a retry back-off past
// its deadline (back-offs reach 500 ms, 1 s for NOT_MY_VBUCKET) is caught
// unless the whole machine stalled for as long at that moment. A network
// fault adds nothing to what the client may overshoot: its deadline timer
// does not wait for the network. This is a wall-clock rule, which the
// in-process chaos test no longer uses (chaos/timing_test.go checks each
// retry's plan instead): one goroutine's wake-ups do not measure the
// delays of an operation's goroutines, so on a loaded machine an operation
// can overshoot this margin without a fault of the client's, and a stall
// the sampler sees widens it for a client that is late.
const (
	baseMargin = 50 * time.Millisecond
	latLead    = 20 * time.Millisecond
	latSleep   = 2 * time.Millisecond
)

type latSample struct {
	woke time.Time
	late time.Duration
}

// lateness samples scheduler lateness: how much later than asked a
// goroutine sleeping latSleep woke.
type lateness struct {
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	samples []latSample // in order of woke
	maxLate time.Duration
}

func startLateness() *lateness {
	l := &lateness{stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *lateness) run() {
	defer close(l.done)
	t := time.NewTimer(latSleep)
	defer t.Stop()
	for {
		t0 := time.Now()
		t.Reset(latSleep)
		select {
		case <-l.stop:
			return
		case <-t.C:
			now := time.Now()
			l.add(now, now.Sub(t0)-latSleep)
		}
	}
}

func (l *lateness) add(woke time.Time, late time.Duration) {
	late = max(late, 0)
	l.mu.Lock()
	l.samples = append(l.samples, latSample{woke, late})
	l.maxLate = max(l.maxLate, late)
	l.mu.Unlock()
}

func (l *lateness) close() {
	close(l.stop)
	<-l.done
}

// worst returns the largest lateness of a sleep that overlapped [from, to]
// (a sample that woke at w late by d covers [w-d, w]).
func (l *lateness) worst(from, to time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := sort.Search(len(l.samples), func(i int) bool { return !l.samples[i].woke.Before(from) })
	var w time.Duration
	for ; i < len(l.samples); i++ {
		s := l.samples[i]
		if s.woke.Add(-s.late).After(to) {
			if s.woke.Sub(to) > l.maxLate {
				break
			}
			continue
		}
		w = max(w, s.late)
	}
	return w
}

// margin is how far past deadline an operation that ended at end may have
// ended.
func (l *lateness) margin(deadline, end time.Time) time.Duration {
	return baseMargin + 2*l.worst(deadline.Add(-latLead), end)
}
