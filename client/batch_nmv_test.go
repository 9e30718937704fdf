package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// notMyVbuckets is how many NOT_MY_VBUCKET answers the mock's nodes sent.
func notMyVbuckets(mc *mockcluster.Cluster) uint64 {
	var n uint64
	for _, nd := range mc.Nodes() {
		n += nd.ErrorCount(memdx.StatusNotMyVbucket)
	}
	return n
}

// moveEveryVbucket moves every vbucket of the default bucket to the next
// node (active and replica), as one rebalance finished at once: the
// client, which gets no notifications and no polls, learns of it from the
// NOT_MY_VBUCKET answers.
func moveEveryVbucket(t *testing.T, mc *mockcluster.Cluster) {
	t.Helper()
	b := mc.Bucket(mockcluster.DefaultBucket)
	n := len(mc.Nodes())
	target := b.VbucketMap()
	for vb, chain := range target {
		moved := make([]int, len(chain))
		for i, id := range chain {
			moved[i] = (id + 1) % n
		}
		target[vb] = moved
	}
	r, err := mc.StartRebalance(mockcluster.RebalanceOptions{Targets: map[string][][]int{mockcluster.DefaultBucket: target}})
	require.NoError(t, err)
	require.NoError(t, r.Finish())
}

// When every vbucket moves just before a batch of 200 keys starts, each
// key's first attempt meets NOT_MY_VBUCKET (the batch went out in one
// write, by the old map), and the config the first answer brought
// re-routes every key: about one NOT_MY_VBUCKET per key, as a single
// operation draws, not a round of them per key while the new config is
// on its way. GetMany and RemoveMany alike.
func TestBatchReroutedByTheConfigTheFirstNMVBrought(t *testing.T) {
	for _, op := range []string{"GetMany", "RemoveMany"} {
		t.Run(op, func(t *testing.T) {
			mc := newMock(t, mockcluster.Options{NoClusterMapNotifications: true})
			c := connect(t, mc, &Options{ConfigPollInterval: time.Hour})
			col := c.DefaultCollection()
			keys := batchKeys(t, col, "nmv-"+op, 200, 200)
			moveEveryVbucket(t, mc)
			before := notMyVbuckets(mc)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var errs []error
			if op == "GetMany" {
				for _, r := range col.GetMany(ctx, keys, nil) {
					errs = append(errs, r.Err)
				}
			} else {
				for _, r := range col.RemoveMany(ctx, keys, nil) {
					errs = append(errs, r.Err)
				}
			}
			for i, err := range errs {
				require.NoError(t, err, keys[i])
			}
			nmv := notMyVbuckets(mc) - before
			t.Logf("%s of %d keys after every vbucket moved: %d NOT_MY_VBUCKET answers", op, len(keys), nmv)
			require.LessOrEqual(t, nmv, uint64(len(keys)), "at most one NOT_MY_VBUCKET per key")
		})
	}
}
