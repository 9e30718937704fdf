package conn

import (
	"context"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// queuedPanic is a QueuedHook that panics once wait is closed.
type queuedPanic struct{ wait <-chan struct{} }

func (h queuedPanic) Queued() {
	<-h.wait
	panic("queued hook")
}

// A QueuedHook that panics (the caller's Observer runs there) unwinds
// DoDeadline's caller while its request is on the connection: the request
// is given up before the panic goes on, abandoned here (written), so that
// the connection no longer waits for it on behalf of a caller that is
// gone, and its late answer reaches neither the caller's handler nor an
// orphan report: it is dropped, and the connection goes on.
func TestQueuedHookPanicGivesTheRequestUp(t *testing.T) {
	c, p := dialPipe(t, Options{}, nil)
	var first memdx.Packet
	written := make(chan struct{})
	go func() {
		first = p.read()
		close(written)
	}()
	req := memdx.NewGet([]byte("k"))
	called := 0
	var got any
	func() {
		defer func() { got = recover() }()
		_, _ = c.DoDeadline(context.Background(), time.Time{}, &req, func(*memdx.Packet) error {
			called++
			return nil
		}, &Origin{Queued: queuedPanic{wait: written}})
	}()
	if got != "queued hook" {
		t.Fatalf("recovered %v, want the hook's panic", got)
	}
	if n := c.Awaited(); n != 0 {
		t.Fatalf("%d requests awaited after the hook's panic; want 0: the caller is gone", n)
	}
	p.write(ok(first, "late"))
	go func() {
		next := p.read()
		p.write(ok(next, "v"))
	}()
	if r := doGet(testCtx(t), c, "k2"); r.err != nil || r.value != "v" {
		t.Fatalf("the next request: %+v", r)
	}
	if called != 0 {
		t.Fatalf("the handler of the request given up was called %d times", called)
	}
	if st := c.Stats(); st.LateResponses != 1 || c.Err() != nil {
		t.Fatalf("late responses %d, connection error %v; want the late answer dropped, the connection kept", st.LateResponses, c.Err())
	}
}
