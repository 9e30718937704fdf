package client

import (
	"context"
	"testing"
	"time"

	"github.com/kvwire/kvwire/mockcluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Touching a document to the expiry it already has is no mutation on
// Couchbase Server (kv_engine's VBucket::processGetAndUpdateTtl): Touch and
// GetAndTouch answer the CAS the document had, and a CAS taken before them
// still replaces it.
func TestTouchSameExpiryKeepsCas(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	mc := newMock(t, mockcluster.Options{Clock: func() time.Time { return start }})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	up, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)

	tr, err := col.Touch(ctx, "k", 0, nil)
	require.NoError(t, err)
	assert.Equal(t, up.Cas, tr.Cas, "no expiry before, none after: the same CAS")
	g, err := col.GetAndTouch(ctx, "k", 0, nil)
	require.NoError(t, err)
	assert.Equal(t, up.Cas, g.Cas)
	_, err = col.Replace(ctx, "k", []byte("w"), &ReplaceOptions{Cas: up.Cas})
	assert.NoError(t, err, "the CAS from before the touches still matches")
}
