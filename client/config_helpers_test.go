package client

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// noPushes are the HELLO features a mock refuses so that it never pushes a
// config to the client.
var noPushes = []memdx.HelloFeature{
	memdx.FeatureClustermapChangeNotification,
	memdx.FeatureClustermapChangeNotificationBrief,
}

// emptyNMVFromNonOwners makes every node answer a key request for a vbucket
// it is not the active owner of (by the mock's current map) with
// NOT_MY_VBUCKET and no body, as servers do that leave the config out.
func emptyNMVFromNonOwners(t *testing.T, mc *mockcluster.Cluster) *mockcluster.Control {
	b := mc.Bucket(mockcluster.DefaultBucket)
	h := mc.Control(mockcluster.Match{Func: func(r *mockcluster.Request) bool { return len(r.Key) > 0 }}, 0,
		func(r *mockcluster.Request) (mockcluster.Action, bool) {
			m := b.VbucketMap()
			if int(r.Vbucket) < len(m) && m[r.Vbucket][0] == r.Node {
				return mockcluster.Action{}, false
			}
			return mockcluster.Action{Status: memdx.StatusNotMyVbucket, Value: []byte{}}, true
		})
	t.Cleanup(h.Remove)
	return h
}

// moveVbucket rebalances the vbucket of key so that node to owns it (the
// old owner keeps a replica), publishing two configs (the start, with a
// forward map, and the end). It returns the old owner.
func moveVbucket(t *testing.T, mc *mockcluster.Cluster, key string, to int) int {
	t.Helper()
	b := mc.Bucket(mockcluster.DefaultBucket)
	vb := b.VbucketForKey([]byte(key))
	target := b.VbucketMap()
	from := target[vb][0]
	require.NotEqual(t, from, to)
	target[vb] = []int{to, from}
	r, err := mc.StartRebalance(mockcluster.RebalanceOptions{Targets: map[string][][]int{b.Name(): target}})
	require.NoError(t, err)
	require.NoError(t, r.Finish())
	return from
}

func owner(mc *mockcluster.Cluster, key string) int {
	b := mc.Bucket(mockcluster.DefaultBucket)
	return b.VbucketMap()[b.VbucketForKey([]byte(key))][0]
}

// Eight goroutines of Upserts and Gets run through four map changes on
// nodes that answer NOT_MY_VBUCKET without a body and never push configs,
// with default options (2.5 s timeout and poll): no operation fails. Each
// moved vbucket's first NMV fetches the new config from the node that
// answered, instead of waiting for the next poll.
func TestWorkloadThroughMapChangesWithoutNMVBodies(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: noPushes})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	nmv := emptyNMVFromNonOwners(t, mc)

	var ops atomic.Int64
	var mu sync.Mutex
	var errs []error
	var slowest time.Duration
	stop := make(chan struct{})
	progress := make(chan struct{}, 1)
	var wg sync.WaitGroup
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	defer halt()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("key-%d", rng.Intn(64))
				start := time.Now()
				var err error
				if rng.Intn(2) == 0 {
					_, err = col.Upsert(context.Background(), key, []byte("v"), nil)
				} else if _, err = col.Get(context.Background(), key, nil); isNotFound(err) {
					err = nil
				}
				d := time.Since(start)
				mu.Lock()
				slowest = max(slowest, d)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				ops.Add(1)
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		}()
	}
	waitOps := func(n int64) {
		target := ops.Load() + n
		stuck := time.NewTimer(30 * time.Second)
		defer stuck.Stop()
		for ops.Load() < target {
			select {
			case <-progress:
			case <-stuck.C:
				t.Fatal("the workload stopped making progress")
			}
		}
	}
	waitOps(200)
	for _, nodes := range [][]int{{0, 1}, {1, 2}, {0, 2}, nil} {
		r, err := mc.StartRebalance(mockcluster.RebalanceOptions{Nodes: nodes})
		require.NoError(t, err)
		require.NoError(t, r.Finish())
		waitOps(400)
	}
	halt()
	t.Logf("%d operations, %d NOT_MY_VBUCKET answers, slowest operation %v", ops.Load(), nmv.Hits(), slowest)
	assert.Positive(t, nmv.Hits())
	assert.Empty(t, errs)
}

