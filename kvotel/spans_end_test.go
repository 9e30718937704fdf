package kvotel

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// spanLedger counts the End calls of every span a TracerProvider made
// (ledgerProvider): the SDK drops a second End silently, and a span never
// ended is never exported, so neither shows in a span recorder's Ended.
type spanLedger struct {
	mu      sync.Mutex
	started map[trace.SpanID]string
	ends    map[trace.SpanID]int
}

func newLedger() *spanLedger {
	return &spanLedger{started: map[trace.SpanID]string{}, ends: map[trace.SpanID]int{}}
}

// check fails t for each span that was not ended exactly once.
func (l *spanLedger) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var bad []string
	for id, name := range l.started {
		if n := l.ends[id]; n != 1 {
			bad = append(bad, fmt.Sprintf("%s ended %d times", name, n))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("of %d spans: %v", len(l.started), bad)
	}
}

type ledgerProvider struct {
	trace.TracerProvider
	l *spanLedger
}

func (p ledgerProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return ledgerTracer{p.TracerProvider.Tracer(name, opts...), p.l}
}

type ledgerTracer struct {
	trace.Tracer
	l *spanLedger
}

func (t ledgerTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, s := t.Tracer.Start(ctx, name, opts...)
	t.l.mu.Lock()
	t.l.started[s.SpanContext().SpanID()] = name
	t.l.mu.Unlock()
	ls := ledgerSpan{s, t.l}
	return trace.ContextWithSpan(ctx, ls), ls
}

type ledgerSpan struct {
	trace.Span
	l *spanLedger
}

func (s ledgerSpan) End(opts ...trace.SpanEndOption) {
	s.l.mu.Lock()
	s.l.ends[s.SpanContext().SpanID()]++
	s.l.mu.Unlock()
	s.Span.End(opts...)
}

// otelEnv is a mock cluster, and for each client connected to it a fresh
// span recorder, ledger and metric reader.
type otelEnv struct {
	mc     *mockcluster.Cluster
	sr     *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	ledger *spanLedger
	reader *sdkmetric.ManualReader
}

