package reftest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/couchbase/gocbcore/v10"
	"github.com/kvwire/kvwire/mockcluster"
)

// gocbScan runs one range scan of vbucket vb with gocbcore until it
// completes, continuing with maxCount items at a time. It reports false
// when the create answers that the vbucket holds nothing to scan.
func gocbScan(t *testing.T, agent *gocbcore.Agent, vb uint16, opts gocbcore.RangeScanCreateOptions, maxCount uint32) ([]gocbcore.RangeScanItem, bool) {
	t.Helper()
	opts.Deadline = deadline()
	res, err := call(t, func(cb func(gocbcore.RangeScanCreateResult, error)) (gocbcore.PendingOp, error) {
		return agent.RangeScanCreate(vb, opts, cb)
	})
	if errors.Is(err, gocbcore.ErrDocumentNotFound) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("RangeScanCreate vb %d: %v", vb, err)
	}
	var items []gocbcore.RangeScanItem
	for {
		var batch []gocbcore.RangeScanItem
		r, err := call(t, func(cb func(*gocbcore.RangeScanContinueResult, error)) (gocbcore.PendingOp, error) {
			return res.RangeScanContinue(gocbcore.RangeScanContinueOptions{MaxCount: maxCount, Deadline: deadline()},
				func(got []gocbcore.RangeScanItem) { batch = append(batch, got...) }, cb)
		})
		if err != nil {
			t.Fatalf("RangeScanContinue vb %d: %v", vb, err)
		}
		items = append(items, batch...)
		if r.Complete {
			return items, true
		}
		if !r.More || len(batch) == 0 || (maxCount > 0 && len(batch) > int(maxCount)) {
			t.Fatalf("continue vb %d: %+v with %d items", vb, r, len(batch))
		}
	}
}

// gocbcore's range scans against the mock: every document of a collection
// once over all vbuckets, keys only or documents with their metadata, a
// seeded sample, and a cancelled scan leaving nothing open.
func TestGocbcoreRangeScan(t *testing.T) {
	c, err := mockcluster.New(mockcluster.Options{Buckets: []mockcluster.BucketOptions{{Name: "default", NumVbuckets: 64}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b := c.Bucket("default")
	if _, err := b.AddScope("inv"); err != nil {
		t.Fatal(err)
	}
	cid, err := b.AddCollection("inv", "items")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 150 {
		k := fmt.Sprintf("item-%03d", i)
		want = append(want, k)
		if _, err := b.Set("inv", "items", k, []byte(`{"n":`+fmt.Sprint(i)+`}`), 0x02000000, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Set("", "", k, []byte("elsewhere"), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	agent := newAgent(t, c, nil)
	full := &gocbcore.RangeScanCreateRangeScanConfig{Start: []byte{0}, End: []byte{0xff}}

	for _, keysOnly := range []bool{true, false} {
		var got []string
		for vb := range uint16(64) {
			items, ok := gocbScan(t, agent, vb, gocbcore.RangeScanCreateOptions{ScopeName: "inv", CollectionName: "items",
				KeysOnly: keysOnly, Range: full}, 9)
			if !ok {
				continue
			}
			for _, it := range items {
				got = append(got, string(it.Key))
				if keysOnly {
					continue
				}
				d, ok := b.Get("inv", "items", string(it.Key))
				if !ok || !bytes.Equal(it.Value, d.Value) || uint64(it.Cas) != d.Cas || it.Flags != d.Flags || uint64(it.SeqNo) != d.Seqno {
					t.Errorf("item %s = %+v, stored %+v", it.Key, it, d)
				}
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("keysOnly %v: scanned %d keys, want each of %d once", keysOnly, len(got), len(want))
		}
	}

	// A seeded sample is the same twice.
	vb := b.VbucketForKey([]byte(want[0]))
	sample := func() []string {
		items, ok := gocbScan(t, agent, vb, gocbcore.RangeScanCreateOptions{CollectionID: cid, KeysOnly: true,
			Sampling: &gocbcore.RangeScanCreateRandomSamplingConfig{Samples: 1, Seed: 5}}, 0)
		if !ok {
			t.Fatal("sampling found nothing")
		}
		var keys []string
		for _, it := range items {
			keys = append(keys, string(it.Key))
		}
		return keys
	}
	if a, b := sample(), sample(); len(a) != 1 || !slices.Equal(a, b) {
		t.Fatalf("samples %q and %q", a, b)
	}

	// Cancel after one continue: nothing stays open on the mock.
	res, err := call(t, func(cb func(gocbcore.RangeScanCreateResult, error)) (gocbcore.PendingOp, error) {
		return agent.RangeScanCreate(vb, gocbcore.RangeScanCreateOptions{CollectionID: cid, Range: full, Deadline: deadline()}, cb)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, func(cb func(*gocbcore.RangeScanContinueResult, error)) (gocbcore.PendingOp, error) {
		return res.RangeScanContinue(gocbcore.RangeScanContinueOptions{MaxCount: 1, Deadline: deadline()},
			func([]gocbcore.RangeScanItem) {}, cb)
	}); err != nil {
		t.Fatal(err)
	}
	if c.OpenRangeScans() != 1 {
		t.Fatalf("%d scans open, want 1", c.OpenRangeScans())
	}
	if _, err := call(t, func(cb func(*gocbcore.RangeScanCancelResult, error)) (gocbcore.PendingOp, error) {
		return res.RangeScanCancel(gocbcore.RangeScanCancelOptions{Deadline: deadline()}, cb)
	}); err != nil {
		t.Fatalf("RangeScanCancel: %v", err)
	}
	if n := c.OpenRangeScans(); n != 0 {
		t.Fatalf("%d scans open after the cancel", n)
	}
}
