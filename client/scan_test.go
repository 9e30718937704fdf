package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/rangescan"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// scanDocs writes n documents "doc-000".."doc-(n-1)" (value "v-<key>") and
// a few others outside the "doc-" prefix, and returns the doc- keys.
func scanDocs(t *testing.T, col *Collection, n int) []string {
	t.Helper()
	ctx := context.Background()
	keys := make([]string, n)
	for i := range n {
		keys[i] = fmt.Sprintf("doc-%03d", i)
		_, err := col.Upsert(ctx, keys[i], []byte("v-"+keys[i]), &UpsertOptions{Flags: uint32(i)})
		require.NoError(t, err)
	}
	for _, k := range []string{"a", "other-1", "zzz"} {
		_, err := col.Upsert(ctx, k, []byte("x"), nil)
		require.NoError(t, err)
	}
	return keys
}

// collect runs a scan to its end and returns its items, failing on an
// error.
func collect(t *testing.T, col *Collection, st ScanType, o *ScanOptions) []ScanItem {
	t.Helper()
	res, err := col.Scan(context.Background(), st, o)
	require.NoError(t, err)
	var items []ScanItem
	for it, err := range res.All() {
		require.NoError(t, err)
		items = append(items, it)
	}
	return items
}

// ids returns the items' keys, sorted, and fails on a key returned twice.
func ids(t *testing.T, items []ScanItem) []string {
	t.Helper()
	out := make([]string, 0, len(items))
	seen := map[string]bool{}
	for _, it := range items {
		require.False(t, seen[it.ID], "key %q returned twice", it.ID)
		seen[it.ID] = true
		out = append(out, it.ID)
	}
	slices.Sort(out)
	return out
}

// scanMock starts a mock whose default bucket has vbs vbuckets (64 when
// 0) and connects to it.
func scanMock(t *testing.T, o mockcluster.Options, vbs int) (*mockcluster.Cluster, *Client) {
	t.Helper()
	if vbs == 0 {
		vbs = 64
	}
	o.Buckets = []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumVbuckets: vbs}}
	mc := newMock(t, o)
	return mc, connect(t, mc, nil)
}

func TestScanReturnsEveryDocumentOnce(t *testing.T) {
	t.Parallel()
	mc, c := scanMock(t, mockcluster.Options{}, 0)
	col := c.DefaultCollection()
	keys := scanDocs(t, col, 200)
	all := append(slices.Clone(keys), "a", "other-1", "zzz")
	slices.Sort(all)

	for _, conc := range []int{0, 1, 4, 100} {
		t.Run(fmt.Sprintf("concurrency=%d", conc), func(t *testing.T) {
			o := &ScanOptions{Concurrency: conc, BatchItemLimit: 7}
			items := collect(t, col, RangeScan{}, o)
			assert.Equal(t, all, ids(t, items), "the whole collection")
			for _, it := range items {
				if it.ID == "doc-123" {
					assert.Equal(t, "v-doc-123", string(it.Value))
					assert.Equal(t, uint32(123), it.Flags)
					assert.NotZero(t, it.Cas)
					assert.False(t, it.IDOnly)
				}
			}

			items = collect(t, col, RangeScan{From: &ScanTerm{Term: "doc-100"}, To: &ScanTerm{Term: "doc-150", Exclusive: true}}, o)
			assert.Equal(t, keys[100:150], ids(t, items), "from inclusive, to exclusive")
			items = collect(t, col, RangeScan{From: &ScanTerm{Term: "doc-100", Exclusive: true}, To: &ScanTerm{Term: "doc-150"}}, o)
			assert.Equal(t, keys[101:151], ids(t, items), "from exclusive, to inclusive")

			items = collect(t, col, PrefixScan{Prefix: "doc-1"}, o)
			assert.Equal(t, keys[100:200], ids(t, items))
			items = collect(t, col, PrefixScan{Prefix: "doc-"}, &ScanOptions{Concurrency: conc, IDsOnly: true})
			assert.Equal(t, keys, ids(t, items), "ids only")
			for _, it := range items {
				require.True(t, it.IDOnly)
				require.Nil(t, it.Value)
			}

			items = collect(t, col, SamplingScan{Limit: 1000, Seed: 7}, o)
			assert.Equal(t, all, ids(t, items), "a sample larger than the collection is the collection")
			items = collect(t, col, SamplingScan{Limit: 10, Seed: 7}, o)
			assert.Len(t, ids(t, items), 10, "at most Limit items, each once")

			assert.Zero(t, mc.OpenRangeScans(), "every scan ran to its end or was cancelled")
		})
	}
}

