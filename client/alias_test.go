package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// Memory ownership on the request path: a result handed to the caller is
// the caller's own, and stays unchanged whatever the client does later
// (pooled ops, the reader's buffer, decompression, a GetMany's blocks).

// aliasSizes are value sizes around the client's buffer boundaries: the
// GetMany blocks (512 / 4 KiB), the reader's buffer (64 KiB), a packet
// larger than it.
var aliasSizes = []int{0, 1, 7, 100, 511, 512, 513, 3000, 4096, 5000, 65536, 70000, 200000}

// aliasValue is key i's value of n bytes in generation gen: every byte
// depends on all three, so a value that took another's bytes shows.
func aliasValue(i, n, gen int) []byte {
	v := make([]byte, n)
	for j := range v {
		v[j] = byte('a' + (i*7+j/13+gen*3)%26)
	}
	return v
}

// aliasJSON is a compressible JSON document for key i in generation gen
// (snappy on the wire both ways).
func aliasJSON(i, gen int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"i":%d,"gen":%d,"pad":"`, i, gen)
	for range 200 {
		fmt.Fprintf(&b, "k%dg%d-", i, gen)
	}
	b.WriteString(`"}`)
	return b.Bytes()
}

// churn runs many other operations on col: writes and reads of other
// keys, with other bytes, in every size.
func churn(t *testing.T, ctx context.Context, col *Collection, rounds int) {
	t.Helper()
	for r := range rounds {
		for i, n := range aliasSizes {
			key := fmt.Sprintf("churn-%d", i)
			v := bytes.Repeat([]byte{byte('A' + r%26)}, n)
			_, err := col.Upsert(ctx, key, v, nil)
			require.NoError(t, err)
			got, err := col.Get(ctx, key, nil)
			require.NoError(t, err)
			require.Equal(t, v, got.Value)
		}
		keys := make([]string, len(aliasSizes))
		for i := range keys {
			keys[i] = fmt.Sprintf("churn-%d", i)
		}
		for _, res := range col.GetMany(ctx, keys, nil) {
			require.NoError(t, res.Err)
		}
	}
}

// Results of Get, GetMany, LookupIn and GetAndTouch held while the client
// runs many more operations keep their bytes.
func TestHeldResultsKeepTheirBytes(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var keys []string
	want := map[string][]byte{}
	for i, n := range aliasSizes {
		key := fmt.Sprintf("held-%d", i)
		v := aliasValue(i, n, 0)
		_, err := col.Upsert(ctx, key, v, nil)
		require.NoError(t, err)
		keys, want[key] = append(keys, key), v
		jkey := fmt.Sprintf("held-json-%d", i)
		jv := aliasJSON(i, 0)
		_, err = col.Upsert(ctx, jkey, jv, &UpsertOptions{JSON: true})
		require.NoError(t, err)
		keys, want[jkey] = append(keys, jkey), jv
	}

	type held struct {
		what  string
		value []byte
		want  []byte
	}
	var hs []held
	for _, key := range keys {
		r, err := col.Get(ctx, key, nil)
		require.NoError(t, err)
		hs = append(hs, held{"Get " + key, r.Value, want[key]})
		r2, err := col.GetAndTouch(ctx, key, time.Hour, nil)
		require.NoError(t, err)
		hs = append(hs, held{"GetAndTouch " + key, r2.Value, want[key]})
	}
	for _, res := range col.GetMany(ctx, keys, nil) {
		require.NoError(t, res.Err)
		hs = append(hs, held{"GetMany " + res.Key, res.Value, want[res.Key]})
	}
	for i := range aliasSizes {
		jkey := fmt.Sprintf("held-json-%d", i)
		lr, err := col.LookupIn(ctx, jkey, []LookupInSpec{GetSpec("i", nil), GetSpec("pad", nil), GetSpec("gen", nil)}, nil)
		require.NoError(t, err)
		for j, w := range []string{fmt.Sprint(i), fmt.Sprintf("%q", padOf(i, 0)), "0"} {
			v, err := lr.ValueAt(j)
			require.NoError(t, err)
			hs = append(hs, held{fmt.Sprintf("LookupIn %s spec %d", jkey, j), v, []byte(w)})
		}
	}
	for _, h := range hs {
		require.Equal(t, string(h.want), string(h.value), h.what)
	}
	// Overwrite every held key and churn: no held result may change.
	for i, n := range aliasSizes {
		_, err := col.Upsert(ctx, fmt.Sprintf("held-%d", i), aliasValue(i, n, 1), nil)
		require.NoError(t, err)
		_, err = col.Upsert(ctx, fmt.Sprintf("held-json-%d", i), aliasJSON(i, 1), &UpsertOptions{JSON: true})
		require.NoError(t, err)
	}
	churn(t, ctx, col, 20)
	for _, h := range hs {
		if !bytes.Equal(h.want, h.value) {
			t.Errorf("%s changed after later operations: %.60q..., want %.60q...", h.what, h.value, h.want)
		}
	}
}

