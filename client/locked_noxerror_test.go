package client

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A client that had to reconnect without XERROR (its error map was
// unusable) gets what Couchbase Server gives such clients for a locked
// document: KEY_EEXISTS for a mutation (kv_engine's locked, remapped by
// Connection::remapErrorCode) and TMPFAIL for GET_LOCKED (locked_tmpfail),
// no longer TMPFAIL for both. kvwire then reports the Upsert as
// ErrDocumentLocked, retried as KV_LOCKED, as with XERROR (see
// TestMutationOfALockedDocumentWithoutXerrorIsLocked).
func TestLockedDocumentWithoutXerror(t *testing.T) {
	col, ctx := lockedWithoutXerror(t, "v")
	noRetry := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })
	_, err := col.Upsert(ctx, "k", []byte("w"), &UpsertOptions{RetryStrategy: noRetry})
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, StatusKeyExists, kv.Status, "a mutation of a locked document, without XERROR")
	t.Logf("upsert of a locked document without XERROR: %v", err)
	_, err = col.GetAndLock(ctx, "k", 10*time.Second, &GetAndLockOptions{RetryStrategy: noRetry})
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, Status(memdx.StatusTmpFail), kv.Status, "GET_LOCKED of a locked document, without XERROR")
}

// GetAndLock of a locked document on a connection without XERROR gets
// TMPFAIL (kv_engine's locked_tmpfail, which Connection::remapErrorCode
// gives such a connection as TMPFAIL and one with XERROR as LOCKED): it is
// retried as KV_LOCKED and ends as ErrDocumentLocked, as LOCKED does with
// XERROR. It was retried as KV_TEMPORARY_FAILURE and ended as
// ErrTemporaryFailure. The message still says what the TMPFAIL stood for.
func TestGetAndLockTmpFailWithoutXerrorIsLocked(t *testing.T) {
	col, ctx := lockedWithoutXerror(t, "v")
	var reasons []RetryReason
	noRetry := RetryStrategyFunc(func(_ RetryRequest, r RetryReason) RetryAction {
		reasons = append(reasons, r)
		return NoRetry()
	})
	_, err := col.GetAndLock(ctx, "k", 10*time.Second, &GetAndLockOptions{RetryStrategy: noRetry})
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, Status(memdx.StatusTmpFail), kv.Status)
	assert.ErrorIs(t, err, ErrDocumentLocked)
	assert.NotErrorIs(t, err, ErrTemporaryFailure)
	assert.Equal(t, []RetryReason{RetryReasonKVLocked}, reasons)
	t.Logf("%v", err)
	assert.Contains(t, err.Error(), "locked document so to a connection without XERROR", "says why TMPFAIL means a lock: %v", err)
}

// With XERROR kv_engine answers GET_LOCKED of a locked document LOCKED:
// a TMPFAIL is a temporary failure, retried as KV_TEMPORARY_FAILURE, and
// its message says nothing of a lock. The note "the document may be
// locked" used to show on every connection.
func TestGetAndLockTmpFailWithXerrorIsATemporaryFailure(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	col := connect(t, mc, nil).DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k", OpCodes: []memdx.OpCode{memdx.OpGetLocked}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail}, Times: 1})
	var reasons []RetryReason
	noRetry := RetryStrategyFunc(func(_ RetryRequest, r RetryReason) RetryAction {
		reasons = append(reasons, r)
		return NoRetry()
	})
	_, err = col.GetAndLock(ctx, "k", 10*time.Second, &GetAndLockOptions{RetryStrategy: noRetry})
	require.ErrorIs(t, err, ErrTemporaryFailure)
	assert.NotErrorIs(t, err, ErrDocumentLocked)
	assert.Equal(t, []RetryReason{RetryReasonKVTemporaryFailure}, reasons)
	t.Logf("%v", err)
	assert.NotContains(t, err.Error(), "locked", "%v", err)
	assert.NotContains(t, err.Error(), "XERROR", "%v", err)
}

