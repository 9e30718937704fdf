package client

import (
	"bytes"
	"context"
	"errors"
	"slices"

	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

func TestCRUD(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	b := mc.Bucket("default")

	up, err := col.Upsert(ctx, "doc", []byte(`{"a":1}`), &UpsertOptions{Flags: 0x02000000, JSON: true})
	require.NoError(t, err)
	require.NotZero(t, up.Cas)
	assert.NotZero(t, up.Token.Seqno, "mutation tokens are negotiated by default")
	d, ok := b.Get("_default", "_default", "doc")
	require.True(t, ok)
	assert.Equal(t, up.Cas, d.Cas, "the CAS returned is the stored one")
	assert.Equal(t, up.Token.Seqno, d.Seqno)

	got, err := col.Get(ctx, "doc", nil)
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, string(got.Value))
	assert.Equal(t, uint32(0x02000000), got.Flags)
	assert.Equal(t, up.Cas, got.Cas)
	assert.True(t, got.Datatype.Has(DatatypeJSON))

	_, err = col.Insert(ctx, "doc", []byte("x"), nil)
	assert.ErrorIs(t, err, ErrDocumentExists)

	_, err = col.Replace(ctx, "doc", []byte("v2"), &ReplaceOptions{Cas: got.Cas + 1})
	assert.ErrorIs(t, err, ErrCasMismatch)
	rep, err := col.Replace(ctx, "doc", []byte("v2"), &ReplaceOptions{Cas: got.Cas})
	require.NoError(t, err)
	_, err = col.Replace(ctx, "missing", []byte("v"), nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound)

	_, err = col.Append(ctx, "doc", []byte("-tail"), nil)
	require.NoError(t, err)
	_, err = col.Prepend(ctx, "doc", []byte("head-"), nil)
	require.NoError(t, err)
	got, err = col.Get(ctx, "doc", nil)
	require.NoError(t, err)
	assert.Equal(t, "head-v2-tail", string(got.Value))
	assert.NotEqual(t, rep.Cas, got.Cas)
	_, err = col.Append(ctx, "missing", []byte("x"), nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound)

	ex, err := col.Exists(ctx, "doc", nil)
	require.NoError(t, err)
	assert.True(t, ex.Exists)
	assert.Equal(t, got.Cas, ex.Cas)
	_, err = col.Remove(ctx, "doc", &RemoveOptions{Cas: 1})
	assert.ErrorIs(t, err, ErrCasMismatch)
	_, err = col.Remove(ctx, "doc", nil)
	require.NoError(t, err)
	ex, err = col.Exists(ctx, "doc", nil)
	require.NoError(t, err)
	assert.False(t, ex.Exists)
	_, err = col.Get(ctx, "doc", nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound)
	assert.ErrorIs(t, err, memdx.StatusKeyNotFound, "the status is reachable too")
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, "Get", kv.Op)
	assert.Equal(t, "doc", kv.Key)
	assert.NotEmpty(t, kv.Node)
	assert.Equal(t, b.VbucketForKey([]byte("doc")), kv.Vbucket)

	_, err = col.Remove(ctx, "doc", nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound)
}

func TestCounters(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	_, err := col.Increment(ctx, "n", nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound, "no Initial: a missing counter is not created")
	ten := uint64(10)
	r, err := col.Increment(ctx, "n", &IncrementOptions{Initial: &ten, Delta: 5})
	require.NoError(t, err)
	assert.Equal(t, uint64(10), r.Value, "created with Initial, delta not applied")
	r, err = col.Increment(ctx, "n", &IncrementOptions{Delta: 5})
	require.NoError(t, err)
	assert.Equal(t, uint64(15), r.Value)
	r, err = col.Decrement(ctx, "n", &DecrementOptions{Delta: 100})
	require.NoError(t, err)
	assert.Equal(t, uint64(0), r.Value, "decrement stops at zero")
	_, err = col.Upsert(ctx, "s", []byte("abc"), nil)
	require.NoError(t, err)
	_, err = col.Increment(ctx, "s", nil)
	assert.ErrorIs(t, err, ErrDeltaInvalid)
}

