package retry

import "github.com/kvwire/kvwire/memdx"

// ReasonForStatus gives the retry reason for a response status, following
// RFC 0049's response-code retry list:
//
//	NOT_MY_VBUCKET 0x07                    KV_NOT_MY_VBUCKET, on every opcode
//	UNKNOWN_COLLECTION 0x88                KV_COLLECTION_OUTDATED, except COLLECTIONS_GET_ID
//	LOCKED 0x09                            KV_LOCKED, except UNLOCK_KEY
//	ETMPFAIL 0x86                          KV_TEMPORARY_FAILURE
//	SYNC_WRITE_IN_PROGRESS 0xa2            KV_SYNC_WRITE_IN_PROGRESS
//	SYNC_WRITE_RE_COMMIT_IN_PROGRESS 0xa4  KV_SYNC_WRITE_RE_COMMIT_IN_PROGRESS
//
// Every other status, and every status of a DCP opcode (0x50-0x65, which the
// RFC excludes), gives false: a complete, known response is not retried. The
// exceptions are the RFC's: COLLECTIONS_GET_ID answers 0x88 when the
// collection does not exist, and LOCKED on UNLOCK_KEY means the CAS did not
// match the lock and is surfaced to the caller as a CAS mismatch.
//
// Statuses the client does not know are looked up in the node's error map
// instead (ReasonForErrorMap).
func ReasonForStatus(op memdx.OpCode, st memdx.Status) (Reason, bool) {
	if isDCP(op) {
		return ReasonUnknown, false
	}
	switch st {
	case memdx.StatusNotMyVbucket:
		return ReasonKVNotMyVbucket, true
	case memdx.StatusUnknownCollection:
		if op == memdx.OpCollectionsGetID {
			return ReasonUnknown, false
		}
		return ReasonKVCollectionOutdated, true
	case memdx.StatusLocked:
		if op == memdx.OpUnlockKey {
			return ReasonUnknown, false
		}
		return ReasonKVLocked, true
	case memdx.StatusTmpFail:
		return ReasonKVTemporaryFailure, true
	case memdx.StatusSyncWriteInProgress:
		return ReasonKVSyncWriteInProgress, true
	case memdx.StatusSyncWriteReCommitInProgress:
		return ReasonKVSyncWriteReCommitInProgress, true
	}
	return ReasonUnknown, false
}

// isDCP reports whether op is one of kv_engine's DCP opcodes (DcpOpen 0x50
// through DcpOsoSnapshot 0x65 in include/mcbp/protocol/opcode.h).
func isDCP(op memdx.OpCode) bool { return op >= 0x50 && op <= 0x65 }

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
// connection dies in flight.
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
