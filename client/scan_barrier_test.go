package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// scanBarrierSetup is barrierSetup for a scan: a one-node bucket of 4
// vbuckets holding the documents d:0 to d:7, written before the durable
// write on "k" that stays pending on the node's only connection.
func scanBarrierSetup(t *testing.T) (*mockcluster.Cluster, *retry.FakeClock, *Client, *conn.Conn, <-chan error) {
	t.Helper()
	mc := newMock(t, mockcluster.Options{Nodes: 1, Buckets: []mockcluster.BucketOptions{
		{Name: mockcluster.DefaultBucket, NumVbuckets: 4, NumReplicas: mockcluster.NoReplicas}}})
	mc.SetSyncWriteDelay(time.Hour)
	t.Cleanup(mc.CommitSyncWrites) // before the cluster closes
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour, ConnectionsPerNode: 1})
	col := c.DefaultCollection()
	for i := range 8 {
		if _, err := col.Upsert(context.Background(), fmt.Sprint("d:", i), []byte(`1`), &UpsertOptions{Timeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	var cn *conn.Conn
	waitUntil(t, "the node's connection", func() bool {
		es := c.cl.Endpoints()
		if len(es) == 1 && es[0].Conn != nil {
			cn = es[0].Conn
		}
		return cn != nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := col.Upsert(context.Background(), "k", []byte(`"v"`),
			&UpsertOptions{Durability: DurabilityMajority, Timeout: 2 * time.Minute, DurabilityTimeout: 65 * time.Second})
		done <- err
	}()
	waitUntil(t, "the node holding the synchronous write", func() bool { return mc.PendingSyncWrites() == 1 && cn.Pending() == 1 })
	return mc, fc, c, cn, done
}

// heldNotSent waits until a scan's request op is held by the client (a
// timer armed at at) or received by the node, and fails the test in the
// second case, when the node received more than base of them.
func heldNotSent(t *testing.T, fc *retry.FakeClock, mc *mockcluster.Cluster, op memdx.OpCode, base uint64, at time.Time) {
	t.Helper()
	sent := func() bool { return mc.RequestCount(op) > base }
	waitUntil(t, op.String()+" held or sent", func() bool { return armedAt(fc, at) || sent() })
	if sent() {
		t.Fatalf("%s was sent behind the pending synchronous write: it waits for the write and holds every later request on the connection", op)
	}
}

// RANGE_SCAN_CONTINUE is a barrier in kv_engine under UnorderedExecution
// (not is_reorder_supported). Sent on a connection holding a durable
// write waiting for replication, it waited for the write (up to its
// durability timeout), timing the scan out on a healthy node, and every
// later request on the connection (a plain Get) waited with it. It is
// held by the client, unsent, and goes once the write is answered.
func TestScanContinueHeldNotSentBehindPendingSyncWrite(t *testing.T) {
	mc, fc, c, _, done := scanBarrierSetup(t)
	col := c.DefaultCollection()
	const timeout = 30 * time.Second
	at := fc.Now().Add(timeout)
	res, err := col.Scan(context.Background(), PrefixScan{Prefix: "d:"}, &ScanOptions{Timeout: timeout, BatchItemLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	heldNotSent(t, fc, mc, memdx.OpRangeScanContinue, 0, at)
	if _, err := col.Get(context.Background(), "d:0", &GetOptions{Timeout: time.Minute}); err != nil {
		t.Fatalf("a Get on the node while the continue is held: %v", err)
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	var got []string
	for res.Next() {
		got = append(got, res.Item().ID)
	}
	if err := res.Err(); err != nil {
		t.Fatalf("the scan once the write was answered: %v", err)
	}
	slices.Sort(got)
	if want := []string{"d:0", "d:1", "d:2", "d:3", "d:4", "d:5", "d:6", "d:7"}; !slices.Equal(got, want) {
		t.Fatalf("scanned %v; want %v", got, want)
	}
}

// A continue held behind a pending durable write until the scan's
// Timeout fails the scan with an unambiguous timeout saying it was not
// sent. The scan's cancel, sent before the error is reported, is a
// barrier too: it is held as well (within its own Timeout), and sent once
// the write is answered, so the server-side scan is not left open.
func TestScanContinueHeldPastItsTimeout(t *testing.T) {
	mc, fc, c, _, done := scanBarrierSetup(t)
	const timeout = 30 * time.Second
	at := fc.Now().Add(timeout)
	res, err := c.DefaultCollection().Scan(context.Background(), PrefixScan{Prefix: "d:"}, &ScanOptions{Timeout: timeout, BatchItemLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	heldNotSent(t, fc, mc, memdx.OpRangeScanContinue, 0, at)
	fc.Advance(timeout)
	heldNotSent(t, fc, mc, memdx.OpRangeScanCancel, 0, at.Add(timeout))
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	if res.Next() {
		t.Fatal("an item from a continue held past its timeout")
	}
	err = res.Err()
	if !errors.Is(err, ErrUnambiguousTimeout) || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("the scan whose continue was held past its timeout: %v; want an unambiguous timeout saying it was not sent", err)
	}
	if n := mc.RequestCount(memdx.OpRangeScanContinue); n != 0 {
		t.Fatalf("%d continues sent; want none", n)
	}
	if n := mc.OpenRangeScans(); n != 0 {
		t.Fatalf("%d scans open after the scan failed; want 0 (its cancel sent once the write was answered)", n)
	}
}

// Closing a scan whose continue is held behind a pending durable write
// ends the continue at once; the scan's cancel, a barrier too, is held
// (not sent behind the write) until the write is answered, then sent:
// the server-side scan is not left open.
func TestScanCancelHeldNotSentBehindPendingSyncWrite(t *testing.T) {
	mc, fc, c, _, done := scanBarrierSetup(t)
	col := c.DefaultCollection()
	const timeout = 30 * time.Second
	res, err := col.Scan(context.Background(), PrefixScan{Prefix: "d:"}, &ScanOptions{Timeout: timeout, BatchItemLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	heldNotSent(t, fc, mc, memdx.OpRangeScanContinue, 0, fc.Now().Add(timeout))
	closed := make(chan error, 1)
	go func() { closed <- res.Close() }()
	heldNotSent(t, fc, mc, memdx.OpRangeScanCancel, 0, fc.Now().Add(timeout))
	if _, err := col.Get(context.Background(), "d:0", &GetOptions{Timeout: time.Minute}); err != nil {
		t.Fatalf("a Get on the node while the cancel is held: %v", err)
	}
	if n := mc.OpenRangeScans(); n != 1 {
		t.Fatalf("%d scans open while the cancel is held; want 1", n)
	}
	mc.CommitSyncWrites()
	if err := <-done; err != nil {
		t.Fatalf("the durable write: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := mc.OpenRangeScans(); n != 0 {
		t.Fatalf("%d scans open after Close; want 0", n)
	}
	if n := mc.RequestCount(memdx.OpRangeScanContinue); n != 0 {
		t.Fatalf("%d continues sent; want none", n)
	}
}