func padOf(i, gen int) string {
	var b bytes.Buffer
	for range 200 {
		fmt.Fprintf(&b, "k%dg%d-", i, gen)
	}
	return b.String()
}

// The same on memcached: GetMany's text multi-gets and quiet gets, whose
// small values share blocks.
func TestHeldResultsKeepTheirBytesMemcached(t *testing.T) {
	addr := memcachedtest.Start(t)
	for _, binary := range []bool{false, true} {
		t.Run(fmt.Sprintf("binary=%v", binary), func(t *testing.T) {
			c := textClient(t, addr, &Options{Memcached: MemcachedOptions{BinaryMultiGet: binary}})
			col := c.DefaultCollection()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var keys []string
			want := map[string][]byte{}
			for i, n := range aliasSizes {
				if n > 65536 {
					continue // memcached's default item size limit is 1 MiB; keep it quick
				}
				key := fmt.Sprintf("mheld-%v-%d", binary, i)
				v := aliasValue(i, n, 0)
				_, err := col.Upsert(ctx, key, v, nil)
				require.NoError(t, err)
				keys, want[key] = append(keys, key), v
			}
			if !binary {
				warmText(t, c, keys[0])
			}
			type held struct {
				what        string
				value, want []byte
			}
			var hs []held
			for range 3 {
				for _, res := range col.GetMany(ctx, append(append([]string(nil), keys...), keys...), nil) {
					require.NoError(t, res.Err)
					hs = append(hs, held{"GetMany " + res.Key, res.Value, want[res.Key]})
				}
			}
			for _, h := range hs {
				require.Equal(t, h.want, h.value, h.what)
			}
			for i, key := range keys {
				_, err := col.Upsert(ctx, key, aliasValue(i, len(want[key]), 1), nil)
				require.NoError(t, err)
			}
			for range 20 {
				for _, res := range col.GetMany(ctx, keys, nil) {
					require.NoError(t, res.Err)
					// A caller appending to one value must not write
					// into another's.
					_ = append(res.Value, bytes.Repeat([]byte{'!'}, 64)...)
				}
			}
			for _, h := range hs {
				if !bytes.Equal(h.want, h.value) {
					t.Errorf("%s changed after later operations: %.60q..., want %.60q...", h.what, h.value, h.want)
				}
			}
		})
	}
}

// waitHits waits until f has applied to n requests: the request reached
// the node. The bound is a failure guard, not a wait the test relies on.
func waitHits(t *testing.T, f *mockcluster.Control, n int) {
	t.Helper()
	waitFor(t, "the request reaching the node", func() bool { return f.Hits() >= n })
}

