package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A Durability that is no DurabilityLevel is an argument refused before
// anything is routed or sent, as the KeyValueError documentation has it
// (Node "", no retry), on every kind of write alike, and on a memcached
// bucket or memcached:// too (not a missing feature: a bad argument).
func TestUnknownDurabilityLevelIsRefusedBeforeRouting(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	bad := DurabilityLevel(9)
	initial := uint64(1)
	for op, call := range map[string]func() error{
		"Upsert": func() error { _, err := col.Upsert(ctx, "k", nil, &UpsertOptions{Durability: bad}); return err },
		"Remove": func() error { _, err := col.Remove(ctx, "k", &RemoveOptions{Durability: bad}); return err },
		"Increment": func() error {
			_, err := col.Increment(ctx, "n", &IncrementOptions{Initial: &initial, Durability: bad})
			return err
		},
		"MutateIn": func() error {
			_, err := col.MutateIn(ctx, "k", []MutateInSpec{UpsertSpec("a", []byte("1"), nil)},
				&MutateInOptions{StoreSemantic: StoreSemanticsUpsert, Durability: bad})
			return err
		},
	} {
		err := call()
		require.ErrorIs(t, err, ErrInvalidArgument, op)
		var kv *KeyValueError
		require.ErrorAs(t, err, &kv, op)
		assert.Empty(t, kv.Node, "%s: refused before routing: %v", op, err)
		assert.Contains(t, err.Error(), "DurabilityLevel(9)", op)
	}
	for _, opc := range []memdx.OpCode{memdx.OpSet, memdx.OpDelete, memdx.OpIncrement, memdx.OpSubdocMultiMutation} {
		assert.Zero(t, mc.RequestCount(opc), "%s sent", opc)
	}
	r := col.UpsertMany(ctx, []UpsertManyItem{{Key: "k"}}, &UpsertManyOptions{Durability: bad})
	require.ErrorIs(t, r[0].Err, ErrInvalidArgument)
}
