package client

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/retry"
)

// hookGuard makes the client's calls into code it does not own: a
// RequestTracer and its spans, a Meter and its instruments. Every call is
// made on an operation's goroutine (never on a connection's reader or
// writer, never under a lock of the client's), and through the guard,
// which recovers a panic so that it cannot unwind an operation half done
// (a batch's keys in flight, a pooled buffer in use): the call is dropped,
// a span that panicked on start is replaced by one that records nothing,
// and the panic is logged at error with its stack, once per hook and then
// at most once a minute. A hook that blocks blocks the operation calling
// it and nothing else.
type hookGuard struct {
	logger *slog.Logger
	clock  retry.Clock

	panics atomic.Uint64 // every panic recovered

	mu     sync.Mutex
	logged map[string]time.Time // hook -> when its last panic was logged
}

// hookPanicLogEvery is how often a hook that keeps panicking is logged.
const hookPanicLogEvery = time.Minute

func newHookGuard(logger *slog.Logger, clock retry.Clock) *hookGuard {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if clock == nil {
		clock = retry.RealClock()
	}
	return &hookGuard{logger: logger, clock: clock, logged: make(map[string]time.Time)}
}

// recovered is deferred by each guarded call; hook names what was called.
func (g *hookGuard) recovered(hook string) {
	r := recover()
	if r == nil {
		return
	}
	n := g.panics.Add(1)
	now := g.clock.Now()
	g.mu.Lock()
	last, seen := g.logged[hook]
	due := !seen || now.Sub(last) >= hookPanicLogEvery
	if due {
		g.logged[hook] = now
	}
	g.mu.Unlock()
	if due {
		g.logger.Error("kvwire: a tracer or meter panicked; the call was dropped and the operation goes on",
			"hook", hook, "panic", fmt.Sprint(r), "panics", n, "stack", string(debug.Stack()))
	}
}

func (g *hookGuard) startSpan(t RequestTracer, ctx context.Context, name string, parent RequestSpan, start time.Time) (s RequestSpan) {
	s = noopSpan{}
	defer g.recovered("RequestTracer.RequestSpan")
	if got := t.RequestSpan(ctx, name, parent, start); got != nil {
		s = got
	}
	return s
}

func (g *hookGuard) setAttribute(s RequestSpan, key string, v slog.Value) {
	defer g.recovered("RequestSpan.SetAttribute")
	s.SetAttribute(key, v)
}

func (g *hookGuard) addEvent(s RequestSpan, name string, at time.Time, attrs ...slog.Attr) {
	defer g.recovered("RequestSpan.AddEvent")
	s.AddEvent(name, at, attrs...)
}

func (g *hookGuard) setStatus(s RequestSpan, status SpanStatus) {
	defer g.recovered("RequestSpan.SetStatus")
	s.SetStatus(status)
}

func (g *hookGuard) endSpan(s RequestSpan, at time.Time) {
	defer g.recovered("RequestSpan.End")
	s.End(at)
}

// valueRecorder asks m for a recorder; an error is logged like a panic and
// gives a recorder that records nothing.
func (g *hookGuard) valueRecorder(m Meter, name string, attrs map[string]string) ValueRecorder {
	return guardedInstrument(g, "Meter.ValueRecorder", name, ValueRecorder(noopInstrument{}),
		func() (ValueRecorder, error) { return m.ValueRecorder(name, attrs) })
}

// counter asks m for a counter, as valueRecorder does.
func (g *hookGuard) counter(m Meter, name string, attrs map[string]string) Counter {
	return guardedInstrument(g, "Meter.Counter", name, Counter(noopInstrument{}),
		func() (Counter, error) { return m.Counter(name, attrs) })
}

// guardedInstrument makes an instrument with mk, giving none when mk fails
// (logged), panics (recovered) or returns nil.
func guardedInstrument[I any](g *hookGuard, hook, metric string, none I, mk func() (I, error)) (inst I) {
	inst = none
	defer g.recovered(hook)
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

func (g *hookGuard) recordValue(r ValueRecorder, v uint64) {
	defer g.recovered("ValueRecorder.RecordValue")
	r.RecordValue(v)
}

func (g *hookGuard) incrementBy(c Counter, n uint64) {
	defer g.recovered("Counter.IncrementBy")
	c.IncrementBy(n)
}
