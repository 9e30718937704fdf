package client

import (
	"context"
	"errors"
	"strings"
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

// With the only node's only connection holding a durable write waiting for
// replication, a collection-id lookup has nowhere to go free of it: it is
// held, unsent (sent, COLLECTIONS_GET_ID, a barrier in kv_engine under
// unordered execution, waited for the write and held every later request
// on the connection), a Get of the default collection meanwhile is
// answered at once, and the Get that needed the id times out saying it was
// held behind the write: not a retry for SOCKET_NOT_AVAILABLE, as its
// error said, the socket being fine.
func TestCollectionLookupHeldBehindPendingSyncWrite(t *testing.T) {
	mc, fc, c, _, cn, done := barrierSetup(t, oneNodeNoReplicas, time.Hour, 65*time.Second)
	addCollections(t, mc, "s", "y")
	const timeout = 30 * time.Second
	at := fc.Now().Add(timeout)
	res := make(chan error, 1)
	go func() {
		_, err := c.Scope("s").Collection("y").Get(context.Background(), "k", &GetOptions{Timeout: timeout})
		res <- err
	}()
	heldOrSent(t, fc, cn, at, "the collection-id lookup")
	if _, err := c.DefaultCollection().Get(context.Background(), "k", &GetOptions{Timeout: time.Minute}); !errors.Is(err, ErrDocumentNotFound) {
		t.Fatalf("a Get on the node while the lookup is held: %v; want ErrDocumentNotFound", err)
	}
	fc.Advance(timeout)
	err := <-res
	if !errors.Is(err, ErrUnambiguousTimeout) {
		t.Fatalf("the Get whose lookup was held past its timeout: %v; want an unambiguous timeout", err)
	}
	if msg := err.Error(); strings.Contains(msg, "SOCKET_NOT_AVAILABLE") || !strings.Contains(msg, "not sent") || !strings.Contains(msg, "synchronous write") {
		t.Fatalf("the Get's timeout does not say its lookup was held behind the synchronous write: %v", err)
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	// Free again: the lookup goes.
	if _, err := c.Scope("s").Collection("y").Get(context.Background(), "k", &GetOptions{Timeout: time.Minute}); !errors.Is(err, ErrDocumentNotFound) {
		t.Fatalf("a Get in s.y once the write was answered: %v; want ErrDocumentNotFound", err)
	}
}
