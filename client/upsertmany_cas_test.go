package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// UpsertManyItem carries Upsert's per-document Cas and PreserveExpiry:
// an item whose Cas does not match fails alone with ErrCasMismatch, one
// that matches is written, and PreserveExpiry keeps an existing
// document's expiry as Upsert's does.
func TestUpsertManyItemCasAndPreserveExpiry(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	mc := newMock(t, mockcluster.Options{Clock: func() time.Time { return start }})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	a, err := col.Upsert(ctx, "a", []byte("a0"), nil)
	require.NoError(t, err)
	_, err = col.Upsert(ctx, "b", []byte("b0"), nil)
	require.NoError(t, err)
	_, err = col.Upsert(ctx, "p", []byte("p0"), &UpsertOptions{Expiry: time.Hour})
	require.NoError(t, err)

	res := col.UpsertMany(ctx, []UpsertManyItem{
		{Key: "a", Value: []byte("a1"), Cas: a.Cas},
		{Key: "b", Value: []byte("b1"), Cas: a.Cas + 12345},
		{Key: "p", Value: []byte("p1"), PreserveExpiry: true, Expiry: time.Minute},
	}, nil)
	require.Len(t, res, 3)
	require.NoError(t, res[0].Err)
	require.ErrorIs(t, res[1].Err, ErrCasMismatch)
	require.NoError(t, res[2].Err)

	g, err := col.Get(ctx, "a", nil)
	require.NoError(t, err)
	assert.Equal(t, "a1", string(g.Value))
	g, err = col.Get(ctx, "b", nil)
	require.NoError(t, err)
	assert.Equal(t, "b0", string(g.Value), "a Cas mismatch writes nothing")
	d, ok := mc.Bucket("default").Get("_default", "_default", "p")
	require.True(t, ok)
	assert.Equal(t, "p1", string(d.Value))
	assert.Equal(t, start.Add(time.Hour).Unix(), d.Expiry.Unix(), "PreserveExpiry keeps the document's expiry")
}
