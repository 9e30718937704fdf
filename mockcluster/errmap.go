package mockcluster

import (
	"encoding/json"
	"sort"
	"strconv"

	"github.com/kvwire/kvwire/memdx"
)

// Test statuses the mock's error map describes and fault injection can
// answer. Couchbase Server never sends them; they stand for "a status this
// client does not know", which a client must look up in the error map
// (RFC 0013).
const (
	// StatusTestRetry (0x7ff0) has the retry attributes temp, retry-later
	// and auto-retry and a retry spec (constant, 10 ms interval, 10 ms
	// after, 500 ms max-duration): a client following the error map retries
	// it.
	StatusTestRetry memdx.Status = 0x7ff0
	// StatusTestNoRetry (0x7ff1) has no retry attribute (only internal): a
	// client following the error map fails the operation.
	StatusTestNoRetry memdx.Status = 0x7ff1
)

// ErrorMapRevision is the revision of the version-2 error map the mock
// serves. The version-1 map carries ErrorMapRevision+4, as kv_engine derives
// its v1 map from v2 (revision = 4 + v2 revision).
const ErrorMapRevision = 1

// RetrySpec is the retry object of an error-map entry (RFC 0013).
type RetrySpec struct {
	Strategy    string `json:"strategy"`
	Interval    int    `json:"interval"`
	After       int    `json:"after"`
	MaxDuration int    `json:"max-duration,omitempty"`
	Ceil        int    `json:"ceil,omitempty"`
}

// ErrorMapEntry is one status of the mock's error map.
type ErrorMapEntry struct {
	Status memdx.Status
	Name   string
	Desc   string
	Attrs  []string
	Retry  *RetrySpec
}

