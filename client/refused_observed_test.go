package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/mockcluster"
)

// connectObserved connects to mc with a treeTracer and a countingMeter.
func connectObserved(t *testing.T, mc *mockcluster.Cluster) (*Client, *treeTracer, *countingMeter) {
	t.Helper()
	tr, m := &treeTracer{}, &countingMeter{}
	return connect(t, mc, &Options{Tracer: tr, Meter: m}), tr, m
}

// reset forgets the latency points recorded so far.
func (m *countingMeter) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values = nil
}

// assertPoints asserts that n latency points were recorded under key
// (operation/error type).
func (m *countingMeter) assertPoints(t *testing.T, key string, n int, msg string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Len(t, m.values[key], n, "%s: %v", msg, m.values)
}

// An operation its caller called is an operation to its observers even
// when it refuses its arguments before any attempt (RFC 0067: a span for
// each operation the caller calls, started as soon as it is called; its
// metric records every operation, failures included, by error.type): its
// span, under the parent its options or its context name, failed with
// error.type InvalidArgument, and its latency point. A tracer's user
// looking for the failed calls of a service saw none of these: a Get of
// an empty key made no span and no point, while the same Get sent and
// refused by the server did. A durable write refused for its key still
// carries the durability asked for (not one refused for its level).
func TestRefusedOperationsAreObserved(t *testing.T) {
	t.Parallel()
	c, tr, m := connectObserved(t, newMock(t, mockcluster.Options{}))
	col := c.DefaultCollection()
	ctx := context.Background()
	parent := &treeSpan{t: tr, name: "caller"}
	var nilCtx context.Context

	for _, tc := range []struct {
		name, span string
		parent     RequestSpan
		durability string // "": none
		call       func() error
	}{
		{"empty key", "get", nil, "", func() error { _, err := col.Get(ctx, "", nil); return err }},
		{"negative timeout, ParentSpan", "get", parent, "", func() error {
			_, err := col.Get(ctx, "k", &GetOptions{Timeout: -1, ParentSpan: parent})
			return err
		}},
		{"context's parent", "get_and_touch", parent, "", func() error {
			_, err := col.GetAndTouch(ContextWithParentSpan(ctx, parent), "k", -1, nil)
			return err
		}},
		{"nil context", "get", nil, "", func() error { _, err := col.Get(nilCtx, "k", nil); return err }},
		{"unknown durability", "upsert", nil, "", func() error {
			_, err := col.Upsert(ctx, "k", []byte("v"), &UpsertOptions{Durability: DurabilityLevel(9)})
			return err
		}},
		{"durable write, empty key", "upsert", nil, "majority", func() error {
			_, err := col.Upsert(ctx, "", []byte("v"), &UpsertOptions{Durability: DurabilityMajority})
			return err
		}},
		{"no specs", "lookup_in", nil, "", func() error { _, err := col.LookupIn(ctx, "k", nil, nil); return err }},
		{"mutate_in, no specs", "mutate_in", nil, "", func() error { _, err := col.MutateIn(ctx, "k", nil, nil); return err }},
		{"projection, empty path", "get", parent, "", func() error {
			_, err := col.Get(ctx, "k", &GetOptions{Project: []string{""}, ParentSpan: parent})
			return err
		}},
		{"scan, negative concurrency", "scan", parent, "", func() error {
			_, err := col.Scan(ctx, RangeScan{}, &ScanOptions{Concurrency: -1, ParentSpan: parent})
			return err
		}},
		{"scan, nil context", "scan", nil, "", func() error { _, err := col.Scan(nilCtx, RangeScan{}, nil); return err }},
		{"get_any_replica, nil context", "get_any_replica", parent, "", func() error {
			_, err := col.GetAnyReplica(nilCtx, "k", &GetReplicaOptions{ParentSpan: parent})
			return err
		}},
		{"get_all_replicas, nil context", "get_all_replicas", nil, "", func() error {
			_, err := col.GetAllReplicas(nilCtx, "k", nil)
			return err
		}},
		{"lookup_in_any_replica, nil context", "lookup_in_any_replica", parent, "", func() error {
			_, err := col.LookupInAnyReplica(nilCtx, "k", []LookupInSpec{GetSpec("a", nil)},
				&LookupInAnyReplicaOptions{ParentSpan: parent})
			return err
		}},
		{"lookup_in_all_replicas, nil context", "lookup_in_all_replicas", nil, "", func() error {
			_, err := col.LookupInAllReplicas(nilCtx, "k", []LookupInSpec{GetSpec("a", nil)}, nil)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr.take()
			m.reset()
			require.ErrorIs(t, tc.call(), ErrInvalidArgument)
			spans := tr.take()
			require.Len(t, spans, 1, "one span, the operation's: nothing was encoded or sent")
			s := spans[0]
			assert.Equal(t, tc.span, s.name)
			assert.Equal(t, tc.parent, s.parent)
			assert.Equal(t, 1, s.ended)
			assert.Equal(t, SpanStatusError, s.status)
			assert.Equal(t, "InvalidArgument", s.attrs[AttributeErrorType].String())
			assert.Equal(t, int64(0), s.attrs[AttributeRetries].Int64())
			if tc.durability != "" {
				assert.Equal(t, tc.durability, s.attrs[AttributeDurability].String())
			} else {
				assert.NotContains(t, s.attrs, AttributeDurability)
			}
			m.assertPoints(t, tc.span+"/InvalidArgument", 1, "its latency point")
		})
	}
}

