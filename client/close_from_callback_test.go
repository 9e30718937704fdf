package client

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/leakcheck"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// closeHook closes the client from caller code the client runs: armed,
// the first call of fire closes it there and reports Close's error on
// done. Calls while it is not armed, or after the first, do nothing (they
// must not block: the client's other goroutines call them too).
type closeHook struct {
	armed atomic.Bool
	c     atomic.Pointer[Client]
	done  chan error
}

func newCloseHook() *closeHook { return &closeHook{done: make(chan error, 1)} }

func (h *closeHook) fire() {
	if c := h.c.Load(); c != nil && h.armed.CompareAndSwap(true, false) {
		h.done <- c.Close()
	}
}

// closeHookWaits bounds every wait of these tests: only a hang reaches it.
const closeHookWaits = 30 * time.Second

// await requires the Close the callback made to return, then a Close from
// the test's goroutine to return, and no goroutine of the client to be
// left after it: Close's contract holds for every caller but the
// callback's goroutine itself.
func (h *closeHook) await(t *testing.T) {
	t.Helper()
	select {
	case err := <-h.done:
		require.NoError(t, err)
	case <-time.After(closeHookWaits):
		t.Fatalf("Close called from the callback did not return within %v", closeHookWaits)
	}
	closed := make(chan error, 1)
	go func() { closed <- h.c.Load().Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(closeHookWaits):
		t.Fatalf("Close after the callback's did not return within %v", closeHookWaits)
	}
	requireNoClientGoroutines(t)
}

// requireNoClientGoroutines requires every goroutine of the client (its
// cluster, connections, reports and HTTP config requests) to have exited. Polled: a goroutine
// that closed what Close waits for may still be unwinding its frames.
func requireNoClientGoroutines(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(closeHookWaits); ; time.Sleep(10 * time.Millisecond) {
		var mine []string
		for _, g := range leakcheck.Foreign() {
			if strings.Contains(g, "kvwire/internal/logreport") || strings.Contains(g, "kvwire/internal/cluster") ||
				strings.Contains(g, "kvwire/conn.") || strings.Contains(g, "kvwire/internal/lifecycle") ||
				strings.Contains(g, "kvwire/internal/httpconfig") || strings.Contains(g, "net/http.(*Transport)") ||
				strings.Contains(g, "net/http.(*persistConn)") {
				mine = append(mine, g)
			}
		}
		if len(mine) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left after Close returned:\n%s", strings.Join(mine, "\n\n"))
		}
	}
}

// hookHandler is a slog.Handler that fires h on every record (match nil)
// or on those match accepts.
type hookHandler struct {
	h     *closeHook
	match func(slog.Record) bool
}

func (x hookHandler) Enabled(context.Context, slog.Level) bool { return true }
func (x hookHandler) WithAttrs([]slog.Attr) slog.Handler       { return x }
func (x hookHandler) WithGroup(string) slog.Handler            { return x }
func (x hookHandler) Handle(_ context.Context, r slog.Record) error {
	if x.match == nil || x.match(r) {
		x.h.fire()
	}
	return nil
}

// hookTracer's spans fire h when they end.
type hookTracer struct{ h *closeHook }

func (x hookTracer) RequestSpan(context.Context, string, RequestSpan, time.Time) RequestSpan {
	return hookSpan(x)
}

type hookSpan struct{ h *closeHook }

func (hookSpan) SetAttribute(string, slog.Value)          {}
func (hookSpan) AddEvent(string, time.Time, ...slog.Attr) {}
func (hookSpan) SetStatus(SpanStatus)                     {}
func (x hookSpan) End(time.Time)                          { x.h.fire() }

// hookMeter's instruments fire h when they record.
type hookMeter struct{ h *closeHook }

func (x hookMeter) Counter(string, map[string]string) (Counter, error) { return hookInstrument(x), nil }
func (x hookMeter) ValueRecorder(string, map[string]string) (ValueRecorder, error) {
	return hookInstrument(x), nil
}

type hookInstrument struct{ h *closeHook }

func (x hookInstrument) IncrementBy(uint64) { x.h.fire() }
func (x hookInstrument) RecordValue(uint64) { x.h.fire() }

// hookObserver fires h when an attempt ends.
type hookObserver struct{ h *closeHook }

func (hookObserver) AttemptStart(AttemptInfo)        {}
func (x hookObserver) AttemptEnd(AttemptInfo, error) { x.h.fire() }