func TestExpiryAndTouch(t *testing.T) {
	// The mock's clock starts at the real time (absolute expiries are
	// computed from the client's clock) and moves only when told.
	start := time.Now().Truncate(time.Second)
	clock := func() time.Time { return start }
	mc := newMock(t, mockcluster.Options{Clock: clock})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "e", []byte("v"), &UpsertOptions{Expiry: 10 * time.Second})
	require.NoError(t, err)
	d, _ := mc.Bucket("default").Get("_default", "_default", "e")
	assert.Equal(t, start.Add(10*time.Second).Unix(), d.Expiry.Unix())

	_, err = col.Touch(ctx, "e", 100*time.Second, nil)
	require.NoError(t, err)
	g, err := col.GetAndTouch(ctx, "e", 200*time.Second, nil)
	require.NoError(t, err)
	assert.Equal(t, "v", string(g.Value))
	d, _ = mc.Bucket("default").Get("_default", "_default", "e")
	assert.Equal(t, start.Add(200*time.Second).Unix(), d.Expiry.Unix())

	// 40 days is past the 30-day relative limit: sent as an absolute time.
	_, err = col.Upsert(ctx, "far", []byte("v"), &UpsertOptions{Expiry: 40 * 24 * time.Hour})
	require.NoError(t, err)
	d, _ = mc.Bucket("default").Get("_default", "_default", "far")
	assert.InDelta(t, time.Now().Add(40*24*time.Hour).Unix(), d.Expiry.Unix(), 5,
		"absolute expiry is computed from the client's clock")
}

func TestLockUnlock(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "l", []byte("v"), nil)
	require.NoError(t, err)
	locked, err := col.GetAndLock(ctx, "l", 10*time.Second, nil)
	require.NoError(t, err)

	// UNLOCK with a wrong CAS: a CAS mismatch, never retried.
	err = col.Unlock(ctx, "l", locked.Cas+1, &UnlockOptions{Timeout: atOnceTimeout})
	assert.ErrorIs(t, err, ErrCasMismatch)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Zero(t, kv.RetryAttempts, "Unlock is not retried")

	require.NoError(t, col.Unlock(ctx, "l", locked.Cas, nil))
	err = col.Unlock(ctx, "l", locked.Cas, nil)
	assert.ErrorIs(t, err, ErrDocumentNotLocked)
}

// LOCKED is retried until the lock goes away (here: the test unlocks it).
func TestLockedRetriedUntilReleased(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "l", []byte("v1"), nil)
	require.NoError(t, err)
	locked, err := col.GetAndLock(ctx, "l", 10*time.Second, nil)
	require.NoError(t, err)

	done := make(chan error, 1)
	var res MutationResult
	go func() {
		var err error
		res, err = col.Upsert(ctx, "l", []byte("v2"), &UpsertOptions{Timeout: 5 * time.Second})
		done <- err
	}()
	// The writer keeps meeting LOCKED until the lock is released.
	require.Eventually(t, func() bool {
		return mc.Bucket("default").MutationCount("_default", "_default", "l") == 1 &&
			countOp(mc, memdx.OpSet) >= 3
	}, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, col.Unlock(ctx, "l", locked.Cas, nil))
	require.NoError(t, <-done)
	assert.True(t, res.RetryReasons.Has(retryKVLocked), "retried for LOCKED: %v", res.RetryReasons)
	assert.GreaterOrEqual(t, res.RetryAttempts, 2)
	g, err := col.Get(ctx, "l", nil)
	require.NoError(t, err)
	assert.Equal(t, "v2", string(g.Value))
}

