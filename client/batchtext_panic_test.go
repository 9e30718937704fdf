package client

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kvwire/kvwire/internal/memcachedtest"
)

// panicLogger is a slog handler that panics, while armed, on a record whose
// message contains msg: a Logger of the caller's that fails on the
// goroutine of the operation logging.
type panicLogger struct {
	msg   string
	armed *atomic.Bool
}

func (h panicLogger) Enabled(context.Context, slog.Level) bool { return true }
func (h panicLogger) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h panicLogger) WithGroup(string) slog.Handler            { return h }

func (h panicLogger) Handle(_ context.Context, r slog.Record) error {
	if h.armed.Load() && strings.Contains(r.Message, h.msg) {
		panic("logger: " + h.msg)
	}
	return nil
}

// textInUse is the text connections a multi-get holds on c's nodes.
func textInUse(c *Client) int {
	n := 0
	for _, nd := range c.cl.Topology().Nodes() {
		n += nd.TextInUse()
	}
	return n
}

// A panic on the GetMany's goroutine while its groups are read (here the
// caller's Logger, at the warning that window 1's multi-get was refused,
// while window 2's multi-get is in flight on a second text connection)
// reaches the caller, and leaves no text connection held: window 2's, with
// its answer unread, is closed and given back. Held, it would stay in use
// until Close, and once a node's 16 are held no text connection is dialed
// for it again.
func TestGetManyMemcachedTextPanicGivesBackTheTextConnections(t *testing.T) {
	armed := &atomic.Bool{}
	f := newTextFront(t, memcachedtest.Start(t))
	o := windowOptions()
	o.Logger = slog.New(panicLogger{msg: "refused a text multi-get", armed: armed})
	c := textClient(t, f.addr(), o)
	col := c.DefaultCollection()
	keys := windowKeys(t, col, "txpanic")
	warmText(t, c, keys[0])
	requireWindowKeys(t, col.GetMany(context.Background(), keys, nil))
	waitFor(t, "two idle text connections", func() bool { return textIdle(c) == 2 })
	g := newWindowGate()
	f.setOnGets(func(ks []string) textAction {
		if ks[0] != keys[0] {
			g.arrived()
			return textAction{}
		}
		g.hold()
		return textAction{reply: "VALUE txpanic-000 0 5\r\nWRONG\r\nGARBAGE\r\n"}
	})
	armed.Store(true)
	func() {
		defer func() { assert.Equal(t, "logger: refused a text multi-get", recover()) }()
		col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: time.Minute})
		t.Error("GetMany returned: the Logger's panic did not reach its caller")
	}()
	armed.Store(false)
	g.requireOverlapped(t)
	assert.Zero(t, textInUse(c), "no text connection is left in use")
	assert.Zero(t, textIdle(c), "window 2's connection, its answer unread, is not kept")
}
