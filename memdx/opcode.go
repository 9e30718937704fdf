package memdx

import "fmt"

// OpCode is the opcode of a client-initiated packet (magics 0x80, 0x81, 0x08,
// 0x18). Server-initiated packets (0x82, 0x83) use ServerOpCode: the two
// spaces overlap numerically and are kept in distinct types so that one can
// never be taken for the other.
type OpCode uint8

// Client opcodes, from kv_engine's include/mcbp/protocol/opcode.h.
const (
	OpGet        OpCode = 0x00
	OpSet        OpCode = 0x01
	OpAdd        OpCode = 0x02
	OpReplace    OpCode = 0x03
	OpDelete     OpCode = 0x04
	OpIncrement  OpCode = 0x05
	OpDecrement  OpCode = 0x06
	OpQuit       OpCode = 0x07
	OpFlush      OpCode = 0x08
	OpGetQ       OpCode = 0x09
	OpNoop       OpCode = 0x0a
	OpVersion    OpCode = 0x0b
	OpGetK       OpCode = 0x0c
	OpGetKQ      OpCode = 0x0d
	OpAppend     OpCode = 0x0e
	OpPrepend    OpCode = 0x0f
	OpStat       OpCode = 0x10
	OpSetQ       OpCode = 0x11
	OpAddQ       OpCode = 0x12
	OpReplaceQ   OpCode = 0x13
	OpDeleteQ    OpCode = 0x14
	OpIncrementQ OpCode = 0x15
	OpDecrementQ OpCode = 0x16
	OpQuitQ      OpCode = 0x17
	OpFlushQ     OpCode = 0x18
	OpAppendQ    OpCode = 0x19
	OpPrependQ   OpCode = 0x1a
	OpVerbosity  OpCode = 0x1b
	OpTouch      OpCode = 0x1c
	OpGAT        OpCode = 0x1d
	OpGATQ       OpCode = 0x1e
	OpHello      OpCode = 0x1f

	OpSASLListMechs OpCode = 0x20
	OpSASLAuth      OpCode = 0x21
	OpSASLStep      OpCode = 0x22

	OpGetAllVbSeqnos OpCode = 0x48
	OpGetEx          OpCode = 0x49
	OpGetExReplica   OpCode = 0x4a

	OpGetReplica   OpCode = 0x83
	OpListBuckets  OpCode = 0x87
	OpSelectBucket OpCode = 0x89

	OpObserveSeqno OpCode = 0x91
	OpObserve      OpCode = 0x92
	OpEvictKey     OpCode = 0x93
	OpGetLocked    OpCode = 0x94
	OpUnlockKey    OpCode = 0x95
	OpGetMeta      OpCode = 0xa0
	OpGetQMeta     OpCode = 0xa1

	OpGetClusterConfig       OpCode = 0xb5
	OpGetRandomKey           OpCode = 0xb6
	OpSeqnoPersistence       OpCode = 0xb7
	OpGetKeys                OpCode = 0xb8
	OpCollectionsGetManifest OpCode = 0xba
	OpCollectionsGetID       OpCode = 0xbb
	OpCollectionsGetScopeID  OpCode = 0xbc

	OpSubdocGet                  OpCode = 0xc5
	OpSubdocExists               OpCode = 0xc6
	OpSubdocDictAdd              OpCode = 0xc7
	OpSubdocDictUpsert           OpCode = 0xc8
	OpSubdocDelete               OpCode = 0xc9
	OpSubdocReplace              OpCode = 0xca
	OpSubdocArrayPushLast        OpCode = 0xcb
	OpSubdocArrayPushFirst       OpCode = 0xcc
	OpSubdocArrayInsert          OpCode = 0xcd
	OpSubdocArrayAddUnique       OpCode = 0xce
	OpSubdocCounter              OpCode = 0xcf
	OpSubdocMultiLookup          OpCode = 0xd0
	OpSubdocMultiMutation        OpCode = 0xd1
	OpSubdocGetCount             OpCode = 0xd2
	OpSubdocReplaceBodyWithXattr OpCode = 0xd3

	OpRangeScanCreate   OpCode = 0xda
	OpRangeScanContinue OpCode = 0xdb
	OpRangeScanCancel   OpCode = 0xdc

	OpGetErrorMap OpCode = 0xfe
	// OpInvalid is reserved by the server to signal an invalid opcode.
	OpInvalid OpCode = 0xff
)

