package dnsctx

import (
	"context"
	"net"
	"testing"
	"time"
)

// A query connection closed twice returns from the second Close: the
// first stopped the context's watch, which the second must not wait for.
func TestQueryConnClosedTwice(t *testing.T) {
	var peer net.Conn
	r := Interruptible(&net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, p := net.Pipe()
		peer = p
		return c, nil
	}})
	nc, err := r.Dial(context.Background(), "tcp", "127.0.0.1:53")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = nc.Close()
		_ = nc.Close()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the second Close of a query connection did not return within a minute")
	}
}
