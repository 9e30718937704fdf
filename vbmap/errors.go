package vbmap

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is matched (errors.Is) by every error Parse returns: the
// bytes are not a cluster config this package can use. The *ParseError that
// carries it names the field and says what was wrong.
var ErrInvalidConfig = errors.New("vbmap: invalid cluster config")

// Routing errors. They are plain sentinel values so that routing never
// allocates; the caller wraps them with the key, bucket and node it knows.
var (
	// ErrNoVbucketMap: the config cannot route by vbucket. It is a global
	// (bucketless) config, a memcached bucket asked for a vbucket, or a
	// couchbase bucket that has no partitions yet. Wait for another config.
	ErrNoVbucketMap = errors.New("vbmap: config has no vbucket map")

	// ErrNoForwardMap: the forward map was asked for and the config has none.
	ErrNoForwardMap = errors.New("vbmap: config has no forward vbucket map")

	// ErrNoServer: the map holds -1 for this vbucket and copy (no node owns
	// it right now), or a memcached bucket has no server that can take part
	// in the ketama ring. Wait for another config.
	ErrNoServer = errors.New("vbmap: no server for this vbucket")

	// ErrVbucketOutOfRange: the vbucket id is not below NumVbuckets.
	ErrVbucketOutOfRange = errors.New("vbmap: vbucket out of range")

	// ErrReplicaOutOfRange: the replica index is negative or above
	// NumReplicas (memcached buckets have no replicas).
	ErrReplicaOutOfRange = errors.New("vbmap: replica index out of range")

	// ErrStaleConfig: a RouteState that moved to the forward map of one config
	// was asked to route with an older config that has no forward map. Holders
	// never go backwards, so this means the caller routed with a snapshot it
	// had kept for too long; load the current config and route again.
	ErrStaleConfig = errors.New("vbmap: config is older than the one this operation was routed by")

	// ErrNoServers: NewKetama was given no servers.
	ErrNoServers = errors.New("vbmap: empty server list")
)

// ParseError says which field of a config was wrong and why.
// errors.Is(err, ErrInvalidConfig) holds for every *ParseError.
type ParseError struct {
	// Field is a JSON path such as "vBucketServerMap.vBucketMap[12][1]",
	// or "json" when the bytes are not a JSON document of the right shape.
	Field string
	// Reason says what was wrong with it.
	Reason string
	// Err is the underlying error (from encoding/json, net), or nil.
	Err error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("vbmap: invalid cluster config: %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ParseError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error, if any.
func (e *ParseError) Unwrap() error { return e.Err }

func invalid(field, format string, args ...any) error {
	return &ParseError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
