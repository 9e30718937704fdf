package client

import (
	"context"
	"log/slog"
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
