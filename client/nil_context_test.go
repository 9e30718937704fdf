package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/mockcluster"
)

// A nil context is a bad argument like any other: every call that takes a
// context refuses it with ErrInvalidArgument, saying so, rather than
// panicking in the middle of the client (a nil dereference on the
// caller's goroutine, or in a goroutine of a replica read's).
func TestNilContextIsRefused(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumVbuckets: 64}}})
	c := connect(t, mc, &Options{Tracer: &treeTracer{}})
	col := c.DefaultCollection()
	var nilCtx context.Context
	requireRefused := func(name string, err error) {
		t.Helper()
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "nil context", name)
	}
	for name, call := range map[string]func() error{
		"Get":    func() error { _, err := col.Get(nilCtx, "k", nil); return err },
		"Upsert": func() error { _, err := col.Upsert(nilCtx, "k", nil, nil); return err },
		"UpsertJSON": func() error {
			_, err := UpsertJSON(nilCtx, col, "k", 1, nil)
			return err
		},
		"Project": func() error { _, err := col.Get(nilCtx, "k", &GetOptions{Project: []string{"a"}}); return err },
		"LookupIn": func() error {
			_, err := col.LookupIn(nilCtx, "k", []LookupInSpec{GetSpec("a", nil)}, nil)
			return err
		},
		"GetAnyReplica":  func() error { _, err := col.GetAnyReplica(nilCtx, "k", nil); return err },
		"GetAllReplicas": func() error { _, err := col.GetAllReplicas(nilCtx, "k", nil); return err },
		"LookupInAnyReplica": func() error {
			_, err := col.LookupInAnyReplica(nilCtx, "k", []LookupInSpec{GetSpec("a", nil)}, nil)
			return err
		},
		"LookupInAllReplicas": func() error {
			_, err := col.LookupInAllReplicas(nilCtx, "k", []LookupInSpec{GetSpec("a", nil)}, nil)
			return err
		},
		"GetMany": func() error { return col.GetMany(nilCtx, []string{"k", "l"}, nil)[1].Err },
		"UpsertMany": func() error {
			return col.UpsertMany(nilCtx, []UpsertManyItem{{Key: "k"}}, nil)[0].Err
		},
		"RemoveMany":     func() error { return col.RemoveMany(nilCtx, []string{"k"}, nil)[0].Err },
		"Scan":           func() error { _, err := col.Scan(nilCtx, RangeScan{}, nil); return err },
		"Stats":          func() error { _, err := c.Stats(nilCtx, "", nil); return err },
		"Ping":           func() error { r := c.Ping(nilCtx); require.Len(t, r, len(c.Nodes())); return r[0].Err },
		"WaitUntilReady": func() error { return c.WaitUntilReady(nilCtx, nil) },
		"Connect": func() error {
			_, err := Connect(nilCtx, mc.ConnString(), testOptions(&Options{Username: mockcluster.DefaultUser,
				Password: mockcluster.DefaultPassword, Bucket: mockcluster.DefaultBucket}))
			return err
		},
	} {
		var err error
		require.NotPanics(t, func() { err = call() }, name)
		requireRefused(name, err)
	}
	assert.Nil(t, ParentSpanFromContext(nilCtx))
}

// On memcached:// a GetMany reads its keys by groups before any key is an
// operation: a nil context is refused there too, for every key.
func TestNilContextIsRefusedByAMemcachedGetMany(t *testing.T) {
	addr := memcachedtest.Start(t)
	c, err := Connect(context.Background(), "memcached://"+addr, testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	var nilCtx context.Context
	var res []GetManyResult
	require.NotPanics(t, func() { res = c.DefaultCollection().GetMany(nilCtx, []string{"a", "b"}, nil) })
	for _, r := range res {
		require.ErrorIs(t, r.Err, ErrInvalidArgument)
		assert.Contains(t, r.Err.Error(), "nil context")
	}
}
