// Package statuspolicy is the client's status policy: what a non-success
// response status means for the request that got it. Decide is the one
// place that decides it, from one table, for the client's operations
// (client's judge step) and for the collection-id lookup (internal/cluster)
// alike.
//
// A status is, in this order:
//
//  1. retried for a reason of RFC 0049's response-code list (Rule.Reason;
//     NOT_MY_VBUCKET's config handling is the cluster's, the reason is the
//     table's), except on DCP opcodes, which the list excludes;
//  2. otherwise, when the client has no outcome of its own for it
//     (Rule.ErrorMap), looked up in the node's error map (RFC 0013, RFC
//     0049 "KV Error Map Handling"): retried as KV_ERROR_MAP_RETRY_INDICATED
//     when the entry says so, and reported as ErrTemporaryFailure when
//     the entry has the "temp" attribute;
//  3. otherwise final: the operation ends with the rule's sentinel.
//
// When the map was consulted (step 2) and its entry says
// "conn-state-invalidated" or "special-handling", the outcome also says
// that the connection the status came on must be dropped (ConnInvalid).
//
// A status not in the table has no outcome of its own: ErrServerFailure,
// and the error map decides. The sentinels are internal/kverr's, which
// client re-exports.
package statuspolicy

import (
	"slices"

	"github.com/kvwire/kvwire/errmap"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// Rule is what the client does with one status.
type Rule struct {
	// Reason: retried for this reason (the strategy decides how); 0: not
	// retried by the client's own rules.
	Reason retry.Reason
	// Sentinel: what the caller's error matches when the status ends the
	// operation.
	Sentinel error
	// ErrorMap: when not retried by reason, the node's error map decides:
	// the client has no outcome of its own for the status.
	ErrorMap bool
	// Ambiguous: the request may have been applied (SYNC_WRITE_AMBIGUOUS).
	Ambiguous bool
}

// Row is one row of the table: the rule for Status on the requests it
// matches (Ops nil: every opcode; CasGiven: only when the caller gave a
// CAS; NotInsert: only when the request is known not to be an insert,
// DecideMutation's, for an opcode that does not say; NoXerror: only on a
// connection that did not negotiate XERROR, Request.NoXerror).
type Row struct {
	Status    memdx.Status
	Ops       []memdx.OpCode
	CasGiven  bool
	NotInsert bool
	NoXerror  bool
	Rule      Rule
}

// ops is shorthand for a row's opcode list.
func ops(o ...memdx.OpCode) []memdx.OpCode { return o }

// table holds every status the client gives an outcome of its own.
// Rows of one status are consecutive; the first that matches the request
// wins, so per-opcode exceptions come before the status's general row.
var table = []Row{
	// KEY_ENOENT on STAT: the server has no such group of statistics.
	{Status: memdx.StatusKeyNotFound, Ops: ops(memdx.OpStat), Rule: Rule{Sentinel: kverr.ErrInvalidArgument}},
	{Status: memdx.StatusKeyNotFound, Rule: Rule{Sentinel: kverr.ErrDocumentNotFound}},
	// KEY_EEXISTS: Insert of an existing document; with a CAS (and for
	// UNLOCK, whose CAS is the lock's), the CAS did not match.
	{Status: memdx.StatusKeyExists, Ops: ops(memdx.OpAdd), Rule: Rule{Sentinel: kverr.ErrDocumentExists}},
	{Status: memdx.StatusKeyExists, Ops: ops(memdx.OpUnlockKey), Rule: Rule{Sentinel: kverr.ErrCasMismatch}},
	// KEY_EEXISTS on TOUCH and GAT: a locked document, to a connection
	// without XERROR (kv_engine's getAndTouchInner answers locked, which
	// Connection::remapErrorCode sends such a connection as KEY_EEXISTS):
	// what LOCKED is with XERROR.
	{Status: memdx.StatusKeyExists, Ops: ops(memdx.OpTouch, memdx.OpGAT), Rule: Rule{Reason: retry.ReasonKVLocked, Sentinel: kverr.ErrDocumentLocked}},
	{Status: memdx.StatusKeyExists, CasGiven: true, Rule: Rule{Sentinel: kverr.ErrCasMismatch}},
	// KEY_EEXISTS on a mutation given no CAS that is not an insert: a
	// locked document, to a connection without XERROR (kv_engine's
	// locked, remapped to KEY_EEXISTS by Connection::remapErrorCode),
	// the only KEY_EEXISTS these have. Not applied: retried as LOCKED is.
	{Status: memdx.StatusKeyExists, Ops: ops(memdx.OpSet, memdx.OpReplace, memdx.OpDelete,
		memdx.OpAppend, memdx.OpPrepend, memdx.OpIncrement, memdx.OpDecrement),
		Rule: Rule{Reason: retry.ReasonKVLocked, Sentinel: kverr.ErrDocumentLocked}},
	// The same for a sub-document mutation given no CAS that is known not
	// to be an insert (its doc flags not Add; an insert's KEY_EEXISTS is an
	// existing document, and Decide, which does not know, keeps the
	// general row): kv_engine's store answers locked when the document
	// was locked after its fetch (one locked before answers
	// locked_tmpfail), which such a connection gets as KEY_EEXISTS; a CAS
	// mismatch of its own fetch it retries itself.
	{Status: memdx.StatusKeyExists, Ops: ops(memdx.OpSubdocMultiMutation), NotInsert: true,
		Rule: Rule{Reason: retry.ReasonKVLocked, Sentinel: kverr.ErrDocumentLocked}},
	{Status: memdx.StatusKeyExists, Rule: Rule{Sentinel: kverr.ErrDocumentExists}},
	{Status: memdx.StatusTooBig, Rule: Rule{Sentinel: kverr.ErrValueTooLarge}},
	{Status: memdx.StatusInvalidArgs, Rule: Rule{Sentinel: kverr.ErrInvalidArgument}},
	// NOT_STORED: memcached's answer to ADD of an existing key and to
	// APPEND/PREPEND of a missing one.
	{Status: memdx.StatusNotStored, Ops: ops(memdx.OpAdd), Rule: Rule{Sentinel: kverr.ErrDocumentExists}},
	{Status: memdx.StatusNotStored, Ops: ops(memdx.OpAppend, memdx.OpPrepend), Rule: Rule{Sentinel: kverr.ErrDocumentNotFound}},
	{Status: memdx.StatusNotStored, Rule: Rule{Sentinel: kverr.ErrNotStored}},
	{Status: memdx.StatusBadDelta, Rule: Rule{Sentinel: kverr.ErrDeltaInvalid}},
	{Status: memdx.StatusNotMyVbucket, Rule: Rule{Reason: retry.ReasonKVNotMyVbucket, Sentinel: kverr.ErrServerFailure, ErrorMap: true}},
	// LOCKED on UNLOCK: the CAS is not the lock's (RFC 0049: never retried,
	// surfaced as a CAS mismatch).
	{Status: memdx.StatusLocked, Ops: ops(memdx.OpUnlockKey), Rule: Rule{Sentinel: kverr.ErrCasMismatch}},
	{Status: memdx.StatusLocked, Rule: Rule{Reason: retry.ReasonKVLocked, Sentinel: kverr.ErrDocumentLocked}},
	{Status: memdx.StatusNotLocked, Rule: Rule{Sentinel: kverr.ErrDocumentNotLocked}},
	{Status: memdx.StatusAuthStale, Rule: Rule{Sentinel: kverr.ErrAuthenticationFailure}},
	// AUTH_ERROR on FLUSH: memcached started with -F (flush_all
	// disabled) refuses FLUSH so (proto_bin.c, process_bin_flush), on a
	// connection allowed everything else (kvwire logs in before any
	// request); only memcached:// sends FLUSH.
	{Status: memdx.StatusAuthError, Ops: ops(memdx.OpFlush), Rule: Rule{Sentinel: kverr.ErrFeatureNotAvailable}},
	{Status: memdx.StatusAuthError, Rule: Rule{Sentinel: kverr.ErrAuthenticationFailure}},
	{Status: memdx.StatusRangeError, Rule: Rule{Sentinel: kverr.ErrInvalidArgument}},
	{Status: memdx.StatusNoAccess, Rule: Rule{Sentinel: kverr.ErrNoAccess}},
	{Status: memdx.StatusUnknownFrameInfo, Rule: Rule{Sentinel: kverr.ErrFeatureNotAvailable}},
	{Status: memdx.StatusUnknownCommand, Rule: Rule{Sentinel: kverr.ErrFeatureNotAvailable}},
	{Status: memdx.StatusOutOfMemory, Rule: Rule{Sentinel: kverr.ErrTemporaryFailure, ErrorMap: true}},
	{Status: memdx.StatusNotSupported, Rule: Rule{Sentinel: kverr.ErrFeatureNotAvailable}},
	{Status: memdx.StatusBusy, Rule: Rule{Sentinel: kverr.ErrTemporaryFailure, ErrorMap: true}},
	// TMPFAIL on UNLOCK: the document is not locked (kv_engine before
	// 7.6, which had no NOT_LOCKED, KVBucket::unlockKey; and any
	// connection without XERROR, which Connection::remapErrorCode gives
	// not_locked and locked_tmpfail as TMPFAIL: a lock held with another
	// CAS). Neither clears on a retry (a new lock has a new CAS), which
	// would only run out the timeout: final, whatever the error map says.
	{Status: memdx.StatusTmpFail, Ops: ops(memdx.OpUnlockKey), Rule: Rule{Sentinel: kverr.ErrDocumentNotLocked}},
	// TMPFAIL on a sub-document mutation given a CAS: a temporary failure
	// (the general rule; the row below does not apply). With a CAS the
	// fetch lets a locked document through, and the store answers locked,
	// KEY_EEXISTS without XERROR.
	{Status: memdx.StatusTmpFail, Ops: ops(memdx.OpSubdocMultiMutation), CasGiven: true, Rule: tmpFail},
	// TMPFAIL to a connection without XERROR on GET_LOCKED, on a
	// sub-document command given no CAS (a mutation known not to be an
	// insert: an insert's fetch answers KEY_EEXISTS for any existing
	// document before the lock check) and on DELETE given one: the
	// document is locked. kv_engine answers them locked_tmpfail for a
	// locked document (GetLockedCommandContext; SubdocExecutionContext's
	// get_document_for_searching; VBucket::deleteItem, a CAS that is not
	// the lock's), which Connection::remapErrorCode gives such a
	// connection as TMPFAIL and one with XERROR as LOCKED: retried as
	// LOCKED is. With XERROR, TMPFAIL is a temporary failure (the general
	// row).
	{Status: memdx.StatusTmpFail, Ops: ops(memdx.OpGetLocked, memdx.OpSubdocMultiLookup),
		NoXerror: true, Rule: Rule{Reason: retry.ReasonKVLocked, Sentinel: kverr.ErrDocumentLocked}},
	{Status: memdx.StatusTmpFail, Ops: ops(memdx.OpSubdocMultiMutation), NotInsert: true,
		NoXerror: true, Rule: Rule{Reason: retry.ReasonKVLocked, Sentinel: kverr.ErrDocumentLocked}},
	{Status: memdx.StatusTmpFail, Ops: ops(memdx.OpDelete), CasGiven: true, NoXerror: true,
		Rule: Rule{Reason: retry.ReasonKVLocked, Sentinel: kverr.ErrDocumentLocked}},
	{Status: memdx.StatusTmpFail, Rule: tmpFail},
	{Status: memdx.StatusXattrInvalid, Rule: Rule{Sentinel: kverr.ErrInvalidArgument}},
	// UNKNOWN_COLLECTION: the cached id is outdated (RFC 0049
	// KV_COLLECTION_OUTDATED), except for COLLECTIONS_GET_ID, where the
	// collection does not exist (RFC 0049 revision 16 COLLECTION_NOT_FOUND,
	// a terminal Reason: the strategy decides whether to wait for it).
	{Status: memdx.StatusUnknownCollection, Ops: ops(memdx.OpCollectionsGetID), Rule: Rule{Reason: retry.ReasonCollectionNotFound, Sentinel: kverr.ErrCollectionNotFound}},
	{Status: memdx.StatusUnknownCollection, Rule: Rule{Reason: retry.ReasonKVCollectionOutdated, Sentinel: kverr.ErrCollectionNotFound}},
	{Status: memdx.StatusUnknownScope, Ops: ops(memdx.OpCollectionsGetID), Rule: Rule{Reason: retry.ReasonScopeNotFound, Sentinel: kverr.ErrScopeNotFound}},
	{Status: memdx.StatusUnknownScope, Rule: Rule{Sentinel: kverr.ErrScopeNotFound}},
	{Status: memdx.StatusDurabilityInvalidLevel, Rule: Rule{Sentinel: kverr.ErrDurabilityLevelNotAvailable}},
	{Status: memdx.StatusDurabilityImpossible, Rule: Rule{Sentinel: kverr.ErrDurabilityImpossible}},
	{Status: memdx.StatusSyncWriteInProgress, Rule: Rule{Reason: retry.ReasonKVSyncWriteInProgress, Sentinel: kverr.ErrDurableWriteInProgress}},
	{Status: memdx.StatusSyncWriteAmbiguous, Rule: Rule{Sentinel: kverr.ErrDurabilityAmbiguous, Ambiguous: true}},
	{Status: memdx.StatusSyncWriteReCommitInProgress, Rule: Rule{Reason: retry.ReasonKVSyncWriteReCommitInProgress, Sentinel: kverr.ErrDurableWriteReCommitInProgress}},
	// RANGE_SCAN_CANCELLED: the server dropped the scan a continue asked
	// for while the continue ran (its lifetime ended, its vbucket or bucket
	// went); the scan creates it again (internal/rangescan.Restart) and
	// ends with this only after restarts without progress: a server
	// failure, never ErrRequestCanceled, which is the caller's own
	// cancellation. Any other request has no outcome of its own for it.
	{Status: memdx.StatusRangeScanCancelled, Ops: ops(memdx.OpRangeScanContinue), Rule: Rule{Sentinel: kverr.ErrServerFailure}},
	{Status: memdx.StatusRangeScanCancelled, Rule: Default},
	// Sub-document statuses: a path's status in a LookupIn result or a
	// failed MutateIn, or the status of the whole command.
	{Status: memdx.StatusSubdocPathNotFound, Rule: Rule{Sentinel: kverr.ErrPathNotFound}},
	{Status: memdx.StatusSubdocPathMismatch, Rule: Rule{Sentinel: kverr.ErrPathMismatch}},
	{Status: memdx.StatusSubdocPathInvalid, Rule: Rule{Sentinel: kverr.ErrPathInvalid}},
	{Status: memdx.StatusSubdocPathTooBig, Rule: Rule{Sentinel: kverr.ErrPathTooBig}},
	{Status: memdx.StatusSubdocDocTooDeep, Rule: Rule{Sentinel: kverr.ErrPathTooDeep}},
	{Status: memdx.StatusSubdocCantInsert, Rule: Rule{Sentinel: kverr.ErrValueInvalid}},
	{Status: memdx.StatusSubdocNotJSON, Rule: Rule{Sentinel: kverr.ErrDocumentNotJSON}},
	{Status: memdx.StatusSubdocBadRange, Rule: Rule{Sentinel: kverr.ErrNumberTooBig}},
	{Status: memdx.StatusSubdocBadDelta, Rule: Rule{Sentinel: kverr.ErrDeltaInvalid}},
	{Status: memdx.StatusSubdocPathExists, Rule: Rule{Sentinel: kverr.ErrPathExists}},
	{Status: memdx.StatusSubdocValueTooDeep, Rule: Rule{Sentinel: kverr.ErrValueTooDeep}},
	{Status: memdx.StatusSubdocInvalidCombo, Rule: Rule{Sentinel: kverr.ErrInvalidArgument}},
	// SUBDOC_MULTI_PATH_FAILURE ("special-handling" in kv_engine's error
	// map) ends a MutateIn; a lookup takes it as its result. Never retried;
	// MutateIn's error takes the sentinel of the failing path's status,
	// whose row is above (mutateInError), in place of this one.
	{Status: memdx.StatusSubdocMultiPathFailure, Rule: Rule{Sentinel: kverr.ErrServerFailure}},
	{Status: memdx.StatusSubdocMultiPathFailureDeleted, Rule: Rule{Sentinel: kverr.ErrServerFailure}},
	{Status: memdx.StatusSubdocXattrInvalidFlagCombo, Rule: Rule{Sentinel: kverr.ErrXattrInvalidFlagCombo}},
	{Status: memdx.StatusSubdocXattrInvalidKeyCombo, Rule: Rule{Sentinel: kverr.ErrXattrInvalidKeyCombo}},
	{Status: memdx.StatusSubdocXattrUnknownMacro, Rule: Rule{Sentinel: kverr.ErrXattrUnknownMacro}},
	{Status: memdx.StatusSubdocXattrUnknownVattrMacro, Rule: Rule{Sentinel: kverr.ErrXattrUnknownMacro}},
	{Status: memdx.StatusSubdocXattrUnknownVattr, Rule: Rule{Sentinel: kverr.ErrXattrUnknownVirtualAttribute}},
	{Status: memdx.StatusSubdocXattrCantModifyVattr, Rule: Rule{Sentinel: kverr.ErrXattrCannotModifyVirtualAttribute}},
	{Status: memdx.StatusSubdocInvalidXattrOrder, Rule: Rule{Sentinel: kverr.ErrXattrInvalidOrder}},
	{Status: memdx.StatusSubdocCanOnlyReviveDeletedDocuments, Rule: Rule{Sentinel: kverr.ErrDocumentAlreadyAlive}},
	{Status: memdx.StatusSubdocDeletedDocumentCantHaveValue, Rule: Rule{Sentinel: kverr.ErrInvalidArgument}},
}

// Table is the policy's table, in order (tests, and the package doc's
// error table, which a client test holds to it).
func Table() []Row { return table }

// index maps a status to its first row in table.
var index = func() map[memdx.Status]int {
	m := make(map[memdx.Status]int, len(table))
	for i, r := range table {
		if _, ok := m[r.Status]; !ok {
			m[r.Status] = i
		}
	}
	return m
}()

// tmpFail is TMPFAIL's general rule: a temporary failure, retried.
var tmpFail = Rule{Reason: retry.ReasonKVTemporaryFailure, Sentinel: kverr.ErrTemporaryFailure, ErrorMap: true}

// Default is the rule of a status the table does not hold.
var Default = Rule{Sentinel: kverr.ErrServerFailure, ErrorMap: true}

// Request is what the policy knows of the request a status answered and
// of the connection the status came on.
type Request struct {
	Op memdx.OpCode
	// CasGiven: the caller gave a CAS.
	CasGiven bool
	// NotInsert: the request is known not to be an insert (a mutation
	// whose opcode does not say, SUBDOC_MULTI_MUTATION: its doc flags do).
	NotInsert bool
	// NoXerror: the connection did not negotiate XERROR, so kv_engine sent
	// it a status remapped by Connection::remapErrorCode (its locked as
	// KEY_EEXISTS, locked_tmpfail as TMPFAIL).
	NoXerror bool
}

// ruleFor returns the table's rule for st answered to q.
func ruleFor(q Request, st memdx.Status) Rule {
	i, ok := index[st]
	if !ok {
		return Default
	}
	for _, r := range table[i:] {
		if r.Status != st {
			break
		}
		if (r.Ops == nil || slices.Contains(r.Ops, q.Op)) && (!r.CasGiven || q.CasGiven) &&
			(!r.NotInsert || q.NotInsert) && (!r.NoXerror || q.NoXerror) {
			return r.Rule
		}
	}
	return Default // unreachable while every status ends on a general row
}

// Outcome is what Decide decided for one response.
type Outcome struct {
	// Reason is the retry reason; 0 when the status ends the operation.
	Reason retry.Reason
	// Sentinel is what the caller's error matches if the operation ends on
	// this status (now, or when the strategy refuses the retry).
	Sentinel  error
	Ambiguous bool
	// Entry is the node's error-map entry when the map was consulted and
	// had one (Found).
	Entry errmap.Entry
	Found bool
	// ConnInvalid: the entry (Found) says "conn-state-invalidated" or
	// "special-handling". RFC 0013: the connection is no longer valid and
	// must be dropped (the client has no special handling of its own for a
	// status it looks up in the map); the status still ends, or retries,
	// the operation as above.
	ConnInvalid bool
}

// Decide is the status policy (see table): the outcome of status
// st for a request with opcode op (casGiven: the caller gave a CAS) on a
// connection with XERROR, m being the node's error map (nil: none).
func Decide(op memdx.OpCode, casGiven bool, st memdx.Status, m *errmap.Map) Outcome {
	return DecideRequest(Request{Op: op, CasGiven: casGiven}, st, m)
}

// DecideMutation is Decide for a mutation whose opcode does not say
// whether it is an insert (SUBDOC_MULTI_MUTATION: its doc flags do), insert
// saying so.
func DecideMutation(op memdx.OpCode, casGiven, insert bool, st memdx.Status, m *errmap.Map) Outcome {
	return DecideRequest(Request{Op: op, CasGiven: casGiven, NotInsert: !insert}, st, m)
}

// DecideRequest is the status policy's outcome of status st answered to
// q, m being the node's error map (nil: none).
func DecideRequest(q Request, st memdx.Status, m *errmap.Map) Outcome {
	return decide(ruleFor(q, st), q.Op, st, m)
}

// decide is the outcome of rule r, the table's for status st on op.
func decide(r Rule, op memdx.OpCode, st memdx.Status, m *errmap.Map) Outcome {
	out := Outcome{Sentinel: r.Sentinel, Ambiguous: r.Ambiguous}
	if r.Reason != retry.ReasonUnknown && !isDCP(op) {
		out.Reason = r.Reason
		return out
	}
	if !r.ErrorMap {
		return out
	}
	e, ok := m.Lookup(st)
	if !ok {
		return out
	}
	out.Entry, out.Found = e, true
	out.ConnInvalid = e.Attrs.Has(errmap.AttrConnStateInvalidated) || e.Attrs.Has(errmap.AttrSpecialHandling)
	if e.Attrs.Has(errmap.AttrTemp) {
		out.Sentinel = kverr.ErrTemporaryFailure
	}
	if e.RetryIndicated() {
		out.Reason = retry.ReasonKVErrorMapRetryIndicated
	}
	return out
}

// isDCP reports whether op is one of kv_engine's DCP opcodes (DcpOpen 0x50
// through DcpOsoSnapshot 0x65 in include/mcbp/protocol/opcode.h), which RFC
// 0049's response-code list excludes.
func isDCP(op memdx.OpCode) bool { return op >= 0x50 && op <= 0x65 }