// A scan of a named collection: its terms count 250 bytes at most without
// the collection's LEB128 prefix (kv_engine's range_scan_create_executor
// checks the decoded start and end against KEY_MAX_LENGTH alone), so the
// default range, up to ScanTermMaximum's 250 bytes, is valid there too.
func TestScanOfANamedCollection(t *testing.T) {
	mc, c := scanMock(t, mockcluster.Options{}, 0)
	addCollections(t, mc, "app", "users")
	users := c.Scope("app").Collection("users")
	keys := scanDocs(t, users, 30)
	_ = scanDocs(t, c.DefaultCollection(), 40) // other documents with the same keys

	items := collect(t, users, PrefixScan{Prefix: "doc-"}, nil)
	assert.Equal(t, keys, ids(t, items))
	items = collect(t, users, RangeScan{}, nil)
	assert.ElementsMatch(t, append(slices.Clone(keys), "a", "other-1", "zzz"), ids(t, items))
}

func TestScanOfAnEmptyRangeReturnsNothing(t *testing.T) {
	mc, c := scanMock(t, mockcluster.Options{}, 0)
	col := c.DefaultCollection()
	scanDocs(t, col, 20)
	assert.Empty(t, collect(t, col, PrefixScan{Prefix: "nothing-"}, nil))
	assert.Empty(t, collect(t, col, RangeScan{From: &ScanTerm{Term: "doc-5"}, To: &ScanTerm{Term: "doc-4"}}, nil))
	assert.NotZero(t, mc.Nodes()[0].ErrorCount(memdx.StatusKeyNotFound), "the creates answered KEY_ENOENT")
	assert.Zero(t, mc.OpenRangeScans())
}

// The scan stops after a few items: Close cancels the scans open on the
// server and returns only once the scan's goroutines have ended.
//
// The bucket has 4 vbuckets of about 75 documents each, and a batch is 2
// items: when the caller has taken 5 items, the scan has fetched at most
// the caller's 3 batches, the batches the channel buffers (one per worker)
// and the one each worker is sending, far fewer than any vbucket holds. So
// at Close no vbucket scan has completed by itself: each one created is
// open on the server and only a RANGE_SCAN_CANCEL removes it, whatever the
// timing of the workers.
func TestScanClosedEarlyLeavesNoScanOpen(t *testing.T) {
	const vbs, docs, batch, taken = 4, 300, 2, 5
	mc, c := scanMock(t, mockcluster.Options{}, vbs)
	col := c.DefaultCollection()
	keys := scanDocs(t, col, docs)
	perVb := make([]int, vbs)
	for _, k := range keys {
		perVb[vbmap.VbucketForKey([]byte(k), vbs)]++
	}
	cancels := func() (n uint64) {
		for _, nd := range mc.Nodes() {
			n += nd.RequestCount(memdx.OpRangeScanCancel)
		}
		return n
	}
	for _, conc := range []int{1, vbs} {
		fetched := (taken/batch + 1 + 2*conc) * batch // the caller's, buffered, being sent
		require.Less(t, fetched, slices.Min(perVb), "documents per vbucket %v: a vbucket could complete before Close", perVb)
		before := cancels()
		res, err := col.Scan(context.Background(), RangeScan{}, &ScanOptions{Concurrency: conc, BatchItemLimit: batch})
		require.NoError(t, err)
		for range taken {
			require.True(t, res.Next())
		}
		require.NotZero(t, mc.OpenRangeScans(), "concurrency %d: the scan that returned the items is open", conc)
		require.NoError(t, res.Close())
		assert.Zero(t, mc.OpenRangeScans(), "concurrency %d: Close cancelled the open scans", conc)
		assert.Greater(t, cancels(), before, "concurrency %d: Close sent RANGE_SCAN_CANCEL", conc)
		assert.False(t, res.Next(), "nothing after Close")
		require.NoError(t, res.Close(), "a second Close is harmless")
	}

	// Breaking out of All closes the scan.
	res, err := col.Scan(context.Background(), RangeScan{}, &ScanOptions{Concurrency: 4, BatchItemLimit: 2})
	require.NoError(t, err)
	n := 0
	for _, err := range res.All() {
		require.NoError(t, err)
		if n++; n == 3 {
			break
		}
	}
	assert.Zero(t, mc.OpenRangeScans())

	// A sampling scan stops every vbucket's scan once it has returned its
	// Limit, before the caller asks for more.
	items := collect(t, col, SamplingScan{Limit: 3, Seed: 1}, &ScanOptions{Concurrency: 4, BatchItemLimit: 1})
	assert.Len(t, items, 3)
	assert.Zero(t, mc.OpenRangeScans())
	res, err = col.Scan(context.Background(), SamplingScan{Limit: 3, Seed: 1}, &ScanOptions{Concurrency: 4, BatchItemLimit: 1})
	require.NoError(t, err)
	for range 3 {
		require.True(t, res.Next())
	}
	assert.NotEmpty(t, res.Item().ID, "the last item is still the caller's")
	assert.Zero(t, mc.OpenRangeScans())
	assert.False(t, res.Next())
	require.NoError(t, res.Err())
}

