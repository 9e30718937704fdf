package client

import (
	"errors"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// errors.Is on an operation's *KeyValueError, the way callers test every
// failure (a miss, a lock, a timeout), allocates nothing, whether it
// matches the sentinel asked for or not: Unwrap hands errors.Is the
// sentinel and the cause without building a slice per call.
func TestKeyValueErrorIsAllocatesNothing(t *testing.T) {
	cause := &memdx.StatusError{Status: memdx.StatusKeyNotFound, OpCode: memdx.OpGet}
	o := op{opHot: opHot{name: "Get", keyStr: "k"}}
	o.req.OpCode = memdx.OpGet
	err := error(newKVError(&o, ErrDocumentNotFound, cause))
	for _, c := range []struct {
		target error
		want   bool
	}{
		{ErrDocumentNotFound, true},
		{memdx.StatusKeyNotFound, true},
		{ErrDocumentLocked, false},
		{ErrTimeout, false},
	} {
		if got := errors.Is(err, c.target); got != c.want {
			t.Errorf("errors.Is(err, %v) = %v, want %v", c.target, got, c.want)
		}
		if n := testing.AllocsPerRun(100, func() { errors.Is(err, c.target) }); n != 0 {
			t.Errorf("errors.Is(err, %v): %v allocations, want 0", c.target, n)
		}
	}
	// Changed after the client made it, or made by the caller: Unwrap
	// answers what Err and Cause hold, whatever their types (a cause that
	// is not comparable: nothing compares it).
	ke := newKVError(&o, ErrDocumentNotFound, cause)
	ke.Cause = ErrTimeout
	if !errors.Is(ke, ErrTimeout) || errors.Is(ke, memdx.StatusKeyNotFound) {
		t.Errorf("a changed cause: errors.Is sees %v", ke.Unwrap())
	}
	if lit := (&KeyValueError{Err: ErrDocumentLocked}); !errors.Is(lit, ErrDocumentLocked) || len(lit.Unwrap()) != 1 {
		t.Errorf("a caller's KeyValueError unwraps to %v", lit.Unwrap())
	}
	// A copy (a caller's *kv = ...) holds its own parts: as made, it
	// unwraps to its fields without building; changed, to the new ones.
	cp := *newKVError(&o, ErrDocumentNotFound, cause)
	if !errors.Is(&cp, memdx.StatusKeyNotFound) {
		t.Errorf("a copy: errors.Is sees %v", cp.Unwrap())
	}
	if n := testing.AllocsPerRun(100, func() { errors.Is(&cp, ErrDocumentNotFound) }); n != 0 {
		t.Errorf("a copy: errors.Is: %v allocations, want 0", n)
	}
	cp.Cause = ErrTimeout
	if !errors.Is(&cp, ErrTimeout) || errors.Is(&cp, memdx.StatusKeyNotFound) {
		t.Errorf("a changed copy: errors.Is sees %v", cp.Unwrap())
	}
	odd := newKVError(&o, ErrDocumentNotFound, uncomparableError{"x"})
	if !errors.Is(odd, ErrDocumentNotFound) || errors.Is(odd, ErrTimeout) {
		t.Errorf("a cause that is not comparable: errors.Is sees %v", odd.Unwrap())
	}

	var se *memdx.StatusError
	if !errors.As(err, &se) || se != cause {
		t.Errorf("errors.As found %v, want the cause", se)
	}
	if n := testing.AllocsPerRun(100, func() { errors.As(err, &se) }); n != 0 {
		t.Errorf("errors.As: %v allocations, want 0", n)
	}
}

// uncomparableError is an error whose values == cannot compare.
type uncomparableError []string

func (e uncomparableError) Error() string { return e[0] }
