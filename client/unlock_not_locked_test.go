package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// unlockRetryProbe is a retry strategy that records what it was asked and
// never retries: an Unlock whose answer is final asks it nothing.
type unlockRetryProbe struct {
	mu      sync.Mutex
	reasons []RetryReason
}

func (p *unlockRetryProbe) strategy() RetryStrategy {
	return RetryStrategyFunc(func(_ RetryRequest, r RetryReason) RetryAction {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.reasons = append(p.reasons, r)
		return NoRetry()
	})
}

func (p *unlockRetryProbe) asked() []RetryReason {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]RetryReason(nil), p.reasons...)
}

// Couchbase Server before 7.6 answers UNLOCK_KEY of a document that is not
// locked with TMPFAIL (kv_engine's KVBucket::unlockKey had no NOT_LOCKED),
// XERROR or not. Retrying cannot help: the document stays unlocked, and a
// new lock would have a new CAS. Unlock used to retry it as a temporary
// failure until its timeout and end in a timeout; it now ends at once with
// ErrDocumentNotLocked, the error a 7.6 server's NOT_LOCKED gives, and the
// message says what the TMPFAIL stood for.
func TestUnlockNotLockedBefore76IsNotLocked(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Version: "7.2.4-7070-enterprise"})
	col := connect(t, mc, nil).DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mr, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	lr, err := col.GetAndLock(ctx, "k", 10*time.Second, nil)
	require.NoError(t, err)
	require.NoError(t, col.Unlock(ctx, "k", lr.Cas, nil))

	for name, cas := range map[string]uint64{"never locked": mr.Cas, "unlocked already": lr.Cas} {
		var probe unlockRetryProbe
		err = col.Unlock(ctx, "k", cas, &UnlockOptions{RetryStrategy: probe.strategy()})
		require.ErrorIs(t, err, ErrDocumentNotLocked, "%s: %v", name, err)
		assert.NotErrorIs(t, err, ErrTimeout, name)
		assert.Empty(t, probe.asked(), "%s: a final answer asks the strategy nothing", name)
		var kv *KeyValueError
		require.ErrorAs(t, err, &kv)
		assert.Equal(t, Status(memdx.StatusTmpFail), kv.Status, name)
		assert.Contains(t, err.Error(), "not locked", name)
		assert.Contains(t, err.Error(), "7.6", "%s: the message says why TMPFAIL means that: %v", name, err)
		t.Logf("%s: %v", name, err)
	}
	d, _ := mc.Bucket(mockcluster.DefaultBucket).Get("_default", "_default", "k")
	assert.False(t, d.Locked)
}

// TMPFAIL stays a temporary failure, retried, on every other operation:
// only UNLOCK_KEY gets TMPFAIL for a document that is not locked.
func TestTmpfailStillRetriedOnOtherOps(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Version: "7.2.4-7070-enterprise"})
	col := connect(t, mc, nil).DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	for _, op := range []memdx.OpCode{memdx.OpGet, memdx.OpGetLocked, memdx.OpTouch} {
		ctl := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k", OpCodes: []memdx.OpCode{op}},
			Action: mockcluster.Action{Status: memdx.StatusTmpFail}, Times: 1})
		var probe unlockRetryProbe
		var err error
		switch op {
		case memdx.OpGet:
			_, err = col.Get(ctx, "k", &GetOptions{RetryStrategy: probe.strategy()})
		case memdx.OpGetLocked:
			_, err = col.GetAndLock(ctx, "k", time.Second, &GetAndLockOptions{RetryStrategy: probe.strategy()})
		case memdx.OpTouch:
			_, err = col.Touch(ctx, "k", time.Hour, &TouchOptions{RetryStrategy: probe.strategy()})
		}
		require.ErrorIs(t, err, ErrTemporaryFailure, "%s", op)
		assert.NotErrorIs(t, err, ErrDocumentNotLocked, "%s", op)
		assert.Equal(t, []RetryReason{retryKVTemporaryFailure}, probe.asked(), "%s", op)
		assert.Equal(t, 1, ctl.Hits(), "%s", op)
		ctl.Remove()
	}
}

// Without XERROR (a reconnect after an unusable error map) kv_engine
// answers UNLOCK_KEY TMPFAIL both for a document that is not locked
// (not_locked, remapped by Connection::remapErrorCode) and for a lock
// held with another CAS (locked_tmpfail, remapped likewise). Neither
// clears on a retry, so Unlock ends at once, and its message names both
// possibilities rather than the one it cannot know.
func TestUnlockWithoutXerrorEndsAtOnce(t *testing.T) {
	col, ctx := lockedWithoutXerror(t, "v")
	var probe unlockRetryProbe
	err := col.Unlock(ctx, "k", 1, &UnlockOptions{RetryStrategy: probe.strategy()})
	require.ErrorIs(t, err, ErrDocumentNotLocked, "%v", err)
	assert.Empty(t, probe.asked(), "a final answer asks the strategy nothing")
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, Status(memdx.StatusTmpFail), kv.Status)
	assert.Contains(t, err.Error(), "another CAS", "the message says the lock may be held with another CAS: %v", err)
	t.Logf("%v", err)
}
