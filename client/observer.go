package client

import (
	"time"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/retry"
)

// Observer sees every attempt of every operation that is sent to a node,
// as MongoDB's command monitoring sees retried writes: one operation id,
// one AttemptStart and one AttemptEnd per attempt sent. An attempt that
// ends before its request is handed to a connection (no route or no live
// connection for the key, the collection id lookup failed or was retried,
// a feature the node lacks) is not reported, but it is counted: the
// Attempt numbers of one operation may skip, and KeyValueError.RetryAttempts
// (the retries made) includes them. A barrier's attempt (Exists, Ping,
// Stats, Version, a range scan's continue and cancel: requests kv_engine
// does not reorder) is reported once its connection has queued it: one
// the connection refused unqueued is not reported, and one refused
// because a synchronous write was queued there first (the request is then
// held, unsent, and placed again) is no attempt at all and takes no
// Attempt number. Methods run on the operation's goroutine,
// synchronously: keep them cheap and do not call the client from them. (A
// call that reads several copies or nodes at once, GetAllReplicas or Ping
// say, runs each read on a goroutine of its own, which it waits for: a
// panic there reaches the call's caller once the other reads have ended.)
type Observer interface {
	AttemptStart(AttemptInfo)
	AttemptEnd(AttemptInfo, error)
}

// AttemptInfo describes one attempt of an operation.
type AttemptInfo struct {
	// OperationID is the same for every attempt of one operation.
	OperationID uint64
	Op          string
	OpCode      OpCode
	Key         string
	// Attempt counts every attempt of the operation from 0, including those
	// that ended before being sent and were not reported, so the numbers
	// the Observer sees may have gaps.
	Attempt int
	// RetryReason is why this attempt is a retry; Retry is false for the
	// first attempt.
	Retry       bool
	RetryReason RetryReason
	Node        string
	Vbucket     uint16
	// ForwardMap is true when the attempt was routed by the config's
	// vBucketMapForward (RFC 0005).
	ForwardMap bool
	// Ketama is true when the key was routed by ketama (memcached:// and
	// memcached buckets), which has no vbuckets.
	Ketama bool
	// ConfigRev is the revision of the config the attempt was routed with.
	ConfigRev uint64
	Start     time.Time
	// Filled in AttemptEnd: how long it took, the request's opaque on its
	// connection (a new one per attempt), and the status answered (0 when
	// no response came).
	Duration time.Duration
	Opaque   uint32
	Status   Status
}

func (o *op) attemptInfo(id uint64, attempt int, start time.Time, t *cluster.Topology, reason retry.Reason, retried bool) AttemptInfo {
	info := AttemptInfo{
		OperationID: id,
		Op:          o.name,
		OpCode:      opCodeOf(o.req.OpCode),
		Key:         o.keyStr,
		Attempt:     attempt,
		Retry:       retried,
		RetryReason: retryReasonOf(reason),
		Vbucket:     o.vb,
		ForwardMap:  o.route.OnForwardMap(),
		Start:       start,
		Opaque:      o.opaque,
	}
	if o.node != nil {
		info.Node = o.node.Addr()
	}
	if t != nil {
		info.Ketama = t.Ketama()
		if cfg := t.Config(); cfg != nil {
			info.ConfigRev = cfg.Version().Rev
		}
	}
	return info
}