// Cancelling the context ends the iteration with ErrRequestCanceled and
// cancels the scans open on the server, whether the cancel comes between
// continues or while one is in flight.
func TestScanContextCancelLeavesNoScanOpen(t *testing.T) {
	mc, c := scanMock(t, mockcluster.Options{}, 0)
	col := c.DefaultCollection()
	scanDocs(t, col, 300)

	ctx, cancel := context.WithCancel(context.Background())
	res, err := col.Scan(ctx, RangeScan{}, &ScanOptions{Concurrency: 4, BatchItemLimit: 2})
	require.NoError(t, err)
	require.True(t, res.Next())
	cancel()
	for res.Next() {
	}
	require.ErrorIs(t, res.Err(), ErrRequestCanceled)
	assert.Zero(t, mc.OpenRangeScans(), "the open scans were cancelled before Next returned false")
	assert.ErrorIs(t, res.Close(), ErrRequestCanceled)

	// Cancelled while the server runs a continue: the continue is
	// answered after the client left it.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var continues atomic.Int32
	ctl := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanContinue}}, 0,
		func(r *mockcluster.Request) (mockcluster.Action, bool) {
			if continues.Add(1) == 3 {
				cancel()
			}
			return mockcluster.Action{}, false
		})
	defer ctl.Remove()
	res, err = col.Scan(ctx, RangeScan{}, &ScanOptions{Concurrency: 2, BatchItemLimit: 2})
	require.NoError(t, err)
	for res.Next() {
	}
	require.ErrorIs(t, res.Err(), ErrRequestCanceled)
	assert.Zero(t, mc.OpenRangeScans())
}

// A context deadline ends the scan with a timeout, which names the
// scan's request, not a GET (opcode 0).
func TestScanContextDeadlineIsATimeout(t *testing.T) {
	_, c := scanMock(t, mockcluster.Options{}, 0)
	col := c.DefaultCollection()
	scanDocs(t, col, 10)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	res, err := col.Scan(ctx, RangeScan{}, nil)
	require.NoError(t, err)
	assert.False(t, res.Next())
	assert.ErrorIs(t, res.Err(), ErrTimeout)
	assert.ErrorIs(t, res.Err(), ErrUnambiguousTimeout)
	var kv *KeyValueError
	require.ErrorAs(t, res.Err(), &kv)
	assert.Equal(t, "Scan", kv.Op)
	assert.Contains(t, []OpCode{OpCode(memdx.OpRangeScanCreate), OpCode(memdx.OpRangeScanContinue)}, kv.OpCode)
	assert.NotContains(t, res.Err().Error(), "[GET")
	assert.Contains(t, res.Err().Error(), "[RANGE_SCAN_")
}

