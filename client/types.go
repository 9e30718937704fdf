package client

import "strconv"

// Status is a status the server answered: the two-byte status of the
// memcached binary protocol. KeyValueError.Status and AttemptInfo.Status
// carry it (0, StatusSuccess, when no response came). String gives
// kv_engine's name (KEY_ENOENT, ETMPFAIL, ...).
//
// Test outcomes with the sentinels (errors.Is(err, ErrDocumentNotFound));
// the status says what the server answered, for diagnostics and for the
// statuses no sentinel names.
type Status uint16

// Statuses a caller may meet in an error or an attempt, with kv_engine's
// names.
const (
	StatusSuccess                     Status = 0x00 // SUCCESS
	StatusKeyNotFound                 Status = 0x01 // KEY_ENOENT
	StatusKeyExists                   Status = 0x02 // KEY_EEXISTS
	StatusTooBig                      Status = 0x03 // E2BIG
	StatusInvalidArgs                 Status = 0x04 // EINVAL
	StatusNotStored                   Status = 0x05 // NOT_STORED
	StatusBadDelta                    Status = 0x06 // DELTA_BADVAL
	StatusNotMyVbucket                Status = 0x07 // NOT_MY_VBUCKET
	StatusNoBucket                    Status = 0x08 // NO_BUCKET
	StatusLocked                      Status = 0x09 // LOCKED
	StatusNotLocked                   Status = 0x0e // NOT_LOCKED
	StatusAuthError                   Status = 0x20 // AUTH_ERROR
	StatusNoAccess                    Status = 0x24 // EACCESS
	StatusUnknownCommand              Status = 0x81 // UNKNOWN_COMMAND
	StatusOutOfMemory                 Status = 0x82 // ENOMEM
	StatusNotSupported                Status = 0x83 // NOT_SUPPORTED
	StatusInternalError               Status = 0x84 // EINTERNAL
	StatusBusy                        Status = 0x85 // EBUSY
	StatusTmpFail                     Status = 0x86 // ETMPFAIL
	StatusUnknownCollection           Status = 0x88 // UNKNOWN_COLLECTION
	StatusUnknownScope                Status = 0x8c // UNKNOWN_SCOPE
	StatusDurabilityInvalidLevel      Status = 0xa0 // DURABILITY_INVALID_LEVEL
	StatusDurabilityImpossible        Status = 0xa1 // DURABILITY_IMPOSSIBLE
	StatusSyncWriteInProgress         Status = 0xa2 // SYNC_WRITE_IN_PROGRESS
	StatusSyncWriteAmbiguous          Status = 0xa3 // SYNC_WRITE_AMBIGUOUS
	StatusSyncWriteReCommitInProgress Status = 0xa4 // SYNC_WRITE_RE_COMMIT_IN_PROGRESS
	StatusRangeScanCancelled          Status = 0xa5 // RANGE_SCAN_CANCELLED
	StatusVbUUIDNotEqual              Status = 0xa8 // VB_UUID_NOT_EQUAL: a scan's ConsistentWith names another vbucket history

	// Sub-document statuses: a path's (SubdocError.Status) or a whole
	// operation's.
	StatusSubdocPathNotFound                  Status = 0xc0 // SUBDOC_PATH_ENOENT
	StatusSubdocPathMismatch                  Status = 0xc1 // SUBDOC_PATH_MISMATCH
	StatusSubdocPathInvalid                   Status = 0xc2 // SUBDOC_PATH_EINVAL
	StatusSubdocPathTooBig                    Status = 0xc3 // SUBDOC_PATH_E2BIG
	StatusSubdocDocTooDeep                    Status = 0xc4 // SUBDOC_PATH_E2DEEP
	StatusSubdocCantInsert                    Status = 0xc5 // SUBDOC_VALUE_CANTINSERT
	StatusSubdocNotJSON                       Status = 0xc6 // SUBDOC_DOC_NOTJSON
	StatusSubdocBadRange                      Status = 0xc7 // SUBDOC_NUM_ERANGE
	StatusSubdocBadDelta                      Status = 0xc8 // SUBDOC_DELTA_EINVAL
	StatusSubdocPathExists                    Status = 0xc9 // SUBDOC_PATH_EEXISTS
	StatusSubdocValueTooDeep                  Status = 0xca // SUBDOC_VALUE_ETOODEEP
	StatusSubdocInvalidCombo                  Status = 0xcb // SUBDOC_INVALID_COMBO
	StatusSubdocMultiPathFailure              Status = 0xcc // SUBDOC_MULTI_PATH_FAILURE
	StatusSubdocSuccessDeleted                Status = 0xcd // SUBDOC_SUCCESS_DELETED
	StatusSubdocXattrInvalidFlagCombo         Status = 0xce // SUBDOC_XATTR_INVALID_FLAG_COMBO
	StatusSubdocXattrInvalidKeyCombo          Status = 0xcf // SUBDOC_XATTR_INVALID_KEY_COMBO
	StatusSubdocXattrUnknownMacro             Status = 0xd0 // SUBDOC_XATTR_UNKNOWN_MACRO
	StatusSubdocXattrUnknownVattr             Status = 0xd1 // SUBDOC_XATTR_UNKNOWN_VATTR
	StatusSubdocXattrCantModifyVattr          Status = 0xd2 // SUBDOC_XATTR_CANT_MODIFY_VATTR
	StatusSubdocMultiPathFailureDeleted       Status = 0xd3 // SUBDOC_MULTI_PATH_FAILURE_DELETED
	StatusSubdocInvalidXattrOrder             Status = 0xd4 // SUBDOC_INVALID_XATTR_ORDER
	StatusSubdocXattrUnknownVattrMacro        Status = 0xd5 // SUBDOC_XATTR_UNKNOWN_VATTR_MACRO
	StatusSubdocCanOnlyReviveDeletedDocuments Status = 0xd6 // SUBDOC_CAN_ONLY_REVIVE_DELETED_DOCUMENTS
	StatusSubdocDeletedDocumentCantHaveValue  Status = 0xd7 // SUBDOC_DELETED_DOCUMENT_CANT_HAVE_VALUE
	StatusSubdocFieldNotBinaryValue           Status = 0xd8 // SUBDOC_FIELD_NOT_BINARY_VALUE
)

