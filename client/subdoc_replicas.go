package client

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// bucketCapSubdocReplicaRead is the bucket capability of servers that run
// sub-document lookups on replicas (the ReplicaRead doc flag).
const bucketCapSubdocReplicaRead = "subdoc.ReplicaRead"

// LookupInAnyReplicaOptions are the options of LookupInAnyReplica; they
// apply to the lookup of each copy.
type LookupInAnyReplicaOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
}

// LookupInAllReplicasOptions are the options of LookupInAllReplicas; they
// apply to the lookup of each copy.
type LookupInAllReplicasOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
}

// LookupInReplicaResult is a LookupIn of the active copy or of a replica.
type LookupInReplicaResult struct {
	LookupInResult
	// IsReplica is false for the active copy.
	IsReplica bool
	Node      string
}

// checkSubdocReplicaRead refuses a replica lookup the bucket does not
// advertise (ErrFeatureNotAvailable), or given a nil ctx
// (ErrInvalidArgument).
func (c *Client) checkSubdocReplicaRead(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, errNilContext)
	}
	t := c.cl.Topology()
	if t == nil || t.Config() == nil || !t.Config().HasBucketCapability(bucketCapSubdocReplicaRead) {
		return errors.New("the bucket does not advertise " + bucketCapSubdocReplicaRead + ": its servers cannot run lookups on replicas")
	}
	return nil
}

// lookupInCopy runs a LookupIn on copy i of key (0: the active copy).
func (col *Collection) lookupInCopy(ctx context.Context, key string, specs []LookupInSpec, i int, p opParams) (LookupInReplicaResult, error) {
	name := "LookupInReplica(active)"
	if i > 0 {
		name = "LookupInReplica"
	}
	p.copyRead = true
	o, err := col.lookupInOp(ctx, name, key, specs, p, false, i)
	if err != nil {
		return LookupInReplicaResult{}, err
	}
	o.copyRead = true
	return run(ctx, o, func(o *op) LookupInReplicaResult {
		r := LookupInReplicaResult{LookupInResult: o.lookupInResult(), IsReplica: i > 0}
		if o.node != nil {
			r.Node = o.node.Addr()
		}
		return r
	})
}

// replicaLookupRefused is the error of a replica lookup the bucket cannot
// run, built as LookupIn's own errors are.
func (col *Collection) replicaLookupRefused(name, key string, err error) error {
	sentinel := ErrFeatureNotAvailable
	if errors.Is(err, ErrInvalidArgument) {
		sentinel = ErrInvalidArgument
	}
	return col.c.refused(name, 0, col, key, sentinel, err)
}

// LookupInAnyReplica runs LookupIn on the active copy and every replica at
// once and returns the first answer (see GetAnyReplica). The bucket must
// advertise replica lookups (Couchbase Server 7.6 and later); otherwise it
// fails with ErrFeatureNotAvailable, sending nothing.
func (col *Collection) LookupInAnyReplica(ctx context.Context, key string, specs []LookupInSpec, opts *LookupInAnyReplicaOptions) (LookupInReplicaResult, error) {
	var lo LookupInAnyReplicaOptions
	if opts != nil {
		lo = *opts
	}
	if err := col.c.checkSubdocReplicaRead(ctx); err != nil {
		e := col.replicaLookupRefused("LookupInAnyReplica", key, err)
		col.refusedWrap(ctx, "lookup_in_any_replica", true, lo.ParentSpan, e)
		return LookupInReplicaResult{}, e
	}
	var end func(error)
	ctx, lo.ParentSpan, end = col.wrapCall(ctx, "lookup_in_any_replica", true, lo.ParentSpan)
	defer end(errUnwound) // a panic in a read still ends the span (after end(err): nothing)
	r, err := readAnyCopy(ctx, col, "LookupInAnyReplica", key, func(ctx context.Context, i int) (LookupInReplicaResult, error) {
		return col.lookupInCopy(ctx, key, specs, i, opParams{timeout: lo.Timeout, strategy: lo.RetryStrategy, parent: lo.ParentSpan})
	})
	end(err)
	return r, err
}

// LookupInAllReplicas runs LookupIn on the active copy and every replica
// and returns every copy that answered, active first, or GetAllReplicas'
// errors when none did (see GetAllReplicas and LookupInAnyReplica).
func (col *Collection) LookupInAllReplicas(ctx context.Context, key string, specs []LookupInSpec, opts *LookupInAllReplicasOptions) ([]LookupInReplicaResult, error) {
	var lo LookupInAllReplicasOptions
	if opts != nil {
		lo = *opts
	}
	if err := col.c.checkSubdocReplicaRead(ctx); err != nil {
		e := col.replicaLookupRefused("LookupInAllReplicas", key, err)
		col.refusedWrap(ctx, "lookup_in_all_replicas", false, lo.ParentSpan, e)
		return nil, e
	}
	var end func(error)
	ctx, lo.ParentSpan, end = col.wrapCall(ctx, "lookup_in_all_replicas", false, lo.ParentSpan)
	defer end(errUnwound) // a panic in a read still ends the span (after end(err): nothing)
	r, err := readAllCopies(ctx, col, "LookupInAllReplicas", key, func(ctx context.Context, i int) (LookupInReplicaResult, error) {
		return col.lookupInCopy(ctx, key, specs, i, opParams{timeout: lo.Timeout, strategy: lo.RetryStrategy, parent: lo.ParentSpan})
	})
	end(err)
	return r, err
}
