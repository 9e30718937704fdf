package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// The config in a NOT_MY_VBUCKET answer to a range scan's continue (a
// request addressed to the node holding the scan, which cannot be routed
// elsewhere) is installed, and the scan's create of that vbucket again
// reaches the vbucket's new node. That answer is the only way the client
// can learn of the move here: the nodes push no configs, the client's
// clock never moves (no poll, no back-off ends), every GET_CLUSTER_CONFIG
// is refused, and the old node answers the create NOT_MY_VBUCKET without a
// config. A client that dropped the continue's config waited for one
// until the test's deadline.
func TestScanContinueNMVConfigIsInstalled(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes,
		Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumVbuckets: 4}}})
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, fakeClockOptions(fc))
	col := c.DefaultCollection()
	keys := scanDocs(t, col, 40)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a bound only a broken run reaches
	defer cancel()
	res, err := col.Scan(ctx, RangeScan{}, &ScanOptions{BatchItemLimit: 1, Timeout: time.Minute})
	require.NoError(t, err)
	require.True(t, res.Next())
	items := []ScanItem{res.Item()}
	b := mc.Bucket(mockcluster.DefaultBucket)
	vb := b.VbucketForKey([]byte(items[0].ID))
	from := b.VbucketMap()[vb][0]
	held := c.ConfigVersion()
	nmvBefore := mc.Node(from).ErrorCount(memdx.StatusNotMyVbucket)

	createNMV := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Nodes: []int{from}, OpCodes: []memdx.OpCode{memdx.OpRangeScanCreate},
		Func: func(r *mockcluster.Request) bool { return r.Vbucket == vb }},
		Action: mockcluster.Action{Status: memdx.StatusNotMyVbucket, Value: []byte{}}})
	defer createNMV.Remove()
	noFetch := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGetClusterConfig}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail}})
	defer noFetch.Remove()

	// The vbucket being scanned (its scan open on from) moves.
	moveVbucket(t, mc, items[0].ID, (from+1)%3)
	// The scan runs on its own: a create waiting for a config ends only at
	// its timeout on the stopped clock, or when the client closes.
	done := make(chan error, 1)
	go func() {
		for res.Next() {
			items = append(items, res.Item())
		}
		done <- res.Err()
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatalf("the scan never ended: the create of vbucket %d waits for a config (client at rev %d, the cluster at %d)",
			vb, c.ConfigVersion().Rev, b.Rev())
	}
	assert.ElementsMatch(t, append(keys, "a", "other-1", "zzz"), ids(t, items))
	assert.Positive(t, mc.Node(from).ErrorCount(memdx.StatusNotMyVbucket)-nmvBefore, "the continue met NOT_MY_VBUCKET")
	assert.Greater(t, c.ConfigVersion().Rev, held.Rev, "the continue's NOT_MY_VBUCKET config was installed")
	assert.Equal(t, uint64(b.Rev()), c.ConfigVersion().Rev)
	require.NoError(t, res.Close())
	assert.Zero(t, mc.OpenRangeScans())
}
