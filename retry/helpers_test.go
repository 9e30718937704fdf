package retry

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	conformancedata "github.com/kvwire/kvwire/internal/conformance"
	"github.com/kvwire/kvwire/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// t0 is the fake clock's start in every test.
var t0 = time.Date(2025, 11, 1, 12, 0, 0, 0, time.UTC)

// recorder is a slog.Handler that keeps every record it is given.
type recorder struct {
	mu      sync.Mutex
	level   slog.Level
	records []slog.Record
}

func newRecorder(level slog.Level) (*recorder, *slog.Logger) {
	r := &recorder{level: level}
	return r, slog.New(r)
}

func (r *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.level }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}

func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// entry is a record flattened for assertions.
type entry struct {
	Level slog.Level
	Msg   string
	Attrs map[string]any
}

func (r *recorder) entries() []entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]entry, len(r.records))
	for i, rec := range r.records {
		e := entry{Level: rec.Level, Msg: rec.Message, Attrs: map[string]any{}}
		rec.Attrs(func(a slog.Attr) bool {
			e.Attrs[a.Key] = a.Value.Any()
			return true
		})
		out[i] = e
	}
	return out
}

// quiet is a logger with everything disabled.
var quiet = slog.New(slog.DiscardHandler)

// fixed is a strategy that always asks for the same delay.
func fixed(d time.Duration) Strategy {
	return StrategyFunc(func(Request, Reason) Action { return RetryAfter(d) })
}

// neverRetry refuses every reason it is asked about (comparable, unlike a
// StrategyFunc).
type neverRetry struct{}

func (neverRetry) RetryAfter(Request, Reason) Action { return NoRetry() }

// conformance reads a file of the shared conformance corpus (skipping, or
// failing under KVWIRE_REQUIRE_CONFORMANCE=1, when it is absent).
func conformance(t *testing.T, name string) []byte {
	t.Helper()
	return conformancedata.Read(t, name)
}

// waitCtx bounds the blocking helpers of a test so that a bug fails the
// test instead of hanging it.
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