func newMock(t *testing.T) *mockcluster.Cluster {
	t.Helper()
	mc, err := mockcluster.New(mockcluster.Options{Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumVbuckets: 64}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	return mc
}

// connect connects a client to mc with o (nil: defaults) whose tracer
// and meter are this package's over the SDK's.
func connect(t *testing.T, mc *mockcluster.Cluster, o *client.Options) (*client.Client, *otelEnv) {
	t.Helper()
	e := &otelEnv{mc: mc, ledger: newLedger()}
	e.sr, e.tp = newRecorder(t)
	var mp *sdkmetric.MeterProvider
	e.reader, mp = newReader(t)
	if o == nil {
		o = &client.Options{}
	}
	o.Username, o.Password, o.Bucket = mockcluster.DefaultUser, mockcluster.DefaultPassword, mockcluster.DefaultBucket
	o.Tracer, o.Meter = NewTracer(ledgerProvider{e.tp, e.ledger}), NewMeter(mp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, mc.ConnString(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.WaitUntilReady(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return c, e
}

// spans returns the ended spans by name.
func (e *otelEnv) spans() map[string][]sdktrace.ReadOnlySpan {
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range e.sr.Ended() {
		out[s.Name()] = append(out[s.Name()], s)
	}
	return out
}

// held makes mc hold the answers to requests for key until the test ends,
// and returns a channel that gets a value each time one arrives.
func held(t *testing.T, mc *mockcluster.Cluster, key string) <-chan struct{} {
	t.Helper()
	hold := make(chan struct{})
	arrived := make(chan struct{}, 16)
	ctl := mc.Control(mockcluster.Match{Key: key}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		return mockcluster.Action{Hold: hold}, true
	})
	t.Cleanup(func() { close(hold); ctl.Remove() })
	return arrived
}

// checkFailed checks that the one span named name failed with errType.
func checkFailed(t *testing.T, spans map[string][]sdktrace.ReadOnlySpan, name, errType string) sdktrace.ReadOnlySpan {
	t.Helper()
	if len(spans[name]) != 1 {
		t.Fatalf("%d %s spans, want 1", len(spans[name]), name)
	}
	s := spans[name][0]
	if s.Status().Code != codes.Error {
		t.Errorf("%s status %v, want Error", name, s.Status())
	}
	if got := attrMap(s.Attributes())["error.type"]; got != errType {
		t.Errorf("%s error.type %v, want %s", name, got, errType)
	}
	return s
}

// Every span the client starts through kvotel ends once, whatever way its
// operation ends: a success, a failure, a timeout with the request
// unanswered, a context canceled meanwhile, retries given up, the client
// closed meanwhile; and the fan-out calls (replica reads, Ping, batches,
// a scan) nest their operations' spans under theirs, under the caller's.
func TestSpansEndOnceOnEveryPath(t *testing.T) {
	mc := newMock(t)
	bg := context.Background()
	for i := range 20 {
		if _, err := mc.Bucket(mockcluster.DefaultBucket).Set("_default", "_default", fmt.Sprintf("doc%02d", i), []byte(`{"n":1}`), client.CommonFlagsJSON, 0); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("get and typed upsert", func(t *testing.T) {
		c, e := connect(t, mc, nil)
		col := c.DefaultCollection()
		ctx, caller := e.tp.Tracer("app").Start(bg, "caller")
		if _, err := col.Get(ctx, "doc00", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := client.UpsertJSON(ctx, col, "typed", map[string]int{"a": 1}, nil); err != nil {
			t.Fatal(err)
		}
		caller.End()
		e.ledger.check(t)
		sp := e.spans()
		for _, name := range []string{"get", "upsert"} {
			if len(sp[name]) != 1 || sp[name][0].Parent().SpanID() != caller.SpanContext().SpanID() || sp[name][0].Status().Code != codes.Ok {
				t.Errorf("%s spans %v, want one under the caller's, Ok", name, sp[name])
			}
		}
		if len(sp[client.SpanRequestEncoding]) != 1 || sp[client.SpanRequestEncoding][0].Parent().SpanID() != sp["upsert"][0].SpanContext().SpanID() {
			t.Errorf("request_encoding spans %v, want one under the upsert", sp[client.SpanRequestEncoding])
		}
	})

	t.Run("not found and exists", func(t *testing.T) {
		c, e := connect(t, mc, nil)
		col := c.DefaultCollection()
		if _, err := col.Get(bg, "missing", nil); !errors.Is(err, client.ErrDocumentNotFound) {
			t.Fatalf("Get: %v", err)
		}
		if _, err := col.Insert(bg, "doc00", []byte("x"), nil); !errors.Is(err, client.ErrDocumentExists) {
			t.Fatalf("Insert: %v", err)
		}
		e.ledger.check(t)
		sp := e.spans()
		checkFailed(t, sp, "insert", "DocumentExists")
		if g := sp["get"]; len(g) != 1 || g[0].Status().Code != codes.Ok || attrMap(g[0].Attributes())["error.type"] != "DocumentNotFound" {
			t.Errorf("get of a missing document: %v, want Ok with error.type DocumentNotFound (RFC 0067: not a failure)", g)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		c, e := connect(t, mc, nil)
		held(t, mc, "slow")
		_, err := c.DefaultCollection().Get(bg, "slow", &client.GetOptions{Timeout: 100 * time.Millisecond})
		if !errors.Is(err, client.ErrTimeout) {
			t.Fatalf("Get: %v", err)
		}
		e.ledger.check(t)
		checkFailed(t, e.spans(), "get", "UnambiguousTimeout") // a read: never applied twice
	})

	t.Run("canceled", func(t *testing.T) {
		c, e := connect(t, mc, nil)
		arrived := held(t, mc, "slow")
		ctx, cancel := context.WithCancel(bg)
		go func() { <-arrived; cancel() }()
		_, err := c.DefaultCollection().Get(ctx, "slow", nil)
		if !errors.Is(err, context.Canceled) && !errors.Is(err, client.ErrRequestCanceled) {
			t.Fatalf("Get: %v", err)
		}
		e.ledger.check(t)
		checkFailed(t, e.spans(), "get", "RequestCanceled")
	})

	t.Run("retries given up", func(t *testing.T) {
		c, e := connect(t, mc, nil)
		ctl := mc.Control(mockcluster.Match{Key: "doc01", OpCodes: []memdx.OpCode{memdx.OpGet}}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
			return mockcluster.Action{Status: memdx.StatusLocked}, true
		})
		defer ctl.Remove()
		twice := client.RetryStrategyFunc(func(req client.RetryRequest, _ client.RetryReason) client.RetryAction {
			if req.Attempts() < 2 {
				return client.RetryAfter(0)
			}
			return client.NoRetry()
		})
		if _, err := c.DefaultCollection().Get(bg, "doc01", &client.GetOptions{RetryStrategy: twice}); !errors.Is(err, client.ErrDocumentLocked) {
			t.Fatalf("Get: %v", err)
		}
		e.ledger.check(t)
		sp := e.spans()
		get := checkFailed(t, sp, "get", "DocumentLocked")
		if n := attrMap(get.Attributes())["couchbase.retries"]; n != int64(2) || len(sp[client.SpanDispatchToServer]) != 3 {
			t.Errorf("retries %v, %d dispatches; want 2 and 3", n, len(sp[client.SpanDispatchToServer]))
		}
	})

	t.Run("closed in flight", func(t *testing.T) {
		c, e := connect(t, mc, nil)
		arrived := held(t, mc, "slow")
		go func() { <-arrived; c.Close() }()
		if _, err := c.DefaultCollection().Get(bg, "slow", nil); err == nil {
			t.Fatal("Get on a client closed meanwhile succeeded")
		}
		e.ledger.check(t)
		checkFailed(t, e.spans(), "get", "RequestCanceled") // RFC 0058: in flight, its socket closed
	})

	t.Run("closed with a batch in flight", func(t *testing.T) {
		c, e := connect(t, mc, nil)
		arrived := held(t, mc, "slow")
		go func() { <-arrived; c.Close() }()
		res := c.DefaultCollection().GetMany(bg, []string{"doc06", "slow", "doc07"}, nil)
		if res[1].Err == nil {
			t.Fatal("the held key of a GetMany on a client closed meanwhile succeeded")
		}
		e.ledger.check(t)
		if len(e.spans()["get"]) != 3 {
			t.Errorf("get spans %v, want 3", e.spans()["get"])
		}
	})

	t.Run("batch timeout and a scan left early", func(t *testing.T) {
		c, e := connect(t, mc, nil)
		col := c.DefaultCollection()
		held(t, mc, "slow")
		res := col.GetMany(bg, []string{"doc08", "slow"}, &client.GetManyOptions{Timeout: 100 * time.Millisecond})
		if !errors.Is(res[1].Err, client.ErrTimeout) {
			t.Fatalf("GetMany's held key: %v", res[1].Err)
		}
		sr, err := col.Scan(bg, client.RangeScan{}, &client.ScanOptions{BatchItemLimit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !sr.Next() {
			t.Fatal(sr.Err())
		}
		if err := sr.Close(); err != nil {
			t.Fatal(err)
		}
		e.ledger.check(t)
		if sp := e.spans(); len(sp["scan"]) != 1 {
			t.Errorf("%d scan spans after a scan closed early, want 1", len(sp["scan"]))
		}
	})

	t.Run("fan-outs", func(t *testing.T) {
		c, e := connect(t, mc, nil)
		col := c.DefaultCollection()
		ctx, caller := e.tp.Tracer("app").Start(bg, "caller")
		if _, err := col.GetAllReplicas(ctx, "doc02", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := col.GetAnyReplica(ctx, "doc03", nil); err != nil {
			t.Fatal(err)
		}
		for _, r := range c.Ping(ctx) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		for _, r := range col.GetMany(ctx, []string{"doc04", "doc05", "nope"}, nil) {
			if r.Err != nil && !errors.Is(r.Err, client.ErrDocumentNotFound) {
				t.Fatal(r.Err)
			}
		}
		sr, err := col.Scan(ctx, client.PrefixScan{Prefix: "doc1"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, err := range sr.All() {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != 10 {
			t.Errorf("scan: %d items, want 10", n)
		}
		caller.End()
		e.ledger.check(t)
		sp := e.spans()
		byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		for _, s := range e.sr.Ended() {
			byID[s.SpanContext().SpanID()] = s
		}
		// Every span is in the caller's trace, under a span that was
		// exported.
		for _, s := range e.sr.Ended() {
			if s.Name() == "caller" {
				continue
			}
			if _, ok := byID[s.Parent().SpanID()]; !ok || s.SpanContext().TraceID() != caller.SpanContext().TraceID() {
				t.Errorf("%s: parent %v not exported, or another trace", s.Name(), s.Parent().SpanID())
			}
		}
		// The wrapping spans are under the caller's, the reads of the
		// copies and the nodes' pings under theirs; the GetMany's gets and
		// the scan under the caller's, the scan's requests its dispatch
		// spans.
		under := map[string]map[string]int{}
		for _, s := range e.sr.Ended() {
			if p := byID[s.Parent().SpanID()]; p != nil {
				if under[p.Name()] == nil {
					under[p.Name()] = map[string]int{}
				}
				under[p.Name()][s.Name()]++
			}
		}
		want := map[string]map[string]int{
			"get_all_replicas": {"get": 1, "get_replica": 1},
			"get_any_replica":  {"get": 1, "get_replica": 1},
			"ping":             {"ping": 3},
		}
		for wrap, kids := range want {
			if len(sp[wrap]) != 1 && wrap != "ping" || under["caller"][wrap] != 1 {
				t.Errorf("%s: %d under the caller's, want 1", wrap, under["caller"][wrap])
			}
			for name, n := range kids {
				if under[wrap][name] != n {
					t.Errorf("under %s: %v, want %d %s", wrap, under[wrap], n, name)
				}
			}
		}
		if under["caller"]["get"] != 3 || under["caller"]["scan"] != 1 {
			t.Errorf("under the caller's: %v, want the GetMany's 3 gets and the scan", under["caller"])
		}
		if n := under["scan"][client.SpanDispatchToServer]; n < 65 || len(under["scan"]) != 1 {
			t.Errorf("under the scan: %v, want its 64 creates and its continues as dispatch spans", under["scan"])
		}
	})
}
