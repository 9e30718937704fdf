package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reportLog is a slog.Handler that keeps the reports a client logs (and
// drops every other record): a test waits on it for a report, which comes
// on Close or at the end of the report's interval.
type reportLog struct {
	ch     chan logcapture.Logged
	errors chan string // messages logged at error
}

func newReportLog() (*slog.Logger, *reportLog) {
	r := &reportLog{ch: make(chan logcapture.Logged, 256), errors: make(chan string, 256)}
	return slog.New(r), r
}

func (r *reportLog) Enabled(context.Context, slog.Level) bool { return true }
func (r *reportLog) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *reportLog) WithGroup(string) slog.Handler            { return r }
func (r *reportLog) Handle(_ context.Context, rec slog.Record) error {
	switch rec.Message {
	case ThresholdReportMessage, OrphanReportMessage, LoggingMeterMessage:
	default:
		if rec.Level >= slog.LevelError {
			select {
			case r.errors <- rec.Message:
			default:
			}
		}
		return nil
	}
	l := logcapture.Of(rec, ReportAttribute)
	select {
	case r.ch <- l:
	default:
	}
	return nil
}

// next returns the next report logged with msg (others are skipped).
func (r *reportLog) next(t *testing.T, msg string) logcapture.KVReport {
	t.Helper()
	for {
		l := logcapture.Next(t, r.ch)
		if l.Msg == msg {
			return logcapture.ParseKV(t, l)
		}
	}
}

// entry returns the report's entry of operation name, failing when there
// is none.
func kvEntry(t *testing.T, k logcapture.KVReport, name string) map[string]any {
	t.Helper()
	for _, e := range k.KV.TopRequests {
		if e["operation_name"] == name {
			return e
		}
	}
	t.Fatalf("no %s in the report %+v", name, k.KV.TopRequests)
	return nil
}

// lowEncoded: decoded, a server duration of these magnitudes may be up to
// 0.2% off the server's own measure, either way (the 2-byte encoding is a
// rounded power of the microseconds), so a comparison of one with a time
// the test knows multiplies the side that must be the smaller by it.
const lowEncoded = 0.998

func us(e map[string]any, k string) time.Duration {
	v, _ := e[k].(float64)
	return time.Duration(v) * time.Microsecond
}

// localID is RFC 0067's local id of a connection: the client's id and
// the connection's own, 16 hex digits each.
var localID = regexp.MustCompile(`^[0-9A-F]{16}/[0-9a-f]{16}$`)

