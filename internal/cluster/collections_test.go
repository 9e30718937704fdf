package cluster

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A caller waiting for a collection-id lookup (perhaps another caller's,
// under that caller's context and deadline) waits within its own: its
// context's end or its deadline on the clock ends the wait as its own
// lookup would have ended, a *conn.RequestError with the context's error,
// not written; the lookup's result, once there, is taken even past the
// deadline.
func TestCollectionLookupWaitEndsWithItsCaller(t *testing.T) {
	fc := retry.NewFakeClock(time.Now())
	cc := CollectionIDs{clock: fc}
	flight := make(chan struct{}) // a lookup not answered yet
	wait := func(ctx context.Context, deadline time.Time) <-chan error {
		done := make(chan error, 1)
		go func() {
			done <- cc.await(ctx, deadline, flight, "node:11210")
		}()
		return done
	}
	ended := func(done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the wait did not end")
			return nil
		}
	}
	isRequestError := func(err, cause error) {
		t.Helper()
		var re *conn.RequestError
		require.True(t, errors.As(err, &re), "%v", err)
		assert.Equal(t, memdx.OpCollectionsGetID, re.Op)
		assert.False(t, re.Written)
		assert.ErrorIs(t, err, cause)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := wait(ctx, fc.Now().Add(time.Hour))
	cancel()
	isRequestError(ended(done), context.Canceled)

	done = wait(context.Background(), fc.Now().Add(time.Second))
	bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer bcancel()
	require.NoError(t, fc.BlockUntilTimers(bctx, 1))
	fc.Advance(time.Second)
	isRequestError(ended(done), context.DeadlineExceeded)

	close(flight)
	require.NoError(t, cc.await(context.Background(), fc.Now().Add(-time.Second), flight, "node:11210"))
}

// A caller waiting for a collection-id lookup another caller runs is not
// ended by that caller's end: the lookup is its first caller's request
// (within that caller's context and deadline), so when that context ends
// before the server answers the lookup ends with it, and the caller waiting
// for it, whose own context and deadline have not ended, looks the id up
// itself rather than taking the other's cancellation as its own failure.
func TestCollectionLookupJoinerOutlivesTheFirstCallersCancel(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	b := mc.Bucket(mockcluster.DefaultBucket)
	_, err := b.AddScope("app")
	require.NoError(t, err)
	want, err := b.AddCollection("app", "users")
	require.NoError(t, err)
	cfg := testConfig(mc)
	cfg.Conn.Features = append(slices.Clone(cfg.Conn.Features), memdx.FeatureCollections)
	c := connectCluster(t, cfg)
	n := c.Node(mc.Node(0).Addr())
	require.NotNil(t, n)
	cn, _, err := n.Pick()
	require.NoError(t, err)

	// The first lookup reaches the node, which holds its answer until
	// release; a later one waits behind it (GET_COLLECTION_ID is not
	// reorderable: kv_engine runs it after every earlier command).
	reached := make(chan struct{}, 1)
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	mc.AddFault(mockcluster.Fault{
		Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpCollectionsGetID}, Func: func(*mockcluster.Request) bool {
			select {
			case reached <- struct{}{}:
			default:
			}
			return true
		}},
		Action: mockcluster.Action{Hold: release}, Times: 1,
	})
	cc := c.Collections()
	deadline := time.Now().Add(time.Minute)
	firstCtx, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	first := make(chan error, 1)
	go func() {
		_, _, _, _, err := cc.ID(firstCtx, deadline, cn, "app", "users", "app.users")
		first <- err
	}()
	select {
	case <-reached:
	case <-time.After(time.Minute):
		t.Fatal("the first lookup did not reach the node")
	}
	joined := make(chan joinedLookup, 1)
	go joinLookup(cc, deadline, cn, joined)
	waitForStack(t, "the second caller waiting for the first's lookup", "cluster.joinLookup", "(*CollectionIDs).await")

	cancelFirst()
	select {
	case err := <-first:
		require.ErrorIs(t, err, context.Canceled, "the first caller's own cancellation")
	case <-time.After(time.Minute):
		t.Fatal("the cancelled first caller did not return")
	}
	close(release) // the abandoned lookup's answer comes; the joiner's own follows it
	select {
	case j := <-joined:
		require.NoError(t, j.err, "not the first caller's cancellation")
		assert.Equal(t, want, j.id)
	case <-time.After(time.Minute):
		t.Fatal("the second caller did not return")
	}
}

