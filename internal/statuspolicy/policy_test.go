package statuspolicy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/errmap"
	"github.com/kvwire/kvwire/internal/conformance"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// statusRequest is one class of request the status policy distinguishes.
type statusRequest struct {
	op       memdx.OpCode
	casGiven bool
}

func (r statusRequest) String() string {
	if r.casGiven {
		return r.op.String() + "+CAS"
	}
	return r.op.String()
}

// policyRequests: every opcode the client sends (with and without a CAS
// where it may carry one), the bootstrap and config requests, a subdoc
// mutation and a DCP opcode.
var policyRequests = []statusRequest{
	{memdx.OpGet, false}, {memdx.OpGetReplica, false}, {memdx.OpGAT, false}, {memdx.OpGetLocked, false},
	{memdx.OpTouch, false}, {memdx.OpUnlockKey, true}, {memdx.OpGetMeta, false},
	{memdx.OpSet, false}, {memdx.OpSet, true}, {memdx.OpAdd, false},
	{memdx.OpReplace, false}, {memdx.OpReplace, true}, {memdx.OpDelete, false}, {memdx.OpDelete, true},
	{memdx.OpAppend, false}, {memdx.OpAppend, true}, {memdx.OpPrepend, false},
	{memdx.OpIncrement, false}, {memdx.OpDecrement, true},
	{memdx.OpCollectionsGetID, false}, {memdx.OpNoop, false}, {memdx.OpGetClusterConfig, false},
	{memdx.OpSubdocMultiMutation, true}, {memdx.OpCode(0x57), false}, // DCP_MUTATION
}

// policyStatuses: every status memdx names but SUCCESS, and codes it does
// not name (a server may send any; the error map describes them).
func policyStatuses() []memdx.Status {
	var out []memdx.Status
	for _, st := range memdx.KnownStatuses() {
		if st != memdx.StatusSuccess {
			out = append(out, st)
		}
	}
	return append(out, 0x7ff0, 0x7ff1, 0x10, 0xffff)
}

// wantReason is RFC 0049's response-code retry list with its exceptions,
// plus RFC 0049 revision 16's terminal reasons for the collection-id lookup.
func wantReason(r statusRequest, st memdx.Status) retry.Reason {
	if r.op >= 0x50 && r.op <= 0x65 { // "DCP commands are excluded from this list"
		return retry.ReasonUnknown
	}
	switch st {
	case memdx.StatusNotMyVbucket:
		return retry.ReasonKVNotMyVbucket
	case memdx.StatusUnknownCollection:
		if r.op == memdx.OpCollectionsGetID {
			return retry.ReasonCollectionNotFound
		}
		return retry.ReasonKVCollectionOutdated
	case memdx.StatusUnknownScope:
		if r.op == memdx.OpCollectionsGetID {
			return retry.ReasonScopeNotFound
		}
	case memdx.StatusLocked:
		if r.op != memdx.OpUnlockKey {
			return retry.ReasonKVLocked
		}
	case memdx.StatusKeyExists:
		if r.op == memdx.OpTouch || r.op == memdx.OpGAT || lockedWithoutCas(r) { // LOCKED, without XERROR
			return retry.ReasonKVLocked
		}
	case memdx.StatusTmpFail:
		if r.op != memdx.OpUnlockKey { // not locked: a retry cannot help
			return retry.ReasonKVTemporaryFailure
		}
	case memdx.StatusSyncWriteInProgress:
		return retry.ReasonKVSyncWriteInProgress
	case memdx.StatusSyncWriteReCommitInProgress:
		return retry.ReasonKVSyncWriteReCommitInProgress
	}
	return retry.ReasonUnknown
}

// lockedWithoutCas: KEY_EEXISTS on r can only be kv_engine's locked
// (remapped for a connection without XERROR): a mutation given no CAS that
// is not an insert (a sub-document mutation's may be its Add doc flag's).
func lockedWithoutCas(r statusRequest) bool {
	switch r.op {
	case memdx.OpSet, memdx.OpReplace, memdx.OpDelete, memdx.OpAppend, memdx.OpPrepend,
		memdx.OpIncrement, memdx.OpDecrement:
		return !r.casGiven
	}
	return false
}

