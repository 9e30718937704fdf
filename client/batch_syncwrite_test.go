package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// A Couchbase GetMany on the only connection of a node holding a durable
// write waiting for replication is answered at once: its gets are GET,
// which kv_engine reorders under UnorderedExecution (is_reorder_supported),
// with no NOOP fence behind them (a NOOP is a barrier there, and would
// wait for the write, and the batch with it). Quiet gets and their NOOP go
// only on memcached:// connections, which negotiate no unordered execution
// and on which the client refuses durable writes (TestMemcachedPlain): no
// synchronous write can be pending ahead of a fence. (A memcached bucket
// of a Couchbase cluster is read over couchbase:// connections, with GET.)
func TestGetManyNotHeldBehindPendingSyncWrite(t *testing.T) {
	mc, _, c, _, cn, done := barrierSetup(t, oneNodeNoReplicas, time.Hour, 65*time.Second)
	noops, getkqs := mc.RequestCount(memdx.OpNoop), mc.RequestCount(memdx.OpGetKQ)
	res := make(chan []GetManyResult, 1)
	go func() {
		res <- c.DefaultCollection().GetMany(context.Background(), []string{"a", "b", "c"}, &GetManyOptions{Timeout: time.Minute})
	}()
	for _, r := range recvWithin(t, "GetMany behind the pending synchronous write", res) {
		if !errors.Is(r.Err, ErrDocumentNotFound) {
			t.Fatalf("GetMany's %q while a durable write is pending on the connection: %v; want ErrDocumentNotFound", r.Key, r.Err)
		}
	}
	if n := mc.RequestCount(memdx.OpGetKQ) - getkqs; n != 0 {
		t.Fatalf("%d GETKQ sent by a Couchbase GetMany; want GET only", n)
	}
	if n := mc.RequestCount(memdx.OpNoop) - noops; n != 0 {
		t.Fatalf("%d NOOPs sent with a Couchbase GetMany; want none: a NOOP waits behind the durable write", n)
	}
	if n := cn.Pending(); n != 1 {
		t.Fatalf("%d requests in flight on the connection; want the write alone", n)
	}
	mc.CommitSyncWrites()
	if err := recvWithin(t, "the durable write", done); err != nil {
		t.Fatalf("the durable write: %v", err)
	}
}
