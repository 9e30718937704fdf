package client

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/optrace"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// A failed operation costs the default observers (the logging meter on,
// no tracer) no allocation, as a successful one does: its error.type is
// found without one, a miss (the most common failure) and a refusal whose
// status RFC 0058 does not name alike. KeyValueError's Unwrap builds a
// slice each call; an errors.Is per name tried would allocate that many
// times for each failed Get.
func TestFailedOperationErrorTypeAllocatesNothing(t *testing.T) {
	o := Options{Logger: slog.New(slog.DiscardHandler), Bucket: "b"}
	cs, err := ParseConnStr("couchbase://h/b")
	if err != nil {
		t.Fatal(err)
	}
	if o, err = o.resolved(cs); err != nil {
		t.Fatal(err)
	}
	clock := retry.NewFakeClock(reportEpoch)
	ob := newObservers(&o, clock, clock, "ABCDEF0123456789")
	defer ob.close()
	col := &Collection{scope: DefaultScope, name: DefaultCollection, isDefault: true}
	ctx := context.Background()
	name := optrace.NameOf("Get", memdx.OpGet)
	start := reportEpoch
	end := start.Add(30 * time.Microsecond)
	for _, c := range []struct {
		err  error
		name string
	}{
		{nil, ""},
		{&KeyValueError{Op: "Get", Err: ErrDocumentNotFound, Cause: &memdx.StatusError{Status: memdx.StatusKeyNotFound, OpCode: memdx.OpGet}}, "DocumentNotFound"},
		{&KeyValueError{Op: "Get", Err: ErrTemporaryFailure, Cause: &memdx.StatusError{Status: memdx.StatusTmpFail, OpCode: memdx.OpGet}}, "TemporaryFailure"},
		{&KeyValueError{Op: "Get", Err: ErrServerFailure, Cause: &memdx.StatusError{Status: memdx.StatusRateLimitedMaxCommands, OpCode: memdx.OpGet}}, "RateLimited"},
		{&KeyValueError{Op: "Upsert", Err: ErrUnresponsive, Ambiguous: true}, "RequestCanceled"},
		{&KeyValueError{Op: "Get", Err: ErrUnambiguousTimeout, Cause: &KeyValueError{Err: ErrTemporaryFailure}}, "UnambiguousTimeout"},
	} {
		if c.err != nil {
			if got := optrace.ErrorType(c.err, ErrorTypeOther); got != c.name {
				t.Errorf("%v: error.type %q, want %q", c.err, got, c.name)
			}
		}
		allocs := testing.AllocsPerRun(100, func() {
			var tr opTrace
			ob.begin(ctx, &tr, name, col, nil, start, 2500*time.Millisecond)
			tr.Origin.Sent = start
			ob.end(&tr, col, c.err, 0, end)
		})
		if allocs != 0 {
			t.Errorf("an operation ending with %v: %v allocations, want 0", c.err, allocs)
		}
	}
}
