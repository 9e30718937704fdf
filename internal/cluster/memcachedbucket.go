package cluster

import "github.com/kvwire/kvwire/memdx"

// MemcachedBucketLacks says what a memcached bucket (over couchbase://: a
// config routed by ketama, with no vbuckets) lacks to serve req, read from
// replica (0: the active copy) of collection ("" for the default
// collection, else its "scope.collection" path), or "" when it lacks
// nothing. What it names, kv_engine's default_engine does not do:
// sub-documents, synchronous durability, OBSERVE and OBSERVE_SEQNO, range
// scans, collections other than the default, replica reads. The client
// refuses them at once, with the bucket type named, instead of after a
// server's refusal or a retry until the timeout.
func MemcachedBucketLacks(req *memdx.Request, replica int, collection string) string {
	switch op := req.OpCode; {
	case op >= memdx.OpSubdocGet && op <= memdx.OpSubdocReplaceBodyWithXattr:
		return "sub-document operations"
	case req.Durability != memdx.DurabilityNone:
		return "synchronous durability"
	case op == memdx.OpObserve || op == memdx.OpObserveSeqno:
		return "observe (legacy durability)"
	case op == memdx.OpRangeScanCreate || op == memdx.OpRangeScanContinue || op == memdx.OpRangeScanCancel:
		return "range scans"
	case op == memdx.OpGetReplica || op == memdx.OpGetExReplica || replica > 0:
		return "replicas"
	case collection != "":
		return "collections other than the default (" + collection + ")"
	}
	return ""
}
