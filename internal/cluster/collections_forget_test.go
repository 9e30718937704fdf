package cluster

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A collection-id lookup begun before the cache was emptied (Forget: the
// bucket was made again, and an id of the old one may name another
// collection of the new one) is not joined by a request that looks the
// id up after: its answer may be the old bucket's. It was joined (one
// lookup per collection and node), and the waiter sent the old bucket's
// id on its connection, the new bucket's, writing into whatever collection
// has that id there.
func TestLookupAfterForgetDoesNotJoinOneBegunBefore(t *testing.T) {
	h := newHeldLookup(t)
	b, c, addr, cn, reached, oldID := h.b, h.c, h.addr, h.cn, h.reached, h.users
	cc := c.Collections()
	deadline := time.Now().Add(5 * time.Minute) // past the test's bound of a minute
	first := make(chan uint32, 1)
	go func() {
		id, _, _, _, _ := cc.ID(context.Background(), deadline, cn, "app", "users", "app.users")
		first <- id
	}()
	select {
	case <-reached:
	case <-time.After(time.Minute):
		t.Fatal("the first lookup did not reach the node")
	}

	// Meanwhile the id the held answer gives stops naming app.users (the
	// bucket made again: here, the collection made again under its name,
	// which takes another id), and the cache is emptied.
	require.NoError(t, b.DropCollection("app", "users"))
	newID, err := b.AddCollection("app", "users")
	require.NoError(t, err)
	require.NotEqual(t, oldID, newID)
	cc.Forget()

	// A request on another connection to the node looks the id up.
	cn2, err := conn.Dial(context.Background(), addr, c.connOptions(nil))
	require.NoError(t, err)
	defer cn2.Close()
	require.Equal(t, cn.Addr(), cn2.Addr())
	second := make(chan uint32, 1)
	go func() {
		id, _, _, _, _ := cc.ID(context.Background(), deadline, cn2, "app", "users", "app.users")
		second <- id
	}()
	select {
	case id := <-second:
		require.Equal(t, newID, id, "the id looked up after the cache was emptied")
	case <-time.After(time.Minute):
		t.Fatal("a lookup after the cache was emptied waited a minute for the lookup begun before (whose answer, id " +
			"of the collection before, it would have taken)")
	}
	h.release()
	<-first
	id, _, _, _, err := cc.ID(context.Background(), deadline, cn2, "app", "users", "app.users")
	require.NoError(t, err)
	require.Equal(t, newID, id, "the id cached")
}

// heldLookup is a one-node cluster holding app.users, a client cluster
// on it with collections, and a connection of it; the node holds the answer
// to the first COLLECTIONS_GET_ID until release (reached gets a value as
// the node takes it). release runs at the test's end too, before the
// cluster closes.
type heldLookup struct {
	mc      *mockcluster.Cluster
	b       *mockcluster.Bucket
	c       *Cluster
	addr    string
	cn      *conn.Conn
	users   uint32
	reached chan struct{}
	release func()
}

func newHeldLookup(t *testing.T) *heldLookup {
	t.Helper()
	h := &heldLookup{mc: newMock(t, mockcluster.Options{Nodes: 1})}
	h.b = h.mc.Bucket(mockcluster.DefaultBucket)
	_, err := h.b.AddScope("app")
	require.NoError(t, err)
	h.users, err = h.b.AddCollection("app", "users")
	require.NoError(t, err)
	cfg := testConfig(h.mc)
	cfg.Conn.Features = append(slices.Clone(cfg.Conn.Features), memdx.FeatureCollections)
	h.c = connectCluster(t, cfg)
	h.addr = h.mc.Node(0).Addr()
	n := h.c.Node(h.addr)
	require.NotNil(t, n)
	h.cn, _, err = n.Pick()
	require.NoError(t, err)
	h.reached = make(chan struct{}, 1)
	release := make(chan struct{})
	h.release = sync.OnceFunc(func() { close(release) })
	t.Cleanup(h.release)
	h.mc.AddFault(mockcluster.Fault{
		Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpCollectionsGetID}, Func: func(*mockcluster.Request) bool {
			select {
			case h.reached <- struct{}{}:
			default:
			}
			return true
		}},
		Action: mockcluster.Action{Hold: release}, Times: 1,
	})
	return h
}

// A lookup begun before Forget whose answer comes after it, with no id
// cached since, gives neither its caller nor a caller that joined it
// before Forget an id: its answer may be the old bucket's id, which names
// another collection of the new one (or none). It gave that id, kept only
// out of the cache, and the request sent it on its connection, writing
// into whatever collection of the new bucket has that number. Each caller
// is retried as for an id found outdated (KV_COLLECTION_OUTDATED: nothing
// was sent), and looks the id up again, of the new bucket.
func TestLookupBegunBeforeForgetGivesNoIDOfTheBucketBefore(t *testing.T) {
	h := newHeldLookup(t)
	b, c, cn, reached, oldID := h.b, h.c, h.cn, h.reached, h.users
	cc := c.Collections()
	deadline := time.Now().Add(5 * time.Minute) // past the test's bound of a minute
	first := make(chan joinedLookup, 1)
	go func() {
		id, _, _, reason, err := cc.ID(context.Background(), deadline, cn, "app", "users", "app.users")
		first <- joinedLookup{id, reason, err}
	}()
	select {
	case <-reached:
	case <-time.After(time.Minute):
		t.Fatal("the first lookup did not reach the node")
	}
	joined := make(chan joinedLookup, 1)
	go joinLookup(cc, deadline, cn, joined)
	waitForStack(t, "a caller waiting for the first's lookup", "cluster.joinLookup", "(*CollectionIDs).await")

	// The bucket is made again: here, the collection made again under
	// its name, which takes another id; the cache is emptied.
	require.NoError(t, b.DropCollection("app", "users"))
	newID, err := b.AddCollection("app", "users")
	require.NoError(t, err)
	require.NotEqual(t, oldID, newID)
	cc.Forget()
	h.release() // the answer of the bucket before: oldID

	for _, got := range []struct {
		who string
		out chan joinedLookup
	}{{"the lookup's caller", first}, {"a caller that joined it before Forget", joined}} {
		select {
		case j := <-got.out:
			require.Error(t, j.err, "%s was given id %#x (the id before Forget: %#x)", got.who, j.id, oldID)
			require.Equal(t, retry.ReasonKVCollectionOutdated, j.reason, "%s: %v", got.who, j.err)
		case <-time.After(time.Minute):
			t.Fatalf("%s did not return", got.who)
		}
	}
	id, _, _, _, err := cc.ID(context.Background(), deadline, cn, "app", "users", "app.users")
	require.NoError(t, err)
	require.Equal(t, newID, id, "the id looked up again")
}
