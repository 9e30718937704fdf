package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// A scanned document decodes as a Get's does: ContentAs with the client's
// Transcoder (JSONTranscoder by default), by the document's flags.
func TestScanItemContentAsUsesTheClientsTranscoder(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumVbuckets: 16}}})
	ctx := context.Background()

	col := connect(t, mc, nil).DefaultCollection()
	_, err := UpsertJSON(ctx, col, "j", map[string]int{"n": 7}, nil)
	require.NoError(t, err)
	items := collect(t, col, PrefixScan{Prefix: "j"}, nil)
	require.Len(t, items, 1)
	var v struct{ N int }
	require.NoError(t, items[0].ContentAs(&v))
	assert.Equal(t, 7, v.N)

	tagged := connect(t, mc, &Options{Transcoder: taggingTranscoder{}}).DefaultCollection()
	items = collect(t, tagged, PrefixScan{Prefix: "j"}, nil)
	require.Len(t, items, 1)
	var s string
	require.NoError(t, items[0].ContentAs(&s))
	assert.Equal(t, `tagged:{"n":7}`, s)

	ids := collect(t, col, PrefixScan{Prefix: "j"}, &ScanOptions{IDsOnly: true})
	require.Len(t, ids, 1)
	assert.ErrorIs(t, ids[0].ContentAs(&v), ErrInvalidArgument, "an IDs-only item has no content")
}
