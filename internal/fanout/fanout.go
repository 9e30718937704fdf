// Package fanout runs one call per target at once, one goroutine each, and
// waits for every one before it returns, so that no goroutine outlives the
// call: the replica reads, one read per copy of a document (GetAnyReplica,
// GetAllReplicas and their sub-document forms), and the requests to every
// node (Stats, Version, Flush, Ping: Each).
package fanout

import (
	"context"
	"errors"
	"fmt"
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
	}
	ch := make(chan answer, n)
	for _, i := range copies {
		go func() {
			r, err := read(ctx, i)
			ch <- answer{r, err}
		}()
	}
	var errs []error
	for i := range n {
		a := <-ch
		if a.err == nil {
			cancel()
			// Drain the rest so no goroutine outlives the call.
			for range n - i - 1 {
				<-ch
			}
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
	res := make([]T, n)
	errs := make([]error, n)
	done := make(chan struct{}, n)
	for j, i := range copies {
		go func() {
			res[j], errs[j] = read(ctx, i)
			done <- struct{}{}
		}()
	}
	for range n {
		<-done
	}
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
	out := make([]R, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, n := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = do(ctx, n)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}
