package memdx

import (
	"fmt"
	"slices"
)

// Status is the status field of a response. Every status of kv_engine's
// current error map (etc/couchbase/kv/error_maps/error_map_v2.json, revision
// 9) has a constant here, as do the two older ones (0x89, 0x8b) that earlier
// maps list; a server may send others, which a client looks up in the node's
// error map.
//
// String gives the name the error map uses, always in UPPER_SNAKE form. The
// map spells a few names differently (0x8d is "DCP stream-ID invalid", 0xa0
// to 0xa8 are CamelCase such as "DurabilityInvalidLevel"); memdx writes those
// as DCP_STREAM_ID_INVALID, DURABILITY_INVALID_LEVEL and so on, so that log
// lines have one style. TestStatusNamesMatchErrorMaps checks every code of
// every kv_engine map in the conformance data against this rule.
//
// Status implements error so that errors.Is(err, memdx.StatusLocked) can be
// asked of any error that wraps a *StatusError.
type Status uint16

// Status codes. The comment after each gives kv_engine's name for it.
const (
	StatusSuccess                   Status = 0x00 // SUCCESS
	StatusKeyNotFound               Status = 0x01 // KEY_ENOENT
	StatusKeyExists                 Status = 0x02 // KEY_EEXISTS
	StatusTooBig                    Status = 0x03 // E2BIG
	StatusInvalidArgs               Status = 0x04 // EINVAL
	StatusNotStored                 Status = 0x05 // NOT_STORED
	StatusBadDelta                  Status = 0x06 // DELTA_BADVAL
	StatusNotMyVbucket              Status = 0x07 // NOT_MY_VBUCKET
	StatusNoBucket                  Status = 0x08 // NO_BUCKET
	StatusLocked                    Status = 0x09 // LOCKED
	StatusStreamNotFound            Status = 0x0a // STREAM_NOT_FOUND
	StatusOpaqueNoMatch             Status = 0x0b // OPAQUE_NO_MATCH
	StatusWouldThrottle             Status = 0x0c // EWOULD_THROTTLE
	StatusConfigOnly                Status = 0x0d // ECONFIG_ONLY
	StatusNotLocked                 Status = 0x0e // NOT_LOCKED
	StatusCasValueInvalid           Status = 0x0f // CAS_VALUE_INVALID
	StatusAuthStale                 Status = 0x1f // AUTH_STALE
	StatusAuthError                 Status = 0x20 // AUTH_ERROR
	StatusAuthContinue              Status = 0x21 // AUTH_CONTINUE
	StatusRangeError                Status = 0x22 // ERANGE
	StatusRollback                  Status = 0x23 // ROLLBACK
	StatusNoAccess                  Status = 0x24 // EACCESS
	StatusNotInitialized            Status = 0x25 // NOT_INITIALIZED
	StatusEncryptionKeyNotAvailable Status = 0x26 // ENCRYPTION_KEY_NOT_AVAILABLE
	StatusChecksumMismatch          Status = 0x27 // CHECKSUM_MISMATCH
	StatusExpiryOverflow            Status = 0x28 // EXPIRY_OVERFLOW
	StatusLockExpiryOverflow        Status = 0x29 // LOCK_EXPIRY_OVERFLOW
	StatusRateLimitedIngress        Status = 0x30 // RATE_LIMITED_NETWORK_INGRESS
	StatusRateLimitedEgress         Status = 0x31 // RATE_LIMITED_NETWORK_EGRESS
	StatusRateLimitedMaxConnections Status = 0x32 // RATE_LIMITED_MAX_CONNECTIONS
	StatusRateLimitedMaxCommands    Status = 0x33 // RATE_LIMITED_MAX_COMMANDS
	StatusBucketSizeLimitExceeded   Status = 0x35 // BUCKET_SIZE_LIMIT_EXCEEDED
	StatusBucketResidentRatioTooLow Status = 0x36 // BUCKET_RESIDENT_RATIO_TOO_LOW
	StatusBucketDataSizeTooBig      Status = 0x37 // BUCKET_DATA_SIZE_TOO_BIG
	StatusBucketDiskSpaceTooLow     Status = 0x38 // BUCKET_DISK_SPACE_TOO_LOW
	StatusBucketPaused              Status = 0x50 // BUCKET_PAUSED
	StatusCancelled                 Status = 0x51 // CANCELLED
	StatusUnknownFrameInfo          Status = 0x80 // UNKNOWN_FRAME_INFO
	StatusUnknownCommand            Status = 0x81 // UNKNOWN_COMMAND
	StatusOutOfMemory               Status = 0x82 // ENOMEM
	StatusNotSupported              Status = 0x83 // NOT_SUPPORTED
	StatusInternalError             Status = 0x84 // EINTERNAL
	StatusBusy                      Status = 0x85 // EBUSY
	StatusTmpFail                   Status = 0x86 // ETMPFAIL
	StatusXattrInvalid              Status = 0x87 // XATTR_EINVAL
	// StatusUnknownCollection is what RFC 0049 calls "Collection Outdated".
	StatusUnknownCollection              Status = 0x88 // UNKNOWN_COLLECTION
	StatusNoCollectionsManifest          Status = 0x89 // NO_COLLECTIONS_MANIFEST (older servers)
	StatusCannotApplyCollectionsManifest Status = 0x8a // CANNOT_APPLY_COLLECTIONS_MANIFEST
	StatusCollectionsManifestAhead       Status = 0x8b // COLLECTIONS_MANIFEST_IS_AHEAD (older servers)
	StatusUnknownScope                   Status = 0x8c // UNKNOWN_SCOPE
	StatusDcpStreamIDInvalid             Status = 0x8d // DCP_STREAM_ID_INVALID
	StatusDurabilityInvalidLevel         Status = 0xa0 // DURABILITY_INVALID_LEVEL
	StatusDurabilityImpossible           Status = 0xa1 // DURABILITY_IMPOSSIBLE
	StatusSyncWriteInProgress            Status = 0xa2 // SYNC_WRITE_IN_PROGRESS
	StatusSyncWriteAmbiguous             Status = 0xa3 // SYNC_WRITE_AMBIGUOUS
	StatusSyncWriteReCommitInProgress    Status = 0xa4 // SYNC_WRITE_RE_COMMIT_IN_PROGRESS
	StatusRangeScanCancelled             Status = 0xa5 // RANGE_SCAN_CANCELLED
	StatusRangeScanMore                  Status = 0xa6 // RANGE_SCAN_MORE
	StatusRangeScanComplete              Status = 0xa7 // RANGE_SCAN_COMPLETE
	StatusVbUUIDNotEqual                 Status = 0xa8 // VB_UUID_NOT_EQUAL

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

var statusNames = map[Status]string{
	StatusSuccess: "SUCCESS", StatusKeyNotFound: "KEY_ENOENT", StatusKeyExists: "KEY_EEXISTS",
	StatusTooBig: "E2BIG", StatusInvalidArgs: "EINVAL", StatusNotStored: "NOT_STORED",
	StatusBadDelta: "DELTA_BADVAL", StatusNotMyVbucket: "NOT_MY_VBUCKET", StatusNoBucket: "NO_BUCKET",
	StatusLocked: "LOCKED", StatusStreamNotFound: "STREAM_NOT_FOUND",
	StatusOpaqueNoMatch: "OPAQUE_NO_MATCH", StatusWouldThrottle: "EWOULD_THROTTLE",
	StatusConfigOnly: "ECONFIG_ONLY", StatusNotLocked: "NOT_LOCKED",
	StatusCasValueInvalid: "CAS_VALUE_INVALID", StatusAuthStale: "AUTH_STALE",
	StatusAuthError: "AUTH_ERROR", StatusAuthContinue: "AUTH_CONTINUE", StatusRangeError: "ERANGE",
	StatusRollback: "ROLLBACK", StatusNoAccess: "EACCESS", StatusNotInitialized: "NOT_INITIALIZED",
	StatusEncryptionKeyNotAvailable: "ENCRYPTION_KEY_NOT_AVAILABLE",
	StatusChecksumMismatch:          "CHECKSUM_MISMATCH", StatusExpiryOverflow: "EXPIRY_OVERFLOW",
	StatusLockExpiryOverflow:        "LOCK_EXPIRY_OVERFLOW",
	StatusRateLimitedIngress:        "RATE_LIMITED_NETWORK_INGRESS",
	StatusRateLimitedEgress:         "RATE_LIMITED_NETWORK_EGRESS",
	StatusRateLimitedMaxConnections: "RATE_LIMITED_MAX_CONNECTIONS",
	StatusRateLimitedMaxCommands:    "RATE_LIMITED_MAX_COMMANDS",
	StatusBucketSizeLimitExceeded:   "BUCKET_SIZE_LIMIT_EXCEEDED",
	StatusBucketResidentRatioTooLow: "BUCKET_RESIDENT_RATIO_TOO_LOW",
	StatusBucketDataSizeTooBig:      "BUCKET_DATA_SIZE_TOO_BIG",
	StatusBucketDiskSpaceTooLow:     "BUCKET_DISK_SPACE_TOO_LOW",
	StatusBucketPaused:              "BUCKET_PAUSED", StatusCancelled: "CANCELLED",
	StatusUnknownFrameInfo: "UNKNOWN_FRAME_INFO", StatusUnknownCommand: "UNKNOWN_COMMAND",
	StatusOutOfMemory: "ENOMEM", StatusNotSupported: "NOT_SUPPORTED",
	StatusInternalError: "EINTERNAL", StatusBusy: "EBUSY", StatusTmpFail: "ETMPFAIL",
	StatusXattrInvalid: "XATTR_EINVAL", StatusUnknownCollection: "UNKNOWN_COLLECTION",
	StatusNoCollectionsManifest:          "NO_COLLECTIONS_MANIFEST",
	StatusCannotApplyCollectionsManifest: "CANNOT_APPLY_COLLECTIONS_MANIFEST",
	StatusCollectionsManifestAhead:       "COLLECTIONS_MANIFEST_IS_AHEAD",
	StatusUnknownScope:                   "UNKNOWN_SCOPE", StatusDcpStreamIDInvalid: "DCP_STREAM_ID_INVALID",
	StatusDurabilityInvalidLevel:      "DURABILITY_INVALID_LEVEL",
	StatusDurabilityImpossible:        "DURABILITY_IMPOSSIBLE",
	StatusSyncWriteInProgress:         "SYNC_WRITE_IN_PROGRESS",
	StatusSyncWriteAmbiguous:          "SYNC_WRITE_AMBIGUOUS",
	StatusSyncWriteReCommitInProgress: "SYNC_WRITE_RE_COMMIT_IN_PROGRESS",
	StatusRangeScanCancelled:          "RANGE_SCAN_CANCELLED", StatusRangeScanMore: "RANGE_SCAN_MORE",
	StatusRangeScanComplete: "RANGE_SCAN_COMPLETE", StatusVbUUIDNotEqual: "VB_UUID_NOT_EQUAL",
	StatusSubdocPathNotFound: "SUBDOC_PATH_ENOENT", StatusSubdocPathMismatch: "SUBDOC_PATH_MISMATCH",
	StatusSubdocPathInvalid: "SUBDOC_PATH_EINVAL", StatusSubdocPathTooBig: "SUBDOC_PATH_E2BIG",
	StatusSubdocDocTooDeep: "SUBDOC_PATH_E2DEEP", StatusSubdocCantInsert: "SUBDOC_VALUE_CANTINSERT",
	StatusSubdocNotJSON: "SUBDOC_DOC_NOTJSON", StatusSubdocBadRange: "SUBDOC_NUM_ERANGE",
	StatusSubdocBadDelta: "SUBDOC_DELTA_EINVAL", StatusSubdocPathExists: "SUBDOC_PATH_EEXISTS",
	StatusSubdocValueTooDeep: "SUBDOC_VALUE_ETOODEEP", StatusSubdocInvalidCombo: "SUBDOC_INVALID_COMBO",
	StatusSubdocMultiPathFailure:              "SUBDOC_MULTI_PATH_FAILURE",
	StatusSubdocSuccessDeleted:                "SUBDOC_SUCCESS_DELETED",
	StatusSubdocXattrInvalidFlagCombo:         "SUBDOC_XATTR_INVALID_FLAG_COMBO",
	StatusSubdocXattrInvalidKeyCombo:          "SUBDOC_XATTR_INVALID_KEY_COMBO",
	StatusSubdocXattrUnknownMacro:             "SUBDOC_XATTR_UNKNOWN_MACRO",
	StatusSubdocXattrUnknownVattr:             "SUBDOC_XATTR_UNKNOWN_VATTR",
	StatusSubdocXattrCantModifyVattr:          "SUBDOC_XATTR_CANT_MODIFY_VATTR",
	StatusSubdocMultiPathFailureDeleted:       "SUBDOC_MULTI_PATH_FAILURE_DELETED",
	StatusSubdocInvalidXattrOrder:             "SUBDOC_INVALID_XATTR_ORDER",
	StatusSubdocXattrUnknownVattrMacro:        "SUBDOC_XATTR_UNKNOWN_VATTR_MACRO",
	StatusSubdocCanOnlyReviveDeletedDocuments: "SUBDOC_CAN_ONLY_REVIVE_DELETED_DOCUMENTS",
	StatusSubdocDeletedDocumentCantHaveValue:  "SUBDOC_DELETED_DOCUMENT_CANT_HAVE_VALUE",
	StatusSubdocFieldNotBinaryValue:           "SUBDOC_FIELD_NOT_BINARY_VALUE",
}

// String gives kv_engine's name for the status, or its number when unknown.
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("STATUS(0x%04x)", uint16(s))
}

// Known reports whether memdx has a constant for the status. A client looks
// statuses that are not known up in the node's error map (RFC 0013).
func (s Status) Known() bool {
	_, ok := statusNames[s]
	return ok
}

// Error makes a Status usable as a sentinel with errors.Is. It returns the
// same text as String, so that fmt prints a Status as its name whichever verb
// is used (fmt prefers Error to String).
func (s Status) Error() string { return s.String() }

// KnownStatuses returns every status memdx names, in ascending order.
func KnownStatuses() []Status {
	out := make([]Status, 0, len(statusNames))
	for s := range statusNames {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
