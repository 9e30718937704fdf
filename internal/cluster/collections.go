package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/statuspolicy"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// CollectionIDs caches collection ids by "scope.collection", for the whole
// bucket (ids are per bucket, the same on every node), and looks them up
// (COLLECTIONS_GET_ID) on a miss, once per node however many requests meet
// it there at the same time.
type CollectionIDs struct {
	mu  sync.RWMutex
	ids map[string]cachedID
	// flights are the lookups running, by path and node: each on the
	// goroutine of its first caller, the others of that node waiting for
	// it (guarded by mu). A node's lookup is not another's: one that does
	// not answer (a node hung) must not hold the requests to the others.
	flights map[flightKey]*idFlight
	// floors are, by path, the newest manifest uid by which a node found
	// the id cached before unknown (Outdated dropped it): a lookup answered
	// by an older manifest is stale and not cached (guarded by mu).
	floors map[string]uint64
	// floorRest is the newest of the floors dropped to bound floors: it
	// stands for each of their paths and, over-cautiously, for every
	// other (a lookup answered by a manifest older than it is retried
	// until its node catches up; guarded by mu).
	floorRest uint64
	// maxIDs and maxFloors bound ids and floors (0: maxCachedIDs and
	// maxIDFloors): a client living for weeks meets collections made
	// and dropped, and keeps an entry for none beyond them.
	maxIDs, maxFloors int
	// clock times a caller's wait for a lookup another caller runs (the
	// cluster's, the client's Clock).
	clock retry.Clock
	// gen counts Forget calls: a lookup begun before one neither caches
	// nor gives the id it gets (guarded by mu).
	gen uint64
	// pick chooses the connection a lookup for a request routed to a
	// connection goes on, or says the lookup is to be held, or that the
	// request is to be routed again (Cluster.lookupConn; nil: that one).
	pick func(*conn.Conn) (*conn.Conn, BarrierHold, retry.Reason, error)
}

const (
	// maxCachedIDs bounds the ids cached: beyond it, caching one drops
	// another, whose next request looks it up again. A lookup answered
	// by a manifest older than the dropped id's is not cached (its floor
	// is raised to that id's manifest): a node behind could give the id
	// of a collection of that name since dropped.
	maxCachedIDs = 8192
	// maxIDFloors bounds the floors kept by path: beyond it, raising one
	// folds another into floorRest.
	maxIDFloors = 8192
)

// cachedID is a cached collection id and the uid of the manifest the
// lookup that gave it was answered by (Outdated compares it with a node's).
type cachedID struct {
	id  uint32
	uid uint64
}

// flightKey names a lookup: the collection's path and the node's address.
type flightKey struct{ path, node string }

// idFlight is a lookup that its first caller runs and the callers that
// meet the same miss meanwhile wait for: its outcome (ID's) is set before
// done is closed.
type idFlight struct {
	done   chan struct{}
	id     uint32
	uid    uint64 // the answering manifest's uid
	reason retry.Reason
	err    error
	// callerEnded says the lookup ended with its caller's context or
	// deadline, before an answer: that caller's end, not the others'.
	callerEnded bool
	// gen is the cache's gen when the lookup began.
	gen uint64
	// idGen is the cache's gen that id belongs to (ID's gen): gen, or
	// the one after Forget when the id is one cached since.
	idGen uint64
}

