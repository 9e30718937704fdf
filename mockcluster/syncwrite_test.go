package mockcluster

import (
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// durable makes r a majority synchronous write.
func durable(r memdx.Request) memdx.Request {
	r.Durability = memdx.DurabilityMajority
	return r
}

// CommitSyncWrites called after a sync write's timer fired but before its
// callback ran must still commit and answer the write exactly once: the
// write is neither lost (no answer, the key blocked by
// SYNC_WRITE_IN_PROGRESS for good) nor applied twice.
func TestCommitSyncWritesRacingTimer(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	k := "durable"
	addr := c.Node(ownerOf(b, k)).Addr()
	a := bootstrap(t, addr, DefaultBucket, append([]memdx.HelloFeature{memdx.FeatureUnorderedExecution}, stdFeatures...))

	// The hook holds the fired timer's callback until CommitSyncWrites has
	// run: the interleaving that used to drop the write.
	fired, release := make(chan struct{}), make(chan struct{})
	c.mu.Lock()
	c.syncFired = func() {
		fired <- struct{}{}
		<-release
	}
	c.mu.Unlock()
	c.SetSyncWriteDelay(time.Millisecond)
	op := a.send(keyReq(a, b, durable(set(k, "v"))))
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the sync write's timer never fired")
	}
	c.CommitSyncWrites()
	close(release)

	p, err := a.read(5 * time.Second)
	if err != nil {
		t.Fatalf("no answer to the sync write that CommitSyncWrites raced with its timer: %v (PendingSyncWrites %d)",
			err, c.PendingSyncWrites())
	}
	if p.Opaque != op || p.Status != memdx.StatusSuccess {
		t.Fatalf("sync write answered opaque %d %s, want %d SUCCESS", p.Opaque, p.Status, op)
	}
	if n := b.MutationCount("", "", k); n != 1 {
		t.Fatalf("the sync write was applied %d times, want once", n)
	}
	if n := c.PendingSyncWrites(); n != 0 {
		t.Fatalf("PendingSyncWrites = %d after the commit", n)
	}
	c.SetSyncWriteDelay(0)
	if p := a.do(keyReq(a, b, set(k, "w"))); p.Status != memdx.StatusSuccess {
		t.Fatalf("a plain SET after the commit: %s (the key is still blocked by the sync write)", p.Status)
	}
}
