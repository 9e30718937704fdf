// Package hookguard makes the client's calls into code it does not own: a
// RequestTracer and its spans, a Meter and its instruments. Every call is
// made on an operation's goroutine (never on a connection's reader or
// writer, never under a lock of the client's), and through the guard,
// which recovers a panic so that it cannot unwind an operation half done
// (a batch's keys in flight, a pooled buffer in use): the call is dropped,
// a span that panicked on start is replaced by one that records nothing,
// and the panic is logged at error with its stack, once per hook and then
// at most once a minute. A hook that blocks blocks the operation calling
// it and nothing else.
//
// A guarded call defers Recovered. Spans and instruments are called here,
// through Span, ValueRecorder and Counter, which the client's RequestSpan,
// ValueRecorder and Counter satisfy; the calls that take the client's own
// types (starting a span, setting its status, asking a Meter for an
// instrument) are the client's.
package hookguard

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/retry"
)

// Span is a span as the guard calls it: the client's RequestSpan without
// SetStatus (whose argument is the client's type).
type Span interface {
	SetAttribute(key string, value slog.Value)
	AddEvent(name string, at time.Time, attrs ...slog.Attr)
	End(at time.Time)
}

// ValueRecorder records values into a distribution.
type ValueRecorder interface {
	RecordValue(v uint64)
}

// Counter counts up.
type Counter interface {
	IncrementBy(n uint64)
}

// Guard recovers the panics of the hooks it calls, and logs them.
type Guard struct {
	logger *slog.Logger
	clock  retry.Clock

	panics atomic.Uint64 // every panic recovered

	mu     sync.Mutex
	logged map[string]time.Time // hook -> when its last panic was logged
}

// PanicLogEvery is how often a hook that keeps panicking is logged.
const PanicLogEvery = time.Minute

// New returns a guard logging to logger (nil: nowhere) and reading the
// time from clock (nil: the real one).
func New(logger *slog.Logger, clock retry.Clock) *Guard {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if clock == nil {
		clock = retry.RealClock()
	}
	return &Guard{logger: logger, clock: clock, logged: make(map[string]time.Time)}
}

// Panics is how many panics the guard recovered.
func (g *Guard) Panics() uint64 { return g.panics.Load() }

// Recovered is deferred by each guarded call; hook names what was called.
func (g *Guard) Recovered(hook string) {
	r := recover()
	if r == nil {
		return
	}
	n := g.panics.Add(1)
	now := g.clock.Now()
	g.mu.Lock()
	last, seen := g.logged[hook]
	due := !seen || now.Sub(last) >= PanicLogEvery
	if due {
		g.logged[hook] = now
	}
	g.mu.Unlock()
	if due {
		g.logger.Error("kvwire: a tracer or meter panicked; the call was dropped and the operation goes on",
			"hook", hook, "panic", fmt.Sprint(r), "panics", n, "stack", string(debug.Stack()))
	}
}

// SetAttribute sets an attribute of s.
func (g *Guard) SetAttribute(s Span, key string, v slog.Value) {
	defer g.Recovered("RequestSpan.SetAttribute")
	s.SetAttribute(key, v)
}

// AddEvent adds an event to s.
func (g *Guard) AddEvent(s Span, name string, at time.Time, attrs ...slog.Attr) {
	defer g.Recovered("RequestSpan.AddEvent")
	s.AddEvent(name, at, attrs...)
}

// EndSpan ends s.
func (g *Guard) EndSpan(s Span, at time.Time) {
	defer g.Recovered("RequestSpan.End")
	s.End(at)
}

// Instrument makes an instrument with mk, giving none when mk fails
// (logged), panics (recovered) or returns nil; hook names the Meter's
// method, metric the instrument's name.
func Instrument[I any](g *Guard, hook, metric string, none I, mk func() (I, error)) (inst I) {
	inst = none
	defer g.Recovered(hook)
	got, err := mk()
	if err != nil {
		g.logger.Error("kvwire: a meter refused an instrument; nothing is recorded on it",
			"metric", metric, "err", err)
		return inst
	}
	if any(got) != nil {
		inst = got
	}
	return inst
}

// RecordValue records v on r.
func (g *Guard) RecordValue(r ValueRecorder, v uint64) {
	defer g.Recovered("ValueRecorder.RecordValue")
	r.RecordValue(v)
}

// IncrementBy counts n on c.
func (g *Guard) IncrementBy(c Counter, n uint64) {
	defer g.Recovered("Counter.IncrementBy")
	c.IncrementBy(n)
}