// A cancelled operation's answer that arrives late writes into nothing:
// not into the (pooled) operation now serving another call, not into that
// call's result, not into results held. A write's caller may reuse its
// value (and its specs' values) as soon as the call returned, even when it
// returned before the answer (ambiguous): what the server stores is what
// the call was given.
func TestLateAnswersWriteIntoNothing(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx, cancelAll := context.WithTimeout(context.Background(), time.Minute)
	defer cancelAll()

	type held struct {
		what        string
		value, want []byte
	}
	var hs []held
	for i, n := range aliasSizes {
		lateKey, otherKey := fmt.Sprintf("late-%d", i), fmt.Sprintf("other-%d", i)
		_, err := col.Upsert(ctx, lateKey, aliasValue(i, n, 7), nil)
		require.NoError(t, err)
		otherV := aliasValue(i+100, n/2+3, 9)
		_, err = col.Upsert(ctx, otherKey, otherV, nil)
		require.NoError(t, err)

		for _, opName := range []string{"Get", "LookupIn", "Upsert", "MutateIn"} {
			release := make(chan struct{})
			var f *mockcluster.Control
			switch opName {
			case "Get":
				f = faultGets(t, mc, lateKey, mockcluster.Action{Hold: release}, 1)
			case "LookupIn":
				f = mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSubdocMultiLookup}, Key: lateKey},
					Action: mockcluster.Action{Hold: release}, Times: 1})
			case "Upsert":
				f = mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSet}, Key: lateKey},
					Action: mockcluster.Action{Hold: release}, Times: 1})
			case "MutateIn":
				f = mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSubdocMultiMutation}, Key: "late-json"},
					Action: mockcluster.Action{Hold: release}, Times: 1})
			}
			opCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			mine := aliasValue(i, n, 11) // the write's value, reused by the caller once the call returns
			jsonV := []byte(fmt.Sprintf(`"v%d-%d"`, i, n))
			go func() {
				var err error
				switch opName {
				case "Get":
					_, err = col.Get(opCtx, lateKey, nil)
				case "LookupIn":
					_, err = col.LookupIn(opCtx, lateKey, []LookupInSpec{GetSpec("x", nil)}, nil)
				case "Upsert":
					_, err = col.Upsert(opCtx, lateKey, mine, nil)
				case "MutateIn":
					_, err = col.MutateIn(opCtx, "late-json", []MutateInSpec{UpsertSpec("x", jsonV, nil)}, &MutateInOptions{StoreSemantic: StoreSemanticsUpsert})
				}
				done <- err
			}()
			waitHits(t, f, 1) // written: the cancel leaves a tombstone
			cancel()
			err := <-done
			require.Error(t, err, opName)
			wantStored := append([]byte(nil), mine...)
			wantJSON := append([]byte(nil), jsonV...)
			for j := range mine {
				mine[j] = '!'
			}
			for j := range jsonV {
				jsonV[j] = '!'
			}
			// Another call on the same connection, answered after the
			// late answer.
			otherDone := make(chan GetResult, 1)
			go func() {
				r, err := col.Get(ctx, otherKey, nil)
				assert.NoError(t, err)
				otherDone <- r
			}()
			close(release)
			r := <-otherDone
			require.Equal(t, otherV, r.Value, "%s: the Get after a late answer", opName)
			hs = append(hs, held{opName + " then Get " + otherKey, r.Value, otherV})
			f.Remove()
			switch opName {
			case "Upsert":
				if errors.Is(err, ErrAmbiguous) {
					g, gerr := col.Get(ctx, lateKey, nil)
					require.NoError(t, gerr)
					if !bytes.Equal(g.Value, aliasValue(i, n, 7)) {
						require.Equal(t, string(wantStored), string(g.Value), "what a cancelled Upsert stored")
					}
					_, err = col.Upsert(ctx, lateKey, aliasValue(i, n, 7), nil)
					require.NoError(t, err)
				}
			case "MutateIn":
				lr, lerr := col.LookupIn(ctx, "late-json", []LookupInSpec{GetSpec("x", nil)}, nil)
				if lerr == nil {
					if v, verr := lr.ValueAt(0); verr == nil {
						require.Equal(t, string(wantJSON), string(v), "what a cancelled MutateIn stored")
					}
				}
			}
		}
	}
	churn(t, ctx, col, 5)
	for _, h := range hs {
		if !bytes.Equal(h.want, h.value) {
			t.Errorf("%s changed after later operations: %.60q..., want %.60q...", h.what, h.value, h.want)
		}
	}
}