// String gives kv_engine's name of the status (KEY_ENOENT, ...), or
// STATUS(0x....) for one this package has no name for.
func (s Status) String() string { return s.wire().String() }

// OpCode is the protocol opcode of a request, as AttemptInfo and
// KeyValueError report it next to the operation's name: one operation may
// send several (Exists sends GET_META on Couchbase and GET on memcached).
// String gives kv_engine's name (GET, SET, GET_META, ...).
type OpCode uint8

// String gives kv_engine's name of the opcode, or OPCODE(0x..) for one this
// package has no name for.
func (o OpCode) String() string { return o.wire().String() }

// DurabilityLevel is the durability of a synchronous write: how many nodes
// must have it, in memory or on disk, before the server answers.
type DurabilityLevel uint8

// Durability levels.
const (
	// DurabilityNone: an ordinary write, acknowledged by the active node.
	DurabilityNone DurabilityLevel = 0
	// DurabilityMajority: in memory on a majority of the vbucket's nodes.
	DurabilityMajority DurabilityLevel = 1
	// DurabilityMajorityAndPersistOnMaster: in memory on a majority, and
	// on disk on the active node.
	DurabilityMajorityAndPersistOnMaster DurabilityLevel = 2
	// DurabilityPersistToMajority: on disk on a majority.
	DurabilityPersistToMajority DurabilityLevel = 3
)

// String gives the level's name as Couchbase spells it (none, majority,
// majorityAndPersistActive, persistToMajority).
func (l DurabilityLevel) String() string { return l.wire().String() }

// ConfigVersion is the version of a cluster config: its revision epoch and
// revision. A config is newer than another when its epoch is greater, or
// the epochs are equal and its revision is greater. The zero value is "no
// config" (memcached). ConfigVersion is comparable with ==.
type ConfigVersion struct {
	Epoch int64
	Rev   uint64
}

// Compare returns -1 when v is older than o, 0 when they are equal and +1
// when v is newer.
func (v ConfigVersion) Compare(o ConfigVersion) int { return v.wire().Compare(o.wire()) }

// Newer reports whether v is newer than o.
func (v ConfigVersion) Newer(o ConfigVersion) bool { return v.Compare(o) > 0 }

// String formats v as "epoch/rev".
func (v ConfigVersion) String() string {
	return strconv.FormatInt(v.Epoch, 10) + "/" + strconv.FormatUint(v.Rev, 10)
}
