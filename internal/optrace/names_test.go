package optrace

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
	"github.com/stretchr/testify/assert"
)

// Operations carry RFC 0067's names, in snake case.
func TestSpanNames(t *testing.T) {
	for name, want := range map[string]string{
		"Get": "get", "GetAndLock": "get_and_lock", "GetAndTouch": "get_and_touch", "GetReplica": "get_replica",
		"GetReplica(active)": "get", "LookupIn": "lookup_in", "LookupInReplica": "lookup_in_replica",
		"MutateIn": "mutate_in", "Upsert": "upsert", "Remove": "remove", "Increment": "increment", "Ping": "ping",
		"SomethingNew": "something_new",
	} {
		got, i := SpanName(name, 0)
		assert.Equal(t, want, got, name)
		if i != opUnlisted {
			assert.Equal(t, want, opNames[i], name)
		}
	}
	for op, want := range map[memdx.OpCode]string{memdx.OpRangeScanCreate: "range_scan_create",
		memdx.OpRangeScanContinue: "range_scan_continue", memdx.OpRangeScanCancel: "range_scan_cancel"} {
		got, i := SpanName("Scan", op)
		assert.Equal(t, want, got)
		assert.Equal(t, want, opNames[i])
	}
	_, i := SpanName("SomethingNew", 0)
	assert.Equal(t, opUnlisted, i)
}
