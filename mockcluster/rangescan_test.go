package mockcluster

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// scanEnv is a cluster with a fake clock (it moves only when the test
// advances it, or by tick on every reading when tick is set), a client per
// node, and helpers speaking the range scan protocol in raw requests.
type scanEnv struct {
	t     *testing.T
	c     *Cluster
	b     *Bucket
	now   atomic.Int64 // unix nanoseconds
	tick  atomic.Int64 // added to now on every reading
	conns map[int]*rawClient
}

func newScanEnv(t *testing.T, o Options) *scanEnv {
	e := &scanEnv{t: t, conns: map[int]*rawClient{}}
	e.now.Store(time.Unix(1_700_000_000, 0).UnixNano())
	o.Clock = func() time.Time { return time.Unix(0, e.now.Add(e.tick.Load())) }
	if o.Buckets == nil {
		o.Buckets = []BucketOptions{{Name: DefaultBucket, NumVbuckets: 16}}
	}
	e.c = newCluster(t, o)
	e.b = e.c.Bucket(DefaultBucket)
	return e
}

// cl returns a client on the active node of vb.
func (e *scanEnv) cl(vb uint16) *rawClient {
	id := e.b.VbucketMap()[vb][0]
	if e.conns[id] == nil {
		e.conns[id] = bootstrap(e.t, e.c.Node(id).Addr(), DefaultBucket, nil)
	}
	return e.conns[id]
}

