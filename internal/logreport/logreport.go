// Package logreport logs a report through a slog.Logger every interval of
// a clock, from a goroutine of its own, and once more when it stops: the
// machinery under the client's slow-operation and orphan reports and its
// logging meter (RFC 0067). A report is JSON, logged as one attribute that
// a JSON handler embeds as an object and a text handler prints as one line
// of JSON.
package logreport

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/kvwire/kvwire/internal/lifecycle"
	"github.com/kvwire/kvwire/retry"
)

// RawJSON is a report as a log attribute: a JSON handler embeds it as an
// object, a text handler prints it as one line of JSON.
type RawJSON []byte

func (r RawJSON) MarshalJSON() ([]byte, error) { return r, nil }
func (r RawJSON) MarshalText() ([]byte, error) { return r, nil }

// Log logs report at level with msg, as the attribute key, when there is
// one (nil: nothing to report).
func Log(logger *slog.Logger, level slog.Level, msg, key string, report []byte) {
	if report == nil || !logger.Enabled(context.Background(), level) {
		return
	}
	logger.LogAttrs(context.Background(), level, msg, slog.Any(key, RawJSON(report)))
}

// Config is how a report is logged: with Message, its JSON as the
// attribute Key, every Interval of Clock, through Logger.
type Config struct {
	Message, Key string
	Interval     time.Duration
	Clock        retry.Clock
	Logger       *slog.Logger
}

// Reporter logs a report every interval of a clock, from a goroutine of
// its own, and once more when it stops. A report whose logging panics (a
// logger's handler is the caller's code) is lost; the next one is tried
// as usual.
type Reporter struct {
	cfg    Config
	level  slog.Level
	report func() []byte // the report since the last one; nil: none

	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// Start starts logging report's result at level every cfg.Interval (a
// non-positive interval starts nothing: the report is logged only at
// Close).
func Start(cfg Config, level slog.Level, report func() []byte) *Reporter {
	r := &Reporter{cfg: cfg, level: level, report: report, stop: make(chan struct{}), done: make(chan struct{})}
	if cfg.Interval <= 0 {
		close(r.done)
		return r
	}
	lifecycle.Go(r.run)
	return r
}

func (r *Reporter) run() {
	defer close(r.done)
	t := r.cfg.Clock.NewTimer(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			r.safeEmit()
			t.Reset(r.cfg.Interval)
		case <-r.stop:
			return
		}
	}
}

func (r *Reporter) safeEmit() {
	defer func() { _ = recover() }()
	Log(r.cfg.Logger, r.level, r.cfg.Message, r.cfg.Key, r.report())
}

// Close stops the reporter, waits for its goroutine, and logs what was
// recorded since the last report. A second Close does nothing.
func (r *Reporter) Close() {
	r.stopped.Do(func() {
		close(r.stop)
		<-r.done
		r.safeEmit()
	})
}
