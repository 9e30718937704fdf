package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/statuspolicy"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// CollectionIDs caches collection ids by "scope.collection", for the whole
// bucket (ids are per bucket, the same on every node), and looks them up
// (COLLECTIONS_GET_ID) on a miss, once however many requests meet it at
// the same time.
type CollectionIDs struct {
	mu  sync.RWMutex
	ids map[string]uint32
	sf  singleflight.Group
	// clock times a caller's wait for a lookup another caller started
	// (the cluster's, the client's Clock).
	clock retry.Clock
}

// ID returns the id of collection name of scope (path: "scope.name") from
// the cache, or asks cn when it is not cached (one lookup at a time per
// collection: concurrent callers share its answer, each waiting for it
// within its own ctx and deadline, like a lookup of its own; the lookup
// runs within its first caller's). A status other than
// success is decided by the status policy (statuspolicy.Decide for
// COLLECTIONS_GET_ID): a missing scope or
// collection gives the terminal reasons of RFC 0049 revision 16 (the
// default strategy fails at once, best effort waits for it to appear);
// TMPFAIL and the statuses the node's error map marks for retry are
// retried (the map's entry goes with the error, for FollowErrorMap); the
// rest end the operation (retry.ReasonUnknown) with an error matching the
// status's sentinel. A lookup that got no answer is retried as
// SOCKET_NOT_AVAILABLE, and so is a caller whose ctx or deadline ended
// while it waited for a lookup (a *conn.RequestError with the context's
// error, as its own lookup would have ended). waited reports that the id
// was not cached: the caller waited for a lookup, so a clock reading it
// made before is stale.
func (cc *CollectionIDs) ID(ctx context.Context, deadline time.Time, cn *conn.Conn, scope, name, path string) (id uint32, waited bool, reason retry.Reason, err error) {
	if !cn.Features().Has(memdx.FeatureCollections) {
		return 0, false, retry.ReasonUnknown, fmt.Errorf("%w: collection %s: the server did not enable collections", kverr.ErrFeatureNotAvailable, path)
	}
	cc.mu.RLock()
	id, ok := cc.ids[path]
	cc.mu.RUnlock()
	if ok {
		return id, false, 0, nil
	}
	id, reason, err = cc.lookup(ctx, deadline, cn, scope, name, path)
	return id, true, reason, err
}

// lookup asks cn for the id of collection name of scope (ID).
func (cc *CollectionIDs) lookup(ctx context.Context, deadline time.Time, cn *conn.Conn, scope, name, path string) (uint32, retry.Reason, error) {
	flight := cc.sf.DoChan(path, func() (any, error) {
		req := memdx.NewCollectionsGetID(scope, name)
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
		}, nil)
		if err != nil {
			return nil, err
		}
		if status != memdx.StatusSuccess {
			return nil, &LookupError{path: path, status: status,
				Outcome: statuspolicy.Decide(memdx.OpCollectionsGetID, false, status, cn.ErrorMap())}
		}
		cc.mu.Lock()
		cc.ids[path] = cid
		cc.mu.Unlock()
		return cid, nil
	})
	v, err := cc.await(ctx, deadline, flight, cn.Addr())
	if err == nil {
		return v.(uint32), 0, nil
	}
	var le *LookupError
	var re *conn.RequestError
	switch {
	case errors.As(err, &le):
		return 0, le.Outcome.Reason, err
	case errors.As(err, &re):
		// The lookup's request did not get an answer (connection,
		// overload, deadline): nothing of the operation was sent, so it
		// may be retried.
		return 0, retry.ReasonSocketNotAvailable, err
	}
	// An answer that did not decode: a server bug, not retried.
	return 0, retry.ReasonUnknown, fmt.Errorf("%w: COLLECTIONS_GET_ID for %s: %w", kverr.ErrServerFailure, path, err)
}

// await waits for a lookup's result, until ctx ends or the deadline (on
// the clock) passes: a lookup another caller started runs within that
// caller's context and deadline, which must not hold this one past its
// own. Leaving it early leaves the lookup to its other callers.
func (cc *CollectionIDs) await(ctx context.Context, deadline time.Time, flight <-chan singleflight.Result, addr string) (any, error) {
	select {
	case r := <-flight:
		return r.Val, r.Err
	default:
	}
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := cc.clock.NewTimer(deadline.Sub(cc.clock.Now()))
		defer t.Stop()
		expired = t.C()
	}
	select {
	case r := <-flight:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, &conn.RequestError{Op: memdx.OpCollectionsGetID, Addr: addr, Err: ctx.Err()}
	case <-expired:
		return nil, &conn.RequestError{Op: memdx.OpCollectionsGetID, Addr: addr, Err: context.DeadlineExceeded}
	}
}

// LookupError is a COLLECTIONS_GET_ID answered with a status other than
// success, with the status policy's outcome for it. errors.Is matches the
// outcome's sentinel (ErrCollectionNotFound, ErrScopeNotFound,
// ErrInvalidArgument for EINVAL, ErrNoAccess for EACCESS,
// ErrTemporaryFailure for TMPFAIL or a "temp" error-map entry,
// ErrServerFailure otherwise) and errors.As finds the *memdx.StatusError.
type LookupError struct {
	path    string
	status  memdx.Status
	Outcome statuspolicy.Outcome
}

func (e *LookupError) Error() string {
	switch e.Outcome.Sentinel {
	case kverr.ErrCollectionNotFound:
		return "collection " + e.path + " not found"
	case kverr.ErrScopeNotFound:
		return "scope of " + e.path + " not found"
	}
	return "looking up the id of collection " + e.path + ": " + e.Unwrap().Error()
}

func (e *LookupError) Is(target error) bool { return target == e.Outcome.Sentinel }

// OutcomeSentinel makes a LookupError a kverr.OutcomeError: the operation
// that needed the id ends with the lookup's outcome.
func (e *LookupError) OutcomeSentinel() error { return e.Outcome.Sentinel }

func (e *LookupError) Unwrap() error {
	return &memdx.StatusError{Status: e.status, OpCode: memdx.OpCollectionsGetID}
}

// Invalidate drops path's id: a node answered UNKNOWN_COLLECTION (the
// manifest changed), and the next request resolves it again.
func (cc *CollectionIDs) Invalidate(path string) {
	cc.mu.Lock()
	delete(cc.ids, path)
	cc.mu.Unlock()
}