// A Get that a node holds 700 ms is in the slow-operation report (on by
// default, over 500 ms) with the server duration the node reported, within
// 10% of the delay (the mock counts its real processing time and the
// delay; the 2-byte encoding is within 0.2%), and RFC 0067's fields: its
// total, dispatch and server times, the request's opaque, the connection's
// local id and sockets, its timeout; never the value or the password.
func TestSlowOperationReportShowsServerDuration(t *testing.T) {
	t.Parallel()
	const delay = 700 * time.Millisecond
	const user, password, value = "reporter", "pw-never-in-a-report", "value-never-in-a-report"
	mc := newMock(t, mockcluster.Options{})
	require.NoError(t, mc.AddUser(mockcluster.User{Name: user, Password: password, Buckets: []string{"*"}}))
	logger, logs := newReportLog()
	c := connect(t, mc, &Options{Logger: logger, Username: user, Password: password})
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "slow", []byte(value), nil)
	require.NoError(t, err)
	faultGets(t, mc, "slow", mockcluster.Action{Delay: delay}, 1)
	_, err = col.Get(ctx, "slow", &GetOptions{Timeout: 10 * time.Second})
	require.NoError(t, err)
	require.NoError(t, c.Close()) // the report logs what it holds

	rep := logs.next(t, ThresholdReportMessage)
	assert.NotContains(t, rep.Raw, value, "a report never holds a document's value")
	assert.NotContains(t, rep.Raw, password, "nor the password")
	e := kvEntry(t, rep, "get")
	t.Logf("slow-operation report's get: %v", e)
	server := us(e, "last_server_duration_us")
	total, dispatch := us(e, "total_duration_us"), us(e, "last_dispatch_duration_us")
	// Within 10% of the delay; a machine so loaded that the mock's timer
	// fired late shows the node's longer time in the round trip too, which
	// then bounds it instead.
	assert.LessOrEqual(t, float64(server), max(1.1*float64(delay), float64(dispatch)/lowEncoded),
		"server duration %v (round trip %v)", server, dispatch)
	assert.GreaterOrEqual(t, float64(server), lowEncoded*float64(delay), "the node held it at least the delay")
	assert.Equal(t, e["total_server_duration_us"], e["last_server_duration_us"])
	assert.GreaterOrEqual(t, float64(dispatch), lowEncoded*float64(server), "the round trip holds the server's time")
	assert.GreaterOrEqual(t, total, dispatch)
	assert.Equal(t, float64(10000), e["timeout_ms"])
	assert.Regexp(t, localID, e["last_local_id"])
	assert.Regexp(t, `^127\.0\.0\.1:\d+$`, e["last_local_socket"])
	assert.Regexp(t, `^127\.0\.0\.1:\d+$`, e["last_remote_socket"])
	assert.Regexp(t, `^0x[0-9a-f]+$`, e["operation_id"])
}

// An operation that timed out after its request was written, and whose
// answer came later, is counted in the orphan report (on by default), with
// its operation, timeout, the time from its dispatch to the late answer,
// and the server's duration; so are a batch's (GetMany) and a ping's.
func TestOrphanReportCountsLateAnswers(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	mc := newMock(t, mockcluster.Options{})
	logger, logs := newReportLog()
	c := connect(t, mc, &Options{Logger: logger, KVTimeout: 100 * time.Millisecond,
		OrphanReporting: OrphanReportingOptions{Interval: 10 * time.Millisecond}})
	col := c.DefaultCollection()
	ctx := context.Background()
	// A request is an orphan only if it was written before its deadline,
	// which a machine that stalls for the 50 ms of the timeout may miss:
	// each operation is tried again on a key of its own until its error
	// says its request was written (one not written reaches no node and
	// is no orphan).
	slow := func(key string) {
		_, err := col.Upsert(ctx, key, []byte("v"), &UpsertOptions{Timeout: 10 * time.Second})
		require.NoError(t, err)
		faultGets(t, mc, key, mockcluster.Action{Delay: delay}, 1)
	}
	var err error
	for i := 0; ; i++ {
		key := fmt.Sprintf("late-%d", i)
		slow(key)
		_, err = col.Get(ctx, key, &GetOptions{Timeout: 50 * time.Millisecond})
		require.ErrorIs(t, err, ErrTimeout)
		if timedOutWritten(err) {
			break
		}
		require.Less(t, i, 100, "no Get was written within its 50 ms in 100 tries: %v", err)
	}
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	rep := logs.next(t, OrphanReportMessage) // the late answer came: its report
	require.EqualValues(t, 1, rep.KV.TotalCount)
	e := kvEntry(t, rep, "get")
	t.Logf("orphan report's get: %v", e)
	assert.Equal(t, float64(50), e["timeout_ms"])
	assert.Equal(t, "0x"+strconv.FormatUint(uint64(kv.Opaque), 16), e["operation_id"])
	server, total := us(e, "last_server_duration_us"), us(e, "total_duration_us")
	assert.GreaterOrEqual(t, float64(server), lowEncoded*float64(delay))
	assert.GreaterOrEqual(t, float64(total), lowEncoded*float64(server), "from the dispatch to the late answer")
	assert.Regexp(t, localID, e["last_local_id"])

	for i := 0; ; i++ {
		key := fmt.Sprintf("late-batch-%d", i)
		slow(key)
		res := col.GetMany(ctx, []string{key}, &GetManyOptions{Timeout: 50 * time.Millisecond})
		require.ErrorIs(t, res[0].Err, ErrTimeout)
		if timedOutWritten(res[0].Err) {
			break
		}
		require.Less(t, i, 100, "no GetMany was written within its 50 ms in 100 tries: %v", res[0].Err)
	}
	rep = logs.next(t, OrphanReportMessage)
	require.EqualValues(t, 1, rep.KV.TotalCount)
	assert.Equal(t, float64(50), kvEntry(t, rep, "get")["timeout_ms"])

	h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpNoop}},
		Action: mockcluster.Action{Delay: delay}, Times: 1})
	defer h.Remove()
	for i := 0; ; i++ {
		timedOut, written := 0, false
		for _, p := range c.Ping(ctx) {
			if p.Err != nil {
				require.ErrorIs(t, p.Err, ErrTimeout)
				timedOut++
				written = written || timedOutWritten(p.Err)
			}
		}
		if written {
			require.Equal(t, 1, timedOut, "the node whose NOOP was held")
			break
		}
		require.Less(t, i, 100, "no Ping's NOOP was written within the 100 ms KVTimeout in 100 tries")
	}
	rep = logs.next(t, OrphanReportMessage)
	require.EqualValues(t, 1, rep.KV.TotalCount)
	assert.Equal(t, float64(100), kvEntry(t, rep, "ping")["timeout_ms"])
}

