package chaos

import (
	"runtime"
	"sync"
	"time"
)

// Deadlines. An operation may end later than its timeout by baseMargin plus
// twice the worst scheduler lateness measured from latLead before its
// deadline to its end. The client ends an operation at its deadline by a
// context deadline (on the reader goroutine) and a capped retry wait (a
// timer), so what it may legitimately overshoot by is how late the runtime
// wakes those goroutines: that is what the sampler measures, with a
// goroutine that sleeps 2 ms in a loop and records how much later it woke.
// Twice, because after a stall of L every goroutine that became runnable
// meanwhile competes for the two CPUs, and draining that backlog can take
// about as long again (seen in a 10-minute run: a stall of 236 ms measured
// around the deadline of an operation, after 10 attempts answered LOCKED or
// TMPFAIL, that ended 299 ms late). 50 ms on top covers the work between the wake-up and the return
// (building the error, the Observer) under -race. In an ordinary moment
// (lateness around 20 ms) an operation more than ~90 ms late fails, so one
// that slept a retry backoff past its deadline (they reach 500 ms, and
// NOT_MY_VBUCKET's controlled backoff 1 s) is caught unless the machine
// stalled for a comparable time at that very moment.
const (
	baseMargin = 50 * time.Millisecond
	latLead    = 20 * time.Millisecond
	latSlot    = 10 * time.Millisecond
	latSlots   = 8192 // 82 s of history: well beyond settleAge
	latSleep   = 2 * time.Millisecond
)

type latSample struct {
	n     int64
	worst time.Duration
}

// lateness samples scheduler lateness into 10 ms slots.
type lateness struct {
	origin time.Time
	stop   chan struct{}
	done   chan struct{}

	mu        sync.Mutex
	slots     [latSlots]latSample
	worstEver time.Duration
}

func startLateness() *lateness {
	l := &lateness{origin: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *lateness) run() {
	defer close(l.done)
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		t0 := time.Now()
		time.Sleep(latSleep)
		t1 := time.Now()
		l.record(t0.Add(latSleep), t1, t1.Sub(t0)-latSleep)
	}
}

func (l *lateness) close() { close(l.stop); <-l.done }

func (l *lateness) index(t time.Time) int64 { return int64(t.Sub(l.origin) / latSlot) }

// record notes that a goroutine due at from woke at to, late by late: every
// slot in between saw at least that lateness.
func (l *lateness) record(from, to time.Time, late time.Duration) {
	a, b := l.index(from), l.index(to)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.worstEver = max(l.worstEver, late)
	if b-a >= latSlots {
		a = b - latSlots + 1
	}
	for n := a; n <= b; n++ {
		s := &l.slots[n%latSlots]
		if s.n != n {
			s.n, s.worst = n, 0
		}
		s.worst = max(s.worst, late)
	}
}

// worst returns the worst lateness recorded in [from, to] (the worst ever
// seen when that is older than the history kept).
func (l *lateness) worst(from, to time.Time) time.Duration {
	a, b := l.index(from), l.index(to)
	l.mu.Lock()
	defer l.mu.Unlock()
	var w time.Duration
	for n := a; n <= b; n++ {
		s := l.slots[((n%latSlots)+latSlots)%latSlots]
		switch {
		case s.n == n:
			w = max(w, s.worst)
		case s.n > n || b-a >= latSlots:
			return l.worstEver
		}
	}
	return w
}

func (l *lateness) max() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.worstEver
}

// check applies the deadline rule to a finished operation (called when it
// is verified, seconds after it ended, so the sampler has recorded any stall
// around its deadline).
func (l *lateness) check(h *harness, ks *keyState, op *opRec) {
	st := &ks.owner.st
	over := op.end.Sub(op.start) - op.timeout
	st.maxOver = max(st.maxOver, over)
	if over <= baseMargin {
		return
	}
	deadline := op.start.Add(op.timeout)
	late := l.worst(deadline.Add(-latLead), op.end)
	if allowed := baseMargin + 2*late; over > allowed {
		st.late++
		h.problem("late", "key %s: ended %v after its %v deadline (allowed %v: margin %v + twice the scheduler lateness %v): %s",
			ks.name, over.Round(time.Millisecond), op.timeout, allowed, baseMargin, late, op)
	}
}

// heapSampler records the heap in use after a GC, periodically, with the
// number of operations done so far.
type heapSampler struct {
	start  time.Time
	warmup time.Duration
	ops    func() int64
	stop   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	baseline uint64 // the first sample after warm-up
	baseOps  int64  // operations done at the baseline sample
	last     uint64 // the latest sample (the final one after close)
	lastOps  int64
	maxInuse uint64
	samples  int
	series   []uint64 // every sample after warm-up, for the trend
}

func startHeap(period, warmup time.Duration, ops func() int64) *heapSampler {
	s := &heapSampler{start: time.Now(), warmup: warmup, ops: ops, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *heapSampler) sample() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	ops := s.ops()
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.start) < s.warmup {
		return
	}
	if s.samples == 0 {
		s.baseline, s.baseOps = ms.HeapInuse, ops
	}
	s.samples++
	s.last, s.lastOps = ms.HeapInuse, ops
	s.maxInuse = max(s.maxInuse, ms.HeapInuse)
	s.series = append(s.series, ms.HeapInuse)
}

// halves returns the largest sample of each half of the run after warm-up:
// a leak shows as the second well above the first.
func (s *heapSampler) halves() (first, second uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.series)
	for i, v := range s.series {
		if i < n/2 {
			first = max(first, v)
		} else {
			second = max(second, v)
		}
	}
	return first, second
}

// heapStats is what the sampler saw after warm-up.
type heapStats struct {
	base, max, end uint64 // the baseline, largest and final heap in use
	ops            int64  // operations done between the baseline and the end
	samples        int
}

// close stops the sampler after a last sample (the workers have stopped)
// and returns what it saw.
func (s *heapSampler) close() heapStats {
	close(s.stop)
	<-s.done
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return heapStats{base: s.baseline, max: s.maxInuse, end: s.last, ops: s.lastOps - s.baseOps, samples: s.samples}
}