// wantSentinel is the error each status ends an operation with, the
// readings that depend on the request first.
func wantSentinel(r statusRequest, st memdx.Status) error {
	switch {
	case st == memdx.StatusKeyExists && r.op == memdx.OpAdd:
		return kverr.ErrDocumentExists
	case st == memdx.StatusKeyExists && (r.op == memdx.OpTouch || r.op == memdx.OpGAT):
		return kverr.ErrDocumentLocked // kv_engine's locked, to a connection without XERROR
	case st == memdx.StatusKeyExists && (r.casGiven || r.op == memdx.OpUnlockKey):
		return kverr.ErrCasMismatch
	case st == memdx.StatusKeyExists && lockedWithoutCas(r):
		return kverr.ErrDocumentLocked // kv_engine's locked, to a connection without XERROR
	case st == memdx.StatusNotStored && r.op == memdx.OpAdd:
		return kverr.ErrDocumentExists
	case st == memdx.StatusNotStored && (r.op == memdx.OpAppend || r.op == memdx.OpPrepend):
		return kverr.ErrDocumentNotFound
	case st == memdx.StatusLocked && r.op == memdx.OpUnlockKey:
		return kverr.ErrCasMismatch // RFC 0049: a CAS mismatch, never retried
	case st == memdx.StatusTmpFail && r.op == memdx.OpUnlockKey:
		// kv_engine before 7.6, or without XERROR: not locked (or,
		// without XERROR, locked with another CAS)
		return kverr.ErrDocumentNotLocked
	}
	own := map[memdx.Status]error{
		memdx.StatusKeyNotFound: kverr.ErrDocumentNotFound, memdx.StatusKeyExists: kverr.ErrDocumentExists,
		memdx.StatusTooBig: kverr.ErrValueTooLarge, memdx.StatusInvalidArgs: kverr.ErrInvalidArgument,
		memdx.StatusNotStored: kverr.ErrNotStored, memdx.StatusBadDelta: kverr.ErrDeltaInvalid,
		memdx.StatusLocked: kverr.ErrDocumentLocked, memdx.StatusNotLocked: kverr.ErrDocumentNotLocked,
		memdx.StatusAuthStale: kverr.ErrAuthenticationFailure, memdx.StatusAuthError: kverr.ErrAuthenticationFailure,
		memdx.StatusRangeError: kverr.ErrInvalidArgument, memdx.StatusNoAccess: kverr.ErrNoAccess,
		memdx.StatusUnknownFrameInfo: kverr.ErrFeatureNotAvailable, memdx.StatusUnknownCommand: kverr.ErrFeatureNotAvailable,
		memdx.StatusNotSupported: kverr.ErrFeatureNotAvailable, memdx.StatusXattrInvalid: kverr.ErrInvalidArgument,
		memdx.StatusOutOfMemory: kverr.ErrTemporaryFailure, memdx.StatusBusy: kverr.ErrTemporaryFailure,
		memdx.StatusTmpFail: kverr.ErrTemporaryFailure, memdx.StatusUnknownCollection: kverr.ErrCollectionNotFound,
		memdx.StatusUnknownScope: kverr.ErrScopeNotFound, memdx.StatusDurabilityInvalidLevel: kverr.ErrDurabilityLevelNotAvailable,
		memdx.StatusDurabilityImpossible: kverr.ErrDurabilityImpossible, memdx.StatusSyncWriteAmbiguous: kverr.ErrDurabilityAmbiguous,
		memdx.StatusSyncWriteInProgress: kverr.ErrDurableWriteInProgress, memdx.StatusSyncWriteReCommitInProgress: kverr.ErrDurableWriteReCommitInProgress,
		memdx.StatusSubdocPathNotFound: kverr.ErrPathNotFound, memdx.StatusSubdocPathMismatch: kverr.ErrPathMismatch,
		memdx.StatusSubdocPathInvalid: kverr.ErrPathInvalid, memdx.StatusSubdocPathTooBig: kverr.ErrPathTooBig,
		memdx.StatusSubdocDocTooDeep: kverr.ErrPathTooDeep, memdx.StatusSubdocCantInsert: kverr.ErrValueInvalid,
		memdx.StatusSubdocNotJSON: kverr.ErrDocumentNotJSON, memdx.StatusSubdocBadRange: kverr.ErrNumberTooBig,
		memdx.StatusSubdocBadDelta: kverr.ErrDeltaInvalid, memdx.StatusSubdocPathExists: kverr.ErrPathExists,
		memdx.StatusSubdocValueTooDeep: kverr.ErrValueTooDeep, memdx.StatusSubdocInvalidCombo: kverr.ErrInvalidArgument,
		memdx.StatusSubdocXattrInvalidFlagCombo: kverr.ErrXattrInvalidFlagCombo, memdx.StatusSubdocXattrInvalidKeyCombo: kverr.ErrXattrInvalidKeyCombo,
		memdx.StatusSubdocXattrUnknownMacro: kverr.ErrXattrUnknownMacro, memdx.StatusSubdocXattrUnknownVattrMacro: kverr.ErrXattrUnknownMacro,
		memdx.StatusSubdocXattrUnknownVattr: kverr.ErrXattrUnknownVirtualAttribute, memdx.StatusSubdocXattrCantModifyVattr: kverr.ErrXattrCannotModifyVirtualAttribute,
		memdx.StatusSubdocInvalidXattrOrder: kverr.ErrXattrInvalidOrder, memdx.StatusSubdocCanOnlyReviveDeletedDocuments: kverr.ErrDocumentAlreadyAlive,
		memdx.StatusSubdocDeletedDocumentCantHaveValue: kverr.ErrInvalidArgument,
	}
	if s, ok := own[st]; ok {
		return s
	}
	return kverr.ErrServerFailure
}