// timedOutWritten reports whether err, an operation's timeout, says its
// last request was written (in flight when the deadline came).
func timedOutWritten(err error) bool {
	var te *retry.TimeoutError
	var re *conn.RequestError
	return errors.As(err, &te) && errors.As(te.LastErr, &re) && re.Written
}

// treeTracer records spans with their parents, times, attributes,
// events and status.
type treeTracer struct {
	mu    sync.Mutex
	spans []*treeSpan
}

type treeSpan struct {
	t          *treeTracer
	name       string
	parent     RequestSpan
	start, end time.Time
	attrs      map[string]slog.Value
	events     []treeEvent
	status     SpanStatus
	ended      int
}

type treeEvent struct {
	name  string
	at    time.Time
	attrs []slog.Attr
}

func (tr *treeTracer) RequestSpan(_ context.Context, name string, parent RequestSpan, start time.Time) RequestSpan {
	s := &treeSpan{t: tr, name: name, parent: parent, start: start, attrs: map[string]slog.Value{}}
	tr.mu.Lock()
	tr.spans = append(tr.spans, s)
	tr.mu.Unlock()
	return s
}

func (s *treeSpan) SetAttribute(k string, v slog.Value) {
	s.t.mu.Lock()
	s.attrs[k] = v
	s.t.mu.Unlock()
}

func (s *treeSpan) AddEvent(name string, at time.Time, attrs ...slog.Attr) {
	s.t.mu.Lock()
	s.events = append(s.events, treeEvent{name, at, append([]slog.Attr(nil), attrs...)})
	s.t.mu.Unlock()
}

func (s *treeSpan) SetStatus(st SpanStatus) {
	s.t.mu.Lock()
	s.status = st
	s.t.mu.Unlock()
}

func (s *treeSpan) End(at time.Time) {
	s.t.mu.Lock()
	s.end = at
	s.ended++
	s.t.mu.Unlock()
}

// take returns the spans recorded, and forgets them.
func (tr *treeTracer) take() []*treeSpan {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	s := tr.spans
	tr.spans = nil
	return s
}

// children returns the spans under parent.
func children(spans []*treeSpan, parent RequestSpan) []*treeSpan {
	var out []*treeSpan
	for _, s := range spans {
		if s.parent == parent {
			out = append(out, s)
		}
	}
	return out
}

