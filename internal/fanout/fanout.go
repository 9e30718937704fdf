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
	"sync"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/panics"
)

// errAnswered is the cause First cancels the other reads' context with
// once one answered (Lost). It wraps conn.ErrNotNeeded: the connections
// then expect the late answers of the reads in flight, which are no
// orphans (the orphan report) and no stray responses to warn of.
var errAnswered = fmt.Errorf("another copy answered first: %w", conn.ErrNotNeeded)

// Lost reports whether ctx, the context First gave a read, was canceled
// because another read answered first, rather than by its caller (whose
// cancel or deadline came first): the read lost the race, and what it
// returns is not the caller's outcome. A nil ctx has lost nothing.
func Lost(ctx context.Context) bool {
	return ctx != nil && ctx.Err() != nil && context.Cause(ctx) == errAnswered
}

// First runs read for each of copies at once and returns the first answer
// without an error; the others are canceled (their context's cause says
// so: Lost) and waited for. With none it returns every error.
func First[T any](ctx context.Context, copies []int, read func(context.Context, int) (T, error)) (T, []error) {
	n := len(copies)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type answer struct {
		r   T
		err error
		p   *panics.Ended
	}
	ch := make(chan answer, n)
	for _, i := range copies {
		go func() {
			var a answer
			defer func() { ch <- a }()
			panics.Catch(&a.p, func() { a.r, a.err = read(ctx, i) })
		}()
	}
	var errs []error
	for i := range n {
		a := <-ch
		if a.err == nil || a.p != nil {
			if a.p != nil {
				cancel(nil) // a panic: the others end as if canceled by the caller
			} else {
				cancel(errAnswered)
			}
			// Drain the rest so no goroutine outlives the call.
			p := a.p
			for range n - i - 1 {
				if b := <-ch; p == nil {
					p = b.p
				}
			}
			p.Raise()
			return a.r, nil
		}
		errs = append(errs, a.err)
	}
	var zero T
	return zero, errs
}

// All runs read for each of copies at once and returns every answer
// without an error, in the order of copies, and the errors of the others.
func All[T any](ctx context.Context, copies []int, read func(context.Context, int) (T, error)) ([]T, []error) {
	n := len(copies)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make([]T, n)
	errs := make([]error, n)
	done := make(chan *panics.Ended, n)
	for j, i := range copies {
		go func() {
			var p *panics.Ended
			defer func() {
				if p != nil {
					cancel() // the panic is raised once the others end
				}
				done <- p
			}()
			panics.Catch(&p, func() { res[j], errs[j] = read(ctx, i) })
		}()
	}
	var p *panics.Ended
	for range n {
		if q := <-done; p == nil {
			p = q
		}
	}
	p.Raise()
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
	ps := make([]*panics.Ended, len(targets))
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
			panics.Catch(&ps[i], func() { out[i], errs[i] = do(ctx, n) })
		}()
	}
	wg.Wait()
	for _, p := range ps {
		p.Raise()
	}
	return out, errors.Join(errs...)
}
