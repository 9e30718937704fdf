package mockcluster

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// kv_engine sends a range scan's RANGE_SCAN_MORE and RANGE_SCAN_COMPLETE
// itself, without remapping (RangeScanContinueResult::send in
// engines/ep/src/range_scans/range_scan_types.cc goes through
// Cookie::sendResponse), but the statuses a range scan command's executor
// ends with go through handle_executor_status
// (daemon/protocol/mcbp/executors.cc) and so Connection::remapErrorCode
// (daemon/connection.cc), which disconnects a client without XERROR for
// range_scan_cancelled and vbuuid_not_equal. The mock answered both.
func TestRangeScanStatusesUnknownWithoutXerrorCloseTheConnection(t *testing.T) {
	var (
		now  atomic.Int64
		fire atomic.Int32 // the clock reading (counting down) that cancels
		c    *Cluster
	)
	now.Store(time.Unix(1_700_000_000, 0).UnixNano())
	clock := func() time.Time {
		if fire.Load() > 0 && fire.Add(-1) == 0 {
			// Mid-continue: the scan's lifetime passes and the node
			// drops it, as kv_engine's RangeScanTimeoutTask would.
			now.Add(int64(DefaultRangeScanLifetime))
			c.OpenRangeScans()
		}
		return time.Unix(0, now.Load())
	}
	c = newCluster(t, Options{Nodes: 1, Clock: clock,
		Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	b := c.Bucket(DefaultBucket)
	for _, k := range []string{"a", "b", "c", "d"} {
		if _, err := b.Set("", "", k, []byte(`{}`), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	noXerror := []memdx.HelloFeature{memdx.FeatureJSON, memdx.FeatureCollections,
		memdx.FeatureAltRequests, memdx.FeatureSelectBucket}
	create := func(cl *rawClient, cfg *memdx.RangeScanCreate) memdx.Packet {
		r, err := memdx.NewRangeScanCreate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cl.do(r)
	}
	// cancelledContinue sends a continue that the node cancels after its
	// first document (the lookup reads the clock once, then every document
	// read under a time limit does).
	cancelledContinue := func(cl *rawClient) {
		p := create(cl, &memdx.RangeScanCreate{KeyOnly: true})
		if p.Status != memdx.StatusSuccess {
			t.Fatalf("create: %s", p.Status)
		}
		id, err := memdx.DecodeRangeScanCreateResponse(&p)
		if err != nil {
			t.Fatal(err)
		}
		fire.Store(2)
		cl.send(memdx.NewRangeScanContinue(memdx.RangeScanContinue{ID: id, TimeLimitMs: 60_000}))
	}

	t.Run("with XERROR", func(t *testing.T) {
		cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
		cancelledContinue(cl)
		if p := cl.recv(cl.opaque); p.Status != memdx.StatusRangeScanCancelled {
			t.Fatalf("continue of a scan cancelled meanwhile: %s, want RANGE_SCAN_CANCELLED", p.Status)
		}
		sr := memdx.RangeScanSnapshot{VbUUID: b.VbucketUUID(0) + 1, Seqno: 1}
		if p := create(cl, &memdx.RangeScanCreate{Snapshot: &sr}); p.Status != memdx.StatusVbUUIDNotEqual {
			t.Fatalf("create with another vb_uuid: %s, want VB_UUID_NOT_EQUAL", p.Status)
		}
	})
	t.Run("without XERROR: RANGE_SCAN_CANCELLED", func(t *testing.T) {
		cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, noXerror)
		cancelledContinue(cl)
		if got := cl.expectClosed(); len(got) != 0 {
			t.Fatalf("continue of a scan cancelled meanwhile: answered %s, want the connection closed", got[0].Status)
		}
	})
	t.Run("without XERROR: VB_UUID_NOT_EQUAL", func(t *testing.T) {
		cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, noXerror)
		sr := memdx.RangeScanSnapshot{VbUUID: b.VbucketUUID(0) + 1, Seqno: 1}
		r, err := memdx.NewRangeScanCreate(&memdx.RangeScanCreate{Snapshot: &sr})
		if err != nil {
			t.Fatal(err)
		}
		cl.send(r)
		if got := cl.expectClosed(); len(got) != 0 {
			t.Fatalf("create with another vb_uuid: answered %s, want the connection closed", got[0].Status)
		}
	})
	t.Run("without XERROR: RANGE_SCAN_MORE and RANGE_SCAN_COMPLETE", func(t *testing.T) {
		cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, noXerror)
		p := create(cl, &memdx.RangeScanCreate{KeyOnly: true})
		if p.Status != memdx.StatusSuccess {
			t.Fatalf("create: %s", p.Status)
		}
		id, _ := memdx.DecodeRangeScanCreateResponse(&p)
		if p := cl.do(memdx.NewRangeScanContinue(memdx.RangeScanContinue{ID: id, ItemLimit: 1})); p.Status != memdx.StatusRangeScanMore {
			t.Fatalf("continue with a limit: %s, want RANGE_SCAN_MORE", p.Status)
		}
		if p := cl.do(memdx.NewRangeScanContinue(memdx.RangeScanContinue{ID: id})); p.Status != memdx.StatusRangeScanComplete {
			t.Fatalf("last continue: %s, want RANGE_SCAN_COMPLETE", p.Status)
		}
	})
}

// A range scan's UNKNOWN_COLLECTION (create naming a collection the bucket
// does not have; continue of a scan whose collection was dropped) is an
// engine status sent through handle_executor_status, whose
// Connection::remapErrorCode answers EINVAL instead to a client that did
// not negotiate Collections.
func TestRangeScanUnknownCollectionWithoutCollectionsIsEinval(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	b := c.Bucket(DefaultBucket)
	if _, err := b.AddScope("s"); err != nil {
		t.Fatal(err)
	}
	cid, err := b.AddCollection("s", "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Set("s", "c", "k1", []byte(`{}`), 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Set("s", "c", "k2", []byte(`{}`), 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, collections := range []bool{true, false} {
		fs := []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket, memdx.FeatureJSON}
		want := memdx.StatusUnknownCollection
		if collections {
			fs = append(fs, memdx.FeatureCollections)
		} else {
			want = memdx.StatusInvalidArgs
		}
		cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, fs)
		r, err := memdx.NewRangeScanCreate(&memdx.RangeScanCreate{CollectionID: 0x99, KeyOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if p := cl.do(r); p.Status != want {
			t.Errorf("collections=%v: create in an unknown collection: %s, want %s", collections, p.Status, want)
		}
		if r, err = memdx.NewRangeScanCreate(&memdx.RangeScanCreate{CollectionID: cid, KeyOnly: true}); err != nil {
			t.Fatal(err)
		}
		p := cl.do(r)
		if p.Status != memdx.StatusSuccess {
			t.Fatalf("collections=%v: create: %s", collections, p.Status)
		}
		id, _ := memdx.DecodeRangeScanCreateResponse(&p)
		if err := b.DropCollection("s", "c"); err != nil {
			t.Fatal(err)
		}
		if p := cl.do(memdx.NewRangeScanContinue(memdx.RangeScanContinue{ID: id})); p.Status != want {
			t.Errorf("collections=%v: continue after the drop: %s, want %s", collections, p.Status, want)
		}
		if cid, err = b.AddCollection("s", "c"); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"k1", "k2"} {
			if _, err := b.Set("s", "c", k, []byte(`{}`), 0, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
}