// A Get against a key that stays locked times out at its deadline, on the
// client's clock: each back-off ends before the deadline or is the last wait,
// ending exactly at it; no attempt follows that wait; and the Get does not
// give up before the clock reaches the deadline. The clock is fake and moves
// only to the end of each wait, so the machine's load changes nothing.
func TestLockedGetTimesOutOnTime(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	// An hour ahead of real time: the socket's wait for a response ends at
	// the operation's deadline read as a real time, so it never ends first.
	fc := retry.NewFakeClock(time.Now().Add(time.Hour))
	col := connect(t, mc, &Options{Clock: fakeClock{fc}}).DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := col.Upsert(ctx, "l", []byte("v"), nil)
	require.NoError(t, err)
	// Make GET answer LOCKED for the key (a GET of a locked document
	// succeeds with a hidden CAS on the server; the lock shows on writes
	// and on GET_LOCKED), so the read keeps retrying.
	ctl := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "l", OpCodes: []memdx.OpCode{memdx.OpGet}},
		Action: mockcluster.Action{Status: memdx.StatusLocked}})
	defer ctl.Remove()

	const timeout = 100 * time.Millisecond
	deadline := fc.Now().Add(timeout)
	done := make(chan error, 1)
	go func() {
		_, err := col.Get(context.Background(), "l", &GetOptions{Timeout: timeout})
		done <- err
	}()
	// inBackoff waits until the Get sleeps in a back-off: two timers armed,
	// the config poll's (due long after the deadline) and the Get's. It
	// fails the test if the Get ends instead.
	inBackoff := func() {
		t.Helper()
		wctx, wcancel := context.WithCancel(ctx)
		armed := make(chan error, 1)
		go func() { armed <- fc.BlockUntilTimers(wctx, 2) }()
		select {
		case err := <-done:
			wcancel()
			<-armed
			t.Fatalf("the Get ended %v before the deadline: %v", deadline.Sub(fc.Now()), err)
		case err := <-armed:
			wcancel()
			require.NoError(t, err)
		}
	}
	waits := 0
	for {
		inBackoff()
		end := slices.MinFunc(fc.Timers(), time.Time.Compare)
		require.False(t, end.After(deadline), "wait %d ends %v past the deadline", waits, end.Sub(deadline))
		waits++
		hits := ctl.Hits()
		fc.Set(end)
		if end.Equal(deadline) {
			err := within(t, done, "the Get's end at its deadline")
			require.ErrorIs(t, err, ErrTimeout)
			assert.ErrorIs(t, err, ErrUnambiguousTimeout, "a read is never ambiguous")
			var kv *KeyValueError
			require.ErrorAs(t, err, &kv)
			assert.True(t, kv.RetryReasons.Has(retryKVLocked))
			assert.Equal(t, hits, ctl.Hits(), "no attempt after the wait that reached the deadline")
			assert.Equal(t, waits, ctl.Hits(), "one wait after each LOCKED answer")
			break
		}
	}
	assert.GreaterOrEqual(t, waits, 3, "LOCKED was retried")
	t.Logf("timed out after %d LOCKED answers", ctl.Hits())
}

// atOnceTimeout is the timeout of operations that must fail at once: they
// end long before it unless they wait for something (retry until the
// timeout), whatever the machine's load.
const atOnceTimeout = 10 * time.Second

func TestTmpFailRetried(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "t", []byte("v"), nil)
	require.NoError(t, err)
	ctl := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "t"},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail}, Times: 3})
	r, err := col.Get(ctx, "t", nil)
	require.NoError(t, err)
	assert.Equal(t, 3, ctl.Hits())
	assert.Equal(t, 3, r.RetryAttempts)
	assert.True(t, r.RetryReasons.Has(retryKVTemporaryFailure))

	// Writes too: TMPFAIL says nothing was applied.
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "t", OpCodes: []memdx.OpCode{memdx.OpSet}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail}, Times: 2})
	m, err := col.Upsert(ctx, "t", []byte("v2"), nil)
	require.NoError(t, err)
	assert.Equal(t, 2, m.RetryAttempts)
	assert.Equal(t, uint64(2), mc.Bucket("default").MutationCount("_default", "_default", "t"))
}

func TestUnknownStatusFollowsErrorMap(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "u", []byte("v"), nil)
	require.NoError(t, err)

	// 0x7ff0 has retry attributes in the node's error map: retried.
	retryable := memdx.Status(0x7ff0)
	require.False(t, retryable.Known())
	ctl := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "u"},
		Action: mockcluster.Action{Status: retryable}, Times: 2})
	r, err := col.Get(ctx, "u", nil)
	require.NoError(t, err)
	assert.Equal(t, 2, ctl.Hits())
	assert.True(t, r.RetryReasons.Has(retryKVErrorMapRetryIndicated))

	// 0x7ff1 has none: failed at once, with the map's name and description.
	ctl = mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "u"},
		Action: mockcluster.Action{Status: 0x7ff1}, Times: 5})
	_, err = col.Get(ctx, "u", &GetOptions{Timeout: atOnceTimeout})
	require.Error(t, err)
	assert.Equal(t, 1, ctl.Hits(), "not retried")
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, Status(mockcluster.StatusTestNoRetry), kv.Status)
	assert.Equal(t, "MOCK_TEST_NO_RETRY", kv.ErrorName)
	assert.NotEmpty(t, kv.ErrorDescription)
	assert.ErrorIs(t, err, ErrServerFailure)
	assert.Contains(t, err.Error(), "MOCK_TEST_NO_RETRY")
	ctl.Remove()
}