// Caller code the client runs may close it: a slog handler that shuts the
// application down on a fatal line, a health hook, a tracer, a meter, an
// observer, a retry strategy, a DNS resolver or a TLS callback. Close
// called there used to wait for the goroutine it was called on (a node's
// connection upkeep, a connection's, the config loop, a report) and never
// returned. Each kind, on each goroutine it runs on, closes the client:
// that Close returns, a Close from another goroutine then returns too, and
// no goroutine of the client is left.
func TestCloseFromCallback(t *testing.T) {
	ops := []struct {
		name string
		run  func(context.Context, *Collection) error
	}{
		{"Get", func(ctx context.Context, col *Collection) error { _, err := col.Get(ctx, "k", nil); return err }},
		{"GetMany", func(ctx context.Context, col *Collection) error {
			for _, r := range col.GetMany(ctx, []string{"k", "k2"}, nil) {
				if r.Err != nil {
					return r.Err
				}
			}
			return nil
		}},
	}
	// runOp runs op with the hook armed: the op's own callbacks close the
	// client; whatever the op returns, it must return.
	runOp := func(t *testing.T, h *closeHook, c *Client, run func(context.Context, *Collection) error) {
		col := c.DefaultCollection()
		_, err := col.Upsert(context.Background(), "k", []byte("v"), nil)
		require.NoError(t, err)
		h.armed.Store(true)
		ended := make(chan error, 1)
		go func() { ended <- run(context.Background(), col) }()
		h.await(t)
		select {
		case <-ended:
		case <-time.After(closeHookWaits):
			t.Fatalf("the operation did not return within %v of Close", closeHookWaits)
		}
	}
	for _, op := range ops {
		t.Run("Tracer/"+op.name, func(t *testing.T) {
			h := newCloseHook()
			c := connect(t, newMock(t, mockcluster.Options{}), &Options{Tracer: hookTracer{h}})
			h.c.Store(c)
			runOp(t, h, c, op.run)
		})
		t.Run("Meter/"+op.name, func(t *testing.T) {
			h := newCloseHook()
			c := connect(t, newMock(t, mockcluster.Options{}), &Options{Meter: hookMeter{h}})
			h.c.Store(c)
			runOp(t, h, c, op.run)
		})
		t.Run("Observer/"+op.name, func(t *testing.T) {
			h := newCloseHook()
			c := connect(t, newMock(t, mockcluster.Options{}), &Options{Observer: hookObserver{h}})
			h.c.Store(c)
			runOp(t, h, c, op.run)
		})
		t.Run("RetryStrategy/"+op.name, func(t *testing.T) {
			h := newCloseHook()
			strategy := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction {
				h.fire()
				return RetryAfter(time.Millisecond)
			})
			mc := newMock(t, mockcluster.Options{})
			c := connect(t, mc, &Options{RetryStrategy: strategy})
			h.c.Store(c)
			for _, k := range []string{"k", "k2"} {
				faultGets(t, mc, k, mockcluster.Action{Status: memdx.StatusLocked}, 0)
			}
			runOp(t, h, c, op.run)
		})
	}
	// A node's connection ends: its end and redial are logged on the
	// client's goroutines.
	t.Run("Logger/connection upkeep", func(t *testing.T) {
		h := newCloseHook()
		mc := newMock(t, mockcluster.Options{})
		c := connect(t, mc, &Options{Logger: slog.New(hookHandler{h: h})})
		h.c.Store(c)
		h.armed.Store(true)
		mc.DropConnections()
		h.await(t)
	})
	// The slow-operation report is logged on its own goroutine.
	t.Run("Logger/report", func(t *testing.T) {
		h := newCloseHook()
		report := func(r slog.Record) bool { return r.Message == ThresholdReportMessage }
		c := connect(t, newMock(t, mockcluster.Options{}), &Options{Logger: slog.New(hookHandler{h: h, match: report}),
			ThresholdLogging: ThresholdLoggingOptions{KVThreshold: time.Nanosecond, Interval: 10 * time.Millisecond}})
		h.c.Store(c)
		h.armed.Store(true)
		_, err := c.DefaultCollection().Upsert(context.Background(), "k", []byte("v"), nil)
		require.NoError(t, err)
		h.await(t)
	})
	// A redial's TLS handshake runs the config's callbacks.
	t.Run("TLS", func(t *testing.T) {
		h := newCloseHook()
		mc := newMock(t, mockcluster.Options{TLS: true})
		tc := &tls.Config{RootCAs: mc.RootCAs(), VerifyConnection: func(tls.ConnectionState) error { h.fire(); return nil }}
		c := connect(t, mc, &Options{TLSConfig: tc})
		h.c.Store(c)
		h.armed.Store(true)
		mc.DropConnections()
		h.await(t)
	})
	// The DNS SRV record is looked up again when no node can be reached.
	t.Run("Resolver", func(t *testing.T) {
		mc := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
		const rec = "_couchbase._tcp.cluster.test"
		h := newCloseHook()
		r := &hookResolver{h: h, srv: newScriptedSRV(rec, srvAnswer{addrs: srvOf(t, mc.Addrs())})}
		o := fakeClockOptions(retry.NewFakeClock(time.Now()))
		o.Resolver = r
		c, err := connectString(t, "couchbase://cluster.test/default", o)
		require.NoError(t, err)
		h.c.Store(c)
		col := c.DefaultCollection()
		_, err = col.Upsert(context.Background(), "k", []byte("v"), nil)
		require.NoError(t, err)
		h.armed.Store(true)
		mc.Node(0).Stop()
		awaitUnreachable(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), closeHookWaits)
		defer cancel()
		g := getAsync(ctx, col, "k")
		h.await(t)
		select {
		case <-g.done:
		case <-ctx.Done():
			t.Fatal("the Get did not return after Close")
		}
	})
}

// hookResolver fires h on each lookup after Connect's, then answers as srv.
type hookResolver struct {
	h   *closeHook
	srv *scriptedSRV
}

func (x *hookResolver) LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error) {
	x.h.fire()
	return x.srv.LookupSRV(ctx, service, proto, name)
}