// Items of a range scan and copies read from replicas, held while the
// scan goes on (its continues, small batches) and later operations run,
// keep their bytes.
func TestHeldScanAndReplicaResultsKeepTheirBytes(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := map[string][]byte{}
	for i, n := range aliasSizes {
		for k := range 3 {
			key := fmt.Sprintf("scan-%d-%d", i, k)
			v := aliasValue(i*3+k, n, 5)
			if k == 2 {
				v = aliasJSON(i, 5)
			}
			_, err := col.Upsert(ctx, key, v, &UpsertOptions{JSON: k == 2})
			require.NoError(t, err)
			want[key] = v
		}
	}
	type held struct {
		what        string
		value, want []byte
	}
	var hs []held
	res, err := col.Scan(ctx, PrefixScan{Prefix: "scan-"}, &ScanOptions{BatchItemLimit: 2})
	require.NoError(t, err)
	for res.Next() {
		it := res.Item()
		hs = append(hs, held{"Scan " + it.ID, it.Value, want[it.ID]})
	}
	require.NoError(t, res.Close())
	require.Len(t, hs, len(want))
	for i := range aliasSizes {
		key := fmt.Sprintf("scan-%d-2", i)
		waitFor(t, "the replica", func() bool {
			all, err := col.GetAllReplicas(ctx, key, nil)
			return err == nil && len(all) == 2
		})
		all, err := col.GetAllReplicas(ctx, key, nil)
		require.NoError(t, err)
		for _, r := range all {
			hs = append(hs, held{fmt.Sprintf("GetAllReplicas %s replica=%v", key, r.IsReplica), r.Value, want[key]})
		}
		a, err := col.GetAnyReplica(ctx, key, nil)
		require.NoError(t, err)
		hs = append(hs, held{"GetAnyReplica " + key, a.Value, want[key]})
	}
	for _, h := range hs {
		require.Equal(t, string(h.want), string(h.value), h.what)
	}
	for key := range want {
		_, err := col.Upsert(ctx, key, []byte("overwritten"), nil)
		require.NoError(t, err)
	}
	churn(t, ctx, col, 10)
	for _, h := range hs {
		if !bytes.Equal(h.want, h.value) {
			t.Errorf("%s changed after later operations", h.what)
		}
	}
}

// A GetMany of more keys than one window (two windows in flight, the
// groups' key arrays reused by the window after next), on memcached's
// text and binary paths: each key's value is its own, and stays so.
func TestGetManyWindowsKeepEachValueMemcached(t *testing.T) {
	addr := memcachedtest.Start(t)
	for _, binary := range []bool{false, true} {
		t.Run(fmt.Sprintf("binary=%v", binary), func(t *testing.T) {
			c := textClient(t, addr, &Options{Memcached: MemcachedOptions{BinaryMultiGet: binary}})
			col := c.DefaultCollection()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const n = 3000
			keys := make([]string, n)
			items := make([]UpsertManyItem, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("win-%v-%d", binary, i)
				items[i] = UpsertManyItem{Key: keys[i], Value: aliasValue(i, 1+i%700, 3)}
			}
			for _, r := range col.UpsertMany(ctx, items, nil) {
				require.NoError(t, r.Err)
			}
			if !binary {
				warmText(t, c, keys[0])
			}
			var all [][]GetManyResult
			for range 3 {
				res := col.GetMany(ctx, keys, nil)
				for i, r := range res {
					require.NoError(t, r.Err, r.Key)
					require.Equal(t, keys[i], r.Key)
					require.Equal(t, items[i].Value, r.Value, r.Key)
					require.Equal(t, len(r.Value), cap(r.Value), "%s: a value of its own capacity", r.Key)
				}
				all = append(all, res)
			}
			for i := range items {
				items[i].Value = aliasValue(i, 1+i%700, 4)
			}
			for _, r := range col.UpsertMany(ctx, items, nil) {
				require.NoError(t, r.Err)
			}
			for range 3 {
				for _, r := range col.GetMany(ctx, keys, nil) {
					require.NoError(t, r.Err)
					_ = append(r.Value, '!')
				}
			}
			for _, res := range all {
				for i, r := range res {
					if want := aliasValue(i, 1+i%700, 3); !bytes.Equal(want, r.Value) {
						t.Fatalf("%s changed after later GetManys", r.Key)
					}
				}
			}
		})
	}
}

