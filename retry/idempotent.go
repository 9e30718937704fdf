package retry

import "github.com/kvwire/kvwire/memdx"

// IsIdempotent reports whether an operation with this opcode may be sent
// again after it was written without an answer, following RFC 0049's
// idempotent operation list. Every opcode not on it is treated as
// non-idempotent, as the RFC requires. The RFC names classes of requests;
// this is how they map to opcodes:
//
//	Carrier Config & Global Config Requests   GET_CLUSTER_CONFIG
//	Get Request (not get-and-lock, not         GET, GETQ, GETK, GETKQ, GET_EX
//	  get-and-touch)
//	Get Collection ID                          COLLECTIONS_GET_ID
//	Get Collection Manifest                    COLLECTIONS_GET_MANIFEST
//	Noop Request                               NOOP
//	Observe via CAS, via Sequence Number       OBSERVE, OBSERVE_SEQNO
//	Replica Get Request                        GET_REPLICA, GET_EX_REPLICA
//	Subdoc Lookup                              SUBDOC_GET, SUBDOC_EXISTS,
//	                                           SUBDOC_GET_COUNT, SUBDOC_MULTI_LOOKUP
//
// GETQ, GETK and GETKQ are the same read as GET with a different response
// shape; GET_EX and GET_EX_REPLICA read a document (with its extended
// attributes) as GET and GET_REPLICA do. GAT, GATQ, GET_LOCKED, TOUCH and
// UNLOCK_KEY change the document and are not idempotent. Reads the RFC does
// not list (GET_META, STAT, VERSION, COLLECTIONS_GET_SCOPE_ID, GET_RANDOM_KEY,
// GET_KEYS, GET_ALL_VB_SEQNOS, GET_ERROR_MAP, RANGE_SCAN_*) and the
// connection-setup commands (HELLO, SASL_*, SELECT_BUCKET) are treated as
// non-idempotent: the cost is only that they are not resent after their
// connection dies in flight. Such a read's error is still never ambiguous
// (State.Ambiguous): it changed nothing (memdx.OpCode.IsReadOnly).
func IsIdempotent(op memdx.OpCode) bool {
	switch op {
	case memdx.OpGetClusterConfig,
		memdx.OpGet, memdx.OpGetQ, memdx.OpGetK, memdx.OpGetKQ, memdx.OpGetEx,
		memdx.OpCollectionsGetID,
		memdx.OpCollectionsGetManifest,
		memdx.OpNoop,
		memdx.OpObserve, memdx.OpObserveSeqno,
		memdx.OpGetReplica, memdx.OpGetExReplica,
		memdx.OpSubdocGet, memdx.OpSubdocExists, memdx.OpSubdocGetCount, memdx.OpSubdocMultiLookup:
		return true
	}
	return false
}
