package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// Names of the default scope and collection.
const (
	DefaultScope      = "_default"
	DefaultCollection = "_default"
)

// Scope is a scope of the bucket.
type Scope struct {
	c    *Client
	name string
}

// Collection is a collection of the bucket: every key-value operation is
// a method of one. Its id is resolved with COLLECTIONS_GET_ID on first use
// and cached; when a node answers UNKNOWN_COLLECTION (the manifest changed)
// the cache entry is dropped and the id resolved again (RFC 0049's
// KV_COLLECTION_OUTDATED, always retried).
type Collection struct {
	c         *Client
	scope     string
	name      string
	path      string // "scope.collection"
	isDefault bool
}

// Scope returns the named scope.
func (c *Client) Scope(name string) *Scope { return &Scope{c: c, name: name} }

// Collection returns the named collection of the scope.
func (s *Scope) Collection(name string) *Collection {
	return &Collection{c: s.c, scope: s.name, name: name, path: s.name + "." + name,
		isDefault: s.name == DefaultScope && name == DefaultCollection}
}

// DefaultCollection returns the bucket's default collection (and, for
// memcached, the only keyspace there is).
func (c *Client) DefaultCollection() *Collection {
	return c.Scope(DefaultScope).Collection(DefaultCollection)
}

// Name returns the collection's name; ScopeName its scope's.
func (col *Collection) Name() string      { return col.name }
func (col *Collection) ScopeName() string { return col.scope }

// collectionCache maps "scope.collection" to its id, for the whole client
// (ids are per bucket, the same on every node).
type collectionCache struct {
	mu  sync.RWMutex
	ids map[string]uint32
	sf  singleflight.Group
}

func (cc *collectionCache) init() { cc.ids = map[string]uint32{} }

func (cc *collectionCache) invalidate(col *Collection) {
	cc.mu.Lock()
	delete(cc.ids, col.path)
	cc.mu.Unlock()
}

// resolve returns col's id, asking cn when it is not cached. A missing
// scope or collection gives the terminal reasons of RFC 0049 revision 16
// (the default strategy fails at once, best effort waits for it to appear).
func (cc *collectionCache) resolve(ctx context.Context, deadline time.Time, cn *conn.Conn, col *Collection) (uint32, retry.Reason, error) {
	if !cn.Features().Has(memdx.FeatureCollections) {
		return 0, retry.ReasonUnknown, fmt.Errorf("%w: collection %s: the server did not enable collections", ErrFeatureNotAvailable, col.path)
	}
	cc.mu.RLock()
	id, ok := cc.ids[col.path]
	cc.mu.RUnlock()
	if ok {
		return id, 0, nil
	}
	v, err, _ := cc.sf.Do(col.path, func() (any, error) {
		req := memdx.NewCollectionsGetID(col.scope, col.name)
		var cid uint32
		var status memdx.Status
		_, err := cn.DoDeadline(ctx, deadline, &req, func(p *memdx.Packet) error {
			status = p.Status
			if p.Status != memdx.StatusSuccess {
				return nil
			}
			_, id, err := memdx.DecodeCollectionsGetID(p)
			cid = id
			return err
		})
		if err != nil {
			return nil, err
		}
		switch status {
		case memdx.StatusSuccess:
		case memdx.StatusUnknownCollection:
			return nil, &collectionError{path: col.path, scope: false}
		case memdx.StatusUnknownScope:
			return nil, &collectionError{path: col.path, scope: true}
		default:
			return nil, &memdx.StatusError{Status: status, OpCode: memdx.OpCollectionsGetID}
		}
		cc.mu.Lock()
		cc.ids[col.path] = cid
		cc.mu.Unlock()
		return cid, nil
	})
	if err == nil {
		return v.(uint32), 0, nil
	}
	var ce *collectionError
	switch {
	case errors.As(err, &ce) && ce.scope:
		return 0, retry.ReasonScopeNotFound, err
	case errors.As(err, &ce):
		return 0, retry.ReasonCollectionNotFound, err
	}
	// The lookup itself failed (connection, timeout): nothing of the
	// operation was sent, so it may be retried.
	return 0, retry.ReasonSocketNotAvailable, err
}

type collectionError struct {
	path  string
	scope bool
}

func (e *collectionError) Error() string {
	if e.scope {
		return "scope of " + e.path + " not found"
	}
	return "collection " + e.path + " not found"
}

func (e *collectionError) Is(target error) bool {
	if e.scope {
		return target == ErrScopeNotFound
	}
	return target == ErrCollectionNotFound
}