// Named statuses the client has no outcome of its own for (EBUSY, ENOMEM)
// follow the node's error map, which says retry (RFC 0049: the map is
// consulted for every error the client "does not know anything about").
// A status the client does handle is not: LOCKED on UNLOCK has "retry-now"
// in the map, and is still a CAS mismatch at once.
func TestNamedStatusesFollowErrorMap(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "b", []byte("v"), nil)
	require.NoError(t, err)
	for _, st := range []memdx.Status{memdx.StatusBusy, memdx.StatusOutOfMemory} {
		ctl := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "b", OpCodes: []memdx.OpCode{memdx.OpSet}},
			Action: mockcluster.Action{Status: st}, Times: 2})
		r, err := col.Upsert(ctx, "b", []byte("w"), nil)
		require.NoError(t, err, "%s", st)
		assert.Equal(t, 2, ctl.Hits())
		assert.True(t, r.RetryReasons.Has(retryKVErrorMapRetryIndicated))
	}
	assert.Equal(t, uint64(3), mc.Bucket("default").MutationCount("_default", "_default", "b"), "each Upsert applied once")

	lr, err := col.GetAndLock(ctx, "b", 5*time.Second, nil)
	require.NoError(t, err)
	ctl := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "b", OpCodes: []memdx.OpCode{memdx.OpUnlockKey}},
		Action: mockcluster.Action{Status: memdx.StatusLocked}, Times: 5})
	err = col.Unlock(ctx, "b", lr.Cas, nil)
	require.ErrorIs(t, err, ErrCasMismatch)
	assert.Equal(t, 1, ctl.Hits(), "not retried")
	ctl.Remove()
	require.NoError(t, col.Unlock(ctx, "b", lr.Cas, nil))
}

// A Set whose connection closes after the server applied it is not sent
// again: it fails as ambiguous, and the server applied it exactly once. A
// Get in the same situation is retried and succeeds.
func TestConnectionDropAfterApply(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	b := mc.Bucket("default")

	ctl := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "w", OpCodes: []memdx.OpCode{memdx.OpSet}},
		Action: mockcluster.Action{Close: mockcluster.CloseAfterApply}, Times: 1})
	_, err := col.Upsert(ctx, "w", []byte("once"), nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrAmbiguous, "the write may have been applied: %v", err)
	assert.NotErrorIs(t, err, ErrTimeout, "it fails at once, not by timeout")
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.True(t, kv.Ambiguous)
	assert.Zero(t, kv.RetryAttempts, "never sent twice")
	assert.Equal(t, 1, ctl.Hits())
	assert.Equal(t, uint64(1), b.MutationCount("_default", "_default", "w"), "applied exactly once")
	d, ok := b.Get("_default", "_default", "w")
	require.True(t, ok)
	assert.Equal(t, "once", string(d.Value))

	ctl = mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "w", OpCodes: []memdx.OpCode{memdx.OpGet}},
		Action: mockcluster.Action{Close: mockcluster.CloseAfterApply}, Times: 1})
	g, err := col.Get(ctx, "w", nil)
	require.NoError(t, err, "an idempotent read is retried")
	assert.Equal(t, "once", string(g.Value))
	assert.Equal(t, 1, ctl.Hits())
	assert.True(t, g.RetryReasons.Has(retrySocketClosedWhileInFlight))

	// Closed before it was applied, a write is still in doubt from where the
	// client stands (it was written): not retried either, and not applied.
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "w2", OpCodes: []memdx.OpCode{memdx.OpSet}},
		Action: mockcluster.Action{Close: mockcluster.CloseBeforeApply}, Times: 1})
	_, err = col.Upsert(ctx, "w2", []byte("x"), nil)
	assert.ErrorIs(t, err, ErrAmbiguous)
	assert.Zero(t, b.MutationCount("_default", "_default", "w2"))
}