// ID returns the id of collection name of scope (path: "scope.name") from
// the cache, or asks cn when it is not cached (one lookup at a time per
// collection and node, on its first caller's goroutine and within that
// caller's ctx and deadline: concurrent callers of that node share its
// answer, each waiting for it
// within its own ctx and deadline, and look up again themselves when it
// ended with its caller's context or deadline rather than with an answer).
// A status other than
// success is decided by the status policy (statuspolicy.Decide for
// COLLECTIONS_GET_ID): a missing scope or
// collection gives the terminal reasons of RFC 0049 revision 16 (the
// default strategy fails at once, best effort waits for it to appear);
// TMPFAIL and the statuses the node's error map marks for retry are
// retried (the map's entry goes with the error, for FollowErrorMap); the
// rest end the operation (retry.ReasonUnknown) with an error matching the
// status's sentinel. A lookup that got no answer (its connection ended, or
// was overloaded) is retried as SOCKET_NOT_AVAILABLE; one that the
// caller's ctx or deadline ended, sent, held (below) or waiting for
// another's lookup, ends with a *conn.RequestError with the context's
// error, which is the caller's end (a timeout, a cancellation), not a
// retry; a lookup answered
// by a manifest older than one by which a node found the id unknown
// (Outdated) is retried as KV_COLLECTION_OUTDATED, the node being behind,
// and one answered by a manifest older than that of the id another node's
// lookup cached meanwhile gives the cached id; one begun before Forget
// gives the id a lookup begun since cached, or none: it is retried as
// KV_COLLECTION_OUTDATED (its answer may be the old bucket's id). waited reports
// that the id was not cached: the caller waited for a lookup, so a clock
// reading it made before is stale. The lookup goes on cn, or on another
// connection when cn holds a synchronous write waiting for replication
// (Cluster.lookupConn); when every connection of the bucket's nodes holds
// one, it is held, unsent, until one of cn's node is free, the shortest of
// their bounds has passed, or the caller's deadline or ctx ends it
// (holdLookup); or until cn's node leaves the config: the request is then
// to be routed again (ReasonNodeNotAvailable), the lookup not sent behind
// them on the connection the node drains. gen is the cache's generation
// the id belongs to (Forget counts them): the request that sends the id
// gives it to Outdated with it, which takes nothing from an answer about
// an id of the bucket before Forget.
func (cc *CollectionIDs) ID(ctx context.Context, deadline time.Time, cn *conn.Conn, scope, name, path string) (id uint32, gen uint64, waited bool, reason retry.Reason, err error) {
	if !cn.Features().Has(memdx.FeatureCollections) {
		return 0, 0, false, retry.ReasonUnknown, fmt.Errorf("%w: collection %s: the server did not enable collections", kverr.ErrFeatureNotAvailable, path)
	}
	cc.mu.RLock()
	e, ok := cc.ids[path]
	gen = cc.gen
	cc.mu.RUnlock()
	if ok {
		return e.id, gen, false, 0, nil
	}
	routed := cn
	var heldAt time.Time
	for {
		if cc.pick != nil {
			cn = routed
			for {
				o, h, reason, err := cc.pick(cn)
				if err != nil {
					return 0, 0, !heldAt.IsZero(), reason, err
				}
				if o != nil {
					cn = o
					break
				}
				if heldAt.IsZero() {
					heldAt = cc.clock.Now()
				}
				if err := cc.holdLookup(ctx, deadline, h, cn.Addr(), path, heldAt); err != nil {
					return 0, 0, true, retry.ReasonUnknown, err
				}
			}
		}
		id, gen, reason, err = cc.lookup(ctx, deadline, cn, scope, name, path)
		if cc.pick != nil && errors.Is(err, conn.ErrBoundedAhead) {
			// A request the server answers only by a bound of its
			// own was queued on cn since the pick: the connection
			// refused the lookup, unwritten (lookupOrigin). Pick
			// again: it goes elsewhere, or is held.
			continue
		}
		return id, gen, true, reason, err
	}
}

// lookupOrigin marks a lookup as a barrier (conn.Origin.Barrier): its
// connection refuses it, unwritten, when a request the server answers only
// by a bound of its own was queued there after lookupConn found it free.
// Read only.
var lookupOrigin = conn.Origin{Barrier: true}