// errorTable is the mock's own table of statuses: kv_engine's names,
// descriptions and attributes (error_map_v2.json revision 9, as facts), plus
// the two test statuses.
var errorTable = []ErrorMapEntry{
	{memdx.StatusSuccess, "SUCCESS", "Success", []string{"success"}, nil},
	{memdx.StatusKeyNotFound, "KEY_ENOENT", "Not Found", []string{"item-only"}, nil},
	{memdx.StatusKeyExists, "KEY_EEXISTS", "key already exists, or CAS mismatch", []string{"item-only"}, nil},
	{memdx.StatusTooBig, "E2BIG", "Value is too big", []string{"item-only", "invalid-input"}, nil},
	{memdx.StatusInvalidArgs, "EINVAL", "Invalid packet", []string{"internal", "invalid-input"}, nil},
	{memdx.StatusNotStored, "NOT_STORED", "Not Stored", []string{"internal", "item-only"}, nil},
	{memdx.StatusBadDelta, "DELTA_BADVAL", "Existing document not a number", []string{"item-only", "invalid-input"}, nil},
	{memdx.StatusNotMyVbucket, "NOT_MY_VBUCKET", "Server does not know about this vBucket", []string{"fetch-config", "invalid-input"}, nil},
	{memdx.StatusNoBucket, "NO_BUCKET", "Not connected to any bucket", []string{"conn-state-invalidated"}, nil},
	{memdx.StatusLocked, "LOCKED", "Requested resource is locked", []string{"item-locked", "item-only", "retry-now"}, nil},
	{memdx.StatusStreamNotFound, "STREAM_NOT_FOUND", "Stream not found", []string{"conn-state-invalidated"}, nil},
	{memdx.StatusOpaqueNoMatch, "OPAQUE_NO_MATCH", "Opaque does not match", []string{"conn-state-invalidated"}, nil},
	{memdx.StatusWouldThrottle, "EWOULD_THROTTLE", "Command would have been throttled", []string{"temp", "retry-later", "rate-limit"}, nil},
	{memdx.StatusConfigOnly, "ECONFIG_ONLY", "Command can't be executed in a config-only bucket", []string{"fetch-config", "retry-now"}, nil},
	{memdx.StatusNotLocked, "NOT_LOCKED", "Requested resource is not locked", []string{"item-only"}, nil},
	{memdx.StatusCasValueInvalid, "CAS_VALUE_INVALID", "The provided CAS value is invalid", []string{"item-only"}, nil},
	{memdx.StatusAuthStale, "AUTH_STALE", "Reauthentication required", []string{"conn-state-invalidated", "auth"}, nil},
	{memdx.StatusAuthError, "AUTH_ERROR", "Authentication failed", []string{"conn-state-invalidated", "auth"}, nil},
	{memdx.StatusAuthContinue, "AUTH_CONTINUE", "Continue authentication processs", []string{"special-handling"}, nil},
	{memdx.StatusRangeError, "ERANGE", "Invalid range requested", []string{"invalid-input"}, nil},
	{memdx.StatusRollback, "ROLLBACK", "Rollback", []string{"dcp", "special-handling"}, nil},
	{memdx.StatusNoAccess, "EACCESS", "Not authorized for command", []string{"support"}, nil},
	{memdx.StatusNotInitialized, "NOT_INITIALIZED", "Server not initialized", []string{"conn-state-invalidated"}, nil},
	{memdx.StatusRateLimitedIngress, "RATE_LIMITED_NETWORK_INGRESS", "Rate limited: Network Ingress", []string{"temp", "retry-later", "rate-limit"}, nil},
	{memdx.StatusRateLimitedEgress, "RATE_LIMITED_NETWORK_EGRESS", "Rate limited: Network Egress", []string{"temp", "retry-later", "rate-limit"}, nil},
	{memdx.StatusRateLimitedMaxConnections, "RATE_LIMITED_MAX_CONNECTIONS", "Rate limited: Max Connections", []string{"conn-state-invalidated", "rate-limit"}, nil},
	{memdx.StatusRateLimitedMaxCommands, "RATE_LIMITED_MAX_COMMANDS", "Rate limited: Max Commands", []string{"temp", "retry-later", "rate-limit"}, nil},
	{memdx.StatusBucketSizeLimitExceeded, "BUCKET_SIZE_LIMIT_EXCEEDED", "The bucket contains too much data", []string{"item-only", "system-constraint", "no-retry"}, nil},
	{memdx.StatusCancelled, "CANCELLED", "The request was cancelled, no state changed", []string{"item-only", "retry-now"}, nil},
	{memdx.StatusUnknownFrameInfo, "UNKNOWN_FRAME_INFO", "Unknown frame info identifier encountered. Maybe a newer server version knows about it", []string{"support"}, nil},
	{memdx.StatusUnknownCommand, "UNKNOWN_COMMAND", "Unknown command. Maybe a newer server version knows about it", []string{"support"}, nil},
	{memdx.StatusOutOfMemory, "ENOMEM", "No memory available to store item. Add memory or remove some items and try later", []string{"temp", "retry-later"}, nil},
	{memdx.StatusNotSupported, "NOT_SUPPORTED", "Command not supported with current bucket type/configuration", []string{"support"}, nil},
	{memdx.StatusInternalError, "EINTERNAL", "Internal error. Reconnect recommended", []string{"internal", "conn-state-invalidated"}, nil},
	{memdx.StatusBusy, "EBUSY", "Busy, try again", []string{"temp", "retry-now"}, nil},
	{memdx.StatusTmpFail, "ETMPFAIL", "Temporary failure. Try again", []string{"temp", "retry-now"}, nil},
	{memdx.StatusXattrInvalid, "XATTR_EINVAL", "Invalid extended attribute", []string{"invalid-input"}, nil},
	{memdx.StatusUnknownCollection, "UNKNOWN_COLLECTION", "Operation specified an unknown collection.", []string{"invalid-input"}, nil},
	{memdx.StatusCannotApplyCollectionsManifest, "CANNOT_APPLY_COLLECTIONS_MANIFEST", "The manifest cannot applied to the bucket's vbuckets.", []string{"invalid-input"}, nil},
	{memdx.StatusUnknownScope, "UNKNOWN_SCOPE", "Operation specified an unknown scope.", []string{"invalid-input"}, nil},
	{memdx.StatusDurabilityInvalidLevel, "DurabilityInvalidLevel", "Durability level is invalid", []string{"invalid-input"}, nil},
	{memdx.StatusDurabilityImpossible, "DurabilityImpossible", "Durability requirements are impossible to achieve", []string{"item-only", "invalid-input"}, nil},
	{memdx.StatusSyncWriteInProgress, "SyncWriteInProgress", "The requested key has a pending synchronous write", []string{"item-only", "retry-later"}, nil},
	{memdx.StatusSyncWriteAmbiguous, "SyncWriteAmbiguous", "The SyncWrite request has not completed in the specified time and has ambiguous result - it may Succeed or Fail; but the final value is not yet known", []string{"item-only"}, nil},
	{memdx.StatusSyncWriteReCommitInProgress, "SyncWriteReCommitInProgress", "The requested key has a SyncWrite which is being re-committed.", []string{"item-only", "retry-later"}, nil},
	{memdx.StatusSubdocPathNotFound, "SUBDOC_PATH_ENOENT", "Subdoc: Path not found in document", []string{"subdoc", "item-only"}, nil},
	{memdx.StatusSubdocPathMismatch, "SUBDOC_PATH_MISMATCH", "Subdoc: Path and document disagree on structure", []string{"subdoc", "item-only"}, nil},
	{memdx.StatusSubdocPathInvalid, "SUBDOC_PATH_EINVAL", "Subdoc: Invalid path (bad syntax or unacceptable semantics for command", []string{"subdoc", "invalid-input"}, nil},
	{memdx.StatusSubdocPathTooBig, "SUBDOC_PATH_E2BIG", "Subdoc: Path size exceeds limit", []string{"subdoc", "invalid-input"}, nil},
	{memdx.StatusSubdocDocTooDeep, "SUBDOC_PATH_E2DEEP", "Subdoc: Path is too deep to be parsed", []string{"subdoc", "invalid-input"}, nil},
	{memdx.StatusSubdocCantInsert, "SUBDOC_VALUE_CANTINSERT", "Subdoc: Value invalid for insertion", []string{"subdoc", "invalid-input"}, nil},
	{memdx.StatusSubdocNotJSON, "SUBDOC_DOC_NOTJSON", "Subdoc: Document not JSON", []string{"subdoc", "item-only"}, nil},
	{memdx.StatusSubdocBadRange, "SUBDOC_NUM_ERANGE", "Subdoc: Existing numeric value is not within range", []string{"subdoc", "item-only"}, nil},
	{memdx.StatusSubdocBadDelta, "SUBDOC_DELTA_EINVAL", "Subdoc: Invalid value passed for delta (out of range, or not an integer", []string{"subdoc", "item-only"}, nil},
	{memdx.StatusSubdocPathExists, "SUBDOC_PATH_EEXISTS", "Subdoc: Path already exists", []string{"subdoc", "item-only"}, nil},
	{memdx.StatusSubdocValueTooDeep, "SUBDOC_VALUE_ETOODEEP", "Subdoc: Value is too deep, or would make the document too deep", []string{"subdoc", "invalid-input", "item-only"}, nil},
	{memdx.StatusSubdocInvalidCombo, "SUBDOC_INVALID_COMBO", "Subdoc: Lookup and mutation commands found within single packet", []string{"subdoc", "invalid-input"}, nil},
	{memdx.StatusSubdocMultiPathFailure, "SUBDOC_MULTI_PATH_FAILURE", "Subdoc: Some (or all) commands failed. Inspect payload for details", []string{"subdoc", "special-handling"}, nil},
	{memdx.StatusSubdocSuccessDeleted, "SUBDOC_SUCCESS_DELETED", "Subdoc: Success, but the affected document was (and still is) deleted", []string{"item-deleted", "success", "subdoc"}, nil},
	{memdx.StatusSubdocXattrInvalidFlagCombo, "SUBDOC_XATTR_INVALID_FLAG_COMBO", "Subdoc: The flag combination doesn't make any sense", []string{"subdoc", "invalid-input"}, nil},
	{memdx.StatusSubdocXattrUnknownMacro, "SUBDOC_XATTR_UNKNOWN_MACRO", "Subdoc: The server don't know about the specified macro", []string{"subdoc", "invalid-input"}, nil},
	{memdx.StatusSubdocXattrUnknownVattr, "SUBDOC_XATTR_UNKNOWN_VATTR", "Subdoc: The server don't know about the specified virtual attribute", []string{"subdoc", "invalid-input"}, nil},
	{memdx.StatusSubdocXattrCantModifyVattr, "SUBDOC_XATTR_CANT_MODIFY_VATTR", "Subdoc: Can't modify virtual attributes", []string{"subdoc", "invalid-input"}, nil},
	{memdx.StatusSubdocMultiPathFailureDeleted, "SUBDOC_MULTI_PATH_FAILURE_DELETED", "Subdoc: One or more paths in a multi-path command failed on a deleted document", []string{"item-deleted", "subdoc", "special-handling"}, nil},
	{memdx.StatusSubdocInvalidXattrOrder, "SUBDOC_INVALID_XATTR_ORDER", "Subdoc: Invalid XATTR order (xattrs should come first)", []string{"subdoc", "invalid-input"}, nil},
	{memdx.StatusSubdocXattrUnknownVattrMacro, "SUBDOC_XATTR_UNKNOWN_VATTR_MACRO", "Subdoc: The server don't know about (or support) the specified virtual macro", []string{"subdoc", "invalid-input"}, nil},
	{memdx.StatusSubdocCanOnlyReviveDeletedDocuments, "SUBDOC_CAN_ONLY_REVIVE_DELETED_DOCUMENTS", "Subdoc: Only deleted documents can be revived", []string{"subdoc", "item-only"}, nil},
	{memdx.StatusSubdocDeletedDocumentCantHaveValue, "SUBDOC_DELETED_DOCUMENT_CANT_HAVE_VALUE", "Subdoc: A deleted document can't have a value", []string{"subdoc", "item-only"}, nil},
	{StatusTestRetry, "MOCK_TEST_RETRY", "Mock cluster test status: temporary, retry later (error map retry spec)",
		[]string{"temp", "retry-later", "auto-retry"},
		&RetrySpec{Strategy: "constant", Interval: 10, After: 10, MaxDuration: 500}},
	{StatusTestNoRetry, "MOCK_TEST_NO_RETRY", "Mock cluster test status: internal failure, not retryable", []string{"internal"}, nil},
}

