package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// Unlock needs the CAS GetAndLock returned: kv_engine refuses UNLOCK_KEY
// without one (unlock_validator: ExpectedCas::Set, EINVAL). Unlock with
// CAS 0 (a zero-valued result, a forgotten field) is refused before
// anything is sent, with ErrInvalidArgument naming the CAS, instead of
// reaching the server and coming back as a misleading "not locked" or
// "CAS mismatch", and the lock is left as it was.
func TestUnlockZeroCasRefusedBeforeSending(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	for _, key := range []string{"unlocked", "locked"} {
		_, err := col.Upsert(ctx, key, []byte("v"), nil)
		require.NoError(t, err)
	}
	lr, err := col.GetAndLock(ctx, "locked", 0, nil)
	require.NoError(t, err)

	ctl := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpUnlockKey}}})
	defer ctl.Remove()
	for _, key := range []string{"unlocked", "locked"} {
		err := col.Unlock(ctx, key, 0, nil)
		require.ErrorIs(t, err, ErrInvalidArgument, "%s: %v", key, err)
		assert.NotErrorIs(t, err, ErrDocumentNotLocked)
		assert.NotErrorIs(t, err, ErrCasMismatch)
		assert.Contains(t, err.Error(), "CAS", "the error names the argument")
	}
	assert.Zero(t, ctl.Hits(), "nothing sent")
	d, _ := mc.Bucket(mockcluster.DefaultBucket).Get("_default", "_default", "locked")
	assert.True(t, d.Locked, "still locked")
	ctl.Remove()
	require.NoError(t, col.Unlock(ctx, "locked", lr.Cas, nil))
}