// holdLookup holds a lookup of path's id (unsent) that would wait, on
// every connection it could go on, behind a request the server answers
// only by a bound of its own (h: the shortest wait, and the channel closed
// once that connection is free): until that connection is free or the
// wait has passed (nil: pick again), or until the deadline passes or ctx
// ends (the caller's end: a *conn.RequestError with the context's error,
// saying why the lookup was not sent).
func (cc *CollectionIDs) holdLookup(ctx context.Context, deadline time.Time, h BarrierHold, addr, path string, heldAt time.Time) error {
	now := cc.clock.Now()
	left := time.Duration(math.MaxInt64)
	if !deadline.IsZero() {
		left = deadline.Sub(now)
	}
	cause := error(context.DeadlineExceeded)
	if left > 0 {
		switch h.Sleep(cc.clock, min(h.Wait, left), ctx.Done(), nil) {
		case HoldChanged:
			return nil
		case HoldElapsed:
			if h.Wait < left {
				return nil
			}
		case HoldStopped:
			cause = ctx.Err()
		}
	}
	end := cc.clock.Now()
	return &conn.RequestError{Op: memdx.OpCollectionsGetID, Addr: addr, Err: fmt.Errorf(
		"%w: the lookup of collection %s's id was held %v, not sent: every connection it could go on has a request in flight that the server answers only by a bound of its own (a synchronous write waiting for replication, or a range scan's continue), the earliest due in %v; COLLECTIONS_GET_ID is not reordered past those (a barrier under unordered execution): sent, it would have waited for them and held every later request on the connection",
		cause, path, end.Sub(heldAt).Round(time.Millisecond), max(h.Wait-end.Sub(now), 0).Round(time.Millisecond))}
}

// lookupConn is the connection a collection-id lookup for a request routed
// to cn goes on (CollectionIDs.ID): cn, unless a barrier sent on it would
// wait behind a request the server answers only by a bound of its own
// (conn.Conn.BarrierWait: a synchronous write waiting for replication).
// COLLECTIONS_GET_ID is not is_reorder_supported in kv_engine: under
// UnorderedExecution it would wait for that write, holding the operation
// and every later request on cn, until the write's durability timeout.
// It then goes on another live connection with collections and free of
// them: one of cn's node first, then of the topology's other nodes in
// order (ids are the bucket's, the same on every node; an answer by a
// manifest older than one seen is judged as any lookup's is). When there
// is none, no connection and the hold of cn's node (Node.PickBarrier): the
// lookup is held, not sent behind them (CollectionIDs.holdLookup). When
// cn's node is no longer the topology's (it left the config while the
// lookup was held, or since the request was routed), or has no live
// connection, the reason and error to route the request again: cn only
// drains, and the lookup would wait there behind those requests while the
// request's vbucket is another node's.
func (c *Cluster) lookupConn(cn *conn.Conn) (*conn.Conn, BarrierHold, retry.Reason, error) {
	if cn.BarrierWait() <= 0 {
		return cn, BarrierHold{}, 0, nil
	}
	t := c.topo.Load()
	if t == nil {
		return cn, BarrierHold{}, 0, nil
	}
	collections := func(o *conn.Conn) bool { return o.Features().Has(memdx.FeatureCollections) }
	free := func(n *Node) *conn.Conn { return n.freeConn(0, cn, collections) }
	var own *Node
	for _, n := range t.all {
		if cs := n.conns.Load(); cs != nil && slices.Contains(*cs, cn) {
			own = n
			break
		}
	}
	if own != nil {
		if o := free(own); o != nil {
			return o, BarrierHold{}, 0, nil
		}
	}
	for _, n := range t.all {
		if n == own {
			continue
		}
		if o := free(n); o != nil {
			return o, BarrierHold{}, 0, nil
		}
	}
	if own == nil {
		return nil, BarrierHold{}, retry.ReasonNodeNotAvailable, c.nodeError(cn.Addr(), errNodeLeft)
	}
	o, h, reason, err := own.PickBarrier()
	if err != nil {
		return nil, BarrierHold{}, reason, err // left meanwhile, or no live connection
	}
	if o != nil && o.Features().Has(memdx.FeatureCollections) {
		return o, BarrierHold{}, 0, nil // freed meanwhile
	}
	if h.Freed == nil {
		return cn, BarrierHold{}, 0, nil // it fails on cn as it would have
	}
	return nil, h, 0, nil
}

