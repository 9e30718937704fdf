package client

// Exists sends GET_META, a read RFC 0049's idempotent list leaves out: it
// is not sent again after its connection dies in flight, but its error
// must not say it may have been applied (ErrAmbiguous,
// ErrAmbiguousTimeout), as the docs give those to requests that may change
// data. (On memcached:// Exists is a GET: resent, never ambiguous.)

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

func TestExistsIsNeverAmbiguous(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, &Options{KVTimeout: 2 * time.Second})
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "ex", []byte("v"), nil)
	require.NoError(t, err)

	f := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "ex", OpCodes: []memdx.OpCode{memdx.OpGetMeta}},
		Action: mockcluster.Action{Close: mockcluster.CloseAfterApply}, Times: 1})
	defer f.Remove()
	_, err = col.Exists(ctx, "ex", nil)
	require.Error(t, err, "GET_META is not resent after its connection died")
	assert.NotErrorIs(t, err, ErrAmbiguous, "a read whose connection died: %v", err)

	// Answered an hour late, against a 200 ms timeout: the outcome does
	// not depend on timing.
	g := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "ex", OpCodes: []memdx.OpCode{memdx.OpGetMeta}},
		Action: mockcluster.Action{Delay: time.Hour}, Times: 1})
	defer g.Remove()
	_, err = col.Exists(ctx, "ex", &ExistsOptions{Timeout: 200 * time.Millisecond})
	require.ErrorIs(t, err, ErrTimeout)
	assert.NotErrorIs(t, err, ErrAmbiguousTimeout, "a read that timed out in flight: %v", err)
}
