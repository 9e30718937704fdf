package cluster

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A client lives for weeks and meets collections made and dropped (for a
// tenant, a job), each named anew. Each one a request found unknown after
// its drop left a floor (the manifest a lookup must not be older than),
// kept by path for good: the map grew by one entry per collection ever
// dropped. Floors are now bounded; one dropped to bound them is folded
// into a floor for every path, so that no path's floor is ever lowered (a
// lookup answered by a node behind it is still not cached).
func TestCollectionIDFloorsAreBounded(t *testing.T) {
	const bound, n = 8, 100
	cc := &CollectionIDs{ids: map[string]cachedID{}, maxFloors: bound}
	for i := range n {
		path := "s.c" + strconv.Itoa(i)
		cc.ids[path] = cachedID{id: uint32(i + 8), uid: uint64(i + 1)}
		cc.Outdated(path, uint32(i+8), 0, uint64(i+1), true)
		require.NotContains(t, cc.ids, path, "the id found unknown is dropped")
	}
	require.LessOrEqual(t, len(cc.floors), bound, "floors kept")
	for i := range n {
		path := "s.c" + strconv.Itoa(i)
		require.GreaterOrEqual(t, cc.floorLocked(path), uint64(i+1), "%s's floor lowered", path)
	}
	cc.Forget()
	require.Zero(t, cc.floorLocked("s.c0"), "a bucket made again numbers its manifests afresh")
}

// The ids of collections a client used and then never again (dropped,
// and no request meeting their drop) stayed cached for good: one entry
// per collection ever used. The cache is now bounded; caching one beyond
// the bound drops another, whose floor becomes the manifest its id came
// from: looked up again, it is not taken from a node behind that manifest
// (which could give the id of a collection of that name since dropped).
func TestCollectionIDCacheIsBounded(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	b := mc.Bucket(mockcluster.DefaultBucket)
	_, err := b.AddScope("app")
	require.NoError(t, err)
	const bound, n = 2, 5
	want := map[string]uint32{}
	for i := range n {
		name := "c" + strconv.Itoa(i)
		id, err := b.AddCollection("app", name)
		require.NoError(t, err)
		want["app."+name] = id
	}
	uid := b.ManifestUID()
	cfg := testConfig(mc)
	cfg.Conn.Features = append(slices.Clone(cfg.Conn.Features), memdx.FeatureCollections)
	c := connectCluster(t, cfg)
	n0 := c.Node(mc.Node(0).Addr())
	require.NotNil(t, n0)
	cn, _, err := n0.Pick()
	require.NoError(t, err)
	cc := c.Collections()
	cc.mu.Lock()
	cc.maxIDs = bound
	cc.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for round := range 2 {
		for i := range n {
			name := "c" + strconv.Itoa(i)
			id, _, _, _, err := cc.ID(context.Background(), deadline, cn, "app", name, "app."+name)
			require.NoError(t, err)
			require.Equal(t, want["app."+name], id, "round %d", round)
		}
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	require.LessOrEqual(t, len(cc.ids), bound, "ids cached")
	for path := range want {
		if _, ok := cc.ids[path]; !ok {
			require.Equal(t, uid, cc.floorLocked(path), "the floor of %s, dropped from the cache", path)
		}
	}
}

// An id dropped from the cache to bound it may still be in flight, in a
// request sent before: a node that answers it UNKNOWN_COLLECTION (the
// collection dropped, perhaps made again under its name) says that a
// lookup answered by a manifest older than its own may give that very id.
// Outdated took nothing from the answer when the path was no longer
// cached, leaving the floor at the dropped id's manifest: a node behind
// the drop (between the two manifests) was then asked, and its answer,
// the dropped collection's id, cached; a write by it was acknowledged
// into the dropped collection and lost. The answer's manifest now raises
// the path's floor even when its id was dropped from the cache.
func TestOutdatedRaisesTheFloorOfAnEvictedPath(t *testing.T) {
	cc := &CollectionIDs{ids: map[string]cachedID{}, maxIDs: 1}
	cc.mu.Lock()
	cc.cacheLocked("s.c", cachedID{id: 9, uid: 5})
	cc.cacheLocked("s.d", cachedID{id: 10, uid: 5}) // drops s.c's id
	require.NotContains(t, cc.ids, "s.c")
	require.Equal(t, uint64(5), cc.floorLocked("s.c"), "the dropped id's manifest")
	cc.mu.Unlock()

	// A request sent with s.c's id 9 before it was dropped: the node,
	// at manifest 7, no longer knows it.
	cc.Outdated("s.c", 9, 0, 7, true)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	require.Equal(t, uint64(7), cc.floorLocked("s.c"),
		"a lookup answered by manifest 6 may give id 9, which manifest 7 dropped")
	require.Equal(t, cachedID{id: 10, uid: 5}, cc.ids["s.d"], "another path's id is kept")
}

// A bucket made again (Forget) numbers its manifests afresh: an answer of
// the old bucket's, read after Forget, names a manifest the new one may
// never reach. Outdated on a path with nothing cached and no floor (not
// dropped from the cache since Forget) raises no floor by it: every
// lookup of that path would be retried, as behind that manifest, until
// the new bucket's manifests passed it.
func TestOutdatedAfterForgetRaisesNoFloorOfAPathNeverCached(t *testing.T) {
	cc := &CollectionIDs{ids: map[string]cachedID{}}
	cc.Forget()
	cc.Outdated("s.c", 9, 0, 0x50, true) // the old bucket's late answer (of the generation before)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	require.Zero(t, cc.floorLocked("s.c"), "a floor of the old bucket's manifest")
}
