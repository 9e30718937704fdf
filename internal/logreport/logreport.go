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

// Reporter calls an emit function every interval of a clock, from a
// goroutine of its own, and once more when it stops. An emit that panics
// (a logger's handler is the caller's code) loses its report; the next one
// is tried as usual.
type Reporter struct {
	clock    retry.Clock
	interval time.Duration
	emit     func()

	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// Start starts calling emit every interval (a non-positive interval
// starts nothing: emit runs only at Close).
func Start(clock retry.Clock, interval time.Duration, emit func()) *Reporter {
	r := &Reporter{clock: clock, interval: interval, emit: emit, stop: make(chan struct{}), done: make(chan struct{})}
	if interval <= 0 {
		close(r.done)
		return r
	}
	go r.run()
	return r
}

func (r *Reporter) run() {
	defer close(r.done)
	t := r.clock.NewTimer(r.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			r.safeEmit()
			t.Reset(r.interval)
		case <-r.stop:
			return
		}
	}
}

func (r *Reporter) safeEmit() {
	defer func() { _ = recover() }()
	r.emit()
}

// Close stops the reporter, waits for its goroutine, and emits what was
// recorded since the last report. A second Close does nothing.
func (r *Reporter) Close() {
	r.stopped.Do(func() {
		close(r.stop)
		<-r.done
		r.safeEmit()
	})
}