// lockedWithoutXerror connects to a one-node mock without XERROR
// (connectWithoutXerror) and writes key "k" with value, locked for 10 s;
// ctx bounds the test's operations.
func lockedWithoutXerror(t *testing.T, value string) (*Collection, context.Context) {
	t.Helper()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connectWithoutXerror(t, mc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	col := c.DefaultCollection()
	_, err := col.Upsert(ctx, "k", []byte(value), nil)
	require.NoError(t, err)
	_, err = col.GetAndLock(ctx, "k", 10*time.Second, nil)
	require.NoError(t, err)
	return col, ctx
}

// connectWithoutXerror connects to mc's one node through a proxy that
// makes the error map unreadable, so that the client reconnects without
// XERROR.
func connectWithoutXerror(t *testing.T, mc *mockcluster.Cluster) *Client {
	t.Helper()
	p := noXerrorProxy(t, mc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Connect(ctx, "couchbase://"+p.Addr()+"/"+mockcluster.DefaultBucket,
		testOptions(&Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, ConnectTimeout: 10 * time.Second}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// noXerrorProxy is a proxy to mc's node 0 that makes the node's error map
// too big to read, so that a client reconnects without XERROR.
func noXerrorProxy(t *testing.T, mc *mockcluster.Cluster) *faultnode.Proxy {
	t.Helper()
	p, err := faultnode.NewProxy(mc.Node(0).Addr())
	require.NoError(t, err)
	t.Cleanup(p.Close)
	p.RewritePorts(map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(p.Addr())})
	padding := bytes.Repeat([]byte(" "), memdx.DefaultMaxBodyLength)
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if resp.OpCode != memdx.OpGetErrorMap || resp.Status != memdx.StatusSuccess {
			return faultnode.Action{}
		}
		huge := *resp // too big to read: the client reconnects without XERROR
		huge.Value = append(append([]byte(nil), resp.Value...), padding...)
		return faultnode.Action{Send: []memdx.Packet{huge}}
	})
	return p
}

// Without XERROR, kv_engine answers TOUCH and GAT of a locked document
// KEY_EEXISTS (getAndTouchInner turns the engine's key_already_exists into
// locked, which Connection::remapErrorCode gives such a connection as
// KEY_EEXISTS): Touch and GetAndTouch report ErrDocumentLocked, as they do
// with XERROR (LOCKED), not ErrDocumentExists, which says nothing of a lock.
func TestTouchLockedDocumentWithoutXerror(t *testing.T) {
	col, ctx := lockedWithoutXerror(t, "v")
	noRetry := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })
	_, err := col.Touch(ctx, "k", time.Minute, &TouchOptions{RetryStrategy: noRetry})
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, StatusKeyExists, kv.Status, "TOUCH of a locked document, without XERROR")
	assert.ErrorIs(t, err, ErrDocumentLocked)
	assert.NotErrorIs(t, err, ErrDocumentExists)
	_, err = col.GetAndTouch(ctx, "k", time.Minute, &GetAndTouchOptions{RetryStrategy: noRetry})
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, StatusKeyExists, kv.Status, "GAT of a locked document, without XERROR")
	assert.ErrorIs(t, err, ErrDocumentLocked)
	assert.NotErrorIs(t, err, ErrDocumentExists)
}

// Without XERROR a mutation of a locked document given no CAS comes back
// KEY_EEXISTS (kv_engine's locked, remapped by Connection::remapErrorCode);
// without a CAS, and not an insert, KEY_EEXISTS has no other meaning. It is
// retried as KV_LOCKED and ends as ErrDocumentLocked, as LOCKED does with
// XERROR, not as ErrDocumentExists, which says the document exists.
func TestMutationOfALockedDocumentWithoutXerrorIsLocked(t *testing.T) {
	col, ctx := lockedWithoutXerror(t, "1")
	var reasons []RetryReason
	noRetry := RetryStrategyFunc(func(_ RetryRequest, r RetryReason) RetryAction {
		reasons = append(reasons, r)
		return NoRetry()
	})
	for name, do := range map[string]func() error{
		"Upsert": func() error {
			_, err := col.Upsert(ctx, "k", []byte("2"), &UpsertOptions{RetryStrategy: noRetry})
			return err
		},
		"Replace": func() error {
			_, err := col.Replace(ctx, "k", []byte("2"), &ReplaceOptions{RetryStrategy: noRetry})
			return err
		},
		"Remove": func() error { _, err := col.Remove(ctx, "k", &RemoveOptions{RetryStrategy: noRetry}); return err },
		"Append": func() error {
			_, err := col.Append(ctx, "k", []byte("2"), &AppendOptions{RetryStrategy: noRetry})
			return err
		},
		"Increment": func() error {
			_, err := col.Increment(ctx, "k", &IncrementOptions{Delta: 1, RetryStrategy: noRetry})
			return err
		},
	} {
		reasons = nil
		err := do()
		var kv *KeyValueError
		require.ErrorAs(t, err, &kv, name)
		assert.Equal(t, StatusKeyExists, kv.Status, "%s of a locked document, without XERROR", name)
		assert.ErrorIs(t, err, ErrDocumentLocked, name)
		assert.NotErrorIs(t, err, ErrDocumentExists, name)
		assert.Equal(t, []RetryReason{RetryReasonKVLocked}, reasons, name)
	}
	// An insert's KEY_EEXISTS is still an existing document.
	_, err := col.Insert(ctx, "k", []byte("2"), nil)
	assert.ErrorIs(t, err, ErrDocumentExists)
}