// Every vbucket moves to another node while the scan runs: the scans of
// the moved vbuckets are created again on their new nodes from the key
// after the last one returned, and every document is returned once.
func TestScanResumesWhenVbucketsMove(t *testing.T) {
	for _, sampling := range []bool{false, true} {
		t.Run(fmt.Sprintf("sampling=%v", sampling), func(t *testing.T) {
			mc, c := scanMock(t, mockcluster.Options{}, 8)
			col := c.DefaultCollection()
			keys := scanDocs(t, col, 200)
			b := mc.Bucket(mockcluster.DefaultBucket)
			var st ScanType = PrefixScan{Prefix: "doc-"}
			if sampling {
				st = SamplingScan{Limit: 1000, Seed: 3}
			}
			res, err := col.Scan(context.Background(), st, &ScanOptions{BatchItemLimit: 3})
			require.NoError(t, err)
			defer res.Close()
			var items []ScanItem
			for range 4 {
				require.True(t, res.Next())
				items = append(items, res.Item())
			}
			// Rotate every vbucket's active copy to the next node.
			target := b.VbucketMap()
			for vb := range target {
				for i := range target[vb] {
					if target[vb][i] >= 0 {
						target[vb][i] = (target[vb][i] + 1) % 3
					}
				}
			}
			rb, err := mc.StartRebalance(mockcluster.RebalanceOptions{Targets: map[string][][]int{mockcluster.DefaultBucket: target}})
			require.NoError(t, err)
			require.NoError(t, rb.Finish())
			for res.Next() {
				items = append(items, res.Item())
			}
			require.NoError(t, res.Err())
			got := ids(t, items)
			if sampling {
				got = slices.DeleteFunc(got, func(k string) bool { return k == "a" || k == "other-1" || k == "zzz" })
			}
			assert.Equal(t, keys, got)
			var nmv uint64
			for _, n := range mc.Nodes() {
				nmv += n.ErrorCount(memdx.StatusNotMyVbucket)
			}
			assert.NotZero(t, nmv, "a continue or create met NOT_MY_VBUCKET")
			assert.Zero(t, mc.OpenRangeScans())
		})
	}
}

func TestScanConsistentWithMutationTokens(t *testing.T) {
	t.Parallel()
	_, c := scanMock(t, mockcluster.Options{}, 0)
	col := c.DefaultCollection()
	scanDocs(t, col, 20)
	m, err := col.Upsert(context.Background(), "doc-new", []byte("x"), nil)
	require.NoError(t, err)
	require.NotZero(t, m.Token.Seqno)

	items := collect(t, col, PrefixScan{Prefix: "doc-new"}, &ScanOptions{ConsistentWith: []MutationToken{m.Token}})
	assert.Equal(t, []string{"doc-new"}, ids(t, items))

	// A token of another vbucket history: the vbucket failed over since.
	bad := m.Token
	bad.VbUUID++
	res, err := col.Scan(context.Background(), PrefixScan{Prefix: "doc-"}, &ScanOptions{ConsistentWith: []MutationToken{bad}})
	require.NoError(t, err)
	for res.Next() {
	}
	var ke *KeyValueError
	require.ErrorAs(t, res.Err(), &ke)
	assert.Equal(t, StatusVbUUIDNotEqual, ke.Status)
	assert.Equal(t, m.Token.Vbucket, ke.Vbucket)

	_, err = col.Scan(context.Background(), RangeScan{}, &ScanOptions{ConsistentWith: []MutationToken{m.Token, bad}})
	assert.ErrorIs(t, err, ErrInvalidArgument, "two UUIDs for one vbucket")
}

// A zero MutationToken (what a write returns when the server sent none:
// DisableMutationTokens, or a server without them) names no mutation: a
// scan ConsistentWith it is refused, saying so, rather than sent as vbucket
// 0's UUID 0, which the server refuses as a vbucket that failed over.
func TestScanConsistentWithAZeroTokenIsRefused(t *testing.T) {
	_, c := scanMock(t, mockcluster.Options{}, 0)
	col := c.DefaultCollection()
	m, err := col.Upsert(context.Background(), "doc", []byte("x"), nil)
	require.NoError(t, err)
	_, err = col.Scan(context.Background(), RangeScan{}, &ScanOptions{ConsistentWith: []MutationToken{m.Token, {}}})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "ConsistentWith[1] is the zero MutationToken")
}

