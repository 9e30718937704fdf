package client

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// Every span carries the cluster's labels when the cluster publishes them
// (tracing.go: "Every span: AttributeSystemName = SystemCouchbase, and the
// cluster labels when the cluster publishes them"): the mock's configs
// carry clusterName and clusterUUID. Every span, the request_encoding
// span included, has db.system.name.
func TestSpansHaveClusterLabels(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	tr := &treeTracer{}
	c := connect(t, mc, &Options{Tracer: tr})
	value := []byte(fmt.Sprintf("%0500d", 0)) // compresses: a request_encoding span too
	_, err := c.DefaultCollection().Upsert(context.Background(), "k", value, nil)
	require.NoError(t, err)
	spans := tr.take()
	require.Len(t, spans, 3, "upsert, request_encoding, dispatch_to_server")
	for _, s := range spans {
		assert.Equal(t, SystemCouchbase, s.attrs[AttributeSystemName].String(), s.name)
		assert.Equal(t, "mockcluster", s.attrs[AttributeClusterName].String(), s.name)
		assert.NotEmpty(t, s.attrs[AttributeClusterUUID].String(), s.name)
	}
}

// The operation metric carries the cluster's labels too (RFC 0067's
// db.client.operation.duration tags: "couchbase.cluster.name and
// couchbase.cluster.uuid", as on every span), so that one dashboard can
// tell the latencies of two clusters apart.
func TestMetricHasClusterLabels(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	m := &countingMeter{}
	c := connect(t, mc, &Options{Meter: m})
	_, err := c.DefaultCollection().Get(context.Background(), "missing", nil)
	require.ErrorIs(t, err, ErrDocumentNotFound)
	m.mu.Lock()
	defer m.mu.Unlock()
	require.NotEmpty(t, m.asked)
	for _, attrs := range m.asked {
		assert.Equal(t, "mockcluster", attrs[AttributeClusterName], "%v", attrs)
		assert.NotEmpty(t, attrs[AttributeClusterUUID], "%v", attrs)
	}
}
