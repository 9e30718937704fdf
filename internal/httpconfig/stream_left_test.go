package httpconfig

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A stream that ends soon after it opened because its node left the
// cluster (the node is no longer among those to stream from: removed in a
// swap, its streams closed with it) is reopened on the next node at once,
// and does not count toward the back-off from streams that end at once: a
// soak swapping nodes less than 10 s apart saw the reopen wait double at
// each swap (100 ms, 200 ms, ... 10 s), and writes meeting
// NOT_MY_VBUCKET meanwhile wait for the stream that long. A node still
// listed whose stream ends at once is waited for as before, from 100 ms:
// the swaps before it did not double that wait.
func TestStreamMovesOnAtOnceFromANodeThatLeft(t *testing.T) {
	type request struct {
		node int
		end  chan struct{}
	}
	clock := newArmClock()
	requests := make(chan request, 16)
	var addrs []string
	for i := range 5 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"rev":1}` + "\n\n\n\n"))
			w.(http.Flusher).Flush()
			end := make(chan struct{})
			requests <- request{i, end}
			select {
			case <-end:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		addrs = append(addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	var mu sync.Mutex
	members := []int{0, 1}
	setMembers := func(m ...int) {
		mu.Lock()
		members = m
		mu.Unlock()
	}
	nodes := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, i := range members {
			out = append(out, addrs[i])
		}
		return out
	}
	const redial = time.Hour // told apart from the reopen waits
	c := New(Config{Bucket: "default", Clock: clock, RedialPeriod: redial})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Stream(ctx, nodes, nil, nil, func([]byte, string, string) error { return nil })
	}()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(context.Background(), guard)
	defer wcancel()
	// next returns the next stream opened; a reopen wait armed before it
	// fails the test.
	next := func(want int) request {
		t.Helper()
		for {
			select {
			case r := <-requests:
				if r.node != want {
					t.Fatalf("stream opened on node %d, want %d", r.node, want)
				}
				return r
			case d := <-clock.armed:
				if d != redial {
					t.Fatalf("a reopen wait of %v armed before the stream was opened on node %d", d, want)
				}
			case <-wctx.Done():
				t.Fatalf("no stream opened on node %d", want)
			}
		}
	}
	r := next(0)
	// Swaps: a node joins, the one streaming leaves, its stream ends at
	// once (well within 10 s of its opening, on the Clock).
	for i := 1; i <= 3; i++ {
		setMembers(i, i+1)
		close(r.end)
		r = next(i)
	}
	// Node 3 stays and its stream ends at once: the back-off starts
	// from 100 ms, the swaps before it counted for nothing.
	close(r.end)
	for {
		select {
		case d := <-clock.armed:
			if d == redial {
				continue
			}
			if d != minRoundWait {
				t.Fatalf("reopen after %v, want %v", d, minRoundWait)
			}
		case <-requests:
			t.Fatal("reopened at once after a stream of a node still listed ended at once")
		case <-wctx.Done():
			t.Fatal("no reopen wait armed")
		}
		break
	}
	clock.Advance(minRoundWait)
	next(4)
}
