// Package fanout runs one call per target at once, one goroutine each, and
// waits for every one before it returns, so that no goroutine outlives the
// call: the replica reads, one read per copy of a document (GetAnyReplica,
// GetAllReplicas and their sub-document forms), and the requests to every
// node (Stats, Version, Flush, Ping: Each). A call that panics (the
// caller's code runs in it: an Observer, a RetryStrategy) makes the
// function panic with the same value on the caller's goroutine, once
// every call has ended, as the read would have panicked there had it run
// alone; on a goroutine of its own the panic would end the program. The
// panic cancels the other calls' context at once, so that they end
// promptly rather than at their timeouts.
package fanout

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/kvwire/kvwire/internal/kverr"
)

// First runs read for each of copies at once and returns the first answer
// without an error; the others are canceled and waited for. With none it
// returns every error.
func First[T any](ctx context.Context, copies []int, read func(context.Context, int) (T, error)) (T, []error) {
	n := len(copies)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		r   T
		err error
		p   *panicked
	}
	ch := make(chan answer, n)
	for _, i := range copies {
		go func() {
			var a answer
			defer func() { ch <- a }()
			catch(&a.p, func() { a.r, a.err = read(ctx, i) })
		}()
	}
	var errs []error
	for i := range n {
		a := <-ch
		if a.err == nil || a.p != nil {
			cancel()
			// Drain the rest so no goroutine outlives the call.
			p := a.p
			for range n - i - 1 {
				if b := <-ch; p == nil {
					p = b.p
				}
			}
			p.raise()
			return a.r, nil
		}
		errs = append(errs, a.err)
	}
	var zero T
	return zero, errs
}

// panicked is how a call ended abnormally: a panic with v, or
// runtime.Goexit (a test's t.FailNow in the caller's code, say).
type panicked struct {
	v      any
	goexit bool
}

// catch runs f and sets *p to how it ended abnormally, nil when it
// returned. A Goexit goes on unwinding f's goroutine: its caller sends
// its outcome from a deferred function.
func catch(p **panicked, f func()) {
	*p = &panicked{goexit: true}
	defer func() {
		if v := recover(); v != nil { // a panic(nil) is a *runtime.PanicNilError
			*p = &panicked{v: v}
		}
	}()
	f()
	*p = nil
}

// raise ends the caller's goroutine as the call's ended: with its panic,
// or Goexit. A nil p does nothing.
func (p *panicked) raise() {
	switch {
	case p == nil:
	case p.goexit:
		runtime.Goexit()
	default:
		panic(p.v)
	}
}

// All runs read for each of copies at once and returns every answer
// without an error, in the order of copies, and the errors of the others.
func All[T any](ctx context.Context, copies []int, read func(context.Context, int) (T, error)) ([]T, []error) {
	n := len(copies)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make([]T, n)
	errs := make([]error, n)
	done := make(chan *panicked, n)
	for j, i := range copies {
		go func() {
			var p *panicked
			defer func() {
				if p != nil {
					cancel() // the panic is raised once the others end
				}
				done <- p
			}()
			catch(&p, func() { res[j], errs[j] = read(ctx, i) })
		}()
	}
	var p *panicked
	for range n {
		if q := <-done; p == nil {
			p = q
		}
	}
	p.raise()
	var out []T
	var failed []error
	for i := range res {
		if errs[i] == nil {
			out = append(out, res[i])
		} else {
			failed = append(failed, errs[i])
		}
	}
	return out, failed
}

// Error picks the error of a read of key's copies that found nothing:
// document not found when any copy said so, else the first error.
func Error(key string, errs []error) error {
	for _, e := range errs {
		if errors.Is(e, kverr.ErrDocumentNotFound) {
			return e
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return fmt.Errorf("%w: no copy of %q answered", kverr.ErrNoNodeAvailable, key)
}

// Each runs do for each of targets at once and waits for every one. It
// returns their results in the order of targets and their errors joined.
func Each[T, R any](ctx context.Context, targets []T, do func(context.Context, T) (R, error)) ([]R, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]R, len(targets))
	errs := make([]error, len(targets))
	ps := make([]*panicked, len(targets))
	var wg sync.WaitGroup
	for i, n := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if ps[i] != nil {
					cancel() // the panic is raised once the others end
				}
			}()
			catch(&ps[i], func() { out[i], errs[i] = do(ctx, n) })
		}()
	}
	wg.Wait()
	for _, p := range ps {
		p.raise()
	}
	return out, errors.Join(errs...)
}
