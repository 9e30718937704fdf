package mockcluster

import (
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// A synchronous write whose durability timeout ends before it could commit
// is aborted, never applied, and answered SYNC_WRITE_AMBIGUOUS, as kv_engine
// does (engines/ep/src/durability/active_durability_monitor.cc aborts the
// expired SyncWrite; VBucket::abort answers sync_write_ambiguous). The key
// is free again afterwards. Both execution modes.
func TestDurabilityTimeoutAbortsSyncWrite(t *testing.T) {
	for _, unordered := range []bool{false, true} {
		name := "ordered"
		if unordered {
			name = "unordered"
		}
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, Options{})
			b := c.Bucket(DefaultBucket)
			k := "durable-" + name
			fs := stdFeatures
			if unordered {
				fs = append([]memdx.HelloFeature{memdx.FeatureUnorderedExecution}, stdFeatures...)
			}
			a := bootstrap(t, c.Node(ownerOf(b, k)).Addr(), DefaultBucket, fs)
			// The write could commit only after an hour; its timeout is 20 ms.
			c.SetSyncWriteDelay(time.Hour)
			r := durable(set(k, "v"))
			r.DurabilityTimeout = 20
			op := a.send(keyReq(a, b, r))
			p, err := a.read(10 * time.Second)
			if err != nil {
				t.Fatalf("no answer 10 s after a 20 ms durability timeout: %v", err)
			}
			if p.Opaque != op || p.Status != memdx.StatusSyncWriteAmbiguous {
				t.Fatalf("answer opaque %d %s, want %d SYNC_WRITE_AMBIGUOUS", p.Opaque, p.Status, op)
			}
			if n := b.MutationCount("", "", k); n != 0 {
				t.Fatalf("the aborted write was applied %d times", n)
			}
			if _, ok := b.Get("", "", k); ok {
				t.Fatal("the aborted write's document exists")
			}
			if n := c.PendingSyncWrites(); n != 0 {
				t.Fatalf("PendingSyncWrites = %d after the abort", n)
			}
			c.SetSyncWriteDelay(0)
			if p := a.do(keyReq(a, b, set(k, "w"))); p.Status != memdx.StatusSuccess {
				t.Fatalf("a SET after the abort: %s", p.Status)
			}
		})
	}
}

// A timeout longer than the write takes does not get in its way, and
// CommitSyncWrites commits a write before its timeout.
func TestDurabilityTimeoutLongerThanTheWrite(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	k := "durable"
	a := bootstrap(t, c.Node(ownerOf(b, k)).Addr(), DefaultBucket, nil)
	c.SetSyncWriteDelay(time.Millisecond)
	r := durable(set(k, "v"))
	r.DurabilityTimeout = 60000
	if p := a.do(keyReq(a, b, r)); p.Status != memdx.StatusSuccess {
		t.Fatalf("sync write with a 60 s timeout and a 1 ms commit: %s", p.Status)
	}
	c.SetSyncWriteDelay(time.Hour)
	r = durable(set(k, "w"))
	r.DurabilityTimeout = 60000
	op := a.send(keyReq(a, b, r))
	waitFor(t, "the write to be pending", func() bool { return c.PendingSyncWrites() == 1 })
	c.CommitSyncWrites()
	if p := a.recv(op); p.Status != memdx.StatusSuccess {
		t.Fatalf("sync write committed by CommitSyncWrites: %s", p.Status)
	}
	if n := b.MutationCount("", "", k); n != 2 {
		t.Fatalf("MutationCount %d, want 2", n)
	}
}