// Without XERROR, a MutateIn that would replace or upsert a document
// given no CAS answers KEY_EEXISTS only when the document was locked
// between kv_engine's fetch of it and its store (the store's locked,
// remapped by Connection::remapErrorCode; a lock held before the fetch
// answers locked_tmpfail, TMPFAIL): it is retried as KV_LOCKED and ends
// as ErrDocumentLocked, as a plain mutation's does. It ended as
// ErrDocumentExists, never retried, for an upsert. An insert's KEY_EEXISTS
// is still an existing document.
func TestMutateInOfADocumentLockedMidwayWithoutXerrorIsLocked(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connectWithoutXerror(t, mc)
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := col.Upsert(ctx, "k", []byte(`{"a":1}`), nil)
	require.NoError(t, err)
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSubdocMultiMutation}},
		Action: mockcluster.Action{Status: memdx.StatusKeyExists, Value: []byte{}}})
	var reasons []RetryReason
	noRetry := RetryStrategyFunc(func(_ RetryRequest, r RetryReason) RetryAction {
		reasons = append(reasons, r)
		return NoRetry()
	})
	mutateIn := func(sem StoreSemantics, cas uint64) error {
		reasons = nil
		_, err := col.MutateIn(ctx, "k", []MutateInSpec{UpsertSpec("a", []byte("2"), nil)},
			&MutateInOptions{StoreSemantic: sem, Cas: cas, RetryStrategy: noRetry})
		var kv *KeyValueError
		require.ErrorAs(t, err, &kv)
		assert.Equal(t, StatusKeyExists, kv.Status)
		return err
	}
	for _, sem := range []StoreSemantics{StoreSemanticsReplace, StoreSemanticsUpsert} {
		err := mutateIn(sem, 0)
		assert.ErrorIs(t, err, ErrDocumentLocked, "store semantics %d", sem)
		assert.NotErrorIs(t, err, ErrDocumentExists, "store semantics %d", sem)
		assert.Equal(t, []RetryReason{RetryReasonKVLocked}, reasons, "store semantics %d", sem)
	}
	err = mutateIn(StoreSemanticsInsert, 0)
	assert.ErrorIs(t, err, ErrDocumentExists, "an insert")
	assert.Empty(t, reasons, "an insert")
	err = mutateIn(StoreSemanticsReplace, 1)
	assert.ErrorIs(t, err, ErrCasMismatch, "a replace given a CAS")
	assert.Empty(t, reasons, "a replace given a CAS")
}

// Without XERROR kv_engine answers TMPFAIL also for a sub-document command
// on a locked document given no CAS (SubdocExecutionContext's
// get_document_for_searching answers locked_tmpfail) and for DELETE of a
// locked document given a CAS (VBucket::deleteItem); with XERROR both are
// LOCKED. As for GET_LOCKED's TMPFAIL, LookupIn, MutateIn without a CAS
// and Remove with one are then retried as KV_LOCKED and end as
// ErrDocumentLocked, as with XERROR; they were retried as
// KV_TEMPORARY_FAILURE and ended as ErrTemporaryFailure.
func TestTmpFailOfALockedDocumentWithoutXerrorIsLocked(t *testing.T) {
	col, ctx := lockedWithoutXerror(t, `{"a":1}`)
	var reasons []RetryReason
	noRetry := RetryStrategyFunc(func(_ RetryRequest, r RetryReason) RetryAction {
		reasons = append(reasons, r)
		return NoRetry()
	})
	for _, c := range []struct {
		name string
		do   func() error
	}{
		{"LookupIn", func() error {
			_, err := col.LookupIn(ctx, "k", []LookupInSpec{GetSpec("a", nil)}, &LookupInOptions{RetryStrategy: noRetry})
			return err
		}},
		{"MutateIn", func() error {
			_, err := col.MutateIn(ctx, "k", []MutateInSpec{UpsertSpec("a", []byte("2"), nil)},
				&MutateInOptions{RetryStrategy: noRetry})
			return err
		}},
		{"Remove with a CAS", func() error {
			_, err := col.Remove(ctx, "k", &RemoveOptions{Cas: 1, RetryStrategy: noRetry})
			return err
		}},
	} {
		reasons = nil
		err := c.do()
		var kv *KeyValueError
		require.ErrorAs(t, err, &kv, c.name)
		assert.Equal(t, Status(memdx.StatusTmpFail), kv.Status, "%s of a locked document, without XERROR", c.name)
		assert.ErrorIs(t, err, ErrDocumentLocked, c.name)
		assert.NotErrorIs(t, err, ErrTemporaryFailure, c.name)
		assert.Equal(t, []RetryReason{RetryReasonKVLocked}, reasons, c.name)
		assert.Contains(t, err.Error(), "without XERROR", "%s: says why TMPFAIL means a lock: %v", c.name, err)
	}
}

