package httpconfig

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// streamRedial is the redial period of the Client a streamRun runs: an
// hour, told apart from the reopen waits and the round waits.
const streamRedial = time.Hour

// streamRun is a Client's Stream running, on an armClock, against one
// node served by a test's handler, which reports each request on
// requests. Stream stops (stop) when the test ends, before the node.
type streamRun[R any] struct {
	t        *testing.T
	clock    armClock
	requests chan R
	// wctx ends after guard: the test's bound on each thing it awaits.
	wctx context.Context
	stop func() // ends Stream and awaits its return
}

// streamRunConfig is what a streamRun's tests set; all of it may be left
// out.
type streamRunConfig struct {
	wake   chan struct{} // Stream's; nil: none
	logger *slog.Logger
	// sink, given Stream's context: Stream's sink. nil: one that takes
	// every config.
	sink func(ctx context.Context) Sink
}

// startStream serves handler on a node and runs Stream against it.
func startStream[R any](t *testing.T, clock armClock, requests chan R, handler http.HandlerFunc, rc streamRunConfig) *streamRun[R] {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	c := New(Config{Bucket: "default", Clock: clock, RedialPeriod: streamRedial, Logger: rc.logger})
	ctx, cancel := context.WithCancel(context.Background())
	sink := Sink(func([]byte, string, string) error { return nil })
	if rc.sink != nil {
		sink = rc.sink(ctx)
	}
	var wake <-chan struct{}
	if rc.wake != nil {
		wake = rc.wake
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Stream(ctx, func() []string { return []string{addr} }, wake, nil, sink)
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop) // before srv.Close: cleanups run last first
	wctx, wcancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(wcancel)
	return &streamRun[R]{t: t, clock: clock, requests: requests, wctx: wctx, stop: stop}
}

// request awaits the node's next request.
func (s *streamRun[R]) request() R {
	s.t.Helper()
	select {
	case r := <-s.requests:
		return r
	case <-s.wctx.Done():
		s.t.Fatal("the stream was not reopened")
		var zero R
		return zero
	}
}

// wait awaits the next wait Stream arms (a reopen or round wait, not a
// stream's redial period), failing the test on a request meanwhile: one
// before that wait was over.
func (s *streamRun[R]) wait() time.Duration {
	s.t.Helper()
	for {
		select {
		case d := <-s.clock.armed:
			if d != streamRedial {
				return d
			}
		case <-s.requests:
			s.t.Fatal("reopened before its wait was over")
		case <-s.wctx.Done():
			s.t.Fatal("no wait armed")
			return 0
		}
	}
}

// endOnCue serves a stream that sends a config (rev 1), then sends on
// requests a channel whose close ends the stream.
func endOnCue(requests chan chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"rev":1}` + "\n\n\n\n"))
		w.(http.Flusher).Flush()
		end := make(chan struct{})
		requests <- end
		select {
		case <-end:
		case <-r.Context().Done():
		}
	}
}
