package client

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// resolveCollection returns col's id, from the cluster's cache, or asking
// cn when it is not cached. A status other than success is decided by the
// status policy (decideStatus for COLLECTIONS_GET_ID): a missing scope or
// collection gives the terminal reasons of RFC 0049 revision 16 (the
// default strategy fails at once, best effort waits for it to appear);
// TMPFAIL and the statuses the node's error map marks for retry are
// retried (the map's entry goes with the error, for FollowErrorMap); the
// rest end the operation (retry.ReasonUnknown) with an error matching the
// status's sentinel. A lookup that got no answer is retried as
// SOCKET_NOT_AVAILABLE.
func (c *Client) resolveCollection(ctx context.Context, deadline time.Time, cn *conn.Conn, col *Collection) (uint32, retry.Reason, error) {
	if !cn.Features().Has(memdx.FeatureCollections) {
		return 0, retry.ReasonUnknown, fmt.Errorf("%w: collection %s: the server did not enable collections", ErrFeatureNotAvailable, col.path)
	}
	ids := c.cl.Collections()
	if id, ok := ids.Lookup(col.path); ok {
		return id, 0, nil
	}
	id, err := ids.Resolve(col.path, func() (uint32, error) {
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
		if err == nil && status != memdx.StatusSuccess {
			err = &lookupError{path: col.path, status: status,
				outcome: decideStatus(memdx.OpCollectionsGetID, false, status, cn.ErrorMap())}
		}
		return cid, err
	})
	if err == nil {
		return id, 0, nil
	}
	var le *lookupError
	var re *conn.RequestError
	switch {
	case errors.As(err, &le):
		return 0, le.outcome.reason, err
	case errors.As(err, &re):
		// The lookup's request did not get an answer (connection,
		// overload, deadline): nothing of the operation was sent, so it
		// may be retried.
		return 0, retry.ReasonSocketNotAvailable, err
	}
	// An answer that did not decode: a server bug, not retried.
	return 0, retry.ReasonUnknown, fmt.Errorf("%w: COLLECTIONS_GET_ID for %s: %w", ErrServerFailure, col.path, err)
}

// lookupError is a COLLECTIONS_GET_ID answered with a status other than
// success, with the status policy's outcome for it. errors.Is matches the
// outcome's sentinel (ErrCollectionNotFound, ErrScopeNotFound,
// ErrInvalidArgument for EINVAL, ErrNoAccess for EACCESS,
// ErrTemporaryFailure for TMPFAIL or a "temp" error-map entry,
// ErrServerFailure otherwise) and errors.As finds the *memdx.StatusError.
type lookupError struct {
	path    string
	status  memdx.Status
	outcome statusOutcome
}

func (e *lookupError) Error() string {
	switch e.outcome.sentinel {
	case ErrCollectionNotFound:
		return "collection " + e.path + " not found"
	case ErrScopeNotFound:
		return "scope of " + e.path + " not found"
	}
	return "looking up the id of collection " + e.path + ": " + e.Unwrap().Error()
}

func (e *lookupError) Is(target error) bool { return target == e.outcome.sentinel }

func (e *lookupError) Unwrap() error {
	return &memdx.StatusError{Status: e.status, OpCode: memdx.OpCollectionsGetID}
}