// v1Attrs are the 16 attributes of error map format version 1; kv_engine
// drops every other attribute when it serves v1.
var v1Attrs = map[string]bool{
	"item-deleted": true, "item-locked": true, "item-only": true, "invalid-input": true,
	"fetch-config": true, "conn-state-invalidated": true, "auth": true, "special-handling": true,
	"support": true, "temp": true, "internal": true, "retry-now": true, "retry-later": true,
	"subdoc": true, "dcp": true, "success": true,
}

// ErrorMapEntries returns a copy of the mock's error-map table, ordered by
// status.
func ErrorMapEntries() []ErrorMapEntry {
	out := make([]ErrorMapEntry, len(errorTable))
	for i, e := range errorTable {
		e.Attrs = append([]string(nil), e.Attrs...)
		if e.Retry != nil {
			r := *e.Retry
			e.Retry = &r
		}
		out[i] = e
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Status < out[j].Status })
	return out
}

type errMapJSONEntry struct {
	Name  string     `json:"name"`
	Desc  string     `json:"desc"`
	Attrs []string   `json:"attrs"`
	Retry *RetrySpec `json:"retry,omitempty"`
}

type errMapJSON struct {
	Version  int                        `json:"version"`
	Revision int                        `json:"revision"`
	Errors   map[string]errMapJSONEntry `json:"errors"`
}

// ErrorMapJSON renders the error map in kv_engine's format for the requested
// format version: 1 gives version 1 (revision ErrorMapRevision+4, attributes
// outside the 16 v1 ones dropped), 2 or higher gives version 2. Keys are the
// status in lowercase hexadecimal without padding.
func ErrorMapJSON(version uint16) []byte {
	out := errMapJSON{Version: 2, Revision: ErrorMapRevision, Errors: make(map[string]errMapJSONEntry, len(errorTable))}
	if version <= 1 {
		out.Version, out.Revision = 1, ErrorMapRevision+4
	}
	for _, e := range errorTable {
		attrs := e.Attrs
		if out.Version == 1 {
			attrs = nil
			for _, a := range e.Attrs {
				if v1Attrs[a] {
					attrs = append(attrs, a)
				}
			}
			if attrs == nil {
				attrs = []string{}
			}
		}
		out.Errors[strconv.FormatUint(uint64(e.Status), 16)] = errMapJSONEntry{Name: e.Name, Desc: e.Desc, Attrs: attrs, Retry: e.Retry}
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic("mockcluster: error map does not marshal: " + err.Error())
	}
	return b
}