// Operations' spans: each under the span its options name, else the
// context's; RFC 0067's attributes; a dispatch span per request, under it,
// with the connection's local id and sockets; a compressed value's
// encoding span; error.type and status for a failure (a missing
// document's status stays Ok); every span ended once, children within
// their parent. The meter gets each operation's latency.
func TestOperationSpans(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	tr := &treeTracer{}
	m := &countingMeter{}
	c := connect(t, mc, &Options{Tracer: tr, Meter: m})
	col := c.DefaultCollection()
	fromCtx, fromOpts := &treeSpan{t: tr, name: "ctx"}, &treeSpan{t: tr, name: "opts"}
	ctx := ContextWithParentSpan(context.Background(), fromCtx)
	value := []byte(fmt.Sprintf("%0500d", 0)) // compresses

	_, err := col.Upsert(ctx, "k", value, &UpsertOptions{ParentSpan: fromOpts})
	require.NoError(t, err)
	_, err = col.Get(ctx, "k", nil)
	require.NoError(t, err)
	_, err = col.Get(ctx, "missing", nil)
	require.ErrorIs(t, err, ErrDocumentNotFound)
	_, err = col.Insert(ctx, "k", value, nil)
	require.ErrorIs(t, err, ErrDocumentExists)

	spans := tr.take()
	ops := append(children(spans, fromOpts), children(spans, fromCtx)...)
	require.Len(t, ops, 4, "the upsert under its options' parent, the rest under the context's")
	want := []struct {
		name, errType string
		status        SpanStatus
	}{{"upsert", "", SpanStatusOK}, {"get", "", SpanStatusOK}, {"get", "DocumentNotFound", SpanStatusOK}, {"insert", "DocumentExists", SpanStatusError}}
	for i, op := range ops {
		w := want[i]
		require.Equal(t, w.name, op.name)
		assert.Equal(t, 1, op.ended, "%s ended once", op.name)
		assert.Equal(t, w.status, op.status, op.name)
		for k, v := range map[string]string{AttributeSystemName: "couchbase", AttributeService: "kv", AttributeOperationName: w.name,
			AttributeBucketName: mockcluster.DefaultBucket, AttributeScopeName: "_default", AttributeCollectionName: "_default"} {
			assert.Equal(t, v, op.attrs[k].String(), "%s %s", op.name, k)
		}
		assert.Equal(t, int64(0), op.attrs[AttributeRetries].Int64(), op.name)
		if w.errType != "" {
			assert.Equal(t, w.errType, op.attrs[AttributeErrorType].String())
		} else {
			assert.NotContains(t, op.attrs, AttributeErrorType)
		}
		var dispatches, encodings int
		for _, ch := range children(spans, op) {
			assert.Equal(t, 1, ch.ended)
			assert.False(t, ch.start.Before(op.start) || ch.end.After(op.end), "%s's %s within it", op.name, ch.name)
			switch ch.name {
			case SpanDispatchToServer:
				dispatches++
				assert.Regexp(t, localID, ch.attrs[AttributeLocalID].String())
				assert.Equal(t, "tcp", ch.attrs[AttributeNetworkTransport].String())
				assert.Equal(t, "127.0.0.1", ch.attrs[AttributePeerAddress].String())
				assert.NotZero(t, ch.attrs[AttributePeerPort].Int64())
				// RFC 0067 (stable conventions) removed the local address and port.
				assert.NotContains(t, ch.attrs, "network.local.address")
				assert.NotContains(t, ch.attrs, "network.local.port")
				assert.NotZero(t, ch.attrs[AttributeServerPort].Int64())
				assert.NotZero(t, ch.attrs[AttributeOperationID].Int64())
				assert.Contains(t, ch.attrs, AttributeServerDuration)
			case SpanRequestEncoding:
				encodings++
			}
		}
		assert.Equal(t, 1, dispatches, op.name)
		if w.name == "upsert" || w.name == "insert" {
			assert.Equal(t, 1, encodings, "%s's value was compressed", w.name)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Len(t, m.values["upsert/"], 1)
	assert.Len(t, m.values["get/"], 1)
	assert.Len(t, m.values["get/DocumentNotFound"], 1)
	assert.Len(t, m.values["insert/DocumentExists"], 1)
}

// A tracer that panics in every call loses its spans, and the operations
// go on (the panics logged at error); one that blocks holds only the
// operation calling it: other operations on the same connection go
// through meanwhile, since no tracer call runs on a connection's reader
// or writer, nor under a lock.
func TestTracerThatPanicsOrBlocksHoldsNoConnection(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	logger, logs := newReportLog()
	c := connect(t, mc, &Options{Tracer: panicky{}, Meter: panicky{}, Logger: logger})
	ctx := context.Background()
	col := c.DefaultCollection()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	r, err := col.Get(ctx, "k", nil)
	require.NoError(t, err)
	require.Equal(t, "v", string(r.Value))
	select {
	case msg := <-logs.errors:
		assert.Contains(t, msg, "panicked")
	case <-time.After(time.Minute):
		t.Fatal("no panic logged")
	}

	bt := &blockingTracer{entered: make(chan struct{}), release: make(chan struct{})}
	c2 := connect(t, mc, &Options{Tracer: bt})
	col2 := c2.DefaultCollection()
	held := make(chan error, 1)
	go func() {
		_, err := col2.Get(ctx, "k", nil)
		held <- err
	}()
	<-bt.entered // the first get's span is ending, and blocks
	for range 20 {
		r, err := col2.Get(ctx, "k", nil)
		require.NoError(t, err)
		require.Equal(t, "v", string(r.Value))
	}
	select {
	case err := <-held:
		t.Fatalf("the get whose tracer blocks returned: %v", err)
	default:
	}
	close(bt.release)
	require.NoError(t, <-held)
}

// blockingTracer's first operation span blocks in End until released.
type blockingTracer struct {
	once             sync.Once
	entered, release chan struct{}
}

func (b *blockingTracer) RequestSpan(_ context.Context, name string, parent RequestSpan, _ time.Time) RequestSpan {
	return &blockingSpan{b: b, op: parent == nil && name == "get"}
}

type blockingSpan struct {
	b  *blockingTracer
	op bool
}

func (s *blockingSpan) SetAttribute(string, slog.Value)          {}
func (s *blockingSpan) AddEvent(string, time.Time, ...slog.Attr) {}
func (s *blockingSpan) SetStatus(SpanStatus)                     {}
func (s *blockingSpan) End(time.Time) {
	if !s.op {
		return
	}
	first := false
	s.b.once.Do(func() { first = true })
	if first {
		close(s.b.entered)
		<-s.b.release
	}
}

// With Options.Meter unset the logging meter records every operation's
// latency and logs its percentiles (on Close here, every 10 minutes
// otherwise).
func TestLoggingMeterIsTheDefaultMeter(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	logger, logs := newReportLog()
	c := connect(t, mc, &Options{Logger: logger})
	ctx := context.Background()
	col := c.DefaultCollection()
	for range 3 {
		_, err := col.Upsert(ctx, "k", []byte("v"), nil)
		require.NoError(t, err)
	}
	_, err := col.Get(ctx, "k", nil)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	for {
		l := logcapture.Next(t, logs.ch)
		if l.Msg != LoggingMeterMessage {
			continue
		}
		var rep struct {
			Operations map[string]map[string]struct {
				TotalCount uint64 `json:"total_count"`
			} `json:"operations"`
		}
		require.NoError(t, json.Unmarshal(l.Report, &rep), "%s", l.Report)
		require.EqualValues(t, 3, rep.Operations["kv"]["upsert"].TotalCount, "%s", l.Report)
		require.EqualValues(t, 1, rep.Operations["kv"]["get"].TotalCount, "%s", l.Report)
		return
	}
}