func TestWrongPasswordAndBucketFailFast(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	// Timeouts far longer than the answer takes: "at once" means the error
	// comes from the server's refusal, long before any timeout could fire.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	long := testOptions(&Options{ConnectTimeout: 30 * time.Second, KVTimeout: 30 * time.Second})

	auths := countOp(mc, memdx.OpSASLAuth)
	o := *long
	o.Username, o.Password = mockcluster.DefaultUser, "wrong"
	_, err := Connect(ctx, mc.ConnString()+"/default", &o)
	assert.ErrorIs(t, err, ErrAuthenticationFailure)
	assert.NotErrorIs(t, err, ErrTimeout)
	assert.Equal(t, auths+1, countOp(mc, memdx.OpSASLAuth), "fails at the first refusal, without authenticating again")
	assert.Contains(t, err.Error(), "authentication")
	assert.NotContains(t, err.Error(), "wrong", "the password is never in an error")

	selects := countOp(mc, memdx.OpSelectBucket)
	o = *long
	o.Username, o.Password = mockcluster.DefaultUser, mockcluster.DefaultPassword
	_, err = Connect(ctx, mc.ConnString()+"/nosuchbucket", &o)
	assert.ErrorIs(t, err, ErrBucketNotFound)
	assert.NotErrorIs(t, err, ErrTimeout)
	assert.Equal(t, selects+1, countOp(mc, memdx.OpSelectBucket), "fails at the first refusal, without selecting again")
	assert.Contains(t, err.Error(), "nosuchbucket")

	_, err = Connect(ctx, "couchbase://127.0.0.1:1/default", &Options{ConnectTimeout: 500 * time.Millisecond})
	assert.ErrorIs(t, err, ErrNoNodeAvailable, "nothing listening")
}

// After bootstrap, a node whose reconnects are refused makes operations for
// it fail at once with the default strategy (RFC 0049 rev 16 terminal
// reasons), not after the timeout.
func TestFailFastAfterPasswordChange(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Users: []mockcluster.User{{Name: "app", Password: "pw1", Buckets: []string{"*"}}}})
	c := connect(t, mc, &Options{Username: "app", Password: "pw1"})
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	require.NoError(t, mc.RemoveUser("app"))
	require.NoError(t, mc.AddUser(mockcluster.User{Name: "app", Password: "pw2", Buckets: []string{"*"}}))
	mc.DropConnections()
	// Once the redials have been refused, reads fail with the reason, not
	// by their 30 s timeout (a Get that waited it out would also outlast
	// the 20 s the test waits).
	require.Eventually(t, func() bool {
		_, err := col.Get(ctx, "k", &GetOptions{Timeout: 30 * time.Second})
		return errors.Is(err, ErrAuthenticationFailure) && !errors.Is(err, ErrTimeout)
	}, 20*time.Second, 20*time.Millisecond)
}

func TestCollections(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	b := mc.Bucket("default")
	_, err := b.AddScope("app")
	require.NoError(t, err)
	cid, err := b.AddCollection("app", "users")
	require.NoError(t, err)
	c := connect(t, mc, nil)
	ctx := context.Background()
	users := c.Scope("app").Collection("users")
	_, err = users.Upsert(ctx, "u1", []byte("alice"), nil)
	require.NoError(t, err)
	d, ok := b.Get("app", "users", "u1")
	require.True(t, ok)
	assert.Equal(t, "alice", string(d.Value))
	_, ok = b.Get("_default", "_default", "u1")
	assert.False(t, ok, "the write went to the collection, not the default one")
	g, err := users.Get(ctx, "u1", nil)
	require.NoError(t, err)
	assert.Equal(t, "alice", string(g.Value))
	_ = cid

	lookups := countOp(mc, memdx.OpCollectionsGetID)
	_, err = c.Scope("app").Collection("nope").Get(ctx, "k", &GetOptions{Timeout: atOnceTimeout})
	assert.ErrorIs(t, err, ErrCollectionNotFound)
	assert.Equal(t, lookups+1, countOp(mc, memdx.OpCollectionsGetID), "fail on a missing collection at its lookup's answer, without looking it up again")
	_, err = c.Scope("nope").Collection("x").Get(ctx, "k", nil)
	assert.ErrorIs(t, err, ErrScopeNotFound)

	// The collection is dropped and recreated: the cached id is stale, the
	// node answers UNKNOWN_COLLECTION, the client re-resolves and succeeds.
	require.NoError(t, b.DropCollection("app", "users"))
	newID, err := b.AddCollection("app", "users")
	require.NoError(t, err)
	require.NotEqual(t, cid, newID)
	_, err = users.Upsert(ctx, "u2", []byte("bob"), nil)
	require.NoError(t, err)
	_, ok = b.Get("app", "users", "u2")
	assert.True(t, ok)
}