type joinedLookup struct {
	id     uint32
	reason retry.Reason
	err    error
}

// joinLookup looks app.users up with a background context and sends what
// it got to out; its name marks its goroutine's stack (waitForStack).
func joinLookup(cc *CollectionIDs, deadline time.Time, cn *conn.Conn, out chan<- joinedLookup) {
	id, _, _, reason, err := cc.ID(context.Background(), deadline, cn, "app", "users", "app.users")
	out <- joinedLookup{id, reason, err}
}

// waitForStack waits (a minute at most: a bound no healthy run nears)
// until a goroutine's stack holds every one of frames.
func waitForStack(t *testing.T, what string, frames ...string) {
	t.Helper()
	end := time.Now().Add(time.Minute)
	buf := make([]byte, 1<<20)
	for {
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(stacks, "\n\n") {
			all := true
			for _, f := range frames {
				all = all && strings.Contains(g, f)
			}
			if all {
				return
			}
		}
		if time.Now().After(end) {
			t.Fatalf("%s: no goroutine reached it within a minute", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Outdated drops a cached id only when it is the one the request sent and
// the node's manifest is not older than the one the id came from.
func TestOutdatedKeepsNewerIDs(t *testing.T) {
	cc := &CollectionIDs{ids: map[string]cachedID{}}
	for _, tc := range []struct {
		name    string
		sent    uint32
		nodeUID uint64
		known   bool
		dropped bool
	}{
		{"another id was cached since", 8, 9, true, false},
		{"the node is behind the id's manifest", 9, 4, true, false},
		{"the node's manifest is the id's", 9, 5, true, true},
		{"the node's manifest is newer", 9, 6, true, true},
		{"the node did not say", 9, 0, false, true},
	} {
		cc.ids["s.c"] = cachedID{id: 9, uid: 5}
		cc.Outdated("s.c", tc.sent, 0, tc.nodeUID, tc.known)
		_, ok := cc.ids["s.c"]
		if ok == tc.dropped {
			t.Errorf("%s: dropped %v, want %v", tc.name, !ok, tc.dropped)
		}
	}
}

// A bucket deleted and made again under the same name (its uuid changes)
// numbers its collections afresh: an id cached from the old bucket may be
// another collection's in the new one, and a write by it lands there. A
// config of another bucket uuid empties the collection-id cache.
func TestRecreatedBucketForgetsCollectionIDs(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	b := mc.Bucket(mockcluster.DefaultBucket)
	_, err := b.AddScope("app")
	require.NoError(t, err)
	oldUsers, err := b.AddCollection("app", "users")
	require.NoError(t, err)
	cfg := testConfig(mc)
	cfg.Conn.Features = append(slices.Clone(cfg.Conn.Features), memdx.FeatureCollections)
	c := connectCluster(t, cfg)
	pick := func() *conn.Conn {
		t.Helper()
		n := c.Node(mc.Node(0).Addr())
		require.NotNil(t, n)
		cn, _, err := n.Pick()
		require.NoError(t, err)
		return cn
	}
	cc := c.Collections()
	deadline := time.Now().Add(time.Minute)
	id, _, _, _, err := cc.ID(context.Background(), deadline, pick(), "app", "users", "app.users")
	require.NoError(t, err)
	require.Equal(t, oldUsers, id)
	oldUUID := c.Topology().Config().BucketUUID()

	require.NoError(t, mc.RemoveBucket(mockcluster.DefaultBucket))
	b, err = mc.AddBucket(mockcluster.BucketOptions{Name: mockcluster.DefaultBucket})
	require.NoError(t, err)
	_, err = b.AddScope("app")
	require.NoError(t, err)
	orders, err := b.AddCollection("app", "orders")
	require.NoError(t, err)
	users, err := b.AddCollection("app", "users")
	require.NoError(t, err)
	require.Equal(t, oldUsers, orders, "the new bucket gives the old id of users to orders")
	awaitTopology(t, c, "the new bucket's config", func(top *Topology) bool {
		return top.Config().BucketUUID() != oldUUID
	})

	id, _, _, _, err = cc.ID(context.Background(), deadline, pick(), "app", "users", "app.users")
	require.NoError(t, err)
	assert.Equal(t, users, id, "app.users by the id cached from the deleted bucket (%d: app.orders now)", oldUsers)
}

// A durable write queued on the connection a collection-id lookup was
// given, between the pick (lookupConn found it free of requests the server
// answers only by a bound of its own) and the lookup's send, does not get
// the lookup sent behind it: COLLECTIONS_GET_ID is a barrier in kv_engine
// under unordered execution and waited there for the write (up to its
// durability timeout), and every later request on the connection with it.
// The connection refuses the lookup unwritten (conn.Origin.Barrier); it is
// picked again and held until the write is answered. The test queues the
// write in that window (a pick that queues it before it returns).
func TestCollectionLookupNotSentBehindAWriteQueuedAfterItsPick(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1,
		Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumReplicas: mockcluster.NoReplicas}}})
	mc.SetSyncWriteDelay(time.Hour)
	t.Cleanup(mc.CommitSyncWrites) // before the cluster closes
	b := mc.Bucket(mockcluster.DefaultBucket)
	_, err := b.AddScope("app")
	require.NoError(t, err)
	want, err := b.AddCollection("app", "users")
	require.NoError(t, err)
	fc := retry.NewFakeClock(time.Now())
	cfg := testConfig(mc)
	cfg.Clock = fc
	cfg.Conn.Features = append(slices.Clone(cfg.Conn.Features), memdx.FeatureCollections, memdx.FeatureSyncReplication)
	c := connectCluster(t, cfg)
	n := c.Node(mc.Node(0).Addr())
	require.NotNil(t, n)
	cn, _, err := n.Pick()
	require.NoError(t, err)
	cc := c.Collections()
	pick := cc.pick
	written := make(chan error, 1)
	var once sync.Once
	cc.pick = func(from *conn.Conn) (*conn.Conn, BarrierHold, retry.Reason, error) {
		o, h, reason, err := pick(from)
		if o == nil {
			return o, h, reason, err
		}
		once.Do(func() {
			req := memdx.NewStore(memdx.OpSet, []byte("k"), []byte(`"v"`), 0, 0)
			req.Vbucket = b.VbucketForKey([]byte("k"))
			req.Collections = true
			req.Durability, req.DurabilityTimeout = memdx.DurabilityMajority, 65000
			go func() {
				_, err := o.DoDeadline(context.Background(), time.Now().Add(2*time.Minute), &req, func(*memdx.Packet) error { return nil }, nil)
				written <- err
			}()
			for end := time.Now().Add(time.Minute); o.BarrierWait() <= 0; time.Sleep(time.Millisecond) {
				require.True(t, time.Now().Before(end), "the durable write was not queued within a minute")
			}
		})
		return o, h, reason, err
	}
	got := make(chan error, 1)
	var id uint32
	deadline := fc.Now().Add(30 * time.Second)
	go func() {
		var err error
		id, _, _, _, err = cc.ID(context.Background(), deadline, cn, "app", "users", "app.users")
		got <- err
	}()
	held := func() bool { return slices.ContainsFunc(fc.Timers(), deadline.Equal) }
	for end := time.Now().Add(time.Minute); !held() && cn.Pending() < 2; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(end), "the lookup neither held nor sent within a minute")
	}
	require.Equal(t, 1, cn.Pending(), "the lookup was sent behind the durable write queued after its pick")
	// Queued on the connection is not yet pending in the node: committed
	// before the node has it, the write would wait out its hour's delay.
	for end := time.Now().Add(time.Minute); mc.PendingSyncWrites() != 1; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(end), "the node did not hold the durable write within a minute")
	}
	mc.CommitSyncWrites()
	require.NoError(t, <-written)
	require.NoError(t, <-got)
	assert.Equal(t, want, id)
}