// A token of another bucket names a mutation the scan cannot see: its
// vbucket and UUID are that bucket's. It is refused, naming both buckets,
// rather than sent as this bucket's, which would fail the scan as if its
// vbucket had failed over (or wait for a seqno it never reaches).
func TestScanConsistentWithATokenOfAnotherBucketIsRefused(t *testing.T) {
	_, c := scanMock(t, mockcluster.Options{}, 0)
	col := c.DefaultCollection()
	m, err := col.Upsert(context.Background(), "doc", []byte("x"), nil)
	require.NoError(t, err)
	require.Equal(t, mockcluster.DefaultBucket, m.Token.Bucket)
	other := m.Token
	other.Bucket = "other"
	_, err = col.Scan(context.Background(), RangeScan{}, &ScanOptions{ConsistentWith: []MutationToken{other}})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), `ConsistentWith[0] is a token of bucket "other"`)
}

// A seqno the vbucket never reaches: the server waits (90% of the
// request's timeout), answers TMPFAIL, and the create is retried until the
// request times out. The timeout is on a fake client clock, moved to it
// once the create sleeps in its back-off after the TMPFAIL: on the real
// clock the answer is due 10% of the timeout (30 ms) before the deadline,
// and a loaded machine can deliver it later, so that the create times out
// with no retry. The fake clock is an hour ahead of real time: a socket
// waits for a response until the request's deadline read as a real time
// (see Clock), which then never comes first.
func TestScanForAnUnreachedSeqnoRetriesUntilItTimesOut(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumVbuckets: 64}}})
	fc := retry.NewFakeClock(time.Now().Add(time.Hour))
	c := connect(t, mc, &Options{Clock: fakeClock{fc}})
	col := c.DefaultCollection()
	m, err := col.Upsert(context.Background(), "doc-new", []byte("x"), nil)
	require.NoError(t, err)

	ahead := m.Token
	ahead.Seqno += 1000
	asked := make(chan RetryReason, 64)
	strategy := RetryStrategyFunc(func(req RetryRequest, reason RetryReason) RetryAction {
		select {
		case asked <- reason:
		default:
		}
		return DefaultRetryStrategy().RetryAfter(req, reason)
	})
	waits := make(chan uint32, 64) // each create's seqno wait (timeout_ms)
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanCreate},
		Func: func(r *mockcluster.Request) bool {
			if cfg, err := memdx.DecodeRangeScanCreateValue(r.Packet.Value); err == nil && cfg.Snapshot != nil {
				waits <- cfg.Snapshot.TimeoutMs
			}
			return false // a witness, not a fault
		}}})
	const timeout = 300 * time.Millisecond
	deadline := fc.Now().Add(timeout) // the create's: fc stays until Advance
	res, err := col.Scan(context.Background(), PrefixScan{Prefix: "doc-"}, &ScanOptions{ConsistentWith: []MutationToken{ahead},
		Timeout: timeout, RetryStrategy: strategy})
	require.NoError(t, err)
	stuck := time.NewTimer(30 * time.Second)
	defer stuck.Stop()
	select {
	case r := <-asked:
		require.Equal(t, RetryReasonKVTemporaryFailure, r)
	case <-stuck.C:
		t.Fatal("the create was not retried")
	}
	assert.EqualValues(t, 270, <-waits, "the first create's wait: 90% of its timeout")
	// The back-off's timer is the one due by the deadline (the config
	// poll's is due later).
	var backoff time.Time
	require.Eventually(t, func() bool {
		timers := fc.Timers()
		i := slices.IndexFunc(timers, func(due time.Time) bool { return !due.After(deadline) })
		if i >= 0 {
			backoff = timers[i]
		}
		return i >= 0
	}, 30*time.Second, time.Millisecond, "the create did not sleep in a back-off")
	fc.Advance(backoff.Sub(fc.Now())) // the retried create goes out
	left := deadline.Sub(backoff)
	select {
	case w := <-waits:
		assert.EqualValues(t, rangescan.SnapshotWait(left), w, "the retried create's wait: 90%% of the %v left", left)
	case <-stuck.C:
		t.Fatal("the retried create was not sent")
	}
	fc.Advance(deadline.Sub(fc.Now()))
	for res.Next() {
	}
	require.ErrorIs(t, res.Err(), ErrTimeout)
	var ke *KeyValueError
	require.ErrorAs(t, res.Err(), &ke)
	assert.Equal(t, OpCode(memdx.OpRangeScanCreate), ke.OpCode)
	assert.True(t, ke.RetryReasons.Len() > 0, "retried: %v", res.Err())
}

