package reftest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/couchbase/gocbcore/v10"
	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

// kvwire's Collection.Scan and gocbcore's range scans (one per vbucket, as
// gocb drives them) return the same documents of the same data: the whole
// collection, a range, a prefix, keys only; and kvwire's sample of N is N
// documents of gocbcore's samples of N per vbucket with the same seed.
func TestScanMatchesGocbcore(t *testing.T) {
	const vbs = 64
	c, err := mockcluster.New(mockcluster.Options{Buckets: []mockcluster.BucketOptions{{Name: "default", NumVbuckets: vbs}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b := c.Bucket("default")
	if _, err := b.AddScope("inv"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddCollection("inv", "items"); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		k := fmt.Sprintf("item-%03d", i)
		if i%3 == 0 {
			k = fmt.Sprintf("other-%03d", i)
		}
		if _, err := b.Set("inv", "items", k, []byte(`{"n":`+fmt.Sprint(i)+`}`), 0x02000000, 0); err != nil {
			t.Fatal(err)
		}
	}
	agent := newAgent(t, c, nil)
	ctx := context.Background()
	kc, err := client.Connect(ctx, c.ConnString(), &client.Options{Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword, Bucket: "default"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.Close() })
	col := kc.Scope("inv").Collection("items")

	type doc struct {
		value []byte
		cas   uint64
		flags uint32
	}
	gocb := func(opts gocbcore.RangeScanCreateOptions) map[string]doc {
		out := map[string]doc{}
		opts.ScopeName, opts.CollectionName = "inv", "items"
		for vb := range uint16(vbs) {
			items, _ := gocbScan(t, agent, vb, opts, 20)
			for _, it := range items {
				if _, dup := out[string(it.Key)]; dup {
					t.Fatalf("gocbcore returned %q twice", it.Key)
				}
				out[string(it.Key)] = doc{it.Value, uint64(it.Cas), it.Flags}
			}
		}
		return out
	}
	kvwire := func(st client.ScanType, o *client.ScanOptions) map[string]doc {
		res, err := col.Scan(ctx, st, o)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]doc{}
		for it, err := range res.All() {
			if err != nil {
				t.Fatal(err)
			}
			if _, dup := out[it.ID]; dup {
				t.Fatalf("kvwire returned %q twice", it.ID)
			}
			out[it.ID] = doc{it.Value, it.Cas, it.Flags}
		}
		return out
	}
	same := func(name string, g, k map[string]doc) {
		t.Helper()
		if len(g) == 0 {
			t.Fatalf("%s: gocbcore returned nothing", name)
		}
		gk, kk := slices.Sorted(maps.Keys(g)), slices.Sorted(maps.Keys(k))
		if !slices.Equal(gk, kk) {
			t.Fatalf("%s: gocbcore returned %d keys, kvwire %d; they differ", name, len(gk), len(kk))
		}
		for key, gd := range g {
			kd := k[key]
			if !bytes.Equal(gd.value, kd.value) || gd.cas != kd.cas || gd.flags != kd.flags {
				t.Fatalf("%s: %q: gocbcore %+v, kvwire %+v", name, key, gd, kd)
			}
		}
	}

	full := &gocbcore.RangeScanCreateRangeScanConfig{Start: []byte{0}, End: []byte{0xff}}
	same("whole collection", gocb(gocbcore.RangeScanCreateOptions{Range: full}), kvwire(client.RangeScan{}, &client.ScanOptions{Concurrency: 4}))
	same("keys only", gocb(gocbcore.RangeScanCreateOptions{Range: full, KeysOnly: true}),
		kvwire(client.RangeScan{}, &client.ScanOptions{IDsOnly: true}))
	same("range", gocb(gocbcore.RangeScanCreateOptions{Range: &gocbcore.RangeScanCreateRangeScanConfig{
		Start: []byte("item-100"), ExclusiveEnd: []byte("item-200")}}),
		kvwire(client.RangeScan{From: &client.ScanTerm{Term: "item-100"}, To: &client.ScanTerm{Term: "item-200", Exclusive: true}}, nil))
	same("prefix", gocb(gocbcore.RangeScanCreateOptions{Range: &gocbcore.RangeScanCreateRangeScanConfig{
		Start: []byte("other-"), End: []byte("other-\xff")}}),
		kvwire(client.PrefixScan{Prefix: "other-"}, &client.ScanOptions{Concurrency: 8}))

	g := gocb(gocbcore.RangeScanCreateOptions{KeysOnly: true, Sampling: &gocbcore.RangeScanCreateRandomSamplingConfig{Samples: 2, Seed: 11}})
	k := kvwire(client.SamplingScan{Limit: 2, Seed: 11}, &client.ScanOptions{IDsOnly: true})
	if len(k) != 2 {
		t.Fatalf("kvwire's sample of 2 has %d documents", len(k))
	}
	for key := range k {
		if _, ok := g[key]; !ok {
			t.Fatalf("kvwire sampled %q, which gocbcore's samples with the same seed do not hold", key)
		}
	}
	if n := c.OpenRangeScans(); n != 0 {
		t.Fatalf("%d scans left open", n)
	}
}
