package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
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

// A collection-id lookup held because every connection of the bucket's
// nodes holds a durable write waiting for replication is not sent on the
// connection of its node once that node has left the config (failed over):
// sent there, behind the write the connection still drains, it waited for
// the write (COLLECTIONS_GET_ID is a barrier in kv_engine) and the Get with
// it, until the write's bound or the Get's deadline, although the key's
// vbucket had moved to the other node. The Get is routed again instead:
// there its lookup is held behind that node's write (its bound, 50 s,
// arms the hold) and goes once the write is answered.
func TestCollectionLookupHeldOnNodeThatLeavesIsRoutedAgain(t *testing.T) {
	// Without cluster-map notifications: the config fetch one brings
	// would be held (GET_CLUSTER_CONFIG is a barrier, and every node has
	// a write pending), and so would a NOT_MY_VBUCKET's config, deduped.
	twoNodes := mockcluster.Options{Nodes: 2, NoClusterMapNotifications: true,
		Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumReplicas: 1}}}
	mc, fc, c, a, cn, done := barrierSetup(t, twoNodes, time.Hour, 65*time.Second)
	addCollections(t, mc, "s", "y")
	b := mc.Bucket(mockcluster.DefaultBucket)
	other, onA := "", "" // keys whose active copy is on the other node, on a
	for i := 0; other == "" || onA == ""; i++ {
		k := fmt.Sprint("b", i)
		if b.VbucketMap()[b.VbucketForKey([]byte(k))][0] != a {
			other = cmp.Or(other, k)
		} else {
			onA = cmp.Or(onA, k)
		}
	}
	second := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Upsert(context.Background(), other, []byte(`"v"`),
			&UpsertOptions{Durability: DurabilityMajority, Timeout: 2 * time.Minute, DurabilityTimeout: 50 * time.Second})
		second <- err
	}()
	waitUntil(t, "a synchronous write pending on each node", func() bool { return mc.PendingSyncWrites() == 2 })
	lookupsOnA := mc.Node(a).RequestCount(memdx.OpCollectionsGetID)
	const timeout = 2 * time.Minute
	res := make(chan error, 1)
	go func() {
		_, err := c.Scope("s").Collection("y").Get(context.Background(), "k", &GetOptions{Timeout: timeout})
		res <- err
	}()
	heldOrSent(t, fc, cn, fc.Now().Add(65*time.Second), "the collection-id lookup")
	addr := mc.Node(a).Addr()
	if err := mc.Failover(a); err != nil {
		t.Fatal(err)
	}
	// The new config comes in the NOT_MY_VBUCKET of a Get of the default
	// collection (no lookup) sent to the node that left.
	nmv := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Get(context.Background(), onA, &GetOptions{Timeout: time.Minute})
		nmv <- err
	}()
	waitUntil(t, "the config without the node", func() bool { return !slices.Contains(c.Nodes(), addr) })
	waitUntil(t, "the lookup held on the other node, or sent on the node that left", func() bool {
		return armedAt(fc, fc.Now().Add(50*time.Second)) || cn.Pending() > 1
	})
	if n := cn.Pending(); n > 1 {
		t.Fatalf("the lookup was sent on the connection of the node that left, behind its pending write (%d requests in flight there)", n)
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Logf("the durable write on the node that left: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("the durable write on the other node: %v", err)
	}
	err := recvWithin(t, "the Get, on the clock that does not move", res)
	if err != nil && !errors.Is(err, ErrDocumentNotFound) {
		t.Fatalf("the Get once the other node's write was answered: %v", err)
	}
	if err := <-nmv; err != nil && !errors.Is(err, ErrDocumentNotFound) {
		t.Fatalf("the Get that brought the config: %v", err)
	}
	if n := mc.Node(a).RequestCount(memdx.OpCollectionsGetID) - lookupsOnA; n != 0 {
		t.Fatalf("%d lookups sent to the node that left", n)
	}
}

// The keys of a batch that share a collection-id lookup held behind a
// durable write until the batch's deadline (the round's first key holds
// it; the others routed to the same connection take its outcome) each end
// with the lookup's own cause: an unambiguous timeout saying it was held,
// not sent, behind the write, not a SOCKET_NOT_AVAILABLE retry for a
// socket that was fine.
func TestBatchKeysSharingAHeldLookupSayWhy(t *testing.T) {
	mc, fc, c, _, cn, done := barrierSetup(t, oneNodeNoReplicas, time.Hour, 65*time.Second)
	addCollections(t, mc, "s", "y")
	const timeout = 30 * time.Second
	at := fc.Now().Add(timeout)
	res := make(chan []GetManyResult, 1)
	go func() {
		res <- c.Scope("s").Collection("y").GetMany(context.Background(), []string{"a", "b", "c"}, &GetManyOptions{Timeout: timeout})
	}()
	heldOrSent(t, fc, cn, at, "the collection-id lookup")
	fc.Advance(timeout)
	for _, r := range <-res {
		if !errors.Is(r.Err, ErrUnambiguousTimeout) {
			t.Fatalf("%s: %v; want an unambiguous timeout", r.Key, r.Err)
		}
		if msg := r.Err.Error(); strings.Contains(msg, "SOCKET_NOT_AVAILABLE") || !strings.Contains(msg, "not sent") || !strings.Contains(msg, "synchronous write") {
			t.Fatalf("%s does not say its lookup was held behind the synchronous write: %v", r.Key, r.Err)
		}
	}
	if n := mc.RequestCount(memdx.OpCollectionsGetID); n != 0 {
		t.Fatalf("%d lookups sent behind the pending write", n)
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
}
