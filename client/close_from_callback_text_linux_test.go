package client

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/memcachedtest"
)

// A batch that takes an idle text connection on which the server sent
// bytes (a late answer) logs that it closed it, on the batch's goroutine.
// A Logger whose handler closes the client there (Close then waits, as
// from anywhere else: the batch's goroutine is the caller's) must not
// find the node's text pool held by that logging call: the shutdown's
// close of the pool waited for it, and the handler for the shutdown.
func TestCloseFromLoggerAtTakingABrokenIdleTextConnection(t *testing.T) {
	h := newCloseHook()
	stray := func(r slog.Record) bool {
		return r.Message == "kvwire: the server sent bytes on an idle text connection, answering no request: closed; binary gets for a while"
	}
	f := newTextFront(t, memcachedtest.Start(t))
	c := textClient(t, f.addr(), &Options{Logger: slog.New(hookHandler{h: h, match: stray})})
	h.c.Store(c)
	col := c.DefaultCollection()
	ctx := context.Background()
	keys := batchKeys(t, col, "late", 10, 10)
	warmText(t, c, keys[0])
	release := make(chan struct{})
	late := make(chan net.Conn, 1)
	f.setOnGets(func(ks []string) textAction {
		return textAction{reply: textValues(ks[:3]), hold: release, later: textValues(ks[3:]), late: late}
	})
	col.GetMany(ctx, keys, nil)
	f.setOnGets(nil)
	close(release)
	front := <-late
	waitFor(t, "the late answer at the client", func() bool { return unacked(t, front) == 0 })
	h.armed.Store(true)
	ended := make(chan struct{})
	go func() {
		col.GetMany(ctx, keys, nil)
		close(ended)
	}()
	h.await(t)
	select {
	case <-ended:
	case <-time.After(closeHookWaits):
		t.Fatalf("the GetMany did not return within %v of Close", closeHookWaits)
	}
}
