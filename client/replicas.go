package client

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/kvwire/kvwire/internal/fanout"
	"github.com/kvwire/kvwire/memdx"
)

// GetReplicaResult is a read from the active copy or a replica.
type GetReplicaResult struct {
	GetResult
	// IsReplica is false for the active copy.
	IsReplica bool
	Node      string
}

// copiesOf returns the copies of key that the current map assigns to a
// server: 0 for the active copy, i for replica i. A copy whose map entry is
// -1 (a 1-replica bucket on one node, a cluster short of nodes) does not
// exist now; reading it would only retry NODE_NOT_AVAILABLE until the
// timeout, so replica reads skip it. When the map assigns no copy at all
// (a failover in progress), the active copy is returned anyway: its read
// waits for a config that assigns it, as Get does. Memcached mode has
// only the active copy (a memcached bucket refuses replica reads:
// replicasRefused).
func (c *Client) copiesOf(key string) []int {
	t := c.cl.Topology()
	if t == nil || t.Config() == nil || t.Ketama() || !t.Config().HasVbucketMap() {
		return []int{0}
	}
	cfg := t.Config()
	vb := cfg.VbucketForKey(unsafe.Slice(unsafe.StringData(key), len(key)))
	out := make([]int, 0, cfg.NumReplicas()+1)
	for i := 0; i <= cfg.NumReplicas(); i++ {
		if s, err := cfg.VbucketServer(vb, i, false); err == nil && s >= 0 {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		out = append(out, 0)
	}
	return out
}

// readCopy reads copy i of key: 0 is the active copy (GET), i > 0 replica i
// (GET_REPLICA).
func (col *Collection) readCopy(ctx context.Context, key string, i int, opts *GetReplicaOptions) (GetReplicaResult, error) {
	var p opParams
	if opts != nil {
		p = opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan}
	}
	req, name := memdx.NewGet(nil), "GetReplica(active)"
	if i > 0 {
		req, name = memdx.NewGetReplica(nil), "GetReplica"
	}
	o, err := col.newOp(name, kindGet, key, req, p)
	if err != nil {
		return GetReplicaResult{}, err
	}
	o.target.Replica = i
	return run(ctx, o, func(o *op) GetReplicaResult {
		r := GetReplicaResult{GetResult: o.getResult(), IsReplica: i > 0}
		if o.node != nil {
			r.Node = o.node.Addr()
		}
		return r
	})
}

// GetAnyReplica reads the active copy and every replica at once and
// returns the first that answers. Only the copies the current map assigns
// to a server are read: a replica the map has no server for (-1) is
// skipped, not waited for. It is the one read that fans out: up to four
// goroutines for one call, which end when it returns.
func (col *Collection) GetAnyReplica(ctx context.Context, key string, opts *GetReplicaOptions) (GetReplicaResult, error) {
	if err := col.replicasRefused("GetAnyReplica", key); err != nil {
		return GetReplicaResult{}, err
	}
	return readAnyCopy(ctx, col.c.copiesOf(key), key, func(ctx context.Context, i int) (GetReplicaResult, error) {
		return col.readCopy(ctx, key, i, opts)
	})
}

// GetAllReplicas reads the active copy and every replica and returns every
// copy that answered, active first. Only the copies the current map assigns
// to a server are read (see GetAnyReplica), so a bucket whose replicas have
// no node yet answers with the active copy alone, without waiting for the
// timeout. It fails only when none answered.
func (col *Collection) GetAllReplicas(ctx context.Context, key string, opts *GetReplicaOptions) ([]GetReplicaResult, error) {
	if err := col.replicasRefused("GetAllReplicas", key); err != nil {
		return nil, err
	}
	return readAllCopies(ctx, col.c.copiesOf(key), key, func(ctx context.Context, i int) (GetReplicaResult, error) {
		return col.readCopy(ctx, key, i, opts)
	})
}

// readAnyCopy reads copies of key at once and returns the first answer
// (fanout.First), or replicaError's choice of the errors.
func readAnyCopy[T any](ctx context.Context, copies []int, key string, read func(context.Context, int) (T, error)) (T, error) {
	r, errs := fanout.First(ctx, copies, read)
	if errs != nil {
		return r, replicaError(key, errs)
	}
	return r, nil
}

// readAllCopies reads copies of key at once and returns every answer, in
// the order of copies (fanout.All); it fails only when none answered.
func readAllCopies[T any](ctx context.Context, copies []int, key string, read func(context.Context, int) (T, error)) ([]T, error) {
	out, errs := fanout.All(ctx, copies, read)
	if len(out) == 0 {
		return nil, replicaError(key, errs)
	}
	return out, nil
}

// replicaError picks the error of a replica read that found nothing:
// document not found when any copy said so, else the first error.
func replicaError(key string, errs []error) error {
	for _, e := range errs {
		if errors.Is(e, ErrDocumentNotFound) {
			return e
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return fmt.Errorf("%w: no copy of %q answered", ErrNoNodeAvailable, key)
}
