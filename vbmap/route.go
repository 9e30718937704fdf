package vbmap

// RouteState is the per-operation state of RFC 0005: which vbucket map the
// operation is routed by. The zero value routes by the current map. It is
// not safe for concurrent use; one operation owns one RouteState, and it is
// small enough to embed in the operation.
//
// The rule (see also the package doc):
//
//  1. An operation starts on the current map (vBucketMap).
//  2. After an attempt fails with NOT_MY_VBUCKET, the caller calls
//     OnNotMyVbucket with the config it now holds (after applying the config
//     in the NMV body, if any). If that config has a forward map
//     (vBucketMapForward), the operation moves to the forward map, and
//     remembers that config's version. Otherwise the NMV is kept pending:
//     the next attempt uses the current map again (RFC steps 3-5), unless
//     the config it is routed with has a forward map (one that arrived
//     between the NMV and the retry), which moves it to that forward map
//     as if it had been held at the NMV.
//  3. Once on the forward map, every later attempt uses the forward map of
//     the config it is routed with, including a newer config that still has
//     a forward map (RFC steps 6-9).
//  4. It returns to the current map only when it is routed with a config that
//     has no forward map and is newer than the one remembered in step 2: the
//     rebalance is over and the current map is valid again. Routing with an
//     older config that has no forward map is ErrStaleConfig (holders never go
//     backwards, so this is a caller bug) and leaves the state unchanged.
//  5. A config that cannot route by vbucket (a global config, a bucket with
//     no partitions yet) yields ErrNoVbucketMap and leaves the state
//     unchanged. Memcached buckets route by their Ketama ring and ignore the
//     state.
type RouteState struct {
	forward bool
	// nmv: an NMV was met while the config held had no forward map, and
	// the operation has not been on a forward map since.
	nmv   bool
	since Version // version of the newest config that put the op on the forward map
}

// OnForwardMap reports whether the next attempt will use a forward map
// (given a config that has one).
func (s *RouteState) OnForwardMap() bool { return s.forward }

// Route returns the server index (see Config) and vbucket for key under c,
// following the rule above. replica 0 is the active copy. For a memcached
// bucket vb is 0 and replica must be 0. Errors: ErrNoVbucketMap, ErrNoServer,
// ErrReplicaOutOfRange, ErrStaleConfig. It takes no lock and allocates
// nothing.
func (s *RouteState) Route(c *Config, key []byte, replica int) (server int, vb uint16, err error) {
	switch c.locator {
	case LocatorKetama:
		if replica != 0 {
			return -1, 0, ErrReplicaOutOfRange
		}
		if c.ketama == nil {
			return -1, 0, ErrNoServer
		}
		return c.ketama.Server(key), 0, nil
	case LocatorVbucket:
	default:
		return -1, 0, ErrNoVbucketMap
	}
	if c.numVbuckets == 0 {
		return -1, 0, ErrNoVbucketMap
	}
	vb = VbucketForKey(key, c.numVbuckets)
	server, err = s.RouteVbucket(c, vb, replica)
	return server, vb, err
}

// RouteVbucket is Route for a request addressed to a vbucket rather than a
// key (a range scan of one vbucket): the server index holding copy replica
// of vb under c, by the same rule. c must route by vbucket
// (ErrNoVbucketMap otherwise); the other errors are VbucketServer's.
func (s *RouteState) RouteVbucket(c *Config, vb uint16, replica int) (server int, err error) {
	if c.locator != LocatorVbucket || c.numVbuckets == 0 {
		return -1, ErrNoVbucketMap
	}
	switch {
	case s.forward && c.fwd == nil:
		if !c.version.Newer(s.since) {
			return -1, ErrStaleConfig
		}
		s.forward = false
	case s.nmv && c.fwd != nil:
		s.forward, s.nmv, s.since = true, false, c.version
	}
	return c.VbucketServer(vb, replica, s.forward)
}

// OnNotMyVbucket records that an attempt failed with NOT_MY_VBUCKET. c is the
// config the next attempt will be routed with. A nil c changes nothing.
func (s *RouteState) OnNotMyVbucket(c *Config) {
	if c == nil || c.fwd == nil {
		s.nmv = s.nmv || !s.forward
		return
	}
	if !s.forward || c.version.Newer(s.since) {
		s.since = c.version
	}
	s.forward, s.nmv = true, false
}