// lookup runs a lookup of path's id or waits for the one running (ID):
// the id, the cache's generation it belongs to, and the outcome.
func (cc *CollectionIDs) lookup(ctx context.Context, deadline time.Time, cn *conn.Conn, scope, name, path string) (uint32, uint64, retry.Reason, error) {
	for {
		cc.mu.Lock()
		if e, ok := cc.ids[path]; ok {
			gen := cc.gen
			cc.mu.Unlock()
			return e.id, gen, 0, nil
		}
		key := flightKey{path, cn.Addr()}
		f := cc.flights[key]
		if f == nil || f.gen != cc.gen {
			// None under way, or one begun before Forget (the bucket
			// made again): its answer may be the old bucket's id,
			// not to be sent on a connection to the new one. This
			// caller's lookup takes its place for later callers.
			f = &idFlight{done: make(chan struct{}), gen: cc.gen}
			if cc.flights == nil {
				cc.flights = map[flightKey]*idFlight{}
			}
			cc.flights[key] = f
			cc.mu.Unlock()
			cc.fly(ctx, deadline, cn, scope, name, key, f)
			return f.id, f.idGen, f.reason, f.err
		}
		cc.mu.Unlock()
		if err := cc.await(ctx, deadline, f.done, cn.Addr()); err != nil {
			return 0, 0, retry.ReasonSocketNotAvailable, err
		}
		if !f.callerEnded {
			return f.id, f.idGen, f.reason, f.err
		}
		// The lookup ended with the context or deadline of the caller
		// that ran it, not this one's: look up again (or wait for
		// another's lookup begun since).
	}
}

// fly runs f, the lookup of path's id on cn within ctx and deadline, caches
// the id it gets, and ends f, which its waiters then read; it ends f even
// when the lookup panics, so that no waiter waits for it past its own
// deadline and no later caller joins it.
func (cc *CollectionIDs) fly(ctx context.Context, deadline time.Time, cn *conn.Conn, scope, name string, key flightKey, f *idFlight) {
	path := key.path
	ended := false
	defer func() {
		if !ended { // a panic
			f.reason, f.err = retry.ReasonUnknown, fmt.Errorf("%w: COLLECTIONS_GET_ID for %s: the lookup panicked", kverr.ErrServerFailure, path)
		}
		cc.mu.Lock()
		if floor := cc.floorLocked(path); f.err == nil && f.uid < floor {
			// A node behind a manifest by which another found the
			// id cached before unknown: its answer may be that very
			// id. The request waits for the node to catch up.
			f.reason, f.err = retry.ReasonKVCollectionOutdated, fmt.Errorf("COLLECTIONS_GET_ID for %s: the node answered by manifest %x, older than manifest %x", path, f.uid, floor)
		}
		f.idGen = f.gen
		if f.err == nil {
			switch e, ok := cc.ids[path]; {
			case ok && (e.uid > f.uid || f.gen != cc.gen):
				// Another node's lookup, by a newer manifest (or of
				// the bucket made again since this one began),
				// ended first: its id stands, of the cache's
				// generation now (Forget empties the cache).
				f.id, f.idGen = e.id, cc.gen
			case f.gen == cc.gen:
				cc.cacheLocked(path, cachedID{id: f.id, uid: f.uid})
			default:
				// The bucket was made again since the lookup
				// began (Forget): its answer may be the old
				// bucket's id, naming another collection of the
				// new one, and is neither kept nor given. Its
				// callers (this one's, and those that joined it
				// before Forget) retry as for an id found
				// outdated, nothing sent, and look it up anew.
				f.id = 0
				f.reason, f.err = retry.ReasonKVCollectionOutdated, fmt.Errorf("COLLECTIONS_GET_ID for %s: the bucket was made again (Forget) while the lookup was under way: its answer may be the id of the bucket before", path)
			}
		}
		if cc.flights[key] == f { // not replaced by a lookup begun after Forget
			delete(cc.flights, key)
		}
		cc.mu.Unlock()
		close(f.done)
	}()
	req := memdx.NewCollectionsGetID(scope, name)
	var cid uint32
	var uid uint64
	var status memdx.Status
	_, err := cn.DoDeadline(ctx, deadline, &req, func(p *memdx.Packet) error {
		status = p.Status
		if p.Status != memdx.StatusSuccess {
			return nil
		}
		u, id, err := memdx.DecodeCollectionsGetID(p)
		cid, uid = id, u
		return err
	}, &lookupOrigin)
	ended = true
	var re *conn.RequestError
	switch {
	case err == nil && status == memdx.StatusSuccess:
		f.id, f.uid, f.reason, f.err = cid, uid, 0, nil
	case err == nil:
		le := &LookupError{path: path, status: status, cn: cn,
			Outcome: statuspolicy.Decide(memdx.OpCollectionsGetID, false, status, cn.ErrorMap())}
		f.reason, f.err = le.Outcome.Reason, le
	case errors.As(err, &re):
		// The lookup's request did not get an answer: nothing of the
		// operation was sent. Its connection ended or was overloaded:
		// retried as SOCKET_NOT_AVAILABLE. Its caller's deadline or
		// ctx ended it (callerEnded): the caller's end, a timeout or a
		// cancellation, not a retry (the client's place); a waiter
		// looks up again.
		f.reason, f.err = retry.ReasonSocketNotAvailable, err
		f.callerEnded = errors.Is(re.Err, context.Canceled) || errors.Is(re.Err, context.DeadlineExceeded)
	default:
		// An answer that did not decode: a server bug, not retried.
		f.reason, f.err = retry.ReasonUnknown, fmt.Errorf("%w: COLLECTIONS_GET_ID for %s: %w", kverr.ErrServerFailure, path, err)
	}
}

