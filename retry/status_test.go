package retry

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kvwire/kvwire/memdx"
)

// TestReasonForStatus encodes RFC 0049's response-code retry list: each
// listed status against representative opcodes, with the list's exceptions,
// and statuses the list does not name.
func TestReasonForStatus(t *testing.T) {
	const none = Reason(255) // "not retried" in this table
	ops := []memdx.OpCode{
		memdx.OpGet, memdx.OpSet, memdx.OpDelete, memdx.OpGetLocked, memdx.OpUnlockKey,
		memdx.OpCollectionsGetID, memdx.OpGetClusterConfig, memdx.OpSubdocMultiMutation,
		memdx.OpHello, memdx.OpNoop,
	}
	rows := []struct {
		status memdx.Status
		want   Reason
		except map[memdx.OpCode]Reason
	}{
		// Not My VBucket 0x07 on all messages.
		{memdx.StatusNotMyVbucket, ReasonKVNotMyVbucket, nil},
		// Collection Outdated 0x88 on all messages, except GetCollectionID.
		{memdx.StatusUnknownCollection, ReasonKVCollectionOutdated, map[memdx.OpCode]Reason{memdx.OpCollectionsGetID: none}},
		// Locked 0x09, not for Unlock (a CAS mismatch for the user).
		{memdx.StatusLocked, ReasonKVLocked, map[memdx.OpCode]Reason{memdx.OpUnlockKey: none}},
		// Temporary Failure 0x86.
		{memdx.StatusTmpFail, ReasonKVTemporaryFailure, nil},
		// SyncWriteInProgress 0xa2.
		{memdx.StatusSyncWriteInProgress, ReasonKVSyncWriteInProgress, nil},
		// SyncWriteReCommitInProgress 0xa4.
		{memdx.StatusSyncWriteReCommitInProgress, ReasonKVSyncWriteReCommitInProgress, nil},
		// Not in the list: a complete, known response is not retried.
		{memdx.StatusSuccess, none, nil},
		{memdx.StatusKeyNotFound, none, nil},
		{memdx.StatusKeyExists, none, nil},
		{memdx.StatusBusy, none, nil},
		{memdx.StatusOutOfMemory, none, nil},
		{memdx.StatusNotLocked, none, nil},
		{memdx.StatusUnknownScope, none, nil},
		{memdx.StatusSyncWriteAmbiguous, none, nil},
		{memdx.StatusNoAccess, none, nil},
		{memdx.StatusAuthError, none, nil},
		{memdx.Status(0x7ff0), none, nil},
	}
	for _, row := range rows {
		for _, op := range ops {
			want := row.want
			if w, ok := row.except[op]; ok {
				want = w
			}
			t.Run(fmt.Sprintf("%s/%s", row.status, op), func(t *testing.T) {
				got, ok := ReasonForStatus(op, row.status)
				if want == none {
					assert.False(t, ok)
					assert.Equal(t, ReasonUnknown, got)
					return
				}
				assert.True(t, ok)
				assert.Equal(t, want, got)
			})
		}
	}
}

// TestReasonForStatusDCP: "DCP commands are excluded from this list".
func TestReasonForStatusDCP(t *testing.T) {
	for op := memdx.OpCode(0x50); op <= 0x65; op++ {
		for _, st := range []memdx.Status{memdx.StatusNotMyVbucket, memdx.StatusUnknownCollection,
			memdx.StatusLocked, memdx.StatusTmpFail, memdx.StatusSyncWriteInProgress,
			memdx.StatusSyncWriteReCommitInProgress} {
			_, ok := ReasonForStatus(op, st)
			assert.False(t, ok, "DCP opcode 0x%02x status %s", uint8(op), st)
		}
	}
	// The neighbours of the DCP range are not DCP.
	for _, op := range []memdx.OpCode{memdx.OpGetExReplica, 0x66} {
		_, ok := ReasonForStatus(op, memdx.StatusNotMyVbucket)
		assert.True(t, ok, "opcode 0x%02x", uint8(op))
	}
}

// TestIsIdempotent encodes RFC 0049's idempotent operation list row by row,
// then checks that every other opcode is non-idempotent.
func TestIsIdempotent(t *testing.T) {
	rows := []struct {
		class string
		ops   []memdx.OpCode
	}{
		{"Carrier Config & Global Config Requests", []memdx.OpCode{memdx.OpGetClusterConfig}},
		{"Get Request (NOT get and lock and NOT get and touch)", []memdx.OpCode{
			memdx.OpGet, memdx.OpGetQ, memdx.OpGetK, memdx.OpGetKQ, memdx.OpGetEx}},
		{"Get Collection ID", []memdx.OpCode{memdx.OpCollectionsGetID}},
		{"Get Collection Manifest", []memdx.OpCode{memdx.OpCollectionsGetManifest}},
		{"Noop Request", []memdx.OpCode{memdx.OpNoop}},
		{"Observe Via CAS, Observe via Sequence Number", []memdx.OpCode{memdx.OpObserve, memdx.OpObserveSeqno}},
		{"Replica Get Request", []memdx.OpCode{memdx.OpGetReplica, memdx.OpGetExReplica}},
		{"Subdoc Lookup", []memdx.OpCode{memdx.OpSubdocGet, memdx.OpSubdocExists,
			memdx.OpSubdocGetCount, memdx.OpSubdocMultiLookup}},
	}
	listed := map[memdx.OpCode]bool{}
	for _, row := range rows {
		t.Run(row.class, func(t *testing.T) {
			for _, op := range row.ops {
				assert.True(t, IsIdempotent(op), "%s", op)
				listed[op] = true
			}
		})
	}
	// The RFC's explicit exclusions, and reads it does not list.
	for _, op := range []memdx.OpCode{memdx.OpGAT, memdx.OpGATQ, memdx.OpGetLocked, memdx.OpTouch,
		memdx.OpUnlockKey, memdx.OpGetMeta, memdx.OpGetQMeta, memdx.OpStat, memdx.OpVersion,
		memdx.OpHello, memdx.OpSASLAuth, memdx.OpSelectBucket, memdx.OpGetErrorMap,
		memdx.OpCollectionsGetScopeID, memdx.OpGetRandomKey, memdx.OpRangeScanCreate,
		memdx.OpSet, memdx.OpAdd, memdx.OpIncrement, memdx.OpSubdocMultiMutation} {
		assert.False(t, IsIdempotent(op), "%s", op)
	}
	// "Every operation should be treated as non-idempotent unless ... in
	// this list": all 256 opcode values.
	for i := range 256 {
		op := memdx.OpCode(i)
		assert.Equal(t, listed[op], IsIdempotent(op), "%s", op)
	}
}
