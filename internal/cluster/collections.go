package cluster

import (
	"sync"

	"golang.org/x/sync/singleflight"
)

// CollectionIDs caches collection ids by "scope.collection", for the whole
// bucket (ids are per bucket, the same on every node). A miss is resolved
// once however many requests meet it at the same time.
type CollectionIDs struct {
	mu  sync.RWMutex
	ids map[string]uint32
	sf  singleflight.Group
}

// Lookup returns the cached id of path.
func (cc *CollectionIDs) Lookup(path string) (uint32, bool) {
	cc.mu.RLock()
	id, ok := cc.ids[path]
	cc.mu.RUnlock()
	return id, ok
}

// Resolve returns the id of path (not cached: Lookup first) by calling
// lookup, one at a time per path (concurrent callers share its answer),
// and caches what lookup found.
func (cc *CollectionIDs) Resolve(path string, lookup func() (uint32, error)) (uint32, error) {
	v, err, _ := cc.sf.Do(path, func() (any, error) {
		id, err := lookup()
		if err != nil {
			return nil, err
		}
		cc.mu.Lock()
		cc.ids[path] = id
		cc.mu.Unlock()
		return id, nil
	})
	if err != nil {
		return 0, err
	}
	return v.(uint32), nil
}

// Invalidate drops path's id: a node answered UNKNOWN_COLLECTION (the
// manifest changed), and the next request resolves it again.
func (cc *CollectionIDs) Invalidate(path string) {
	cc.mu.Lock()
	delete(cc.ids, path)
	cc.mu.Unlock()
}
