package client

import (
	"context"
	"fmt"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
)

// memcachedBucketRefusal says why a memcached bucket (over couchbase://:
// a config routed by ketama, with no vbuckets) cannot serve o, or returns
// nil (cluster.MemcachedBucketLacks says what it lacks).
func (c *Client) memcachedBucketRefusal(o *op, t *cluster.Topology) error {
	if c.memcached || t == nil || !t.Ketama() || o.target.Node != nil {
		return nil
	}
	var coll string
	if o.coll != nil && !o.coll.isDefault {
		coll = o.coll.path
	}
	if what := cluster.MemcachedBucketLacks(&o.req, o.target.Replica, coll); what != "" {
		return fmt.Errorf("bucket %q is a memcached bucket, which has no %s", c.opts.Bucket, what)
	}
	return nil
}

// replicasRefused is the error of replica read name of key on a memcached
// bucket, which has no replicas (nil on any other bucket; memcached://
// reads the one copy there is), or given a nil ctx.
func (col *Collection) replicasRefused(ctx context.Context, name, key string) error {
	c := col.c
	if ctx == nil {
		return c.refused(name, memdx.OpGetReplica, col, key, ErrInvalidArgument, errNilContext)
	}
	if t := c.cl.Topology(); c.memcached || t == nil || !t.Ketama() {
		return nil
	}
	return c.refused(name, memdx.OpGetReplica, col, key, ErrFeatureNotAvailable,
		fmt.Errorf("bucket %q is a memcached bucket, which has no replicas", c.opts.Bucket))
}