// await waits for a lookup another caller runs to end (done closed), until
// ctx ends or the deadline (on the clock) passes: that lookup runs within
// its caller's context and deadline, which must not hold this one past its
// own. Leaving it early leaves the lookup to its caller and its other
// waiters.
func (cc *CollectionIDs) await(ctx context.Context, deadline time.Time, done <-chan struct{}, addr string) error {
	select {
	case <-done:
		return nil
	default:
	}
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := cc.clock.NewTimer(deadline.Sub(cc.clock.Now()))
		defer t.Stop()
		expired = t.C()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return &conn.RequestError{Op: memdx.OpCollectionsGetID, Addr: addr, Err: ctx.Err()}
	case <-expired:
		return &conn.RequestError{Op: memdx.OpCollectionsGetID, Addr: addr, Err: context.DeadlineExceeded}
	}
}

// LookupError is a COLLECTIONS_GET_ID answered with a status other than
// success, with the status policy's outcome for it. errors.Is matches the
// outcome's sentinel (ErrCollectionNotFound, ErrScopeNotFound,
// ErrInvalidArgument for EINVAL, ErrNoAccess for EACCESS,
// ErrTemporaryFailure for TMPFAIL or a "temp" error-map entry,
// ErrServerFailure otherwise) and errors.As finds the *memdx.StatusError.
type LookupError struct {
	path   string
	status memdx.Status
	// cn is the connection the answer came on: the lookup's, which its
	// waiters share on other connections (of the node, or of the nodes
	// whose lookups went there: lookupConn).
	cn      *conn.Conn
	Outcome statuspolicy.Outcome
}

// Conn is the connection the answer came on (the one to drop when
// Outcome.ConnInvalid), not necessarily the caller's: a caller that waited
// for another's lookup gets its error.
func (e *LookupError) Conn() *conn.Conn { return e.cn }

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

// Forget drops every cached id and what Outdated learned of manifests:
// the bucket was deleted and made again (its uuid changed), and the new
// one numbers its collections (and its manifests) afresh, so an id of the
// old one may name another collection in it. Lookups under way when it is
// called neither cache nor give the id they get (their callers retry, as
// KV_COLLECTION_OUTDATED, unless a lookup begun since cached the id), and a
// caller after it does not wait for one of them (their answer may be the
// old bucket's id): it looks up anew.
func (cc *CollectionIDs) Forget() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	clear(cc.ids)
	clear(cc.floors)
	cc.floorRest = 0
	cc.gen++
}

// Gen is the cache's generation now (Forget counts them): the one ID
// gives with an id cached now.
func (cc *CollectionIDs) Gen() uint64 {
	cc.mu.RLock()
	defer cc.mu.RUnlock()
	return cc.gen
}

// Invalidate drops path's id, whatever it is: the next request resolves it
// again.
func (cc *CollectionIDs) Invalidate(path string) {
	cc.mu.Lock()
	delete(cc.ids, path)
	cc.mu.Unlock()
}