// Every scan type may be given by pointer, as the ScanType interface lets
// it be (its methods are on the value): &PrefixScan{...} scans as
// PrefixScan{...} does, as &RangeScan{} does as RangeScan{}.
func TestScanTypesByPointerScanAsTheirValues(t *testing.T) {
	_, c := scanMock(t, mockcluster.Options{}, 0)
	col := c.DefaultCollection()
	keys := scanDocs(t, col, 20)
	assert.Equal(t, keys[10:20], ids(t, collect(t, col, &PrefixScan{Prefix: "doc-01"}, nil)))
	assert.Len(t, collect(t, col, &SamplingScan{Limit: 5, Seed: 3}, nil), 5)
	assert.Len(t, collect(t, col, &RangeScan{From: &ScanTerm{Term: "doc-"}, To: &ScanTerm{Term: "doc-\xff"}}, nil), 20)
	for name, st := range map[string]ScanType{
		"nil *client.RangeScan":    (*RangeScan)(nil),
		"nil *client.PrefixScan":   (*PrefixScan)(nil),
		"nil *client.SamplingScan": (*SamplingScan)(nil),
	} {
		_, err := col.Scan(context.Background(), st, nil)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), name, name)
	}
}

func TestScanRefusesBadArguments(t *testing.T) {
	_, c := scanMock(t, mockcluster.Options{}, 0)
	col := c.DefaultCollection()
	ctx := context.Background()
	long := string(make([]byte, MaxKeyLength+1))
	for name, st := range map[string]ScanType{
		"zero sample":  SamplingScan{},
		"long prefix":  PrefixScan{Prefix: long},
		"long term":    RangeScan{From: &ScanTerm{Term: long}},
		"empty term":   RangeScan{To: &ScanTerm{}},
		"nil pointer":  (*RangeScan)(nil),
		"no scan type": nil,
	} {
		_, err := col.Scan(ctx, st, nil)
		assert.ErrorIs(t, err, ErrInvalidArgument, name)
	}
	_, err := col.Scan(ctx, RangeScan{}, &ScanOptions{Concurrency: -1})
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

func TestScanNeedsTheRangeScanCapability(t *testing.T) {
	mc, c := scanMock(t, mockcluster.Options{NoRangeScans: true}, 0)
	_, err := c.DefaultCollection().Scan(context.Background(), RangeScan{}, nil)
	require.ErrorIs(t, err, ErrFeatureNotAvailable)
	for _, n := range mc.Nodes() {
		assert.Zero(t, n.RequestCount(memdx.OpRangeScanCreate), "nothing sent")
	}
}

func TestScanOnMemcachedIsNotAvailable(t *testing.T) {
	addr := memcachedAddr(t, false)
	c, err := Connect(context.Background(), "memcached://"+addr, testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.DefaultCollection().Scan(context.Background(), RangeScan{}, nil)
	require.ErrorIs(t, err, ErrFeatureNotAvailable)
}

// A continue that fails for another reason than a move ends the scan with
// that error, and the scan is cancelled on the server.
func TestScanFailsOnAContinueError(t *testing.T) {
	mc, c := scanMock(t, mockcluster.Options{}, 0)
	col := c.DefaultCollection()
	scanDocs(t, col, 100)
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanContinue}},
		Action: mockcluster.Action{Status: memdx.StatusNoAccess}, Times: 1})
	res, err := col.Scan(context.Background(), RangeScan{}, &ScanOptions{BatchItemLimit: 5})
	require.NoError(t, err)
	for res.Next() {
	}
	require.ErrorIs(t, res.Err(), ErrNoAccess)
	assert.Zero(t, mc.OpenRangeScans())
	assert.True(t, errors.Is(res.Close(), ErrNoAccess))
}

