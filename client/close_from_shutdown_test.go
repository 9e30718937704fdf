package client

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// Close logs what the reports hold on the goroutine that closes the
// client: a Logger handler that closes the client on such a line (one
// that shuts the application down on a warning, say) ran Close inside
// Close, which waited for itself: the client's Close never returned.
func TestCloseFromShutdownLog(t *testing.T) {
	h := newCloseHook()
	report := func(r slog.Record) bool { return r.Message == ThresholdReportMessage }
	c := connect(t, newMock(t, mockcluster.Options{}), &Options{Logger: slog.New(hookHandler{h: h, match: report}),
		ThresholdLogging: ThresholdLoggingOptions{KVThreshold: time.Nanosecond, Interval: time.Hour}})
	h.c.Store(c)
	_, err := c.DefaultCollection().Upsert(context.Background(), "k", []byte("v"), nil)
	require.NoError(t, err)
	h.armed.Store(true)
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(closeHookWaits):
		t.Fatalf("Close, whose final report's handler closed the client, did not return within %v", closeHookWaits)
	}
	select {
	case err := <-h.done:
		require.NoError(t, err)
	default:
		t.Fatal("the final report was not logged at Close")
	}
	require.NoError(t, c.Close())
	requireNoClientGoroutines(t)
}

// closeEveryHandler closes the client on every record once armed, as a
// handler that shuts the application down on each fatal line would.
type closeEveryHandler struct {
	armed  *atomic.Bool
	c      *atomic.Pointer[Client]
	report chan struct{} // the threshold report's record, before its Close
}

func (x closeEveryHandler) Enabled(context.Context, slog.Level) bool { return true }
func (x closeEveryHandler) WithAttrs([]slog.Attr) slog.Handler       { return x }
func (x closeEveryHandler) WithGroup(string) slog.Handler            { return x }
func (x closeEveryHandler) Handle(_ context.Context, r slog.Record) error {
	if c := x.c.Load(); c != nil && x.armed.Load() {
		if r.Message == ThresholdReportMessage {
			x.report <- struct{}{}
		}
		_ = c.Close()
	}
	return nil
}

// A Close from a connection's upkeep leaves the shutdown to a goroutine
// of its own, which logs the reports' last lines: a handler closing the
// client there too called Close inside that shutdown, which waited for
// itself, and every later Close waited for it in turn.
func TestCloseFromCallbackThenShutdownLog(t *testing.T) {
	var armed atomic.Bool
	var cp atomic.Pointer[Client]
	mc := newMock(t, mockcluster.Options{})
	report := make(chan struct{}, 1)
	c := connect(t, mc, &Options{Logger: slog.New(closeEveryHandler{armed: &armed, c: &cp, report: report}),
		ThresholdLogging: ThresholdLoggingOptions{KVThreshold: time.Nanosecond, Interval: time.Hour}})
	cp.Store(c)
	_, err := c.DefaultCollection().Upsert(context.Background(), "k", []byte("v"), nil)
	require.NoError(t, err)
	armed.Store(true)
	mc.DropConnections()
	select {
	case <-report: // the shutdown the upkeep's Close started logs the report
	case <-time.After(closeHookWaits):
		t.Fatalf("the shutdown a handler's Close started logged no report within %v", closeHookWaits)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(closeHookWaits):
		t.Fatalf("Close after the handler's did not return within %v", closeHookWaits)
	}
	requireNoClientGoroutines(t)
}
