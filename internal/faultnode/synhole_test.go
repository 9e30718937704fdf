//go:build linux

package faultnode

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// A dial to a SynHole is neither accepted nor refused: it is still
// waiting when its context ends (here after 300 ms: a connection, or a
// refusal, would come at once on loopback).
func TestSynHoleDropsSyns(t *testing.T) {
	h, err := NewSynHole()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", h.Addr())
		cancel()
		if err == nil {
			c.Close()
			t.Fatal("a dial to the SynHole connected")
		}
		if !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
			t.Fatalf("dial: %v; want it still waiting when the context ended", err)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
