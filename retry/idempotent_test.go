package retry

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kvwire/kvwire/memdx"
)

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
