package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// A replica read call made after Client.Close is refused as a plain
// operation is (ErrClosed, nothing sent), and is shown to the observers
// as a plain operation refused so is: not at all. It recorded a
// get_any_replica / get_all_replicas point (error.type RequestCanceled)
// and ended a span, for a call that never ran, while a Get refused the
// same way records none.
func TestReplicaCallAfterCloseIsObservedAsAPlainOperation(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	m := &countingMeter{}
	tr := &treeTracer{}
	c := connect(t, mc, &Options{Meter: m, Tracer: tr})
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "r", []byte("v"), nil)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	m.mu.Lock()
	m.values = nil
	m.mu.Unlock()
	tr.take()

	_, err = col.Get(ctx, "r", nil)
	require.ErrorIs(t, err, ErrClosed)
	_, err = col.GetAnyReplica(ctx, "r", nil)
	require.ErrorIs(t, err, ErrClosed)
	_, err = col.GetAllReplicas(ctx, "r", nil)
	require.ErrorIs(t, err, ErrClosed)

	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Empty(t, m.values, "points recorded for calls refused after Close")
	var names []string
	for _, s := range tr.take() {
		names = append(names, s.name)
	}
	assert.Empty(t, names, "spans of calls refused after Close")
}