// A memcached GetMany cancelled while its quiet gets are unanswered: the
// late answers (a hit for one of its keys, then the NOOP) write into
// nothing, not into the next GetMany, which reuses the batch and its
// records.
func TestGetManyLateQuietAnswersWriteIntoNothing(t *testing.T) {
	addr := memcachedtest.Start(t)
	p, err := faultnode.NewProxy(addr)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	var mu sync.Mutex
	holding := false
	var held []memdx.Packet
	reached := make(chan struct{}, 1)
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		mu.Lock()
		defer mu.Unlock()
		if !holding || (req.OpCode != memdx.OpGetKQ && req.OpCode != memdx.OpNoop) {
			return faultnode.Action{}
		}
		q := memdx.Packet{OpCode: req.OpCode, Opaque: req.Opaque, Key: append([]byte(nil), req.Key...)}
		held = append(held, q)
		if req.OpCode == memdx.OpNoop {
			select {
			case reached <- struct{}{}:
			default:
			}
		}
		return faultnode.Action{Drop: true}
	})
	c, err := Connect(context.Background(), "memcached://"+p.Addr(), testOptions(&Options{Memcached: MemcachedOptions{BinaryMultiGet: true}}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	col := c.DefaultCollection()
	ctx := context.Background()
	keys := []string{"lq-a", "lq-b", "lq-c"}
	for i, k := range keys {
		mu.Lock()
		holding = false
		mu.Unlock()
		_, err := col.Upsert(ctx, k, aliasValue(i, 10+i, 1), nil)
		require.NoError(t, err)
	}
	mu.Lock()
	holding = true
	mu.Unlock()

	gctx, cancel := context.WithCancel(ctx)
	done := make(chan []GetManyResult, 1)
	go func() { done <- col.GetMany(gctx, keys, nil) }()
	select {
	case <-reached:
	case <-time.After(time.Minute):
		t.Fatal("the GetMany's NOOP did not reach the proxy within a minute")
	}
	cancel()
	for _, r := range <-done {
		require.ErrorIs(t, r.Err, ErrRequestCanceled, r.Key)
	}
	mu.Lock()
	holding = false
	late := append([]memdx.Packet(nil), held...)
	mu.Unlock()
	require.Len(t, late, len(keys)+1, "the group's gets and its NOOP, held")
	// The late answers: each get a hit with a value not its key's, then
	// the NOOP.
	for _, q := range late {
		var a memdx.Packet
		if q.OpCode == memdx.OpGetKQ {
			a = faultnode.Reply(&q, memdx.StatusSuccess, []byte("LATE-"+string(q.Key)))
			a.Extras = []byte{0, 0, 0, 0}
		} else {
			a = faultnode.Reply(&q, memdx.StatusSuccess, nil)
		}
		_, err := p.InjectResponse(a)
		require.NoError(t, err)
	}
	for range 5 {
		res := col.GetMany(ctx, keys, nil)
		for i, r := range res {
			require.NoError(t, r.Err, r.Key)
			require.Equal(t, string(aliasValue(i, 10+i, 1)), string(r.Value), r.Key)
		}
	}
}