func (e *scanEnv) seed(scope, coll string, keys ...string) {
	e.t.Helper()
	for _, k := range keys {
		if _, err := e.b.Set(scope, coll, k, []byte(`{"k":"`+k+`"}`), 0x02000000, 0); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *scanEnv) create(cl *rawClient, vb uint16, cfg *memdx.RangeScanCreate) memdx.Packet {
	e.t.Helper()
	r, err := memdx.NewRangeScanCreate(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	r.Vbucket = vb
	return cl.do(r)
}

func (e *scanEnv) mustCreate(vb uint16, cfg *memdx.RangeScanCreate) memdx.RangeScanID {
	e.t.Helper()
	p := e.create(e.cl(vb), vb, cfg)
	if p.Status != memdx.StatusSuccess {
		e.t.Fatalf("create on vb %d: %s %s", vb, p.Status, p.Value)
	}
	id, err := memdx.DecodeRangeScanCreateResponse(&p)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// batch is what one continue returned.
type batch struct {
	status    memdx.Status
	responses int
	keys      []string
	docs      []memdx.RangeScanDocument
}

// cont sends one continue and reads its responses up to the one that ends
// it (any status but SUCCESS).
func (e *scanEnv) cont(cl *rawClient, vb uint16, c memdx.RangeScanContinue) batch {
	e.t.Helper()
	r := memdx.NewRangeScanContinue(c)
	r.Vbucket = vb
	op := cl.send(r)
	var out batch
	for {
		p := cl.recv(op)
		out.responses++
		out.status = p.Status
		switch p.Status {
		case memdx.StatusSuccess, memdx.StatusRangeScanMore, memdx.StatusRangeScanComplete:
		default: // RANGE_SCAN_CANCELLED included: the status alone, as kv_engine's
			return out
		}
		content, err := memdx.DecodeRangeScanContent(&p)
		if err != nil {
			e.t.Fatal(err)
		}
		if content == memdx.RangeScanKeys {
			keys, err := memdx.DecodeRangeScanKeys(nil, p.Value)
			if err != nil {
				e.t.Fatal(err)
			}
			for _, k := range keys {
				out.keys = append(out.keys, string(k))
			}
		} else {
			docs, err := memdx.DecodeRangeScanDocuments(nil, p.Value)
			if err != nil {
				e.t.Fatal(err)
			}
			for _, d := range docs {
				out.keys = append(out.keys, string(d.Key))
			}
			out.docs = append(out.docs, docs...)
		}
		if p.Status != memdx.StatusSuccess {
			return out
		}
	}
}

// drain continues a scan with the given limits until it completes and
// returns every key and document.
func (e *scanEnv) drain(vb uint16, id memdx.RangeScanID, limit uint32) batch {
	e.t.Helper()
	var all batch
	for i := 0; ; i++ {
		b := e.cont(e.cl(vb), vb, memdx.RangeScanContinue{ID: id, ItemLimit: limit})
		all.keys = append(all.keys, b.keys...)
		all.docs = append(all.docs, b.docs...)
		all.responses += b.responses
		switch b.status {
		case memdx.StatusRangeScanComplete:
			all.status = b.status
			return all
		case memdx.StatusRangeScanMore:
			if len(b.keys) == 0 {
				e.t.Fatal("RANGE_SCAN_MORE without a key")
			}
		default:
			e.t.Fatalf("continue %d: %s", i, b.status)
		}
	}
}

func (e *scanEnv) cancel(vb uint16, id memdx.RangeScanID) memdx.Status {
	e.t.Helper()
	r := memdx.NewRangeScanCancel(id)
	r.Vbucket = vb
	return e.cl(vb).do(r).Status
}

func coll(b *Bucket, t *testing.T, scope, name string) uint32 {
	t.Helper()
	cid, err := b.CollectionID(scope, name)
	if err != nil {
		t.Fatal(err)
	}
	return cid
}

func TestRangeScanReturnsEveryDocumentOfTheCollectionOnce(t *testing.T) {
	e := newScanEnv(t, Options{})
	if _, err := e.b.AddScope("inv"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.AddCollection("inv", "items"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.AddCollection("inv", "other"); err != nil {
		t.Fatal(err)
	}
	cid := coll(e.b, t, "inv", "items")
	var want []string
	for i := range 300 {
		want = append(want, fmt.Sprintf("item-%03d", i))
	}
	e.seed("inv", "items", want...)
	// Same keys elsewhere: a scan must not cross collections.
	e.seed("", "", want[:50]...)
	e.seed("inv", "other", "item-x", "item-y")
	slices.Sort(want)

	for _, keyOnly := range []bool{true, false} {
		t.Run(fmt.Sprintf("key_only=%v", keyOnly), func(t *testing.T) {
			seen := map[string]int{}
			for vb := range uint16(e.b.NumVbuckets()) {
				cfg := &memdx.RangeScanCreate{CollectionID: cid, KeyOnly: keyOnly,
					Range: &memdx.RangeScanRange{Start: []byte{0}, End: []byte{0xff}}}
				p := e.create(e.cl(vb), vb, cfg)
				if p.Status == memdx.StatusKeyNotFound {
					continue // no document of the collection in this vbucket
				}
				if p.Status != memdx.StatusSuccess {
					t.Fatalf("create vb %d: %s", vb, p.Status)
				}
				id, _ := memdx.DecodeRangeScanCreateResponse(&p)
				got := e.drain(vb, id, 7)
				if !slices.IsSorted(got.keys) {
					t.Errorf("vb %d keys out of order: %v", vb, got.keys)
				}
				for _, k := range got.keys {
					seen[k]++
					if e.b.VbucketForKey([]byte(k)) != vb {
						t.Errorf("key %s from vb %d", k, vb)
					}
				}
				if keyOnly != (len(got.docs) == 0) {
					t.Errorf("key_only %v but %d documents", keyOnly, len(got.docs))
				}
				for _, d := range got.docs {
					stored, ok := e.b.Get("inv", "items", string(d.Key))
					if !ok || !bytes.Equal(d.Value, stored.Value) || d.Cas != stored.Cas || d.Flags != stored.Flags ||
						d.Seqno != stored.Seqno || !d.Datatype.Has(memdx.DatatypeJSON) {
						t.Errorf("document %s = %+v, stored %+v", d.Key, d, stored)
					}
				}
			}
			var keys []string
			for k, n := range seen {
				if n != 1 {
					t.Errorf("key %s returned %d times", k, n)
				}
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, want) {
				t.Fatalf("scanned %d keys, want %d", len(keys), len(want))
			}
			if n := e.c.OpenRangeScans(); n != 0 {
				t.Fatalf("%d scans open after every scan completed", n)
			}
		})
	}
}

func TestRangeScanRanges(t *testing.T) {
	e := newScanEnv(t, Options{Nodes: 1, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	e.seed("", "", "a", "b", "c", "d", "e", "user", "user:1", "user:2", "user:3", "userx", "usr")
	cases := []struct {
		name string
		r    memdx.RangeScanRange
		want []string
	}{
		{"prefix", memdx.RangeScanRange{Start: []byte("user:"), End: []byte("user:\xff")}, []string{"user:1", "user:2", "user:3"}},
		{"inclusive", memdx.RangeScanRange{Start: []byte("b"), End: []byte("d")}, []string{"b", "c", "d"}},
		{"exclusive", memdx.RangeScanRange{Start: []byte("b"), ExclusiveStart: true, End: []byte("d"), ExclusiveEnd: true}, []string{"c"}},
		{"excl_start only", memdx.RangeScanRange{Start: []byte("user:3"), ExclusiveStart: true, End: []byte("z")}, []string{"userx", "usr"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.r
			id := e.mustCreate(0, &memdx.RangeScanCreate{KeyOnly: true, Range: &r})
			if got := e.drain(0, id, 0).keys; !slices.Equal(got, c.want) {
				t.Fatalf("keys %q, want %q", got, c.want)
			}
		})
	}
	// kv_engine answers KEY_ENOENT for a range holding no document.
	for _, r := range []memdx.RangeScanRange{
		{Start: []byte("f"), End: []byte("t")},
		{Start: []byte("c"), End: []byte("b")},
		{Start: []byte("c"), ExclusiveStart: true, End: []byte("d"), ExclusiveEnd: true},
	} {
		if p := e.create(e.cl(0), 0, &memdx.RangeScanCreate{Range: &r}); p.Status != memdx.StatusKeyNotFound {
			t.Errorf("empty range %q..%q: %s", r.Start, r.End, p.Status)
		}
	}
}

func TestRangeScanSamplingIsSeededAndSized(t *testing.T) {
	e := newScanEnv(t, Options{Nodes: 1, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	var all []string
	for i := range 100 {
		all = append(all, fmt.Sprintf("k%03d", i))
	}
	e.seed("", "", all...)
	sampleKeys := func(samples uint64, seed uint32) []string {
		id := e.mustCreate(0, &memdx.RangeScanCreate{KeyOnly: true, Sampling: &memdx.RangeScanSampling{Samples: samples, Seed: seed}})
		return e.drain(0, id, 3).keys
	}
	a, b := sampleKeys(10, 42), sampleKeys(10, 42)
	if len(a) != 10 || !slices.Equal(a, b) {
		t.Fatalf("seed 42 sampled %q then %q", a, b)
	}
	if c := sampleKeys(10, 43); slices.Equal(a, c) {
		t.Errorf("seeds 42 and 43 sampled the same keys %q", a)
	}
	if got := sampleKeys(1000, 1); !slices.Equal(got, all) {
		t.Errorf("more samples than documents returned %d keys, want all %d", len(got), len(all))
	}
	// An empty collection cannot be sampled (kv_engine: KEY_ENOENT).
	if _, err := e.b.AddCollection("_default", "empty"); err != nil {
		t.Fatal(err)
	}
	p := e.create(e.cl(0), 0, &memdx.RangeScanCreate{CollectionID: coll(e.b, t, "_default", "empty"),
		Sampling: &memdx.RangeScanSampling{Samples: 5}})
	if p.Status != memdx.StatusKeyNotFound {
		t.Fatalf("sampling an empty collection: %s", p.Status)
	}
}

func TestRangeScanContinueLimits(t *testing.T) {
	e := newScanEnv(t, Options{Nodes: 1, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	var keys []string
	for i := range 20 {
		keys = append(keys, fmt.Sprintf("key-%05d", i)) // 9 bytes each
	}
	e.seed("", "", keys...)
	cl := e.cl(0)

	t.Run("items", func(t *testing.T) {
		id := e.mustCreate(0, &memdx.RangeScanCreate{KeyOnly: true})
		var sizes []int
		for {
			b := e.cont(cl, 0, memdx.RangeScanContinue{ID: id, ItemLimit: 6})
			sizes = append(sizes, len(b.keys))
			if b.status == memdx.StatusRangeScanComplete {
				break
			}
			if b.status != memdx.StatusRangeScanMore {
				t.Fatalf("status %s", b.status)
			}
		}
		if !slices.Equal(sizes, []int{6, 6, 6, 2}) {
			t.Fatalf("continues returned %v keys", sizes)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		// kv_engine counts a key with its collection prefix: 9 + 1 bytes
		// here. Limit 21: the limit is reached by the third key, which is
		// still sent whole.
		id := e.mustCreate(0, &memdx.RangeScanCreate{KeyOnly: true})
		b := e.cont(cl, 0, memdx.RangeScanContinue{ID: id, ByteLimit: 21})
		if b.status != memdx.StatusRangeScanMore || len(b.keys) != 3 {
			t.Fatalf("byte limit 21: %s with %d keys", b.status, len(b.keys))
		}
		b = e.cont(cl, 0, memdx.RangeScanContinue{ID: id, ByteLimit: 20})
		if b.status != memdx.StatusRangeScanMore || len(b.keys) != 2 {
			t.Fatalf("byte limit 20: %s with %d keys", b.status, len(b.keys))
		}
		// A limit smaller than one key still returns one.
		b = e.cont(cl, 0, memdx.RangeScanContinue{ID: id, ByteLimit: 1})
		if b.status != memdx.StatusRangeScanMore || len(b.keys) != 1 || b.keys[0] != keys[5] {
			t.Fatalf("byte limit 1: %s with %q", b.status, b.keys)
		}
		// Documents count key (with prefix) and value bytes.
		id2 := e.mustCreate(0, &memdx.RangeScanCreate{})
		doc := 1 + len(keys[0]) + len(`{"k":"`+keys[0]+`"}`)
		b = e.cont(cl, 0, memdx.RangeScanContinue{ID: id2, ByteLimit: uint32(2 * doc)})
		if b.status != memdx.StatusRangeScanMore || len(b.docs) != 2 {
			t.Fatalf("document byte limit: %s with %d documents", b.status, len(b.docs))
		}
		e.cancel(0, id)
		e.cancel(0, id2)
	})
	t.Run("time", func(t *testing.T) {
		id := e.mustCreate(0, &memdx.RangeScanCreate{KeyOnly: true})
		// Every reading of the cluster's clock now moves it 1 ms: a 4 ms
		// limit ends the continue after a few keys, never after none.
		e.tick.Store(int64(time.Millisecond))
		b := e.cont(cl, 0, memdx.RangeScanContinue{ID: id, TimeLimitMs: 4})
		e.tick.Store(0)
		if b.status != memdx.StatusRangeScanMore || len(b.keys) < 1 || len(b.keys) > 4 {
			t.Fatalf("time limit: %s with %d keys", b.status, len(b.keys))
		}
		if rest := e.drain(0, id, 0); len(b.keys)+len(rest.keys) != len(keys) {
			t.Fatalf("time-limited continue then drain: %d + %d keys", len(b.keys), len(rest.keys))
		}
	})
	t.Run("batches", func(t *testing.T) {
		// 20 documents of 1 KiB: the continue sends full 8 KiB batches as
		// SUCCESS responses before the final one.
		big := strings.Repeat("v", 1024)
		for _, k := range keys {
			if _, err := e.b.Set("", "", k, []byte(big), 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		id := e.mustCreate(0, &memdx.RangeScanCreate{})
		b := e.cont(cl, 0, memdx.RangeScanContinue{ID: id})
		if b.status != memdx.StatusRangeScanComplete || len(b.docs) != len(keys) || b.responses < 3 {
			t.Fatalf("%s after %d responses with %d documents", b.status, b.responses, len(b.docs))
		}
	})
}

func TestRangeScanCancelFreesTheScan(t *testing.T) {
	e := newScanEnv(t, Options{Nodes: 1, MaxRangeScans: 2, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	e.seed("", "", "a", "b", "c")
	id := e.mustCreate(0, &memdx.RangeScanCreate{})
	id2 := e.mustCreate(0, &memdx.RangeScanCreate{})
	// The node's bound on open scans (kv_engine: EBUSY).
	if p := e.create(e.cl(0), 0, &memdx.RangeScanCreate{}); p.Status != memdx.StatusBusy {
		t.Fatalf("third scan with MaxRangeScans 2: %s", p.Status)
	}
	// kv_engine checks the bound before it opens the snapshot: an empty
	// range answers EBUSY, not KEY_ENOENT, while the node is full.
	empty := &memdx.RangeScanRange{Start: []byte("x"), End: []byte("y")}
	if p := e.create(e.cl(0), 0, &memdx.RangeScanCreate{Range: empty}); p.Status != memdx.StatusBusy {
		t.Fatalf("empty range on a full node: %s", p.Status)
	}
	if b := e.cont(e.cl(0), 0, memdx.RangeScanContinue{ID: id, ItemLimit: 1}); b.status != memdx.StatusRangeScanMore {
		t.Fatalf("continue: %s", b.status)
	}
	if st := e.cancel(0, id); st != memdx.StatusSuccess {
		t.Fatalf("cancel: %s", st)
	}
	if e.c.OpenRangeScans() != 1 {
		t.Fatalf("%d scans open after one of two was cancelled", e.c.OpenRangeScans())
	}
	// kv_engine: a continue or cancel of an unknown scan is KEY_ENOENT.
	if b := e.cont(e.cl(0), 0, memdx.RangeScanContinue{ID: id}); b.status != memdx.StatusKeyNotFound {
		t.Fatalf("continue after cancel: %s", b.status)
	}
	if st := e.cancel(0, id); st != memdx.StatusKeyNotFound {
		t.Fatalf("second cancel: %s", st)
	}
	e.mustCreate(0, &memdx.RangeScanCreate{}) // the freed slot
	// A completed scan is gone too.
	e.drain(0, id2, 0)
	if b := e.cont(e.cl(0), 0, memdx.RangeScanContinue{ID: id2}); b.status != memdx.StatusKeyNotFound {
		t.Fatalf("continue after complete: %s", b.status)
	}
}

func TestRangeScanExpiresAfterItsLifetime(t *testing.T) {
	e := newScanEnv(t, Options{Nodes: 1, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	e.seed("", "", "a", "b", "c")
	id := e.mustCreate(0, &memdx.RangeScanCreate{KeyOnly: true})
	e.now.Add(int64(DefaultRangeScanLifetime - time.Second))
	if b := e.cont(e.cl(0), 0, memdx.RangeScanContinue{ID: id, ItemLimit: 1}); b.status != memdx.StatusRangeScanMore {
		t.Fatalf("continue before the lifetime ends: %s", b.status)
	}
	// Being continued does not extend a scan's life (kv_engine measures it
	// from the create).
	e.now.Add(int64(time.Second))
	if n := e.c.OpenRangeScans(); n != 0 {
		t.Fatalf("%d scans open after the lifetime", n)
	}
	if b := e.cont(e.cl(0), 0, memdx.RangeScanContinue{ID: id}); b.status != memdx.StatusKeyNotFound {
		t.Fatalf("continue after the lifetime: %s", b.status)
	}
}

func TestRangeScanOnMovedVbucket(t *testing.T) {
	e := newScanEnv(t, Options{Nodes: 2, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 4}}})
	e.seed("", "", "a", "b", "c", "d", "e", "f", "g", "h")
	vb := e.b.VbucketForKey([]byte("a"))
	old := e.b.VbucketMap()[vb][0]
	oldCl := e.cl(vb)
	id := e.mustCreate(vb, &memdx.RangeScanCreate{KeyOnly: true})
	if err := e.c.Failover(old); err != nil {
		t.Fatal(err)
	}
	if e.b.VbucketMap()[vb][0] == old {
		t.Fatal("failover left the vbucket on its node")
	}
	if b := e.cont(oldCl, vb, memdx.RangeScanContinue{ID: id}); b.status != memdx.StatusNotMyVbucket {
		t.Fatalf("continue on the old node: %s", b.status)
	}
	if n := e.c.OpenRangeScans(); n != 0 {
		t.Fatalf("%d scans open after their vbucket moved", n)
	}
	// The new active node does not know the scan.
	if b := e.cont(e.cl(vb), vb, memdx.RangeScanContinue{ID: id}); b.status != memdx.StatusKeyNotFound {
		t.Fatalf("continue on the new node: %s", b.status)
	}
	// Creating on a node that is not active answers NMV.
	r, _ := memdx.NewRangeScanCreate(&memdx.RangeScanCreate{})
	r.Vbucket = vb
	if p := oldCl.do(r); p.Status != memdx.StatusNotMyVbucket {
		t.Fatalf("create on the old node: %s", p.Status)
	}
}

func TestRangeScanSnapshotRequirements(t *testing.T) {
	e := newScanEnv(t, Options{Nodes: 1, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	e.seed("", "", "a", "b", "c")
	if _, err := e.b.Set("", "", "a", []byte("2"), 0, 0); err != nil { // seqno 4; seqno 1 is no longer stored
		t.Fatal(err)
	}
	uuid := e.b.VbucketUUID(0)
	cl := e.cl(0)
	cases := []struct {
		name string
		sr   memdx.RangeScanSnapshot
		want memdx.Status
	}{
		{"met", memdx.RangeScanSnapshot{VbUUID: uuid, Seqno: 4}, memdx.StatusSuccess},
		{"seqno stored", memdx.RangeScanSnapshot{VbUUID: uuid, Seqno: 2, SeqnoExists: true}, memdx.StatusSuccess},
		{"uuid differs", memdx.RangeScanSnapshot{VbUUID: uuid + 1, Seqno: 1}, memdx.StatusVbUUIDNotEqual},
		{"seqno not reached", memdx.RangeScanSnapshot{VbUUID: uuid, Seqno: 5}, memdx.StatusTmpFail},
		{"seqno not reached within the timeout", memdx.RangeScanSnapshot{VbUUID: uuid, Seqno: 5, TimeoutMs: 1}, memdx.StatusTmpFail},
		{"seqno no longer stored", memdx.RangeScanSnapshot{VbUUID: uuid, Seqno: 1, SeqnoExists: true}, memdx.StatusNotStored},
	}
	for _, c := range cases {
		sr := c.sr
		p := e.create(cl, 0, &memdx.RangeScanCreate{Snapshot: &sr})
		if p.Status != c.want {
			t.Errorf("%s: %s, want %s", c.name, p.Status, c.want)
		}
		// EPBucket::createRangeScan and EPVBucket::createRangeScan answer
		// vbuuid_not_equal and temporary_failure without an error context.
		if (c.want == memdx.StatusVbUUIDNotEqual || c.want == memdx.StatusTmpFail) && len(p.Value) != 0 {
			t.Errorf("%s: body %q, want none", c.name, p.Value)
		}
	}
}

// A create whose snapshot seqno is not reached waits (up to its timeout)
// and succeeds as soon as a write reaches it, on an ordered and on an
// unordered connection.
func TestRangeScanCreateWaitsForItsSeqno(t *testing.T) {
	e := newScanEnv(t, Options{Nodes: 1, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	e.seed("", "", "a")
	writer := e.cl(0)
	for _, unordered := range []bool{false, true} {
		fs := stdFeatures
		if unordered {
			fs = append(slices.Clone(stdFeatures), memdx.FeatureUnorderedExecution)
		}
		waiter := bootstrap(t, e.c.Node(0).Addr(), DefaultBucket, fs)
		doc, _ := e.b.Get("", "", "a")
		r, err := memdx.NewRangeScanCreate(&memdx.RangeScanCreate{KeyOnly: true,
			Snapshot: &memdx.RangeScanSnapshot{VbUUID: e.b.VbucketUUID(0), Seqno: doc.Seqno + 1, TimeoutMs: 60_000}})
		if err != nil {
			t.Fatal(err)
		}
		op := waiter.send(r)
		if p := writer.do(keyReq(writer, e.b, set("b", "1"))); p.Status != memdx.StatusSuccess {
			t.Fatalf("set: %s", p.Status)
		}
		// Well before the 60 s timeout (recv gives up after 5 s).
		if p := waiter.recv(op); p.Status != memdx.StatusSuccess {
			t.Fatalf("unordered %v: create after the seqno was reached: %s", unordered, p.Status)
		}
	}
}

// A scan returns a document's body without its xattrs, and no tombstone
// (kv_engine scans with DocumentFilter::NO_DELETES and, without
// include_xattrs, strips the xattrs).
func TestRangeScanSkipsXattrsAndTombstones(t *testing.T) {
	e := newScanEnv(t, Options{Nodes: 1, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	e.seed("", "", "body", "gone")
	cl := bootstrap(t, e.c.Node(0).Addr(), DefaultBucket, append(slices.Clone(stdFeatures), memdx.FeatureXattr))
	xattr := func(key, path string) {
		r := memdx.NewSubdocMutation(memdx.OpSubdocDictUpsert, []byte(key), []byte(path), []byte("1"),
			memdx.SubdocPathXattr|memdx.SubdocPathMkdirP, 0, 0)
		if p := cl.do(keyReq(cl, e.b, r)); p.Status != memdx.StatusSuccess {
			t.Fatalf("xattr %s on %s: %s", path, key, p.Status)
		}
	}
	xattr("body", "user.x")
	xattr("gone", "_sys.x") // a system xattr outlives the delete: a tombstone
	if p := cl.do(keyReq(cl, e.b, memdx.NewDelete([]byte("gone")))); p.Status != memdx.StatusSuccess {
		t.Fatalf("delete: %s", p.Status)
	}
	id := e.mustCreate(0, &memdx.RangeScanCreate{})
	got := e.drain(0, id, 0)
	if len(got.docs) != 1 || string(got.docs[0].Key) != "body" {
		t.Fatalf("scanned %q", got.keys)
	}
	if d := got.docs[0]; string(d.Value) != `{"k":"body"}` || d.Datatype.Has(memdx.DatatypeXattr) {
		t.Fatalf("document %s: value %q datatype %s", d.Key, d.Value, d.Datatype)
	}
}

func TestRangeScanRequestValidation(t *testing.T) {
	e := newScanEnv(t, Options{Nodes: 1, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	e.seed("", "", "a")
	cl := e.cl(0)
	plain := memdx.Request{OpCode: memdx.OpRangeScanCreate, Value: []byte(`{}`)}
	if p := cl.do(plain); p.Status != memdx.StatusInvalidArgs {
		t.Errorf("create without datatype JSON: %s", p.Status)
	}
	for _, v := range []string{`{`, `{"range":{"start":"YQ=="}}`, `{"range":{},"sampling":{"samples":1}}`} {
		r := memdx.Request{OpCode: memdx.OpRangeScanCreate, Datatype: memdx.DatatypeJSON, Value: []byte(v)}
		if p := cl.do(r); p.Status != memdx.StatusInvalidArgs {
			t.Errorf("create %s: %s", v, p.Status)
		}
	}
	if p := e.create(cl, 0, &memdx.RangeScanCreate{CollectionID: 99}); p.Status != memdx.StatusUnknownCollection {
		t.Errorf("unknown collection: %s", p.Status)
	}
	bad := memdx.Request{OpCode: memdx.OpRangeScanContinue, Extras: make([]byte, 16)}
	if p := cl.do(bad); p.Status != memdx.StatusInvalidArgs {
		t.Errorf("continue with 16 bytes of extras: %s", p.Status)
	}
	bad = memdx.Request{OpCode: memdx.OpRangeScanCancel, Extras: make([]byte, 28)}
	if p := cl.do(bad); p.Status != memdx.StatusInvalidArgs {
		t.Errorf("cancel with 28 bytes of extras: %s", p.Status)
	}
	// A scan whose collection is dropped is cancelled at its next continue.
	if _, err := e.b.AddCollection("_default", "c2"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.Set("_default", "c2", "x", []byte("1"), 0, 0); err != nil {
		t.Fatal(err)
	}
	id := e.mustCreate(0, &memdx.RangeScanCreate{CollectionID: coll(e.b, t, "_default", "c2")})
	if err := e.b.DropCollection("_default", "c2"); err != nil {
		t.Fatal(err)
	}
	if b := e.cont(cl, 0, memdx.RangeScanContinue{ID: id}); b.status != memdx.StatusUnknownCollection {
		t.Errorf("continue after the collection was dropped: %s", b.status)
	}
	if n := e.c.OpenRangeScans(); n != 0 {
		t.Errorf("%d scans open", n)
	}
}

// NoRangeScans: a server before 7.2. The bucket config does not list the
// rangeScan capability and the range scan opcodes are unknown commands.
func TestNoRangeScansIsAnOlderServer(t *testing.T) {
	e := newScanEnv(t, Options{NoRangeScans: true})
	e.seed("", "", "k1", "k2")
	vb := e.b.VbucketForKey([]byte("k1"))
	cl := e.cl(vb)
	p := e.create(cl, vb, &memdx.RangeScanCreate{Range: &memdx.RangeScanRange{Start: []byte{0}, End: []byte{0xff}}})
	if p.Status != memdx.StatusUnknownCommand {
		t.Fatalf("create: %s, want UNKNOWN_COMMAND", p.Status)
	}
	for _, r := range []memdx.Request{memdx.NewRangeScanContinue(memdx.RangeScanContinue{}), memdx.NewRangeScanCancel(memdx.RangeScanID{})} {
		r.Vbucket = vb
		if p := cl.do(r); p.Status != memdx.StatusUnknownCommand {
			t.Fatalf("%s: %s, want UNKNOWN_COMMAND", r.OpCode, p.Status)
		}
	}
	if cfg := string(e.b.ConfigJSON(0)); strings.Contains(cfg, `"rangeScan"`) || !strings.Contains(cfg, `"collections"`) {
		t.Fatalf("bucket capabilities: %s", cfg)
	}
	if cfg := string(newScanEnv(t, Options{}).b.ConfigJSON(0)); !strings.Contains(cfg, `"rangeScan"`) {
		t.Fatalf("a default cluster does not list rangeScan: %s", cfg)
	}
}
