package client

import (
	"context"
	"testing"

	"github.com/kvwire/kvwire/mockcluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Couchbase Server reads a counter as memcached's safe_strtoull does: a
// number followed by white space (a value written with a trailing newline)
// counts, and so does one after white space or a '+'. Increment works on
// such a document; one that is not a number fails with ErrDeltaInvalid.
func TestIncrementTrailingNewline(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "n", []byte("41\n"), nil)
	require.NoError(t, err)
	r, err := col.Increment(ctx, "n", &IncrementOptions{Delta: 1})
	require.NoError(t, err)
	assert.Equal(t, uint64(42), r.Value)
	g, err := col.Get(ctx, "n", nil)
	require.NoError(t, err)
	assert.Equal(t, "42", string(g.Value), "the counter is rewritten as plain digits")

	_, err = col.Upsert(ctx, "n", []byte("-1"), nil)
	require.NoError(t, err)
	_, err = col.Increment(ctx, "n", &IncrementOptions{Delta: 1})
	assert.ErrorIs(t, err, ErrDeltaInvalid)
}