// clientHandles reports whether st ends as kverr.ErrServerFailure by the client's
// own rule, without the error map: SUBDOC_MULTI_PATH_FAILURE, whose
// MutateIn error takes the failing path's sentinel.
func clientHandles(st memdx.Status) bool {
	return st == memdx.StatusSubdocMultiPathFailure || st == memdx.StatusSubdocMultiPathFailureDeleted
}

// mapOfEvery returns an error map with an entry for every status of
// statuses, each with attrs.
func mapOfEvery(t *testing.T, statuses []memdx.Status, attrs ...string) *errmap.Map {
	t.Helper()
	type entry struct {
		Name  string   `json:"name"`
		Desc  string   `json:"desc"`
		Attrs []string `json:"attrs"`
	}
	errs := map[string]entry{}
	for _, st := range statuses {
		errs[strconv.FormatUint(uint64(st), 16)] = entry{Name: "S_" + strconv.Itoa(int(st)), Desc: "d", Attrs: attrs}
	}
	b, err := json.Marshal(map[string]any{"version": 2, "revision": 1, "errors": errs})
	require.NoError(t, err)
	m, err := errmap.Parse(b)
	require.NoError(t, err)
	return m
}

// TestStatusPolicy runs every status against every class of request, with no
// error map, with a map that marks every status retry-now and temp, and
// with one that marks every status internal (no retry): the client's own
// rules come first and never ask the map (a map saying retry-now for LOCKED
// must not turn UNLOCK's CAS mismatch into retries); the map decides exactly
// the statuses the client has no outcome of its own for (those that would
// end as kverr.ErrServerFailure or kverr.ErrTemporaryFailure), retrying them when it
// says so and reporting them as kverr.ErrTemporaryFailure when it says "temp".
func TestStatusPolicy(t *testing.T) {
	statuses := policyStatuses()
	retryTemp := mapOfEvery(t, statuses, "temp", "retry-now")
	internal := mapOfEvery(t, statuses, "internal")
	for _, r := range policyRequests {
		for _, st := range statuses {
			t.Run(fmt.Sprintf("%s/%s", r, st), func(t *testing.T) {
				reason, sentinel := wantReason(r, st), wantSentinel(r, st)
				mapDecides := reason == retry.ReasonUnknown &&
					(sentinel == kverr.ErrServerFailure || sentinel == kverr.ErrTemporaryFailure) && !clientHandles(st)

				got := Decide(r.op, r.casGiven, st, nil)
				assert.Equal(t, reason, got.Reason, "reason without a map")
				assert.Equal(t, sentinel, got.Sentinel, "sentinel without a map")
				assert.False(t, got.Found)
				assert.Equal(t, st == memdx.StatusSyncWriteAmbiguous, got.Ambiguous)

				got = Decide(r.op, r.casGiven, st, retryTemp)
				assert.Equal(t, mapDecides, got.Found, "map consulted")
				if mapDecides {
					assert.Equal(t, retry.ReasonKVErrorMapRetryIndicated, got.Reason)
					assert.Equal(t, kverr.ErrTemporaryFailure, got.Sentinel, "a temp entry")
					assert.Equal(t, st, got.Entry.Status)
				} else {
					assert.Equal(t, reason, got.Reason, "the client's rule, not the map's")
					assert.Equal(t, sentinel, got.Sentinel)
				}

				got = Decide(r.op, r.casGiven, st, internal)
				assert.Equal(t, mapDecides, got.Found, "map consulted")
				assert.Equal(t, reason, got.Reason, "no retry indicated")
				assert.Equal(t, sentinel, got.Sentinel)
			})
		}
	}
}

