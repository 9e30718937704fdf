// Package panics carries how a goroutine running the caller's code (an
// Observer, a RetryStrategy) ended abnormally, a panic or runtime.Goexit,
// to the caller's own goroutine, where it is raised again: on a goroutine
// of the client's, a panic would end the program, however the caller
// guarded its call. internal/fanout (replica reads, requests to every
// node) and internal/rangescan (a scan's workers) use it.
package panics

import "runtime"

// Ended is how a function ended abnormally: a panic with V, or
// runtime.Goexit (a test's t.FailNow in the caller's code, say).
type Ended struct {
	V      any
	Goexit bool
}

// Catch runs f and sets *p to how it ended abnormally, nil when it
// returned. A panic is recovered; a Goexit goes on unwinding the
// goroutine, so its caller reads *p from a deferred function.
func Catch(p **Ended, f func()) {
	*p = &Ended{Goexit: true}
	defer func() {
		if v := recover(); v != nil { // a panic(nil) is a *runtime.PanicNilError
			*p = &Ended{V: v}
		}
	}()
	f()
	*p = nil
}

// Raise ends the calling goroutine as p's function ended: with its panic,
// or Goexit. A nil p does nothing.
func (p *Ended) Raise() {
	switch {
	case p == nil:
	case p.Goexit:
		runtime.Goexit()
	default:
		panic(p.V)
	}
}