// Outdated is told that a node answered UNKNOWN_COLLECTION to a request
// that named path's collection by id; nodeUID is the uid of the manifest
// the node answered by, when its answer said (uidKnown). It drops the
// cached id, so that the next request resolves it again, unless that
// would undo newer news: the id cached now is not the one the request
// used (another request's lookup replaced it since), or it came from a
// manifest newer than the node's (the node has not caught up with the
// collection yet; a lookup there could only give the id of an older
// collection of that name, perhaps one since dropped). The request is
// then retried with the id cached. When no id is cached and the path was
// dropped from the cache since Forget (the one sent may have been dropped
// to bound the cache while the request was in flight), a lookup answered
// by a manifest older than the node's (when it said) is not cached
// either. When it drops the id, a lookup answered
// by a manifest older than the node's (or, when the node did not say, than
// the dropped id's) is not cached either (floors): the request that made
// it is retried (KV_COLLECTION_OUTDATED).
//
// gen is the generation ID gave with the id. An answer about an id of a
// generation before the cache's (Forget was called since: the bucket was
// made again) is the old bucket's, and says nothing of the new one: it is
// ignored. The new bucket numbers its collections and manifests afresh:
// the id cached now may be the same number, and the old bucket's manifest
// one the new one never reaches; dropping the id and raising the path's
// floor to it had every later lookup retried, as behind that manifest,
// until its request timed out.
func (cc *CollectionIDs) Outdated(path string, id uint32, gen, nodeUID uint64, uidKnown bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if gen != cc.gen {
		return
	}
	e, ok := cc.ids[path]
	if !ok {
		// Nothing cached to drop; but the id sent may be one dropped
		// from the cache to bound it (cacheLocked) while the request
		// was in flight, whose floor is only that id's manifest: a
		// lookup answered by a manifest older than the node's may
		// give that very id, which the node no longer knows. Only
		// for a path dropped from the cache since Forget (it has a
		// floor, or floors were folded into floorRest): after
		// Forget, a late answer of the old bucket names a manifest
		// the new one, numbering its manifests afresh, may never
		// reach, and every lookup of the path would wait for it.
		if _, dropped := cc.floors[path]; uidKnown && (dropped || cc.floorRest > 0) {
			cc.raiseFloorLocked(path, nodeUID)
		}
		return
	}
	if e.id != id || uidKnown && e.uid > nodeUID {
		return
	}
	delete(cc.ids, path)
	// A lookup answered by a manifest older than the node's, or than the
	// dropped id's own (the node did not say its uid: it may be behind
	// that manifest, and its lookup give an id that manifest dropped), is
	// stale. Here nodeUID, when known, is not below e.uid.
	floor := e.uid
	if uidKnown {
		floor = nodeUID
	}
	cc.raiseFloorLocked(path, floor)
}

// floorLocked is path's floor: a lookup answered by a manifest older than
// it is not cached (Outdated). mu is held.
func (cc *CollectionIDs) floorLocked(path string) uint64 {
	return max(cc.floors[path], cc.floorRest)
}

// raiseFloorLocked raises path's floor to floor, folding another path's
// into floorRest when floors holds maxFloors already. mu is held.
func (cc *CollectionIDs) raiseFloorLocked(path string, floor uint64) {
	if floor <= cc.floorLocked(path) {
		return
	}
	if cc.floors == nil {
		cc.floors = map[string]uint64{}
	}
	if _, ok := cc.floors[path]; !ok && len(cc.floors) >= cmp.Or(cc.maxFloors, maxIDFloors) {
		for p, f := range cc.floors {
			delete(cc.floors, p)
			cc.floorRest = max(cc.floorRest, f)
			break
		}
		if floor <= cc.floorRest {
			return
		}
	}
	cc.floors[path] = floor
}

// cacheLocked caches path's id, dropping another when ids holds maxIDs
// already: the dropped id's manifest becomes its path's floor, so that a
// node behind that manifest does not give, in its stead, the id of a
// collection of that name since dropped. mu is held.
func (cc *CollectionIDs) cacheLocked(path string, e cachedID) {
	if _, ok := cc.ids[path]; !ok && len(cc.ids) >= cmp.Or(cc.maxIDs, maxCachedIDs) {
		for p, old := range cc.ids {
			delete(cc.ids, p)
			cc.raiseFloorLocked(p, old.uid)
			break
		}
	}
	cc.ids[path] = e
}