// TestStatusTableRows: every status has a general row, after its exceptions
// (or ruleFor would fall through to the default for some requests), and the
// rows of one status are consecutive.
func TestStatusTableRows(t *testing.T) {
	seen := map[memdx.Status]bool{}
	for i, r := range table {
		if i > 0 && table[i-1].Status != r.Status {
			require.False(t, seen[r.Status], "rows of %s are not consecutive", r.Status)
		}
		seen[r.Status] = true
		last := i == len(table)-1 || table[i+1].Status != r.Status
		general := r.Ops == nil && !r.CasGiven
		assert.Equal(t, last, general, "%s: row %d; the general row must come last", r.Status, i)
		assert.NotNil(t, r.Rule.Sentinel, "%s has a sentinel", r.Status)
	}
}

// TestStatusPolicyKVEngineMap: with kv_engine's current error map, the
// statuses it sends that the client has no outcome of its own for are
// retried exactly when the map says retry-now or retry-later, and those
// marked "temp" are temporary failures.
func TestStatusPolicyKVEngineMap(t *testing.T) {
	m, err := errmap.Parse(readConformance(t, "errmap/kv_engine_error_map_v2.json"))
	require.NoError(t, err)
	for st, want := range map[memdx.Status]struct {
		retried bool
		temp    bool
	}{
		memdx.StatusBusy:                  {true, true},   // temp, retry-now
		memdx.StatusRateLimitedIngress:    {true, true},   // temp, retry-later, rate-limit
		memdx.StatusWouldThrottle:         {true, true},   // temp, retry-later
		memdx.StatusExpiryOverflow:        {false, false}, // no-retry
		memdx.StatusBucketDiskSpaceTooLow: {false, false}, // no-retry
		memdx.StatusInternalError:         {false, false},
	} {
		got := Decide(memdx.OpGet, false, st, m)
		require.True(t, got.Found, "%s is in the map", st)
		assert.Equal(t, want.retried, got.Reason == retry.ReasonKVErrorMapRetryIndicated, "%s %s", st, got.Entry.Attrs)
		assert.Equal(t, want.temp, got.Sentinel == kverr.ErrTemporaryFailure, "%s %s", st, got.Entry.Attrs)
	}
	// KEY_ENOENT and SUBDOC_PATH_ENOENT are the client's own: the map's
	// item-only is not asked.
	assert.False(t, Decide(memdx.OpGet, false, memdx.StatusKeyNotFound, m).Found)
	assert.False(t, Decide(memdx.OpSubdocMultiLookup, false, memdx.StatusSubdocPathNotFound, m).Found)
}

// TestStatusPolicyConnInvalid: a status looked up in kv_engine's map whose
// entry says "conn-state-invalidated" or "special-handling" asks for its
// connection to be dropped (RFC 0013); the client's own statuses never do,
// whatever the map says of them (AUTH_STALE, SUBDOC_MULTI_PATH_FAILURE).
func TestStatusPolicyConnInvalid(t *testing.T) {
	m, err := errmap.Parse(readConformance(t, "errmap/kv_engine_error_map_v2.json"))
	require.NoError(t, err)
	for st, want := range map[memdx.Status]bool{
		memdx.StatusInternalError:             true, // internal, conn-state-invalidated
		memdx.StatusNoBucket:                  true, // conn-state-invalidated
		memdx.StatusNotInitialized:            true,
		memdx.StatusRateLimitedMaxConnections: true, // conn-state-invalidated, rate-limit
		memdx.Status(0x27):                    true, // CHECKSUM_MISMATCH: special-handling
		memdx.StatusBusy:                      false,
		memdx.StatusExpiryOverflow:            false,
		memdx.StatusAuthStale:                 false, // the client's own
		memdx.StatusSubdocMultiPathFailure:    false, // the client's own
		memdx.StatusNotMyVbucket:              false, // the client's own
	} {
		assert.Equal(t, want, Decide(memdx.OpGet, false, st, m).ConnInvalid, "%s", st)
	}
	assert.False(t, Decide(memdx.OpGet, false, memdx.StatusInternalError, nil).ConnInvalid, "no map")
}