// fakeClockOptions are the options of a client on fc whose operations end
// only by the test's context. A socket waits for a response until the
// operation's deadline read as a real time (see Clock), and fc's time stays
// where the test made it: with the default KVTimeout, an attempt sent more
// than 2.5 s (real) after fc was made (a loaded machine's connect can take
// that) would end at once as timed out.
func fakeClockOptions(fc *retry.FakeClock) *Options {
	return &Options{Clock: fakeClock{fc}, KVTimeout: time.Hour}
}

// asyncGet is a Get running in the background: its outcome comes on done,
// and each retry reason its strategy (the default one) is asked about on
// asked.
type asyncGet struct {
	done  <-chan error
	asked <-chan RetryReason
}

// getAsync runs a Get of key in the background.
func getAsync(ctx context.Context, col *Collection, key string) asyncGet {
	done := make(chan error, 1)
	asked := make(chan RetryReason, 64)
	strategy := RetryStrategyFunc(func(req RetryRequest, reason RetryReason) RetryAction {
		select {
		case asked <- reason:
		default:
		}
		return DefaultRetryStrategy().RetryAfter(req, reason)
	})
	go func() {
		_, err := col.Get(ctx, key, &GetOptions{RetryStrategy: strategy})
		done <- err
	}()
	return asyncGet{done: done, asked: asked}
}

// requireInBackoff waits until the Get g sleeps in its back-off: until fc
// holds a timer whose due time isBackoff accepts as that back-off's end.
// It fails the test if g ends first (ended names what it should have
// waited for), or if no such timer is armed in failAfter. isBackoff must
// accept no other timer's due time: callers give the Get a back-off longer
// than its time left, so that it sleeps until its deadline (dl.Equal, an
// instant of the real clock's that no timer of the client's is due at, fc
// not having moved since the Get started). Neither a count of armed timers
// nor a step of the controlled back-off (fc.Now() plus 1 ms ... 1 s) would
// do: the config poll, a fetch waiting for its spacing, a node's 100 ms
// wake or the health check's 1 s are timers of the same clock, armed
// before the Get has even been answered.
func requireInBackoff(t *testing.T, ctx context.Context, fc *retry.FakeClock, g asyncGet, isBackoff func(due time.Time) bool, ended string) {
	t.Helper()
	bound := time.After(failAfter)
	for {
		for _, d := range fc.Timers() {
			if isBackoff(d) {
				select {
				case err := <-g.done:
					t.Fatalf("the Get ended %s: %v", ended, err)
				default:
				}
				return
			}
		}
		select {
		case err := <-g.done:
			t.Fatalf("the Get ended %s: %v", ended, err)
		case <-ctx.Done():
			t.Fatalf("the Get's back-off was never armed (now %v, armed: %v): %v", fc.Now(), fc.Timers(), ctx.Err())
		case <-bound:
			t.Fatalf("the Get's back-off was not armed in %v (now %v, armed: %v)", failAfter, fc.Now(), fc.Timers())
		case <-time.After(time.Millisecond): // look again
		}
	}
}

// requireAsked waits until g's strategy was asked about a retry for
// reason (the Get is then in its back-off, which the test's fake clock
// does not end) and fails the test if the Get ended first: ended names
// what it should have waited for.
func requireAsked(t *testing.T, ctx context.Context, g asyncGet, reason RetryReason, ended string) {
	t.Helper()
	select {
	case r := <-g.asked:
		if r != reason {
			t.Fatalf("the Get retries for %v, want %v", r, reason)
		}
	case err := <-g.done:
		t.Fatalf("the Get ended %s: %v", ended, err)
	case <-ctx.Done():
		t.Fatalf("the Get neither retried nor ended (%v)", ctx.Err())
	}
}
