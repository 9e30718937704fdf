package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// A durable write's span carries AttributeDurability (RFC 0067's values,
// as the other SDKs write them); a write without durability, and a read,
// carry none (tracing.go: "set for a durable write only").
func TestDurableWriteSpanHasDurability(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	tr := &treeTracer{}
	c := connect(t, mc, &Options{Tracer: tr})
	col := c.DefaultCollection()
	ctx := context.Background()

	for _, tc := range []struct {
		level DurabilityLevel
		want  string
	}{{DurabilityMajority, "majority"}, {DurabilityMajorityAndPersistOnMaster, "majority_and_persist_active"},
		{DurabilityPersistToMajority, "persist_majority"}} {
		_, err := col.Upsert(ctx, "k", []byte("v"), &UpsertOptions{Durability: tc.level})
		require.NoError(t, err)
		var op *treeSpan
		for _, s := range tr.take() {
			if s.parent == nil {
				op = s
			}
		}
		require.NotNil(t, op)
		require.Equal(t, "upsert", op.name)
		if assert.Contains(t, op.attrs, AttributeDurability, "%v", tc.level) {
			assert.Equal(t, tc.want, op.attrs[AttributeDurability].String())
		}
	}

	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	_, err = col.Get(ctx, "k", nil)
	require.NoError(t, err)
	for _, s := range tr.take() {
		assert.NotContains(t, s.attrs, AttributeDurability, s.name)
	}
}

// A batch's durable writes carry it too, each on its own span.
func TestDurableBatchSpansHaveDurability(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	tr := &treeTracer{}
	c := connect(t, mc, &Options{Tracer: tr})
	col := c.DefaultCollection()
	res := col.UpsertMany(context.Background(), []UpsertManyItem{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}},
		&UpsertManyOptions{Durability: DurabilityMajority})
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	n := 0
	for _, s := range tr.take() {
		if s.parent == nil {
			n++
			assert.Equal(t, "majority", s.attrs[AttributeDurability].String(), s.name)
		}
	}
	require.Equal(t, 2, n)
}

// A durable typed write whose value fails to encode is still the durable
// write its caller asked for: its span (failed with EncodingFailure)
// carries AttributeDurability as the span of one that was sent does, so
// that a query for durable writes by their level finds its failures too.
func TestEncodeFailureSpanHasDurability(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	tr := &treeTracer{}
	c := connect(t, mc, &Options{Tracer: tr})
	col := c.DefaultCollection()
	_, err := UpsertJSON(context.Background(), col, "k", make(chan int), &UpsertOptions{Durability: DurabilityMajority})
	require.ErrorIs(t, err, ErrEncodingFailure)
	var op *treeSpan
	for _, s := range tr.take() {
		if s.parent == nil {
			op = s
		}
	}
	require.NotNil(t, op)
	require.Equal(t, "upsert", op.name)
	require.Equal(t, SpanStatusError, op.status)
	require.Contains(t, op.attrs, AttributeDurability)
	assert.Equal(t, "majority", op.attrs[AttributeDurability].String())
}