var opNames = map[OpCode]string{
	OpGet: "GET", OpSet: "SET", OpAdd: "ADD", OpReplace: "REPLACE", OpDelete: "DELETE",
	OpIncrement: "INCREMENT", OpDecrement: "DECREMENT", OpQuit: "QUIT", OpFlush: "FLUSH",
	OpGetQ: "GETQ", OpNoop: "NOOP", OpVersion: "VERSION", OpGetK: "GETK", OpGetKQ: "GETKQ",
	OpAppend: "APPEND", OpPrepend: "PREPEND", OpStat: "STAT", OpSetQ: "SETQ", OpAddQ: "ADDQ",
	OpReplaceQ: "REPLACEQ", OpDeleteQ: "DELETEQ", OpIncrementQ: "INCREMENTQ",
	OpDecrementQ: "DECREMENTQ", OpQuitQ: "QUITQ", OpFlushQ: "FLUSHQ", OpAppendQ: "APPENDQ",
	OpPrependQ: "PREPENDQ", OpVerbosity: "VERBOSITY", OpTouch: "TOUCH", OpGAT: "GAT",
	OpGATQ: "GATQ", OpHello: "HELLO",
	OpSASLListMechs: "SASL_LIST_MECHS", OpSASLAuth: "SASL_AUTH", OpSASLStep: "SASL_STEP",
	OpGetAllVbSeqnos: "GET_ALL_VB_SEQNOS", OpGetEx: "GET_EX", OpGetExReplica: "GET_EX_REPLICA",
	OpGetReplica: "GET_REPLICA", OpListBuckets: "LIST_BUCKETS", OpSelectBucket: "SELECT_BUCKET",
	OpObserveSeqno: "OBSERVE_SEQNO", OpObserve: "OBSERVE", OpEvictKey: "EVICT_KEY",
	OpGetLocked: "GET_LOCKED", OpUnlockKey: "UNLOCK_KEY", OpGetMeta: "GET_META",
	OpGetQMeta:         "GETQ_META",
	OpGetClusterConfig: "GET_CLUSTER_CONFIG", OpGetRandomKey: "GET_RANDOM_KEY",
	OpSeqnoPersistence: "SEQNO_PERSISTENCE", OpGetKeys: "GET_KEYS",
	OpCollectionsGetManifest: "COLLECTIONS_GET_MANIFEST", OpCollectionsGetID: "COLLECTIONS_GET_ID",
	OpCollectionsGetScopeID: "COLLECTIONS_GET_SCOPE_ID",
	OpSubdocGet:             "SUBDOC_GET", OpSubdocExists: "SUBDOC_EXISTS",
	OpSubdocDictAdd: "SUBDOC_DICT_ADD", OpSubdocDictUpsert: "SUBDOC_DICT_UPSERT",
	OpSubdocDelete: "SUBDOC_DELETE", OpSubdocReplace: "SUBDOC_REPLACE",
	OpSubdocArrayPushLast: "SUBDOC_ARRAY_PUSH_LAST", OpSubdocArrayPushFirst: "SUBDOC_ARRAY_PUSH_FIRST",
	OpSubdocArrayInsert: "SUBDOC_ARRAY_INSERT", OpSubdocArrayAddUnique: "SUBDOC_ARRAY_ADD_UNIQUE",
	OpSubdocCounter: "SUBDOC_COUNTER", OpSubdocMultiLookup: "SUBDOC_MULTI_LOOKUP",
	OpSubdocMultiMutation: "SUBDOC_MULTI_MUTATION", OpSubdocGetCount: "SUBDOC_GET_COUNT",
	OpSubdocReplaceBodyWithXattr: "SUBDOC_REPLACE_BODY_WITH_XATTR",
	OpRangeScanCreate:            "RANGE_SCAN_CREATE", OpRangeScanContinue: "RANGE_SCAN_CONTINUE",
	OpRangeScanCancel: "RANGE_SCAN_CANCEL",
	OpGetErrorMap:     "GET_ERROR_MAP", OpInvalid: "INVALID",
}

// String gives the opcode's name for logs, or its number when unknown.
func (o OpCode) String() string {
	if n, ok := opNames[o]; ok {
		return n
	}
	return fmt.Sprintf("OPCODE(0x%02x)", uint8(o))
}

