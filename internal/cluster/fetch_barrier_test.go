package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A synchronous write queued on the connection a config fetch picked,
// between the pick (free then) and the fetch's send, does not get the
// fetch sent behind it: GET_CLUSTER_CONFIG is a barrier in kv_engine under
// UnorderedExecution, and there it waited for the write (up to its
// durability timeout) and held every later request on the connection.
// The connection refuses the fetch, unwritten (conn.Origin.Barrier), and
// the fetch is held until the write is answered, then sent. The test
// queues the write in that window (testHookFetchPicked).
func TestConfigFetchNotSentBehindAWriteQueuedAfterItsPick(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes,
		Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumReplicas: mockcluster.NoReplicas}}})
	mc.SetSyncWriteDelay(time.Hour)
	t.Cleanup(mc.CommitSyncWrites) // before the cluster closes
	fc := retry.NewFakeClock(time.Now())
	cfg := testConfig(mc)
	cfg.Clock = fc
	c := connectCluster(t, cfg)
	n := c.Topology().Nodes()[0]
	cn, _, err := n.Pick()
	require.NoError(t, err)

	wrote := make(chan error, 1)
	var once sync.Once
	hook := func(picked *conn.Conn) {
		once.Do(func() {
			require.Same(t, cn, picked)
			go func() {
				req := memdx.NewStore(memdx.OpSet, []byte("k"), []byte(`"v"`), 0, 0)
				req.Durability, req.DurabilityTimeout = memdx.DurabilityMajority, 65000
				wrote <- cn.Do(context.Background(), &req, func(*memdx.Packet) error { return nil })
			}()
			waitFor(t, "the synchronous write queued after the pick", func() bool {
				return mc.PendingSyncWrites() == 1 && cn.Pending() == 1
			})
		})
	}
	testHookFetchPicked.Store(&hook)
	t.Cleanup(func() { testHookFetchPicked.Store(nil) })

	fetched := make(chan Offer, 1)
	go func() {
		got, _, _ := c.fetchConfig(n, false, new(time.Time))
		fetched <- got
	}()
	// Held: a timer due by the write's durability timeout (the poll's is
	// an hour away).
	held := func() bool {
		for _, at := range fc.Timers() {
			if at.Sub(fc.Now()) <= 65*time.Second {
				return true
			}
		}
		return false
	}
	waitFor(t, "the fetch held or sent", func() bool { return held() || cn.Pending() > 1 })
	require.Equal(t, 1, cn.Pending(), "the fetch was sent behind the pending synchronous write: it waits for the write and holds every later request on the connection")
	mc.CommitSyncWrites()
	require.NoError(t, <-wrote)
	require.Equal(t, OfferStale, <-fetched, "the fetch, sent once the write was answered")
}

// waitFor waits for cond, polling; a minute bounds a broken cluster.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
	}
}
