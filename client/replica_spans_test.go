package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// GetAnyReplica and GetAllReplicas run a read per copy; RFC 0067 wants
// such an operation to have a span of its own, get_any_replica or
// get_all_replicas, with the operation's attributes, the reads of the
// copies under it (each with its dispatch spans): the caller's trace then
// shows the call it made, rather than up to four unrelated reads.
func TestReplicaReadsHaveAWrappingSpan(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	tr := &treeTracer{}
	col := connect(t, mc, &Options{Tracer: tr}).DefaultCollection()
	caller := &treeSpan{t: tr, name: "caller"}
	ctx := ContextWithParentSpan(context.Background(), caller)
	_, err := col.Upsert(ctx, "r", []byte("v"), nil)
	require.NoError(t, err)
	tr.take()

	for _, tc := range []struct {
		name, key, errType string
		run                func() error
	}{
		{"get_all_replicas", "r", "", func() error { _, err := col.GetAllReplicas(ctx, "r", nil); return err }},
		{"get_any_replica", "r", "", func() error { _, err := col.GetAnyReplica(ctx, "r", nil); return err }},
		{"get_any_replica", "missing", "DocumentUnretrievable", func() error {
			_, err := col.GetAnyReplica(ctx, "missing", &GetReplicaOptions{ParentSpan: caller})
			return err
		}},
		{"get_all_replicas", "missing", "DocumentUnretrievable", func() error {
			_, err := col.GetAllReplicas(ctx, "missing", &GetReplicaOptions{ParentSpan: caller})
			return err
		}},
	} {
		err := tc.run()
		if tc.errType == "" {
			require.NoError(t, err, tc.name)
		}
		spans := tr.take()
		top := children(spans, caller)
		require.Len(t, top, 1, "%s: one span under the caller's, not one per copy", tc.name)
		w := top[0]
		assert.Equal(t, tc.name, w.name)
		assert.Equal(t, 1, w.ended, tc.name)
		assert.Equal(t, SpanStatusOK, w.status, tc.name)
		for k, v := range map[string]string{AttributeSystemName: "couchbase", AttributeService: "kv", AttributeOperationName: tc.name,
			AttributeBucketName: mockcluster.DefaultBucket, AttributeScopeName: "_default", AttributeCollectionName: "_default"} {
			assert.Equal(t, v, w.attrs[k].String(), "%s %s", tc.name, k)
		}
		if tc.errType != "" {
			assert.Equal(t, tc.errType, w.attrs[AttributeErrorType].String())
		} else {
			assert.NotContains(t, w.attrs, AttributeErrorType)
		}
		reads := children(spans, w)
		require.Len(t, reads, 2, "%s: the active copy's read and the replica's", tc.name)
		for _, r := range reads {
			assert.Contains(t, []string{"get", "get_replica"}, r.name)
			assert.Equal(t, 1, r.ended)
			assert.False(t, r.start.Before(w.start) || r.end.After(w.end), "%s's %s within it", tc.name, r.name)
		}
	}
}

// A Ping is a span over the NOOP each node is sent (RFC 0067 names ping
// among the calls that run several requests under a span of their own).
func TestPingHasAWrappingSpan(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 3})
	tr := &treeTracer{}
	c := connect(t, mc, &Options{Tracer: tr})
	caller := &treeSpan{t: tr, name: "caller"}
	for _, r := range c.Ping(ContextWithParentSpan(context.Background(), caller)) {
		require.NoError(t, r.Err, r.Node)
	}
	spans := tr.take()
	top := children(spans, caller)
	require.Len(t, top, 1, "one span under the caller's, not one per node")
	w := top[0]
	assert.Equal(t, "ping", w.name)
	assert.Equal(t, 1, w.ended)
	assert.Equal(t, SpanStatusOK, w.status)
	assert.Equal(t, "ping", w.attrs[AttributeOperationName].String())
	nodes := children(spans, w)
	require.Len(t, nodes, 3, "a NOOP per node")
	for _, n := range nodes {
		assert.Equal(t, "ping", n.name)
		assert.Equal(t, 1, n.ended)
		assert.Len(t, children(spans, n), 1, "its dispatch span")
	}
}
