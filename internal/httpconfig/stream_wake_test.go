package httpconfig

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// While Stream waits before reopening a stream (the back-off from streams
// that end at once), a config wanted (wake: a NOT_MY_VBUCKET without a
// newer config, whose config, with bootstrap_on=http, only the stream can
// bring) ends the wait a quarter of it (at least 100 ms) after it began,
// or at once when it began longer ago: a soak saw writes meeting
// NOT_MY_VBUCKET wait out the back-off, 1.6 s, 3.2 s, ... 10 s. The
// back-off itself goes on doubling: a wake is not a stream that lived.
func TestStreamWaitCutShortWhenAConfigIsWanted(t *testing.T) {
	wake := make(chan struct{}, 1)
	requests := make(chan chan struct{}, 16)
	s := startStream(t, newArmClock(), requests, endOnCue(requests), streamRunConfig{wake: wake})
	clock, wait := s.clock, s.wait
	// request also fails on a reopen wait armed before the request.
	request := func() chan struct{} {
		t.Helper()
		for {
			select {
			case end := <-requests:
				return end
			case d := <-clock.armed:
				if d != streamRedial {
					t.Fatalf("a wait of %v armed before the stream was reopened", d)
				}
			case <-s.wctx.Done():
				t.Fatal("the stream was not reopened")
				return nil
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
	// that wait ends it a quarter of it (200 ms) after its start: 50 ms
	// later.
	close(end)
	if got := wait(); got != 800*time.Millisecond {
		t.Fatalf("reopen after %v, want 800ms", got)
	}
	clock.Advance(150 * time.Millisecond)
	wake <- struct{}{}
	if got := wait(); got != 50*time.Millisecond {
		t.Fatalf("a config wanted 150 ms into a wait of 800 ms: %v left, want 50ms", got)
	}
	clock.Advance(50 * time.Millisecond)
	end = request()
	// 1.6 s: a config wanted 500 ms into it, past its quarter (400 ms),
	// ends it at once.
	close(end)
	if got := wait(); got != 1600*time.Millisecond {
		t.Fatalf("reopen after %v, want 1.6s", got)
	}
	clock.Advance(500 * time.Millisecond)
	wake <- struct{}{}
	close(request())
}

// A config wanted does not cut short the wait after a round in which no
// node served a stream: the nodes are no likelier to serve it, and with
// bootstrap_on=http the failing stream is why the nodes keep answering
// NOT_MY_VBUCKET without the config (kv_engine's
// DedupeNotMyVbucketClustermap), each a wake: every node was asked, and a
// Warn logged for each, every 100 ms for as long as the REST ports
// refused. The wait doubles as before, 100 ms to 10 s; the wake stays for
// the wait after a stream that delivered.
func TestStreamFailedRoundWaitNotCutShortWhenAConfigIsWanted(t *testing.T) {
	requests := make(chan struct{}, 16)
	wake := make(chan struct{}, 1)
	s := startStream(t, newArmClock(), requests, func(w http.ResponseWriter, r *http.Request) {
		requests <- struct{}{}
		http.Error(w, "down", http.StatusServiceUnavailable)
	}, streamRunConfig{wake: wake})
	clock := s.clock
	// round waits for the failed round's request, then for the wait
	// armed after it.
	round := func() time.Duration {
		t.Helper()
		s.request()
		return s.wait()
	}
	want := minRoundWait
	for i := range 6 {
		if got := round(); got != want {
			t.Fatalf("failed round %d: a wait of %v, want %v (a wanted config cut it short)", i+1, got, want)
		}
		if i >= 2 {
			// A config wanted (once the wait is well over 100 ms):
			// not taken by the waits after failed rounds.
			if len(wake) == 0 && i > 2 {
				t.Fatal("a wait after a failed round took the wake")
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
		clock.Advance(want)
		want *= 2
	}
}

// A config wanted before a stream opens is answered by that stream (a
// node sends the config it holds as it opens one): it does not cut short
// the wait after that stream ends. A wake left in the channel (raised
// while Stream waited after a round no node served, a wait it does not
// cut) shortened the next reopen wait, of 400 ms here, to 100 ms, for a
// config the stream had brought meanwhile.
func TestStreamWaitNotCutShortByAConfigWantedBeforeTheStreamOpened(t *testing.T) {
	wake := make(chan struct{}, 1)
	type req struct {
		fail bool
		// wakeHeld: a wake was still buffered once the stream's
		// headers were read (the handler's config is sent after them).
		wakeHeld bool
	}
	requests := make(chan req, 16)
	delivered := make(chan struct{})
	var n atomic.Int32
	s := startStream(t, newArmClock(), requests, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 3 {
			requests <- req{fail: true}
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		// The client reads the headers, then the body: the config
		// below is read once it was sent, after the headers.
		w.Write([]byte(`{"rev":1}` + "\n\n\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-delivered:
			requests <- req{wakeHeld: len(wake) > 0}
		case <-r.Context().Done():
		}
	}, streamRunConfig{wake: wake, sink: func(ctx context.Context) Sink {
		return func([]byte, string, string) error {
			select {
			case delivered <- struct{}{}:
			case <-ctx.Done():
			}
			return nil
		}
	}})
	clock, request, wait := s.clock, s.request, s.wait
	// Two streams that end at once: the back-off is 200 ms, then 400 ms.
	for _, d := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		request()
		if got := wait(); got != d {
			t.Fatalf("reopen after %v, want %v", got, d)
		}
		clock.Advance(d)
	}
	// A round no node serves: its wait takes no wake, which stays.
	request()
	if got := wait(); got != minRoundWait {
		t.Fatalf("after a failed round: a wait of %v, want %v", got, minRoundWait)
	}
	wake <- struct{}{}
	clock.Advance(minRoundWait)
	if rq := request(); rq.wakeHeld {
		t.Fatal("a config wanted before the stream opened was still pending once it delivered: it would cut short the wait after this stream")
	}
	if got := wait(); got != 400*time.Millisecond {
		t.Fatalf("reopen after %v, want 400ms", got)
	}
	clock.Advance(400 * time.Millisecond)
	request()
}

// A proxy in front of the REST port ends every stream once it sent its
// first config, while the nodes keep answering NOT_MY_VBUCKET without a
// config (each a config wanted: with bootstrap_on=http only the stream
// brings it). Each wanted config cut the reopen wait to 100 ms, however
// long the back-off had grown: ten reopens a second, each logged, for as
// long as the fault lasted. A wanted config now cuts the wait to a
// quarter of the back-off (at least 100 ms): a steady fault costs one
// reopen per 2.5 s, and the stream's ends are logged at most once per
// 10 s, with how many ended since.
func TestStreamReopenRateBoundedWhileAConfigIsWantedAndStreamsEndAtOnce(t *testing.T) {
	requests := make(chan struct{}, 64)
	lines := make(logLines, 1024)
	wake := make(chan struct{}, 1)
	s := startStream(t, newArmClock(), requests, func(w http.ResponseWriter, r *http.Request) {
		requests <- struct{}{}
		w.Write([]byte(`{"rev":1}` + "\n\n\n\n")) // then ends at once
	}, streamRunConfig{wake: wake, logger: slog.New(lines)})
	clock, wait := s.clock, s.wait
	start := clock.Now()
	var at []time.Duration // each reopen, since the fault began
	const reopens = 24
	for range reopens {
		s.request()
		at = append(at, clock.Now().Sub(start))
		d := wait()
		// A NOT_MY_VBUCKET without a config, during the wait.
		select {
		case wake <- struct{}{}:
		default:
		}
		if d > minRoundWait {
			d = wait() // cut short: a shorter wait armed in its place
		}
		clock.Advance(d)
	}
	elapsed := at[len(at)-1]
	t.Logf("%d reopens in %v: %v", reopens, elapsed, at)
	if elapsed < 20*time.Second {
		t.Fatalf("%d reopens within %v of a steady fault: more than one a second", reopens, elapsed)
	}
	for i := len(at) - 10; i < len(at); i++ {
		if gap := at[i] - at[i-1]; gap < time.Second {
			t.Fatalf("reopen %d came %v after the one before, once the fault had lasted %v", i, gap, at[i-1])
		}
	}
	s.stop()
	close(lines)
	var logged int
	for l := range lines {
		if strings.Contains(l, "config stream ended") {
			logged++
		}
	}
	if max := 1 + int(elapsed/(10*time.Second)); logged > max {
		t.Fatalf("%d stream ends logged over %v, want at most %d (one per 10 s)", logged, elapsed, max)
	}
}

// During a rebalance that removes node after node, a removed node may
// close its stream before it sends the config without itself: still
// listed, its node has not "left", and the stream's end counts toward
// the reopen back-off. Each stream brought configs newer than any the
// stream had delivered before (the cluster is changing); a fault that
// ends every stream at once brings the same config again and again. So a
// stream that delivered a newer config is reopened after the least wait
// (100 ms), the back-off starting anew, and the nodes' wanted config (the
// removed node's KV connections lost) cuts nothing shorter than that.
// With the back-off doubling at each such end and a wanted config
// cutting it only to a quarter, the waits grew to 200 ms, 400 ms, ...
// 2.5 s: operations routed to a removed node waited that long for the
// config without it (before the quarter rule, 100 ms).
func TestStreamThatBroughtANewerConfigIsReopenedAfterTheLeastWait(t *testing.T) {
	requests := make(chan struct{}, 64)
	var rev atomic.Int32
	wake := make(chan struct{}, 1)
	s := startStream(t, newArmClock(), requests, func(w http.ResponseWriter, r *http.Request) {
		requests <- struct{}{}
		// A newer config each time, then the stream ends at once.
		w.Write([]byte(`{"rev":` + strconv.Itoa(int(rev.Add(1))) + "}\n\n\n\n"))
	}, streamRunConfig{wake: wake})
	clock, wait := s.clock, s.wait
	for i := range 10 {
		s.request()
		d := wait()
		// The removed node's KV connection lost: a config wanted.
		select {
		case wake <- struct{}{}:
		default:
		}
		if d > minRoundWait {
			d = wait() // cut short: a shorter wait armed in its place
		}
		if d > minRoundWait {
			t.Fatalf("end %d of a stream that brought a newer config: reopened after %v, want %v", i+1, d, minRoundWait)
		}
		clock.Advance(d)
	}
}

// A config wanted while a stream is open, after it delivered its first
// config (which then does not answer it), is kept for the wait after
// that stream: only a want raised before the stream opened is dropped
// as it opens (streamFrom).
func TestStreamWaitCutShortByAConfigWantedAfterTheStreamsFirstConfig(t *testing.T) {
	requests := make(chan chan struct{}, 16)
	wake := make(chan struct{}, 1)
	delivered, ack := make(chan struct{}), make(chan struct{})
	s := startStream(t, newArmClock(), requests, endOnCue(requests), streamRunConfig{wake: wake, sink: func(ctx context.Context) Sink {
		return func([]byte, string, string) error {
			select {
			case delivered <- struct{}{}:
				select {
				case <-ack:
				case <-ctx.Done():
				}
			case <-ctx.Done():
			}
			return nil
		}
	}})
	clock, request, wait := s.clock, s.request, s.wait
	// firstConfig returns once the sink has the stream's first config
	// (and holds it until ack).
	firstConfig := func() chan struct{} {
		t.Helper()
		end := request()
		select {
		case <-delivered:
		case <-s.wctx.Done():
			t.Fatal("the stream delivered nothing")
		}
		return end
	}
	// Streams that end at once, each bringing the same config: the
	// back-off grows to 800 ms.
	for _, d := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		end := firstConfig()
		ack <- struct{}{}
		close(end)
		if got := wait(); got != d {
			t.Fatalf("reopen after %v, want %v", got, d)
		}
		clock.Advance(d)
	}
	end := firstConfig()
	wake <- struct{}{} // as the stream delivers its first config
	ack <- struct{}{}
	close(end)
	if got := wait(); got != 800*time.Millisecond {
		t.Fatalf("reopen after %v, want 800ms", got)
	}
	if got := wait(); got != 200*time.Millisecond {
		t.Fatalf("a config wanted during the stream: the wait after it cut to %v, want 200ms (a quarter)", got)
	}
}
