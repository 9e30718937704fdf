package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// TestErrorMapConnStateInvalidatedDropsConnection: a status the client has
// no outcome of its own for, whose error-map entry says
// "conn-state-invalidated" (EINTERNAL, NO_BUCKET, NOT_INITIALIZED in
// kv_engine's map) or "special-handling", means the connection is no longer
// usable: RFC 0013 says the client must drop it and reconnect. The
// operation ends with the status; the connection it came on is closed and
// the node's next one serves the operations after it.
func TestErrorMapConnStateInvalidatedDropsConnection(t *testing.T) {
	t.Parallel()
	for _, st := range []memdx.Status{memdx.StatusInternalError, memdx.StatusNoBucket} {
		t.Run(st.String(), func(t *testing.T) {
			t.Parallel()
			mc := newMock(t, mockcluster.Options{Nodes: 1})
			c := connect(t, mc, nil)
			col := c.DefaultCollection()
			ctx := context.Background()
			_, err := col.Upsert(ctx, "k", []byte("v"), nil)
			require.NoError(t, err)
			cn := c.cl.Topology().Nodes()[0].Conns()[0]
			entry, ok := cn.ErrorMap().Lookup(st)
			require.True(t, ok, "the mock's map has %v", st)
			require.False(t, entry.RetryIndicated())

			ctl := mc.AddFault(mockcluster.Fault{Times: 1,
				Match:  mockcluster.Match{Key: "k", OpCodes: []memdx.OpCode{memdx.OpGet}},
				Action: mockcluster.Action{Status: st}})
			defer ctl.Remove()
			_, err = col.Get(ctx, "k", &GetOptions{Timeout: 10 * time.Second})
			require.ErrorIs(t, err, ErrServerFailure)
			var kv *KeyValueError
			require.ErrorAs(t, err, &kv)
			assert.Equal(t, Status(st), kv.Status)

			select {
			case <-cn.Done():
			case <-time.After(10 * time.Second):
				t.Fatalf("the connection that answered %v is still open", st)
			}
			got, err := col.Get(ctx, "k", &GetOptions{Timeout: 10 * time.Second})
			require.NoError(t, err, "a new connection serves the next operation")
			assert.Equal(t, []byte("v"), got.Value)
		})
	}
}

// TestErrorMapConnStateInvalidatedOnCollectionLookup: the same for a
// collection-id lookup answered EINTERNAL: the operation that needed the
// id ends with it, and the connection is dropped.
func TestErrorMapConnStateInvalidatedOnCollectionLookup(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	addCollections(t, mc, "app", "users")
	c := connect(t, mc, nil)
	col := c.Scope("app").Collection("users")
	ctx := context.Background()
	_, err := col.Upsert(ctx, "u", []byte("v"), nil)
	require.NoError(t, err)
	cn := c.cl.Topology().Nodes()[0].Conns()[0]

	c.cl.Collections().Invalidate(col.path)
	ctl := mc.AddFault(mockcluster.Fault{Times: 1,
		Match:  mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpCollectionsGetID}},
		Action: mockcluster.Action{Status: memdx.StatusInternalError}})
	defer ctl.Remove()
	_, err = col.Get(ctx, "u", &GetOptions{Timeout: 10 * time.Second})
	require.ErrorIs(t, err, ErrServerFailure)
	select {
	case <-cn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the connection that answered EINTERNAL is still open")
	}
	got, err := col.Get(ctx, "u", &GetOptions{Timeout: 10 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, []byte("v"), got.Value)
}
