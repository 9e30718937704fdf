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
	// run: the interleaving in which the write could be lost or applied twice.
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

// GET_LOCKED and UNLOCK_KEY of a key with a pending synchronous write
// answer SYNC_WRITE_IN_PROGRESS, as kv_engine does (they need the committed
// value for write); granting the lock would lose it when the sync write
// commits.
func TestLockDuringSyncWrite(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	k := "durable"
	addr := c.Node(ownerOf(b, k)).Addr()
	a := bootstrap(t, addr, DefaultBucket, append([]memdx.HelloFeature{memdx.FeatureUnorderedExecution}, stdFeatures...))
	other := bootstrap(t, addr, DefaultBucket, nil)
	noX := bootstrap(t, addr, DefaultBucket, []memdx.HelloFeature{memdx.FeatureCollections})
	if p := other.do(keyReq(other, b, set(k, "v1"))); p.Status != memdx.StatusSuccess {
		t.Fatal(p.Status)
	}
	c.SetSyncWriteDelay(time.Hour)

	// GET_LOCKED while a durable SET is pending.
	op := a.send(keyReq(a, b, durable(set(k, "v2"))))
	a.passed(b) // the node has the sync write
	if p := noX.do(keyReq(noX, b, memdx.NewGetLocked([]byte(k), 10))); p.Status != memdx.StatusTmpFail {
		t.Errorf("GET_LOCKED during a sync write, no XERROR: %s, want TMPFAIL", p.Status)
	}
	if p := other.do(keyReq(other, b, memdx.NewGetLocked([]byte(k), 10))); p.Status != memdx.StatusSyncWriteInProgress {
		t.Errorf("GET_LOCKED during a sync write: %s, want SYNC_WRITE_IN_PROGRESS", p.Status)
	}
	c.CommitSyncWrites()
	if p := a.recv(op); p.Status != memdx.StatusSuccess {
		t.Fatalf("sync write: %s", p.Status)
	}
	if d, _ := b.Get("", "", k); d.Locked || string(d.Value) != "v2" {
		t.Fatalf("after the commit: %q locked=%v", d.Value, d.Locked)
	}

	// UNLOCK_KEY while a durable SET made with the lock's CAS is pending.
	l := other.do(keyReq(other, b, memdx.NewGetLocked([]byte(k), 10)))
	if l.Status != memdx.StatusSuccess {
		t.Fatalf("GET_LOCKED: %s", l.Status)
	}
	op = a.send(keyReq(a, b, withCas(durable(set(k, "v3")), l.Cas)))
	a.passed(b)
	if p := other.do(keyReq(other, b, memdx.NewUnlock([]byte(k), l.Cas))); p.Status != memdx.StatusSyncWriteInProgress {
		t.Errorf("UNLOCK_KEY during a sync write: %s, want SYNC_WRITE_IN_PROGRESS", p.Status)
	}
	c.CommitSyncWrites()
	if p := a.recv(op); p.Status != memdx.StatusSuccess {
		t.Fatalf("sync write with the lock's CAS: %s", p.Status)
	}
	if d, _ := b.Get("", "", k); d.Locked || string(d.Value) != "v3" {
		t.Fatalf("after the commit: %q locked=%v", d.Value, d.Locked)
	}
}
