package client

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/internal/memcachedtest"
)

// The Logger's handler runs on the client's own goroutines too, and may run
// an operation on the client. A memcached that takes no text (-B binary)
// never answers the version check of a new text connection; the check
// logged that, on its goroutine, with the node's text pool locked, and a
// GetMany there takes a text connection from that pool: the handler, and
// every later GetMany of the node, waited forever (and Close, for the
// check's goroutine). The handler's GetMany runs on a goroutine of its own,
// bounded, so that the test fails rather than hangs.
func TestLoggerHandlerMayRunAGetManyOnTheClient(t *testing.T) {
	t.Parallel()
	addr := memcachedtest.StartArgs(t, "-B", "binary")
	var client atomic.Pointer[Client]
	ran := make(chan error, 1) // the handler's GetMany: nil, or why not
	logger := slog.New(logcapture.Func(func(l logcapture.Logged) {
		c := client.Load()
		if c == nil || !strings.Contains(l.Msg, "did not answer text") {
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.DefaultCollection().GetMany(context.Background(), []string{"from-the-handler"}, nil)
		}()
		select {
		case <-done:
			ran <- nil
		case <-time.After(10 * time.Second): // no healthy run nears it
			ran <- errHandlerBlocked
		}
	}))
	c := textClient(t, addr, &Options{ConnectTimeout: 200 * time.Millisecond, Logger: logger})
	client.Store(c)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "loghandler", 4, 2)
	requireStored(t, col.GetMany(context.Background(), keys, nil), 2) // starts a text dial and its check
	select {
	case err := <-ran:
		require.NoError(t, err, "the handler's GetMany, on the text check's goroutine")
	case <-time.After(time.Minute):
		t.Fatal("the failed text check was not logged within a minute")
	}
	requireStored(t, col.GetMany(context.Background(), keys, nil), 2)
}

var errHandlerBlocked = errors.New("a GetMany run by the Logger's handler did not return within 10 s: a lock the handler's goroutine holds")
