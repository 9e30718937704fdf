package dnssrv

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// pastFirstConn is a query's connection on which the resolver's own
// SetDeadline (the query's deadline, in the future) waits until one in
// the past (the context's end) was set: the order in which a context
// that ends right after the dial lets the two land.
type pastFirstConn struct {
	net.Conn
	once sync.Once
	past chan struct{}
}

func (c *pastFirstConn) SetDeadline(t time.Time) error {
	if t.Before(time.Now()) {
		err := c.Conn.SetDeadline(t)
		c.once.Do(func() { close(c.past) })
		return err
	}
	select {
	case <-c.past:
	case <-time.After(guard):
	}
	return c.Conn.SetDeadline(t)
}

// A context that ends just after a query's connection was dialed: the
// watch of the context then sets its past deadline at once, and the
// resolver, which sets the query's deadline right after the dial, may set
// it after: the query then waited for the silent server until that
// deadline (5 s by default), Close with it. A deadline set after the
// context ended is now the past one.
func TestLookupEndsWhenItsContextEndsRightAfterTheDial(t *testing.T) {
	dns := newLoopbackDNS(t, nil, "_couchbase._tcp.silent.test")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var deadline time.Time // the first query's
	r := dns.resolver()
	dial := r.Dial
	r.Dial = func(dctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		if dl, ok := dctx.Deadline(); ok && deadline.IsZero() {
			deadline = dl
		}
		mu.Unlock()
		nc, err := dial(dctx, network, addr)
		if err != nil {
			return nil, err
		}
		cancel() // the client's Close, say, right after the dial
		return &pastFirstConn{Conn: nc, past: make(chan struct{})}, nil
	}
	_, err := Lookup(ctx, r, "couchbase", "silent.test", 11210)
	ended := time.Now()
	mu.Lock()
	dl := deadline
	mu.Unlock()
	if dl.IsZero() || !ended.Before(dl) {
		t.Fatalf("the lookup ended at %v, not before its query's deadline %v: it waited for the silent server after its context ended",
			ended.Format(time.StampMilli), dl.Format(time.StampMilli))
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
}
