package client

import (
	"reflect"
	"testing"

	"github.com/kvwire/kvwire/internal/cluster"
)

// TestRestoreAttemptUndoesAttempt: attemptRecord mirrors what op.attempt
// clears or sets, so that a barrier its connection refused unwritten
// (execute) is left with its last attempt sent as it was. Every field of
// an op (cold, so that attempt touches its cold part too) is filled, and
// attempt then restoreAttempt must give every one back: a field attempt
// comes to reset that the record does not carry fails here, rather than
// naming, in a barrier's error, an attempt never sent.
func TestRestoreAttemptUndoesAttempt(t *testing.T) {
	o := &op{}
	fields := opFields(o)
	for _, f := range fields {
		if f.v.Kind() == reflect.Func {
			continue // not comparable; attempt writes none
		}
		fillNonZero(t, f.v, f.name)
	}
	o.cold = true
	before := make([]any, len(fields))
	for i, f := range fields {
		if f.v.Kind() != reflect.Func {
			before[i] = reflect.ValueOf(f.v.Interface()).Interface()
		}
	}
	rec := o.lastAttempt()
	o.attempt(&cluster.Node{}, 7)
	o.restoreAttempt(&rec)
	for i, f := range fields {
		if f.v.Kind() == reflect.Func {
			continue
		}
		if !reflect.DeepEqual(before[i], f.v.Interface()) {
			t.Errorf("op.%s: %v after attempt and restoreAttempt; want %v (attemptRecord must carry what attempt resets)",
				f.name, f.v.Interface(), before[i])
		}
	}
}