// The server streams a continue's batch over several packets when it is
// large (the mock past 8 KiB): every packet's documents are returned.
func TestScanContinueAnsweredInSeveralPackets(t *testing.T) {
	mc, c := scanMock(t, mockcluster.Options{}, 4)
	col := c.DefaultCollection()
	ctx := context.Background()
	val := make([]byte, 1024)
	_, _ = rand.Read(val) // incompressible: sent as is
	var keys []string
	for i := range 100 {
		k := fmt.Sprintf("big-%03d", i)
		keys = append(keys, k)
		_, err := col.Upsert(ctx, k, val, &UpsertOptions{})
		require.NoError(t, err)
	}
	items := collect(t, col, PrefixScan{Prefix: "big-"}, &ScanOptions{BatchItemLimit: 1000, BatchByteLimit: 1 << 20})
	assert.Equal(t, keys, ids(t, items))
	for _, it := range items {
		require.Len(t, it.Value, len(val))
	}
	var creates uint64
	for _, n := range mc.Nodes() {
		creates += n.RequestCount(memdx.OpRangeScanCreate)
	}
	assert.Equal(t, uint64(4), creates, "one scan per vbucket, none restarted")
}

// Closing the client ends a scan in progress with ErrClosed, even one
// whose workers wait for the caller to take their batches.
func TestScanEndsWhenTheClientCloses(t *testing.T) {
	mc, c := scanMock(t, mockcluster.Options{}, 0)
	col := c.DefaultCollection()
	scanDocs(t, col, 100)
	res, err := col.Scan(context.Background(), RangeScan{}, &ScanOptions{BatchItemLimit: 1})
	require.NoError(t, err)
	require.True(t, res.Next())
	// One batch taken, one queued, and the worker has asked for a third
	// (each continue returns one item): it waits to queue it.
	continues := func() (n uint64) {
		for _, nd := range mc.Nodes() {
			n += nd.RequestCount(memdx.OpRangeScanContinue)
		}
		return n
	}
	require.Eventually(t, func() bool { return continues() >= 3 && res.cur.Run().Queued() == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, c.Close())
	// The workers end by themselves, though nobody takes their batches.
	require.Eventually(t, func() bool { return res.cur.Run().Workers() == 0 }, 10*time.Second, time.Millisecond,
		"the scan's goroutines ended")
	for res.Next() {
	}
	require.ErrorIs(t, res.Err(), ErrClosed)
}

// The connection carrying a continue drops: the vbucket's scan is created
// again after the last key returned, and the scan the node still holds
// is cancelled once the node is reachable again.
func TestScanResumesAfterAConnectionDrop(t *testing.T) {
	mc, c := scanMock(t, mockcluster.Options{}, 4)
	col := c.DefaultCollection()
	keys := scanDocs(t, col, 60)
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanContinue}},
		Action: mockcluster.Action{Close: mockcluster.CloseBeforeApply}, Times: 1})
	items := collect(t, col, PrefixScan{Prefix: "doc-"}, &ScanOptions{BatchItemLimit: 4})
	assert.Equal(t, keys, ids(t, items))
	assert.Zero(t, mc.OpenRangeScans())
}

// A node that holds as many scans as it allows answers EBUSY to another
// create (its error map: temp, retry-now): the create is retried until a
// scan of that node ends, and the scan completes.
func TestScanRetriesACreateRefusedAsBusy(t *testing.T) {
	mc, c := scanMock(t, mockcluster.Options{MaxRangeScans: 1}, 32)
	col := c.DefaultCollection()
	keys := scanDocs(t, col, 100)
	items := collect(t, col, PrefixScan{Prefix: "doc-"}, &ScanOptions{Concurrency: 16, BatchItemLimit: 2})
	assert.Equal(t, keys, ids(t, items))
	var busy uint64
	for _, n := range mc.Nodes() {
		busy += n.ErrorCount(memdx.StatusBusy)
	}
	assert.NotZero(t, busy, "some creates met EBUSY")
	assert.Zero(t, mc.OpenRangeScans())
}