// Known reports whether memdx has a name for the opcode.
func (o OpCode) Known() bool {
	_, ok := opNames[o]
	return ok
}

// IsQuiet reports whether the opcode is a "quiet" variant, for which the
// server sends no response on success (or, for GETQ/GETKQ, on a miss).
func (o OpCode) IsQuiet() bool {
	switch o {
	case OpGetQ, OpGetKQ, OpSetQ, OpAddQ, OpReplaceQ, OpDeleteQ, OpIncrementQ, OpDecrementQ,
		OpQuitQ, OpFlushQ, OpAppendQ, OpPrependQ, OpGATQ, OpGetQMeta:
		return true
	}
	return false
}

// IsReadOnly reports whether a request of the opcode only reads: whatever
// the server did with it, it changed nothing a later request sees, so it
// cannot have "been applied". Every other opcode may change data. Read-only
// is not RFC 0049's idempotent: that list (retry.IsIdempotent) says which
// requests may be sent again after they were written without an answer,
// and leaves out reads such as GET_META and STAT.
func (o OpCode) IsReadOnly() bool {
	switch o {
	case OpGet, OpGetQ, OpGetK, OpGetKQ, OpGetEx, OpGetReplica, OpGetExReplica,
		OpGetMeta, OpGetQMeta, OpGetRandomKey, OpGetKeys, OpGetAllVbSeqnos,
		OpNoop, OpVersion, OpStat, OpGetClusterConfig, OpGetErrorMap,
		OpCollectionsGetID, OpCollectionsGetManifest, OpCollectionsGetScopeID,
		OpObserve, OpObserveSeqno,
		OpSubdocGet, OpSubdocExists, OpSubdocGetCount, OpSubdocMultiLookup:
		return true
	}
	return false
}

// HasCollectionKey reports whether the opcode's key carries a collection-id
// prefix once the Collections feature is negotiated.
func (o OpCode) HasCollectionKey() bool {
	switch o {
	case OpGet, OpSet, OpAdd, OpReplace, OpDelete, OpIncrement, OpDecrement, OpGetQ, OpGetK,
		OpGetKQ, OpAppend, OpPrepend, OpSetQ, OpAddQ, OpReplaceQ, OpDeleteQ, OpIncrementQ,
		OpDecrementQ, OpAppendQ, OpPrependQ, OpTouch, OpGAT, OpGATQ, OpGetReplica, OpEvictKey,
		OpGetLocked, OpUnlockKey, OpGetMeta, OpGetQMeta, OpGetEx, OpGetExReplica,
		OpSubdocGet, OpSubdocExists, OpSubdocDictAdd, OpSubdocDictUpsert, OpSubdocDelete,
		OpSubdocReplace, OpSubdocArrayPushLast, OpSubdocArrayPushFirst, OpSubdocArrayInsert,
		OpSubdocArrayAddUnique, OpSubdocCounter, OpSubdocMultiLookup, OpSubdocMultiMutation,
		OpSubdocGetCount, OpSubdocReplaceBodyWithXattr, OpGetKeys:
		return true
	}
	return false
}

// ServerOpCode is the opcode of a server-initiated packet (magics 0x82 and
// 0x83, negotiated with HELLO feature Duplex).
type ServerOpCode uint8

// Server-initiated opcodes.
const (
	// ServerOpClustermapChangeNotification carries a new cluster map (or just
	// its version with ClustermapChangeNotificationBrief). The key is the
	// bucket name, the extras the version; the client does not reply.
	ServerOpClustermapChangeNotification ServerOpCode = 0x01
	ServerOpAuthenticate                 ServerOpCode = 0x02
	ServerOpActiveExternalUsers          ServerOpCode = 0x03
	ServerOpGetAuthorization             ServerOpCode = 0x04
)

func (o ServerOpCode) String() string {
	switch o {
	case ServerOpClustermapChangeNotification:
		return "CLUSTERMAP_CHANGE_NOTIFICATION"
	case ServerOpAuthenticate:
		return "AUTHENTICATE"
	case ServerOpActiveExternalUsers:
		return "ACTIVE_EXTERNAL_USERS"
	case ServerOpGetAuthorization:
		return "GET_AUTHORIZATION"
	}
	return fmt.Sprintf("SERVER_OPCODE(0x%02x)", uint8(o))
}
