package client

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// Reads of a locked document report what kv_engine shows of it: Get and
// Exists (GET_META, VBucket::getMetaData) see CAS 0xffffffffffffffff, the
// lock's being hidden; a replica lookup reads a copy the lock never
// reached (locks are not replicated), with the CAS from before the lock.
func TestReadsOfALockedDocument(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	up, err := col.Upsert(ctx, "l", []byte(`{"a":1}`), &UpsertOptions{JSON: true})
	require.NoError(t, err)
	locked, err := col.GetAndLock(ctx, "l", 10*time.Second, nil)
	require.NoError(t, err)
	require.NotEqual(t, uint64(math.MaxUint64), locked.Cas)

	g, err := col.Get(ctx, "l", nil)
	require.NoError(t, err)
	assert.Equal(t, uint64(math.MaxUint64), g.Cas, "Get")
	ex, err := col.Exists(ctx, "l", nil)
	require.NoError(t, err)
	assert.True(t, ex.Exists)
	assert.Equal(t, uint64(math.MaxUint64), ex.Cas, "Exists")

	// The active copy answers LOCKED (retried); a replica answers at once.
	r, err := col.LookupInAnyReplica(ctx, "l", []LookupInSpec{GetSpec("a", nil)},
		&LookupInAnyReplicaOptions{Timeout: 5 * time.Second})
	require.NoError(t, err)
	assert.True(t, r.IsReplica)
	assert.Equal(t, up.Cas, r.Cas, "the replica's CAS is from before the lock")
	v, err := r.ValueAt(0)
	require.NoError(t, err)
	assert.Equal(t, "1", string(v))
	require.NoError(t, col.Unlock(ctx, "l", locked.Cas, nil))
}