// readConformance reads a file of the shared conformance corpus (skipping,
// or failing under KVWIRE_REQUIRE_CONFORMANCE=1, when it is absent).
func readConformance(t *testing.T, name string) []byte {
	t.Helper()
	return conformance.Read(t, name)
}

// KEY_EEXISTS on a sub-document mutation: an insert's is an existing
// document; one known not to be an insert, given no CAS, is a lock (without
// XERROR), retried; with a CAS, a mismatch. Decide, which does not know
// whether the request is an insert, keeps ErrDocumentExists.
func TestKeyExistsOnASubdocMutation(t *testing.T) {
	op := memdx.OpSubdocMultiMutation
	got := DecideMutation(op, false, false, memdx.StatusKeyExists, nil)
	assert.Equal(t, kverr.ErrDocumentLocked, got.Sentinel)
	assert.Equal(t, retry.ReasonKVLocked, got.Reason)
	got = DecideMutation(op, false, true, memdx.StatusKeyExists, nil)
	assert.Equal(t, kverr.ErrDocumentExists, got.Sentinel)
	assert.Zero(t, got.Reason)
	got = DecideMutation(op, true, false, memdx.StatusKeyExists, nil)
	assert.Equal(t, kverr.ErrCasMismatch, got.Sentinel)
	assert.Zero(t, got.Reason)
	got = Decide(op, false, memdx.StatusKeyExists, nil)
	assert.Equal(t, kverr.ErrDocumentExists, got.Sentinel)
}

// TestStatusPolicyWithoutXerror: on a connection without XERROR every
// status is decided as with it, but TMPFAIL where it is then kv_engine's
// locked_tmpfail (a locked document; one with XERROR gets LOCKED): on
// GET_LOCKED, on a sub-document lookup, on a sub-document mutation given
// no CAS that is known not to be an insert, and on DELETE given a CAS:
// retried as KV_LOCKED, ErrDocumentLocked. With XERROR it stays a
// temporary failure.
func TestStatusPolicyWithoutXerror(t *testing.T) {
	retryTemp := mapOfEvery(t, policyStatuses(), "temp", "retry-now")
	var requests []Request
	for _, r := range append(slices.Clip(policyRequests),
		statusRequest{memdx.OpSubdocMultiLookup, false}, statusRequest{memdx.OpSubdocMultiMutation, false}) {
		requests = append(requests, Request{Op: r.op, CasGiven: r.casGiven})
		if r.op == memdx.OpSubdocMultiMutation {
			requests = append(requests, Request{Op: r.op, CasGiven: r.casGiven, NotInsert: true})
		}
	}
	lockedTmpFail := func(q Request) bool {
		switch q.Op {
		case memdx.OpGetLocked, memdx.OpSubdocMultiLookup:
			return true
		case memdx.OpSubdocMultiMutation:
			return !q.CasGiven && q.NotInsert
		case memdx.OpDelete:
			return q.CasGiven
		}
		return false
	}
	for _, q := range requests {
		for _, st := range policyStatuses() {
			for _, m := range []*errmap.Map{nil, retryTemp} {
				with := DecideRequest(q, st, m)
				noX := q
				noX.NoXerror = true
				without := DecideRequest(noX, st, m)
				if lockedTmpFail(q) && st == memdx.StatusTmpFail {
					assert.Equal(t, retry.ReasonKVTemporaryFailure, with.Reason, "%+v %s with XERROR", q, st)
					assert.Equal(t, kverr.ErrTemporaryFailure, with.Sentinel, "%+v %s with XERROR", q, st)
					assert.Equal(t, retry.ReasonKVLocked, without.Reason, "%+v %s", q, st)
					assert.Equal(t, kverr.ErrDocumentLocked, without.Sentinel, "%+v %s", q, st)
					assert.False(t, without.Found, "%+v %s: the client's own rule", q, st)
					continue
				}
				assert.Equal(t, with, without, "%+v %s", q, st)
			}
		}
	}
	got := Decide(memdx.OpGetLocked, false, memdx.StatusTmpFail, nil)
	assert.Equal(t, retry.ReasonKVTemporaryFailure, got.Reason)
	assert.Equal(t, kverr.ErrTemporaryFailure, got.Sentinel)
}
