package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A bucket made again (Forget) numbers its collections and its manifests
// afresh: a collection's id there may be the very number it had in the
// old bucket, and the old bucket's manifest uid one the new bucket never
// reaches. A late UNKNOWN_COLLECTION of the old bucket, for a request that
// sent the id cached before Forget, reached Outdated once the path was
// cached again with the same number: Outdated took it for news of the
// new bucket, dropped the id and raised the path's floor to the old
// bucket's manifest, and every later lookup of the path was retried
// (KV_COLLECTION_OUTDATED) until its request timed out: the collection
// was unusable. The request carries the cache's generation the id
// belongs to (ID's gen), and Outdated ignores an answer about an id of a
// generation before the cache's.
func TestOutdatedIgnoresAnAnswerAboutAnIDCachedBeforeForget(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	b := mc.Bucket(mockcluster.DefaultBucket)
	_, err := b.AddScope("app")
	require.NoError(t, err)
	users, err := b.AddCollection("app", "users")
	require.NoError(t, err)
	cfg := testConfig(mc)
	cfg.Conn.Features = append(slices.Clone(cfg.Conn.Features), memdx.FeatureCollections)
	c := connectCluster(t, cfg)
	n := c.Node(mc.Node(0).Addr())
	require.NotNil(t, n)
	cn, _, err := n.Pick()
	require.NoError(t, err)
	cc := c.Collections()
	deadline := time.Now().Add(time.Minute)

	// A request of the old bucket takes the id (generation oldGen).
	id, oldGen, _, _, err := cc.ID(context.Background(), deadline, cn, "app", "users", "app.users")
	require.NoError(t, err)
	require.Equal(t, users, id)

	// The bucket is made again: the new one gives app.users the same
	// number, cached anew.
	cc.Forget()
	id, gen, _, _, err := cc.ID(context.Background(), deadline, cn, "app", "users", "app.users")
	require.NoError(t, err)
	require.Equal(t, users, id)
	require.NotEqual(t, oldGen, gen, "the generation after Forget")

	// The old bucket's late UNKNOWN_COLLECTION for the request sent
	// before, by a manifest far past the new bucket's.
	oldUID := b.ManifestUID() + 0x1000
	cc.Outdated("app.users", users, oldGen, oldUID, true)

	id, gen2, _, reason, err := cc.ID(context.Background(), deadline, cn, "app", "users", "app.users")
	require.NoError(t, err, "app.users after the old bucket's late answer (reason %v)", reason)
	require.Equal(t, users, id)
	require.Equal(t, gen, gen2)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	require.Zero(t, cc.floorLocked("app.users"), "a floor of the old bucket's manifest")
	require.NotEqual(t, retry.ReasonKVCollectionOutdated, reason)
}

// The same for a path dropped from the cache to bound it since Forget
// (it has a floor of the new bucket's): the old bucket's late answer
// about the id cached before Forget raised that floor to the old bucket's
// manifest, which the new one may never reach.
func TestOutdatedIgnoresAnAnswerBeforeForgetForAnEvictedPath(t *testing.T) {
	cc := &CollectionIDs{ids: map[string]cachedID{}, maxIDs: 1}
	cc.mu.Lock()
	cc.cacheLocked("s.c", cachedID{id: 9, uid: 0x40})
	cc.mu.Unlock()
	oldGen := cc.Gen()
	cc.Forget()
	cc.mu.Lock()
	cc.cacheLocked("s.c", cachedID{id: 9, uid: 2})  // the new bucket's, same number
	cc.cacheLocked("s.d", cachedID{id: 10, uid: 2}) // drops s.c's id
	require.Equal(t, uint64(2), cc.floorLocked("s.c"), "the dropped id's manifest")
	cc.mu.Unlock()

	cc.Outdated("s.c", 9, oldGen, 0x50, true) // the old bucket's late answer
	cc.mu.Lock()
	defer cc.mu.Unlock()
	require.Equal(t, uint64(2), cc.floorLocked("s.c"), "a floor of the old bucket's manifest")
}

// A lookup begun before Forget that ends after a lookup begun since cached
// the id gives its caller that id: it is of the generation after Forget,
// not of the one the lookup began in. Given the older one, the caller's
// UNKNOWN_COLLECTION for it would be ignored as the old bucket's
// (Outdated), and the request retried with the id, unchanged, until it
// timed out.
func TestLookupBegunBeforeForgetGivesTheGenerationOfTheIDItGives(t *testing.T) {
	h := newHeldLookup(t)
	b, c, addr, cn, reached, users := h.b, h.c, h.addr, h.cn, h.reached, h.users
	cc := c.Collections()
	deadline := time.Now().Add(5 * time.Minute) // past the test's bound of a minute
	type answer struct {
		id  uint32
		gen uint64
		err error
	}
	first := make(chan answer, 1)
	go func() {
		id, gen, _, _, err := cc.ID(context.Background(), deadline, cn, "app", "users", "app.users")
		first <- answer{id, gen, err}
	}()
	select {
	case <-reached:
	case <-time.After(time.Minute):
		t.Fatal("the first lookup did not reach the node")
	}
	cc.Forget()

	// A lookup after Forget, on another connection, caches the id.
	cn2, err := conn.Dial(context.Background(), addr, c.connOptions(nil))
	require.NoError(t, err)
	defer cn2.Close()
	id, gen, _, _, err := cc.ID(context.Background(), deadline, cn2, "app", "users", "app.users")
	require.NoError(t, err)
	require.Equal(t, users, id)

	h.release()
	var got answer
	select {
	case got = <-first:
	case <-time.After(time.Minute):
		t.Fatal("the first lookup did not end")
	}
	require.Equal(t, answer{users, gen, nil}, got, "the lookup begun before Forget")

	// The node finds that id unknown: the id is dropped.
	cc.Outdated("app.users", got.id, got.gen, b.ManifestUID(), true)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	require.NotContains(t, cc.ids, "app.users", "the id the node found unknown")
}
