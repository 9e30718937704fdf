package client

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A document stored with an empty value reads back as an empty, non-nil
// Value, by Get and by GetMany (a memcached one reads it in a group): nil
// is no value at all.
func TestEmptyValueReadsBackEmptyNotNil(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "empty", []byte{}, nil)
	require.NoError(t, err)
	got, err := col.Get(ctx, "empty", nil)
	require.NoError(t, err)
	require.NotNil(t, got.Value, "Get")
	require.Empty(t, got.Value)

	addr := memcachedtest.Start(t)
	mcc, err := Connect(ctx, "memcached://"+addr, testOptions(nil))
	require.NoError(t, err)
	defer mcc.Close()
	mcol := mcc.DefaultCollection()
	key := fmt.Sprintf("kvwire-empty-%d", time.Now().UnixNano())
	_, err = mcol.Upsert(ctx, key, []byte{}, nil)
	require.NoError(t, err)
	got, err = mcol.Get(ctx, key, nil)
	require.NoError(t, err)
	require.NotNil(t, got.Value, "memcached Get")
	for _, r := range mcol.GetMany(ctx, []string{key, key}, nil) {
		require.NoError(t, r.Err)
		require.NotNil(t, r.Value, "memcached GetMany")
		require.Empty(t, r.Value)
	}
}

// An empty value a server sends snappy-compressed (kept so in passive
// compression mode when another SDK wrote it compressed) reads back as an
// empty, non-nil Value too.
func TestEmptySnappyValueReadsBackEmptyNotNil(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	ps, _ := proxyEach(t, mc)
	ps[0].OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if req == nil || req.OpCode != memdx.OpGet || resp.Status != memdx.StatusSuccess || len(resp.Value) != 0 {
			return faultnode.Action{}
		}
		z := *resp
		z.Extras = bytes.Clone(resp.Extras)
		z.Datatype |= memdx.DatatypeSnappy
		z.Value = memdx.CompressSnappy(nil, nil)
		return faultnode.Action{Send: []memdx.Packet{z}}
	})
	col := connectVia(t, ps[0].Addr(), nil).DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "empty", []byte{}, nil)
	require.NoError(t, err)
	got, err := col.Get(ctx, "empty", nil)
	require.NoError(t, err)
	require.NotNil(t, got.Value, "Get")
	require.Empty(t, got.Value)
}
