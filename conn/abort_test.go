package conn

import (
	"context"
	"errors"
	"testing"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// Abort ends the connection without waiting for its goroutines, so that
// it may be called where Close would wait for itself: here from handle, on
// the reader goroutine. The other request in flight fails as on Close
// (written, ErrConnectionClosed) and with the reason given.
func TestAbortFromHandleEndsTheConnection(t *testing.T) {
	c, p := dialPipe(t, Options{ProbeAfter: -1}, nil)
	why := errors.New("the state is invalid")
	aborted := make(chan error, 1)
	go func() {
		req := memdx.NewGet([]byte("a"))
		aborted <- c.Do(testCtx(t), &req, func(*memdx.Packet) error {
			c.Abort(why)
			return nil
		})
	}()
	reqA := p.read()
	b := goGet(context.Background(), c, "b")
	p.read()
	p.write(ok(reqA, "A"))
	if err := recv(t, aborted); err != nil {
		t.Fatalf("the request whose handle aborted: %v", err)
	}
	r := recv(t, b)
	if re := requestError(t, r.err); !re.Written || !errors.Is(r.err, kverr.ErrConnectionClosed) || !errors.Is(r.err, why) {
		t.Fatalf("the other request: %v (written %v); want written, ErrConnectionClosed and the reason", r.err, re.Written)
	}
	<-c.Done()
	if !errors.Is(c.Err(), why) {
		t.Fatalf("Err() = %v, want the reason", c.Err())
	}
	c.Abort(errors.New("again")) // an ended connection: nothing
	if !errors.Is(c.Err(), why) {
		t.Fatalf("Err() after a second Abort = %v", c.Err())
	}
}

// Abort without a reason ends the connection as Close does: its error is
// kverr.ErrConnectionClosed itself, not one with a garbled nil reason.
func TestAbortWithoutAReason(t *testing.T) {
	c, _ := dialPipe(t, Options{ProbeAfter: -1}, nil)
	c.Abort(nil)
	<-c.Done()
	if err := c.Err(); err != kverr.ErrConnectionClosed {
		t.Fatalf("Err() = %v, want kverr.ErrConnectionClosed", err)
	}
}
