package client

import (
	"context"
	"log/slog"
	"time"

	"github.com/kvwire/kvwire/internal/hookguard"
	"github.com/kvwire/kvwire/retry"
)

// hookGuard makes the client's calls into code it does not own: a
// RequestTracer and its spans, a Meter and its instruments, each through
// internal/hookguard, which recovers a panic so that it cannot unwind an
// operation half done, and logs it. A span that panicked on start is
// replaced by one that records nothing; an instrument a Meter refused (or
// panicked making) by one that records nothing.
type hookGuard struct{ *hookguard.Guard }

func newHookGuard(logger *slog.Logger, clock retry.Clock) *hookGuard {
	return &hookGuard{hookguard.New(logger, clock)}
}

func (g *hookGuard) startSpan(t RequestTracer, ctx context.Context, name string, parent RequestSpan, start time.Time) (s RequestSpan) {
	s = noopSpan{}
	defer g.Recovered("RequestTracer.RequestSpan")
	if got := t.RequestSpan(ctx, name, parent, start); got != nil {
		s = got
	}
	return s
}

func (g *hookGuard) setStatus(s RequestSpan, status SpanStatus) {
	defer g.Recovered("RequestSpan.SetStatus")
	s.SetStatus(status)
}

// valueRecorder asks m for a recorder; an error is logged like a panic and
// gives a recorder that records nothing.
func (g *hookGuard) valueRecorder(m Meter, name string, attrs map[string]string) ValueRecorder {
	return hookguard.Instrument(g.Guard, "Meter.ValueRecorder", name, ValueRecorder(noopInstrument{}),
		func() (ValueRecorder, error) { return m.ValueRecorder(name, attrs) })
}

// counter asks m for a counter, as valueRecorder does.
func (g *hookGuard) counter(m Meter, name string, attrs map[string]string) Counter {
	return hookguard.Instrument(g.Guard, "Meter.Counter", name, Counter(noopInstrument{}),
		func() (Counter, error) { return m.Counter(name, attrs) })
}
