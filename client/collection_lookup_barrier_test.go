package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvwire/kvwire/mockcluster"
)

// A Get on a collection whose id is not cached yet, routed to a node whose
// connection holds a durable write waiting for replication, is answered at
// once. COLLECTIONS_GET_ID is a barrier in kv_engine under unordered
// execution (not is_reorder_supported): sent behind the write it waited
// for it, and held every later request on the connection; the Get timed
// out ("unambiguous timeout ... SOCKET_NOT_AVAILABLE; last error:
// COLLECTIONS_GET_ID ... context deadline exceeded") on a node that
// answers GETs at once. Collection ids are the bucket's: the lookup goes
// on the other node's connection, free of such writes.
func TestCollectionLookupNotSentBehindPendingSyncWrite(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	addCollections(t, mc, "s", "y")
	mc.SetSyncWriteDelay(time.Hour)
	t.Cleanup(mc.CommitSyncWrites) // before the cluster closes
	c := connect(t, mc, &Options{ConfigPollInterval: time.Hour, ConnectionsPerNode: 1})
	done := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Upsert(context.Background(), "k", []byte(`"v"`),
			&UpsertOptions{Durability: DurabilityMajority, Timeout: 2 * time.Minute, DurabilityTimeout: 65 * time.Second})
		done <- err
	}()
	waitUntil(t, "the node holding the synchronous write", func() bool { return mc.PendingSyncWrites() == 1 })
	// The same key: the same vbucket, the same node, in collection s.y.
	// A minute bounds a broken client: the write is pending longer.
	_, err := c.Scope("s").Collection("y").Get(context.Background(), "k", &GetOptions{Timeout: time.Minute})
	if !errors.Is(err, ErrDocumentNotFound) {
		t.Fatalf("a Get in an uncached collection on the node holding the write: %v; want ErrDocumentNotFound", err)
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
}
