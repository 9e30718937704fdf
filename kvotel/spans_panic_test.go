package kvotel

import (
	"context"
	"testing"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"go.opentelemetry.io/otel/codes"
)

// panickyObserver panics in AttemptEnd: the caller's code, which the
// client calls on the operation's goroutine without a guard (the panic
// reaches the caller).
type panickyObserver struct{}

func (panickyObserver) AttemptStart(client.AttemptInfo)      {}
func (panickyObserver) AttemptEnd(client.AttemptInfo, error) { panic("observer") }

// mustPanic runs f and fails t unless it panics.
func mustPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	f()
}

// An operation that a panic of the caller's code unwinds (an Observer's,
// here) still ends its spans: the operation's, and a fan-out call's
// wrapping span. Left open, an OpenTelemetry span is never exported: the
// backend showed the dispatch spans (ended before the panic) under a
// parent it never received, and no get, get_all_replicas or ping span.
func TestSpansEndWhenCallerCodePanics(t *testing.T) {
	mc := newMock(t)
	bg := context.Background()
	if _, err := mc.Bucket("default").Set("_default", "_default", "k", []byte("v"), 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		spans []string // the spans that must have ended
		call  func(context.Context, *client.Client)
	}{
		{"get", []string{"get"}, func(ctx context.Context, c *client.Client) {
			_, _ = c.DefaultCollection().Get(ctx, "k", nil)
		}},
		{"get_all_replicas", []string{"get_all_replicas", "get", "get_replica"}, func(ctx context.Context, c *client.Client) {
			_, _ = c.DefaultCollection().GetAllReplicas(ctx, "k", nil)
		}},
		{"ping", []string{"ping"}, func(ctx context.Context, c *client.Client) { c.Ping(ctx) }},
		{"get_many", []string{"get"}, func(ctx context.Context, c *client.Client) {
			c.DefaultCollection().GetMany(ctx, []string{"k", "k2", "k3"}, nil)
		}},
		// The scan's requests run on its goroutines; Next raises the panic.
		{"scan", []string{"scan"}, func(ctx context.Context, c *client.Client) {
			sr, err := c.DefaultCollection().Scan(ctx, client.RangeScan{}, nil)
			if err != nil {
				return
			}
			defer sr.Close()
			for sr.Next() {
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, e := connect(t, mc, &client.Options{Observer: panickyObserver{}})
			ctx, caller := e.tp.Tracer("app").Start(bg, "caller")
			mustPanic(t, func() { tc.call(ctx, c) })
			caller.End()
			e.ledger.check(t)
			sp := e.spans()
			for _, name := range tc.spans {
				if len(sp[name]) == 0 {
					t.Errorf("no %s span ended", name)
				}
				for _, s := range sp[name] {
					if s.Status().Code != codes.Error {
						t.Errorf("%s status %v, want Error", name, s.Status())
					}
				}
			}
		})
	}
}

// A RetryStrategy that panics deciding a retry of a key answered LOCKED,
// alone and in a batch whose other keys are in flight or done: every span
// begun ends.
func TestSpansEndWhenRetryStrategyPanics(t *testing.T) {
	mc := newMock(t)
	bg := context.Background()
	for _, k := range []string{"k", "a", "b"} {
		if _, err := mc.Bucket("default").Set("_default", "_default", k, []byte("v"), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	ctl := mc.Control(mockcluster.Match{Key: "k", OpCodes: []memdx.OpCode{memdx.OpGet}}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		return mockcluster.Action{Status: memdx.StatusLocked}, true
	})
	defer ctl.Remove()
	boom := client.RetryStrategyFunc(func(client.RetryRequest, client.RetryReason) client.RetryAction { panic("strategy") })
	c, e := connect(t, mc, nil)
	col := c.DefaultCollection()
	mustPanic(t, func() { _, _ = col.Get(bg, "k", &client.GetOptions{RetryStrategy: boom}) })
	mustPanic(t, func() { col.GetMany(bg, []string{"a", "k", "b"}, &client.GetManyOptions{RetryStrategy: boom}) })
	e.ledger.check(t)
	if n := len(e.spans()["get"]); n < 2 {
		t.Errorf("%d get spans ended", n)
	}
}
