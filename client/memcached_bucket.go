package client

import (
	"fmt"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
)

// memcachedBucketRefusal says why a memcached bucket (over couchbase://:
// a config routed by ketama, with no vbuckets) cannot serve o, or returns
// nil. What it refuses, kv_engine's default_engine does not do:
// sub-documents, synchronous durability, OBSERVE and OBSERVE_SEQNO, range
// scans, collections other than the default, replica reads. Refusing
// them here fails them at once, with the bucket type named, instead of
// after a server's refusal or a retry until the timeout.
func (c *Client) memcachedBucketRefusal(o *op, t *cluster.Topology) error {
	if c.memcached || t == nil || !t.Ketama() || o.target.Node != nil {
		return nil
	}
	var what string
	switch op := o.req.OpCode; {
	case op >= memdx.OpSubdocGet && op <= memdx.OpSubdocReplaceBodyWithXattr:
		what = "sub-document operations"
	case o.req.Durability != memdx.DurabilityNone:
		what = "synchronous durability"
	case op == memdx.OpObserve || op == memdx.OpObserveSeqno:
		what = "observe (legacy durability)"
	case op == memdx.OpRangeScanCreate || op == memdx.OpRangeScanContinue || op == memdx.OpRangeScanCancel:
		what = "range scans"
	case op == memdx.OpGetReplica || op == memdx.OpGetExReplica || o.target.Replica > 0:
		what = "replicas"
	case o.coll != nil && !o.coll.isDefault:
		what = "collections other than the default (" + o.coll.path + ")"
	default:
		return nil
	}
	return fmt.Errorf("bucket %q is a memcached bucket, which has no %s", c.opts.Bucket, what)
}

// replicasRefused is the error of replica read name of key on a memcached
// bucket, which has no replicas (nil on any other bucket; memcached://
// reads the one copy there is).
func (col *Collection) replicasRefused(name, key string) error {
	c := col.c
	if t := c.cl.Topology(); c.memcached || t == nil || !t.Ketama() {
		return nil
	}
	return c.refused(name, memdx.OpGetReplica, col, key, ErrFeatureNotAvailable,
		fmt.Errorf("bucket %q is a memcached bucket, which has no replicas", c.opts.Bucket))
}
