package client

import (
	"slices"

	"github.com/kvwire/kvwire/errmap"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// The status policy: what a non-success response status means for the
// request that got it. decideStatus is the one place that decides it, from
// statusTable, for operations (classifyStatus) and for the collection-id
// lookup (collectionCache.resolve) alike.
//
// A status is, in this order:
//
//  1. retried for a reason of RFC 0049's response-code list (statusRule.reason;
//     NOT_MY_VBUCKET's config handling is classifyStatus's, the reason is
//     the table's), except on DCP opcodes, which the list excludes;
//  2. otherwise, when the client has no outcome of its own for it
//     (statusRule.errorMap), looked up in the node's error map (RFC 0013, RFC
//     0049 "KV Error Map Handling"): retried as KV_ERROR_MAP_RETRY_INDICATED
//     when the entry says so, and reported as ErrTemporaryFailure when the
//     entry has the "temp" attribute;
//  3. otherwise final: the operation ends with the rule's sentinel.
//
// A status not in the table has no outcome of its own: ErrServerFailure,
// and the error map decides.

// statusRule is what the client does with one status.
type statusRule struct {
	// reason: retried for this reason (the strategy decides how); 0: not
	// retried by the client's own rules.
	reason retry.Reason
	// sentinel: what the caller's error matches when the status ends the
	// operation.
	sentinel error
	// errorMap: when not retried by reason, the node's error map decides:
	// the client has no outcome of its own for the status.
	errorMap bool
	// ambiguous: the request may have been applied (SYNC_WRITE_AMBIGUOUS).
	ambiguous bool
}

// statusRow is one row of statusTable: the rule for status on the requests
// it matches (ops nil: every opcode; casGiven: only when the caller gave a
// CAS).
type statusRow struct {
	status   memdx.Status
	ops      []memdx.OpCode
	casGiven bool
	rule     statusRule
}

// ops is shorthand for a row's opcode list.
func ops(o ...memdx.OpCode) []memdx.OpCode { return o }

// statusTable holds every status the client gives an outcome of its own.
// Rows of one status are consecutive; the first that matches the request
// wins, so per-opcode exceptions come before the status's general row.
var statusTable = []statusRow{
	// KEY_ENOENT on STAT: the server has no such group of statistics.
	{status: memdx.StatusKeyNotFound, ops: ops(memdx.OpStat), rule: statusRule{sentinel: ErrInvalidArgument}},
	{status: memdx.StatusKeyNotFound, rule: statusRule{sentinel: ErrDocumentNotFound}},
	// KEY_EEXISTS: Insert of an existing document; with a CAS (and for
	// UNLOCK, whose CAS is the lock's), the CAS did not match.
	{status: memdx.StatusKeyExists, ops: ops(memdx.OpAdd), rule: statusRule{sentinel: ErrDocumentExists}},
	{status: memdx.StatusKeyExists, ops: ops(memdx.OpUnlockKey), rule: statusRule{sentinel: ErrCasMismatch}},
	{status: memdx.StatusKeyExists, casGiven: true, rule: statusRule{sentinel: ErrCasMismatch}},
	{status: memdx.StatusKeyExists, rule: statusRule{sentinel: ErrDocumentExists}},
	{status: memdx.StatusTooBig, rule: statusRule{sentinel: ErrValueTooLarge}},
	{status: memdx.StatusInvalidArgs, rule: statusRule{sentinel: ErrInvalidArgument}},
	// NOT_STORED: memcached's answer to ADD of an existing key and to
	// APPEND/PREPEND of a missing one.
	{status: memdx.StatusNotStored, ops: ops(memdx.OpAdd), rule: statusRule{sentinel: ErrDocumentExists}},
	{status: memdx.StatusNotStored, ops: ops(memdx.OpAppend, memdx.OpPrepend), rule: statusRule{sentinel: ErrDocumentNotFound}},
	{status: memdx.StatusNotStored, rule: statusRule{sentinel: ErrNotStored}},
	{status: memdx.StatusBadDelta, rule: statusRule{sentinel: ErrDeltaInvalid}},
	{status: memdx.StatusNotMyVbucket, rule: statusRule{reason: retry.ReasonKVNotMyVbucket, sentinel: ErrServerFailure, errorMap: true}},
	// LOCKED on UNLOCK: the CAS is not the lock's (RFC 0049: never retried,
	// surfaced as a CAS mismatch).
	{status: memdx.StatusLocked, ops: ops(memdx.OpUnlockKey), rule: statusRule{sentinel: ErrCasMismatch}},
	{status: memdx.StatusLocked, rule: statusRule{reason: retry.ReasonKVLocked, sentinel: ErrDocumentLocked}},
	{status: memdx.StatusNotLocked, rule: statusRule{sentinel: ErrDocumentNotLocked}},
	{status: memdx.StatusAuthStale, rule: statusRule{sentinel: ErrAuthenticationFailure}},
	{status: memdx.StatusAuthError, rule: statusRule{sentinel: ErrAuthenticationFailure}},
	{status: memdx.StatusRangeError, rule: statusRule{sentinel: ErrInvalidArgument}},
	{status: memdx.StatusNoAccess, rule: statusRule{sentinel: ErrNoAccess}},
	{status: memdx.StatusUnknownFrameInfo, rule: statusRule{sentinel: ErrFeatureNotAvailable}},
	{status: memdx.StatusUnknownCommand, rule: statusRule{sentinel: ErrFeatureNotAvailable}},
	{status: memdx.StatusOutOfMemory, rule: statusRule{sentinel: ErrTemporaryFailure, errorMap: true}},
	{status: memdx.StatusNotSupported, rule: statusRule{sentinel: ErrFeatureNotAvailable}},
	{status: memdx.StatusBusy, rule: statusRule{sentinel: ErrTemporaryFailure, errorMap: true}},
	{status: memdx.StatusTmpFail, rule: statusRule{reason: retry.ReasonKVTemporaryFailure, sentinel: ErrTemporaryFailure, errorMap: true}},
	{status: memdx.StatusXattrInvalid, rule: statusRule{sentinel: ErrInvalidArgument}},
	// UNKNOWN_COLLECTION: the cached id is outdated (RFC 0049
	// KV_COLLECTION_OUTDATED), except for COLLECTIONS_GET_ID, where the
	// collection does not exist (RFC 0049 revision 16 COLLECTION_NOT_FOUND,
	// a terminal reason: the strategy decides whether to wait for it).
	{status: memdx.StatusUnknownCollection, ops: ops(memdx.OpCollectionsGetID), rule: statusRule{reason: retry.ReasonCollectionNotFound, sentinel: ErrCollectionNotFound}},
	{status: memdx.StatusUnknownCollection, rule: statusRule{reason: retry.ReasonKVCollectionOutdated, sentinel: ErrCollectionNotFound}},
	{status: memdx.StatusUnknownScope, ops: ops(memdx.OpCollectionsGetID), rule: statusRule{reason: retry.ReasonScopeNotFound, sentinel: ErrScopeNotFound}},
	{status: memdx.StatusUnknownScope, rule: statusRule{sentinel: ErrScopeNotFound}},
	{status: memdx.StatusDurabilityInvalidLevel, rule: statusRule{sentinel: ErrDurabilityLevelNotAvailable}},
	{status: memdx.StatusDurabilityImpossible, rule: statusRule{sentinel: ErrDurabilityImpossible}},
	{status: memdx.StatusSyncWriteInProgress, rule: statusRule{reason: retry.ReasonKVSyncWriteInProgress, sentinel: ErrDurableWriteInProgress}},
	{status: memdx.StatusSyncWriteAmbiguous, rule: statusRule{sentinel: ErrDurabilityAmbiguous, ambiguous: true}},
	{status: memdx.StatusSyncWriteReCommitInProgress, rule: statusRule{reason: retry.ReasonKVSyncWriteReCommitInProgress, sentinel: ErrDurableWriteReCommitInProgress}},
	// RANGE_SCAN_CANCELLED: the server cancelled the scan a continue asked
	// for. Any other request has no outcome of its own for it.
	{status: memdx.StatusRangeScanCancelled, ops: ops(memdx.OpRangeScanContinue), rule: statusRule{sentinel: ErrRequestCanceled}},
	{status: memdx.StatusRangeScanCancelled, rule: defaultRule},
	// Sub-document statuses: a path's status in a LookupIn result or a
	// failed MutateIn, or the status of the whole command.
	{status: memdx.StatusSubdocPathNotFound, rule: statusRule{sentinel: ErrPathNotFound}},
	{status: memdx.StatusSubdocPathMismatch, rule: statusRule{sentinel: ErrPathMismatch}},
	{status: memdx.StatusSubdocPathInvalid, rule: statusRule{sentinel: ErrPathInvalid}},
	{status: memdx.StatusSubdocPathTooBig, rule: statusRule{sentinel: ErrPathTooBig}},
	{status: memdx.StatusSubdocDocTooDeep, rule: statusRule{sentinel: ErrPathTooDeep}},
	{status: memdx.StatusSubdocCantInsert, rule: statusRule{sentinel: ErrValueInvalid}},
	{status: memdx.StatusSubdocNotJSON, rule: statusRule{sentinel: ErrDocumentNotJSON}},
	{status: memdx.StatusSubdocBadRange, rule: statusRule{sentinel: ErrNumberTooBig}},
	{status: memdx.StatusSubdocBadDelta, rule: statusRule{sentinel: ErrDeltaInvalid}},
	{status: memdx.StatusSubdocPathExists, rule: statusRule{sentinel: ErrPathExists}},
	{status: memdx.StatusSubdocValueTooDeep, rule: statusRule{sentinel: ErrValueTooDeep}},
	{status: memdx.StatusSubdocInvalidCombo, rule: statusRule{sentinel: ErrInvalidArgument}},
	// SUBDOC_MULTI_PATH_FAILURE ("special-handling" in kv_engine's error
	// map) ends a MutateIn; a lookup takes it as its result. Never retried;
	// MutateIn's error takes the sentinel of the failing path's status,
	// whose row is above (mutateInError), in place of this one.
	{status: memdx.StatusSubdocMultiPathFailure, rule: statusRule{sentinel: ErrServerFailure}},
	{status: memdx.StatusSubdocMultiPathFailureDeleted, rule: statusRule{sentinel: ErrServerFailure}},
	{status: memdx.StatusSubdocXattrInvalidFlagCombo, rule: statusRule{sentinel: ErrXattrInvalidFlagCombo}},
	{status: memdx.StatusSubdocXattrInvalidKeyCombo, rule: statusRule{sentinel: ErrXattrInvalidKeyCombo}},
	{status: memdx.StatusSubdocXattrUnknownMacro, rule: statusRule{sentinel: ErrXattrUnknownMacro}},
	{status: memdx.StatusSubdocXattrUnknownVattrMacro, rule: statusRule{sentinel: ErrXattrUnknownMacro}},
	{status: memdx.StatusSubdocXattrUnknownVattr, rule: statusRule{sentinel: ErrXattrUnknownVirtualAttribute}},
	{status: memdx.StatusSubdocXattrCantModifyVattr, rule: statusRule{sentinel: ErrXattrCannotModifyVirtualAttribute}},
	{status: memdx.StatusSubdocInvalidXattrOrder, rule: statusRule{sentinel: ErrXattrInvalidOrder}},
	{status: memdx.StatusSubdocCanOnlyReviveDeletedDocuments, rule: statusRule{sentinel: ErrDocumentAlreadyAlive}},
	{status: memdx.StatusSubdocDeletedDocumentCantHaveValue, rule: statusRule{sentinel: ErrInvalidArgument}},
}

// statusIndex maps a status to its first row in statusTable.
var statusIndex = func() map[memdx.Status]int {
	m := make(map[memdx.Status]int, len(statusTable))
	for i, r := range statusTable {
		if _, ok := m[r.status]; !ok {
			m[r.status] = i
		}
	}
	return m
}()

// defaultRule is the rule of a status statusTable does not hold.
var defaultRule = statusRule{sentinel: ErrServerFailure, errorMap: true}

// ruleFor returns the table's rule for st on op.
func ruleFor(op memdx.OpCode, casGiven bool, st memdx.Status) statusRule {
	i, ok := statusIndex[st]
	if !ok {
		return defaultRule
	}
	for _, r := range statusTable[i:] {
		if r.status != st {
			break
		}
		if (r.ops == nil || slices.Contains(r.ops, op)) && (!r.casGiven || casGiven) {
			return r.rule
		}
	}
	return defaultRule // unreachable while every status ends on a general row
}

// statusOutcome is what decideStatus decided for one response.
type statusOutcome struct {
	// reason is the retry reason; 0 when the status ends the operation.
	reason retry.Reason
	// sentinel is what the caller's error matches if the operation ends on
	// this status (now, or when the strategy refuses the retry).
	sentinel  error
	ambiguous bool
	// entry is the node's error-map entry when the map was consulted and
	// had one (found).
	entry errmap.Entry
	found bool
}

// decideStatus is the status policy (see statusTable): the outcome of status
// st for a request with opcode op (casGiven: the caller gave a CAS), m being
// the node's error map (nil: none).
func decideStatus(op memdx.OpCode, casGiven bool, st memdx.Status, m *errmap.Map) statusOutcome {
	r := ruleFor(op, casGiven, st)
	out := statusOutcome{sentinel: r.sentinel, ambiguous: r.ambiguous}
	if r.reason != retry.ReasonUnknown && !isDCP(op) {
		out.reason = r.reason
		return out
	}
	if !r.errorMap {
		return out
	}
	e, ok := m.Lookup(st)
	if !ok {
		return out
	}
	out.entry, out.found = e, true
	if e.Attrs.Has(errmap.AttrTemp) {
		out.sentinel = ErrTemporaryFailure
	}
	if e.RetryIndicated() {
		out.reason = retry.ReasonKVErrorMapRetryIndicated
	}
	return out
}

// isDCP reports whether op is one of kv_engine's DCP opcodes (DcpOpen 0x50
// through DcpOsoSnapshot 0x65 in include/mcbp/protocol/opcode.h), which RFC
// 0049's response-code list excludes.
func isDCP(op memdx.OpCode) bool { return op >= 0x50 && op <= 0x65 }
