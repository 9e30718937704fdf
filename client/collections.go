package client

import (
	"cmp"
	"sync/atomic"
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
// KV_COLLECTION_OUTDATED, always retried), unless the id cached is newer
// than the one sent or than the node's manifest: the request is then
// retried with it.
type Collection struct {
	c         *Client
	scope     string
	name      string
	path      string // "scope.collection"
	isDefault bool
	// meters are its recorders of successful operations' latencies,
	// found once (observers.go).
	meters atomic.Pointer[collMeters]
}

// Scope returns the named scope; an empty name is DefaultScope.
func (c *Client) Scope(name string) *Scope { return &Scope{c: c, name: cmp.Or(name, DefaultScope)} }

// Collection returns the named collection of the scope; an empty name is
// DefaultCollection (as in the other Couchbase SDKs and kv_engine's
// manifest: Scope("").Collection("") is the default collection, on
// memcached:// too).
func (s *Scope) Collection(name string) *Collection {
	name = cmp.Or(name, DefaultCollection)
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
