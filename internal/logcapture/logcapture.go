// Package logcapture is for tests of what is logged: a slog.Handler that
// sends every record, with its "report" attribute's JSON, to a channel,
// and the waits a test of a reporter on a fake clock needs. Test-only.
package logcapture

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/require"
)

// Logged is one record a capture handler received.
type Logged struct {
	Level  slog.Level
	Msg    string
	Report []byte // the "report" attribute's JSON, nil when absent
}

// Of is r as Logged, its report read from the attribute key.
func Of(r slog.Record, key string) Logged {
	l := Logged{Level: r.Level, Msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			if m, ok := a.Value.Any().(json.Marshaler); ok {
				l.Report, _ = m.MarshalJSON()
			}
		}
		return true
	})
	return l
}

// handler is a slog.Handler sending every record to a channel.
type handler struct{ out chan Logged }

// New returns a logger whose records come out of the channel (it holds
// 64: a test reads them as they come).
func New() (*slog.Logger, chan Logged) {
	out := make(chan Logged, 64)
	return slog.New(handler{out}), out
}

func (h handler) Enabled(context.Context, slog.Level) bool { return true }
func (h handler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h handler) WithGroup(string) slog.Handler            { return h }
func (h handler) Handle(_ context.Context, r slog.Record) error {
	h.out <- Of(r, "report")
	return nil
}

// Func is a slog.Handler calling f for each record, on the logging
// goroutine.
type Func func(Logged)

func (f Func) Enabled(context.Context, slog.Level) bool { return true }
func (f Func) WithAttrs([]slog.Attr) slog.Handler       { return f }
func (f Func) WithGroup(string) slog.Handler            { return f }
func (f Func) Handle(_ context.Context, r slog.Record) error {
	f(Logged{Level: r.Level, Msg: r.Message})
	return nil
}

// Next returns the next record logged, failing the test when none comes
// within a minute (the reporters log from their goroutine once a fake
// clock's timer fired, at once on any machine).
func Next(t *testing.T, ch <-chan Logged) Logged {
	t.Helper()
	select {
	case l := <-ch:
		return l
	case <-time.After(time.Minute):
		t.Fatal("nothing was logged")
		return Logged{}
	}
}

// RequireNone checks that nothing was logged (call it when the reporter
// has re-armed its timer, so that whatever it would log is already sent).
func RequireNone(t *testing.T, ch <-chan Logged) {
	t.Helper()
	select {
	case l := <-ch:
		t.Fatalf("logged %q %s", l.Msg, l.Report)
	default:
	}
}

// Tick moves clock by d once the reporter's timer is armed, and returns
// once the reporter has re-armed it: whatever it logs for that tick has
// been sent.
func Tick(t *testing.T, clock *retry.FakeClock, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, clock.BlockUntilTimers(ctx, 1))
	clock.Advance(d)
	require.NoError(t, clock.BlockUntilTimers(ctx, 1))
}

// Epoch is the time the tests' fake clocks start at.
var Epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// KVReport is the "kv" part of a threshold or orphan report.
type KVReport struct {
	KV struct {
		TotalCount  uint64           `json:"total_count"`
		TopRequests []map[string]any `json:"top_requests"`
	} `json:"kv"`
	Raw string `json:"-"` // the report's JSON
}

// ParseKV parses l's report as a threshold or orphan report.
func ParseKV(t *testing.T, l Logged) KVReport {
	t.Helper()
	require.NotNil(t, l.Report, "%q has no report", l.Msg)
	var r KVReport
	require.NoError(t, json.Unmarshal(l.Report, &r), "%s", l.Report)
	r.Raw = string(l.Report)
	return r
}