func TestCompression(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	big := bytes.Repeat([]byte("compressible "), 200)
	var sawSnappy bool
	ctl := mc.Control(mockcluster.Match{Key: "z", OpCodes: []memdx.OpCode{memdx.OpSet}}, 0,
		func(r *mockcluster.Request) (mockcluster.Action, bool) {
			sawSnappy = r.Packet.Datatype.Has(memdx.DatatypeSnappy) && len(r.Packet.Value) < len(big)
			return mockcluster.Action{}, false
		})
	defer ctl.Remove()
	_, err := col.Upsert(ctx, "z", big, nil)
	require.NoError(t, err)
	assert.True(t, sawSnappy, "a compressible value is sent snappy-compressed")
	d, _ := mc.Bucket("default").Get("_default", "_default", "z")
	assert.Equal(t, big, d.Value)
	g, err := col.Get(ctx, "z", nil)
	require.NoError(t, err)
	assert.Equal(t, big, g.Value)
	assert.False(t, g.Datatype.Has(DatatypeSnappy), "the caller gets the value, not the snappy form")

	// Incompressible values and small ones go as they are.
	sawSnappy = true
	_, err = col.Upsert(ctx, "z", []byte("small"), nil)
	require.NoError(t, err)
	assert.False(t, sawSnappy)
}

func TestReplicaReads(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "r", []byte("v"), nil)
	require.NoError(t, err)
	any, err := col.GetAnyReplica(ctx, "r", nil)
	require.NoError(t, err)
	assert.Equal(t, "v", string(any.Value))
	all, err := col.GetAllReplicas(ctx, "r", nil)
	require.NoError(t, err)
	require.Len(t, all, 2, "active and one replica")
	nodes := map[string]bool{}
	for _, r := range all {
		assert.Equal(t, "v", string(r.Value))
		nodes[r.Node] = true
	}
	assert.Len(t, nodes, 2, "the copies come from different nodes")
	_, err = col.GetAnyReplica(ctx, "missing", nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound)
}

func TestPingAndClose(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	res := c.Ping(context.Background())
	require.Len(t, res, 3)
	for _, r := range res {
		assert.NoError(t, r.Err, r.Node)
	}
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close twice is fine")
	_, err := c.DefaultCollection().Get(context.Background(), "k", nil)
	assert.ErrorIs(t, err, ErrClosed)
}

func TestInvalidArguments(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	_, err := col.Get(ctx, "", nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = col.Get(ctx, string(bytes.Repeat([]byte("k"), 251)), nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = col.GetAndLock(ctx, "k", -time.Second, nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = col.Upsert(ctx, "k", nil, &UpsertOptions{Durability: DurabilityMajority, DurabilityTimeout: time.Hour})
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = col.Touch(ctx, "k", 1<<62, nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = col.Increment(ctx, "k", &IncrementOptions{Expiry: time.Hour})
	assert.ErrorIs(t, err, ErrInvalidArgument)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv, "a refused argument is the operation's error")
	assert.Equal(t, "Increment", kv.Op)
	assert.Equal(t, "k", kv.Key)
	assert.Contains(t, err.Error(), "without Initial", "the error says what was wrong")
	assert.Zero(t, countOp(mc, memdx.OpIncrement)+countOp(mc, memdx.OpGetLocked)+countOp(mc, memdx.OpTouch)+countOp(mc, memdx.OpSet),
		"nothing refused was sent")
}

func countOp(mc *mockcluster.Cluster, op memdx.OpCode) uint64 {
	var n uint64
	for _, nd := range mc.Nodes() {
		n += nd.RequestCount(op)
	}
	return n
}

// Close ends an operation that is waiting to retry (here on LOCKED, with a
// strategy that asks for an hour's wait) at once with ErrClosed, rather
// than at the end of its wait or at its timeout.
func TestCloseEndsRetryingOperation(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "l", []byte("v"), nil)
	require.NoError(t, err)
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "l", OpCodes: []memdx.OpCode{memdx.OpGet}},
		Action: mockcluster.Action{Status: memdx.StatusLocked}})
	asked := make(chan RetryReason, 1)
	done := make(chan error, 1)
	go func() {
		_, err := col.Get(ctx, "l", &GetOptions{Timeout: 2 * time.Hour, RetryStrategy: hourStrategy(asked)})
		done <- err
	}()
	waitAsked(t, asked, RetryReasonKVLocked, done)
	require.NoError(t, c.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ErrClosed)
	case <-time.After(time.Minute):
		t.Fatal("the operation still waits its hour's back-off a minute after the client closed")
	}
}
