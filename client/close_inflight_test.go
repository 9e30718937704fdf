package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// inflight is one call of the client's API left waiting for its answer
// when the client closes, and what its outcome must say.
type inflight struct {
	name string
	// writes are the keys the call writes: one the server read may have
	// been applied (the outcome must say so: ErrAmbiguous).
	writes []string
	errs   <-chan []error
}

// Close while operations of every kind wait for their answers: each
// returns promptly with an error that says the client was closed
// (ErrClosed), each write the server read saying it may have been applied
// (ErrAmbiguous), and no goroutine of the client is left; WaitUntilReady
// then fails at once with ErrClosed.
func TestCloseWithEveryKindInFlight(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	started := make(chan string, 256)
	c := connect(t, mc, &Options{KVTimeout: time.Hour, Observer: startObserver(started)})
	col := c.DefaultCollection()
	ctx := context.Background()
	for _, k := range []string{"g", "m1", "m2", "r", "s1", "s2"} {
		_, err := col.Upsert(ctx, k, []byte("v"), nil)
		require.NoError(t, err)
	}
	for len(started) > 0 { // the setup's attempts
		<-started
	}
	release := make(chan struct{})
	defer close(release)
	var received sync.Map // the keys of the writes the server read
	var armed atomic.Bool
	holding := []memdx.OpCode{memdx.OpGet, memdx.OpGetReplica, memdx.OpSet, memdx.OpNoop, memdx.OpStat, memdx.OpRangeScanContinue}
	mc.Control(mockcluster.Match{}, 0, func(r *mockcluster.Request) (mockcluster.Action, bool) {
		if !armed.Load() || !slices.Contains(holding, r.OpCode) {
			return mockcluster.Action{}, false
		}
		if r.OpCode == memdx.OpSet {
			received.Store(string(r.Key), true)
		}
		return mockcluster.Action{Hold: release}, true
	})

	scan, err := col.Scan(ctx, PrefixScan{Prefix: "s"}, &ScanOptions{BatchItemLimit: 1})
	require.NoError(t, err)
	require.True(t, scan.Next(), "the scan's first document: %v", scan.Err())
	armed.Store(true) // the scan's next continue is held: it is mid-way
	run := func(name string, writes []string, f func() []error) inflight {
		ch := make(chan []error, 1)
		go func() { ch <- f() }()
		return inflight{name: name, writes: writes, errs: ch}
	}
	one := func(err error) []error { return []error{err} }
	calls := []inflight{
		run("Get", nil, func() []error { _, err := col.Get(ctx, "g", nil); return one(err) }),
		run("durable Upsert", []string{"d"}, func() []error {
			_, err := col.Upsert(ctx, "d", []byte("v"), &UpsertOptions{Durability: DurabilityMajority})
			return one(err)
		}),
		run("GetMany", nil, func() []error {
			var errs []error
			for _, r := range col.GetMany(ctx, []string{"m1", "m2"}, nil) {
				errs = append(errs, r.Err)
			}
			return errs
		}),
		run("UpsertMany", []string{"u1", "u2"}, func() []error {
			var errs []error
			for _, r := range col.UpsertMany(ctx, []UpsertManyItem{{Key: "u1", Value: []byte("v")}, {Key: "u2", Value: []byte("v")}}, nil) {
				errs = append(errs, r.Err)
			}
			return errs
		}),
		run("GetAnyReplica", nil, func() []error { _, err := col.GetAnyReplica(ctx, "r", nil); return one(err) }),
		run("Ping", nil, func() []error {
			var errs []error
			for _, r := range c.Ping(ctx) {
				errs = append(errs, r.Err)
			}
			return errs
		}),
		run("Stats", nil, func() []error {
			st, err := c.Stats(ctx, "", nil)
			if err != nil {
				return one(err)
			}
			var errs []error
			for _, s := range st {
				errs = append(errs, s.Err)
			}
			return errs
		}),
	}
	calls = append(calls, run("Scan, mid-way", nil, func() []error {
		for scan.Next() {
		}
		return one(scan.Err())
	}))
	// Every call has an attempt sent (the scan's next continue among
	// them); each answer is held, or waits behind one held on its
	// connection. Ping's and Stats' requests (NOOP, STAT: barriers under
	// unordered execution) to the node holding the durable write are not
	// sent but held by the client until that write's bound (pickBarrier):
	// two of the three nodes' are sent, the third waits unsent, and must
	// end with ErrClosed all the same.
	want := map[string]int{"Get": 3, "Upsert": 3, "GetReplica": 1, "Ping": 2, "Stats": 2, "Scan": 1}
	seen := map[string]int{}
	for deadline := time.After(closeHookWaits); !allSeen(seen, want); {
		select {
		case op := <-started:
			seen[op]++
		case <-deadline:
			t.Fatalf("attempts sent within %v: %v, want %v", closeHookWaits, seen, want)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(closeHookWaits):
		t.Fatalf("Close did not return within %v", closeHookWaits)
	}
	for _, call := range calls {
		select {
		case errs := <-call.errs:
			for i, err := range errs {
				t.Logf("%s [%d]: %v", call.name, i, err)
				if !errors.Is(err, ErrClosed) {
					t.Errorf("%s [%d]: %v, want ErrClosed", call.name, i, err)
				}
				if i < len(call.writes) && isReceived(&received, call.writes[i]) && !errors.Is(err, ErrAmbiguous) {
					t.Errorf("%s [%d]: %v, want ErrAmbiguous (it may have been applied)", call.name, i, err)
				}
			}
		case <-time.After(closeHookWaits):
			t.Errorf("%s did not return within %v of Close", call.name, closeHookWaits)
		}
	}
	require.ErrorIs(t, scan.Close(), ErrClosed) // Close returns Err
	requireNoClientGoroutines(t)
	d := c.Diagnostics(nil)
	t.Logf("Diagnostics after Close: %+v", d)
	wctx, cancel := context.WithTimeout(ctx, closeHookWaits)
	defer cancel()
	err = c.WaitUntilReady(wctx, nil)
	t.Logf("WaitUntilReady after Close: %v", err)
	require.ErrorIs(t, err, ErrClosed)
}

// startObserver tells started (buffered, without blocking) the name of each
// attempt's operation as it is sent.
type startObserver chan<- string

func (o startObserver) AttemptStart(i AttemptInfo) {
	select {
	case o <- i.Op:
	default:
	}
}
func (startObserver) AttemptEnd(AttemptInfo, error) {}

// isReceived reports whether the server read a write of key (its key
// carries the collection id: matched by suffix).
func isReceived(received *sync.Map, key string) bool {
	found := false
	received.Range(func(k, _ any) bool {
		found = strings.HasSuffix(k.(string), key)
		return !found
	})
	return found
}

func allSeen(seen, want map[string]int) bool {
	for op, n := range want {
		if seen[op] < n {
			return false
		}
	}
	return true
}

// Every call made after Close returns at once with ErrClosed (a write
// saying it was not applied), and Diagnostics reports the client offline.
func TestEveryKindAfterClose(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, &Options{KVTimeout: time.Hour})
	col := c.DefaultCollection()
	ctx := context.Background()
	require.NoError(t, c.Close())
	check := func(name string, errs ...error) {
		t.Helper()
		require.NotEmpty(t, errs, name)
		for i, err := range errs {
			t.Logf("%s [%d]: %v", name, i, err)
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s [%d] after Close: %v, want ErrClosed", name, i, err)
			}
			if errors.Is(err, ErrAmbiguous) {
				t.Errorf("%s [%d] after Close: %v, which says it may have been applied", name, i, err)
			}
		}
	}
	_, err := col.Get(ctx, "k", nil)
	check("Get", err)
	_, err = col.Upsert(ctx, "k", []byte("v"), &UpsertOptions{Durability: DurabilityMajority})
	check("durable Upsert", err)
	var errs []error
	for _, r := range col.GetMany(ctx, []string{"a", "b"}, nil) {
		errs = append(errs, r.Err)
	}
	check("GetMany", errs...)
	errs = nil
	for _, r := range col.UpsertMany(ctx, []UpsertManyItem{{Key: "a", Value: []byte("v")}}, nil) {
		errs = append(errs, r.Err)
	}
	check("UpsertMany", errs...)
	_, err = col.GetAnyReplica(ctx, "k", nil)
	check("GetAnyReplica", err)
	errs = nil
	for _, r := range c.Ping(ctx) {
		errs = append(errs, r.Err)
	}
	check("Ping", errs...)
	_, err = c.Stats(ctx, "", nil)
	check("Stats", err)
	scan, err := col.Scan(ctx, PrefixScan{Prefix: "s"}, nil)
	if err == nil {
		for scan.Next() {
		}
		err = scan.Close()
	}
	check("Scan", err)
	check("WaitUntilReady", c.WaitUntilReady(ctx, nil))
	if d := c.Diagnostics(nil); d.State != ClusterOffline {
		t.Errorf("Diagnostics after Close: %v, want offline", d.State)
	}
}