// A batch's keys are operations each: one refused for its key is one
// span and one point, beside the others'.
func TestRefusedBatchKeyIsObserved(t *testing.T) {
	t.Parallel()
	c, tr, m := connectObserved(t, newMock(t, mockcluster.Options{}))
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "a", []byte("v"), nil)
	require.NoError(t, err)
	tr.take()
	res := col.GetMany(ctx, []string{"a", ""}, nil)
	require.NoError(t, res[0].Err)
	require.ErrorIs(t, res[1].Err, ErrInvalidArgument)
	var refused int
	for _, s := range tr.take() {
		if s.parent == nil {
			assert.Equal(t, "get", s.name)
			if s.status == SpanStatusError {
				refused++
				assert.Equal(t, "InvalidArgument", s.attrs[AttributeErrorType].String())
			}
		}
	}
	assert.Equal(t, 1, refused)
	m.assertPoints(t, "get/InvalidArgument", 1, "the key refused")
}

// A call that reads several copies is one operation: one whose key is
// refused is its wrapping span and point, failed, and no span or point of
// each copy's read refused with it.
func TestRefusedReplicaCallIsOneOperation(t *testing.T) {
	t.Parallel()
	c, tr, m := connectObserved(t, newMock(t, mockcluster.Options{}))
	col := c.DefaultCollection()
	_, err := col.GetAnyReplica(context.Background(), "", nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	var names []string
	for _, s := range tr.take() {
		names = append(names, s.name)
	}
	assert.Equal(t, []string{"get_any_replica"}, names)
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Len(t, m.values, 1, "%v", m.values)
	assert.Len(t, m.values["get_any_replica/InvalidArgument"], 1, "%v", m.values)
}

// A batch given a nil context refuses each key at its begin: each is an
// operation refused, a span and a point of its own.
func TestBatchRefusedAtBeginIsObserved(t *testing.T) {
	t.Parallel()
	c, tr, m := connectObserved(t, newMock(t, mockcluster.Options{}))
	col := c.DefaultCollection()
	var nilCtx context.Context
	for _, r := range col.RemoveMany(nilCtx, []string{"a", "b"}, nil) {
		require.ErrorIs(t, r.Err, ErrInvalidArgument)
	}
	var names []string
	for _, s := range tr.take() {
		names = append(names, s.name)
		assert.Equal(t, SpanStatusError, s.status)
		assert.Equal(t, "InvalidArgument", s.attrs[AttributeErrorType].String())
	}
	assert.Equal(t, []string{"remove", "remove"}, names)
	m.assertPoints(t, "remove/InvalidArgument", 2, "a point per key")
}

// On memcached://, an operation memcached has no command for is refused
// before any attempt (ErrFeatureNotAvailable): an operation all the same.
func TestMemcachedRefusedOperationIsObserved(t *testing.T) {
	t.Parallel()
	tr := &treeTracer{}
	m := &countingMeter{}
	c := memcachedClient(t, memcachedtest.Start(t), &Options{Tracer: tr, Meter: m})
	_, err := c.DefaultCollection().GetAndLock(context.Background(), "k", time.Second, nil)
	require.ErrorIs(t, err, ErrFeatureNotAvailable)
	spans := tr.take()
	require.Len(t, spans, 1)
	assert.Equal(t, "get_and_lock", spans[0].name)
	assert.Equal(t, SpanStatusError, spans[0].status)
	assert.Equal(t, "FeatureNotAvailable", spans[0].attrs[AttributeErrorType].String())
	m.assertPoints(t, "get_and_lock/FeatureNotAvailable", 1, "its latency point")
}

// The requests to each node (Stats, Version, Flush) are operations to
// their observers when sent (a span and a point per node, "stats",
// "version", "flush": names RFC 0067 allows as the client's own), and so
// when refused before any node is asked: one span and one point, failed
// with the refusal's error.type. A Ping refused for its nil context is
// RFC 0067's ping: its wrapping span, failed, over a refused NOOP per node
// (a span and a point each), as a Ping sent is; PingReport's ping alike.
func TestRefusedNodeRequestsAreObserved(t *testing.T) {
	t.Parallel()
	c, tr, m := connectObserved(t, newMock(t, mockcluster.Options{Nodes: 2}))
	ctx := context.Background()
	var nilCtx context.Context
	reset := func() {
		tr.take()
		m.reset()
	}

	for _, tc := range []struct {
		name, span, errType string
		call                func() error
	}{
		{"stats, nil context", "stats", "InvalidArgument", func() error { _, err := c.Stats(nilCtx, "", nil); return err }},
		{"stats, negative timeout", "stats", "InvalidArgument", func() error {
			_, err := c.Stats(ctx, "", &StatsOptions{Timeout: -1})
			return err
		}},
		{"stats, unknown node", "stats", "InvalidArgument", func() error {
			_, err := c.Stats(ctx, "", &StatsOptions{Node: "nowhere:1"})
			return err
		}},
		{"version, nil context", "version", "InvalidArgument", func() error { _, err := c.Version(nilCtx, nil); return err }},
		{"flush, a Couchbase bucket", "flush", "FeatureNotAvailable", func() error { _, err := c.Flush(ctx, nil); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reset()
			require.Error(t, tc.call())
			spans := tr.take()
			require.Len(t, spans, 1, "one span: no node was asked")
			s := spans[0]
			assert.Equal(t, tc.span, s.name)
			assert.Nil(t, s.parent)
			assert.Equal(t, 1, s.ended)
			assert.Equal(t, SpanStatusError, s.status)
			assert.Equal(t, tc.errType, s.attrs[AttributeErrorType].String())
			m.assertPoints(t, tc.span+"/"+tc.errType, 1, "its latency point")
		})
	}

	for _, tc := range []struct {
		name string
		call func() []error
	}{
		{"ping", func() (errs []error) {
			for _, r := range c.Ping(nilCtx) {
				errs = append(errs, r.Err)
			}
			return errs
		}},
		{"ping report", func() (errs []error) {
			for _, e := range c.PingReport(nilCtx, nil).Endpoints {
				errs = append(errs, e.Err)
			}
			return errs
		}},
	} {
		t.Run(tc.name+", nil context", func(t *testing.T) {
			reset()
			errs := tc.call()
			require.Len(t, errs, 2)
			for _, err := range errs {
				require.ErrorIs(t, err, ErrInvalidArgument)
			}
			spans := tr.take()
			top := children(spans, nil)
			require.Len(t, top, 1, "the ping's wrapping span")
			w := top[0]
			assert.Equal(t, "ping", w.name)
			assert.Equal(t, 1, w.ended)
			assert.Equal(t, SpanStatusError, w.status)
			assert.Equal(t, "InvalidArgument", w.attrs[AttributeErrorType].String())
			nodes := children(spans, w)
			require.Len(t, nodes, 2, "a NOOP per node, refused")
			for _, n := range nodes {
				assert.Equal(t, "ping", n.name)
				assert.Equal(t, 1, n.ended)
				assert.Equal(t, SpanStatusError, n.status)
				assert.Equal(t, "InvalidArgument", n.attrs[AttributeErrorType].String())
			}
			m.assertPoints(t, "ping/InvalidArgument", 2, "a point per node, as a ping sent has")
		})
	}
}

// A typed write encodes its value before its operation exists; refused
// afterwards for an argument (its key, its Timeout) or for its context,
// it is the same operation as one sent: its span begins when the encoding
// did, with the request_encoding span under it (RFC 0067), as the span of
// one whose value did not encode does. Refused for its key, it lost the
// encoding: the caller's value was encoded and the span said nothing of
// it, starting after it.
func TestRefusedTypedWriteShowsItsEncoding(t *testing.T) {
	t.Parallel()
	c, tr, m := connectObserved(t, newMock(t, mockcluster.Options{}))
	col := c.DefaultCollection()
	var nilCtx context.Context
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"empty key, durable", func() error {
			_, err := UpsertJSON(context.Background(), col, "", 1, &UpsertOptions{Durability: DurabilityMajority})
			return err
		}},
		{"negative timeout", func() error {
			_, err := UpsertJSON(context.Background(), col, "k", 1, &UpsertOptions{Timeout: -1})
			return err
		}},
		{"nil context", func() error { _, err := UpsertJSON(nilCtx, col, "k", 1, nil); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr.take()
			m.reset()
			require.ErrorIs(t, tc.call(), ErrInvalidArgument)
			spans := tr.take()
			require.Len(t, spans, 2, "the write's span and its encoding's")
			op, enc := spans[0], spans[1]
			assert.Equal(t, "upsert", op.name)
			assert.Equal(t, SpanStatusError, op.status)
			assert.Equal(t, SpanRequestEncoding, enc.name)
			assert.Equal(t, RequestSpan(op), enc.parent)
			assert.Equal(t, enc.start, op.start, "the operation began with its encoding")
			assert.Equal(t, "InvalidArgument", op.attrs[AttributeErrorType].String())
			if tc.name == "empty key, durable" {
				assert.Equal(t, "majority", op.attrs[AttributeDurability].String())
			}
			m.assertPoints(t, "upsert/InvalidArgument", 1, "its latency point")
		})
	}
}