// No lock reaches a replica copy (locks are not replicated), so a
// replica's TMPFAIL to a sub-document lookup is a temporary failure even
// on a connection without XERROR, not kv_engine's locked_tmpfail: the
// replica's read is retried as KV_TEMPORARY_FAILURE and fails with
// ErrTemporaryFailure, its message naming no lock.
func TestReplicaTmpFailWithoutXerrorIsATemporaryFailure(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	proxies := make([]*faultnode.Proxy, 2)
	ports := map[string]string{}
	for i := range proxies {
		p, err := faultnode.NewProxy(mc.Node(i).Addr())
		require.NoError(t, err)
		t.Cleanup(p.Close)
		proxies[i] = p
		ports[faultnode.Port(mc.Node(i).Addr())] = faultnode.Port(p.Addr())
	}
	padding := bytes.Repeat([]byte(" "), memdx.DefaultMaxBodyLength)
	for _, p := range proxies {
		p.RewritePorts(ports)
		p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
			if resp.OpCode != memdx.OpGetErrorMap || resp.Status != memdx.StatusSuccess {
				return faultnode.Action{}
			}
			huge := *resp // too big to read: the client reconnects without XERROR
			huge.Value = append(append([]byte(nil), resp.Value...), padding...)
			return faultnode.Action{Send: []memdx.Packet{huge}}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Connect(ctx, "couchbase://"+proxies[0].Addr()+"/"+mockcluster.DefaultBucket,
		testOptions(&Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, ConnectTimeout: 10 * time.Second}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	col := c.DefaultCollection()
	_, err = col.Upsert(ctx, "k", []byte(`{"a":1}`), &UpsertOptions{JSON: true})
	require.NoError(t, err)
	b := mc.Bucket(mockcluster.DefaultBucket)
	replica := b.VbucketMap()[b.VbucketForKey([]byte("k"))][1]
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k", Nodes: []int{replica},
		OpCodes: []memdx.OpCode{memdx.OpSubdocMultiLookup}}, Action: mockcluster.Action{Status: memdx.StatusTmpFail}})
	var reasons []RetryReason
	var mu sync.Mutex
	noRetry := RetryStrategyFunc(func(_ RetryRequest, r RetryReason) RetryAction {
		mu.Lock()
		reasons = append(reasons, r)
		mu.Unlock()
		return NoRetry()
	})
	// The replica's read of LookupInAnyReplica and LookupInAllReplicas
	// (which return the copies that answered).
	_, err = col.lookupInCopy(ctx, "k", []LookupInSpec{GetSpec("a", nil)}, 1, opParams{strategy: noRetry})
	t.Logf("%v", err)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, Status(memdx.StatusTmpFail), kv.Status)
	assert.ErrorIs(t, err, ErrTemporaryFailure)
	assert.NotErrorIs(t, err, ErrDocumentLocked)
	assert.Equal(t, []RetryReason{RetryReasonKVTemporaryFailure}, reasons)
	assert.NotContains(t, err.Error(), "locked", "%v", err)
}

// A sub-document insert (doc flag Add) never meets kv_engine's lock check
// of its fetch: an existing document, locked or not, is KEY_EEXISTS
// before it (SubdocCommandContext::fetch_input_document). Its TMPFAIL is
// a temporary failure without XERROR too.
func TestSubdocInsertTmpFailWithoutXerrorIsATemporaryFailure(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	col := connectWithoutXerror(t, mc).DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "new", OpCodes: []memdx.OpCode{memdx.OpSubdocMultiMutation}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail, Value: []byte{}}, Times: 1})
	var reasons []RetryReason
	noRetry := RetryStrategyFunc(func(_ RetryRequest, r RetryReason) RetryAction {
		reasons = append(reasons, r)
		return NoRetry()
	})
	_, err := col.MutateIn(ctx, "new", []MutateInSpec{UpsertSpec("a", []byte("1"), nil)},
		&MutateInOptions{StoreSemantic: StoreSemanticsInsert, RetryStrategy: noRetry})
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, Status(memdx.StatusTmpFail), kv.Status)
	assert.ErrorIs(t, err, ErrTemporaryFailure)
	assert.NotErrorIs(t, err, ErrDocumentLocked)
	assert.Equal(t, []RetryReason{RetryReasonKVTemporaryFailure}, reasons)
	assert.NotContains(t, err.Error(), "locked", "%v", err)
}
