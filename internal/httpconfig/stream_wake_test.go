package httpconfig

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// While Stream waits before reopening a stream (the back-off from streams
// that end at once), a config wanted (wake: a NOT_MY_VBUCKET without a
// newer config, whose config, with bootstrap_on=http, only the stream can
// bring) ends the wait 100 ms after it began, or at once when it began
// longer ago: a soak saw writes meeting NOT_MY_VBUCKET wait out the
// back-off, 1.6 s, 3.2 s, ... 10 s. The back-off itself goes on doubling:
// a wake is not a stream that lived.
func TestStreamWaitCutShortWhenAConfigIsWanted(t *testing.T) {
	clock := newArmClock()
	requests := make(chan chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"rev":1}` + "\n\n\n\n"))
		w.(http.Flusher).Flush()
		end := make(chan struct{})
		requests <- end
		select {
		case <-end:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	const redial = time.Hour // told apart from the reopen waits
	c := New(Config{Bucket: "default", Clock: clock, RedialPeriod: redial})
	wake := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Stream(ctx, func() []string { return []string{addr} }, wake, func([]byte, string, string) error { return nil })
	}()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(context.Background(), guard)
	defer wcancel()
	request := func() chan struct{} {
		t.Helper()
		for {
			select {
			case end := <-requests:
				return end
			case d := <-clock.armed:
				if d != redial {
					t.Fatalf("a wait of %v armed before the stream was reopened", d)
				}
			case <-wctx.Done():
				t.Fatal("the stream was not reopened")
				return nil
			}
		}
	}
	wait := func() time.Duration {
		t.Helper()
		for {
			select {
			case d := <-clock.armed:
				if d != redial {
					return d
				}
			case <-requests:
				t.Fatal("reopened before its wait was over")
			case <-wctx.Done():
				t.Fatal("no reopen wait armed")
				return 0
			}
		}
	}
	// Streams that end at once: the back-off grows to 400 ms.
	for _, d := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		close(request())
		if got := wait(); got != d {
			t.Fatalf("reopen after %v, want %v", got, d)
		}
		clock.Advance(d)
	}
	close(request())
	if got := wait(); got != 400*time.Millisecond {
		t.Fatalf("reopen after %v, want 400ms", got)
	}
	// A config wanted as the wait begins: it ends 100 ms after its start.
	wake <- struct{}{}
	if got := wait(); got != minRoundWait {
		t.Fatalf("after a wake: a wait of %v, want %v", got, minRoundWait)
	}
	clock.Advance(minRoundWait)
	end := request()
	// The back-off went on doubling: 800 ms. A config wanted 150 ms into
	// that wait ends it at once.
	close(end)
	if got := wait(); got != 800*time.Millisecond {
		t.Fatalf("reopen after %v, want 800ms", got)
	}
	clock.Advance(150 * time.Millisecond)
	wake <- struct{}{}
	close(request())
}
